"""Machine checks behind ``swemill doctor``. Each check says how to fix what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from swemill.repo.uvbin import find_uv
from swemill.sandbox.cgroups import cgroup_support

__all__ = ["Check", "run_checks"]


@dataclass(slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    optional: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _run(cmd: list[str], timeout: float = 10) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return p.returncode, (p.stdout + p.stderr).strip()


def _check_bwrap() -> Check:
    fix = "apt-get install -y bubblewrap"
    if os.geteuid() != 0:
        fix = "sudo " + fix
    path = shutil.which("bwrap")
    if not path:
        return Check("bwrap", False, "bubblewrap not found (default sandbox)", fix)
    rc, out = _run([path, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"])
    if rc != 0:
        return Check("bwrap", False, f"bwrap cannot create namespaces: {out[:120]}",
                     "enable unprivileged user namespaces: "
                     "sysctl kernel.unprivileged_userns_clone=1")
    _, ver = _run([path, "--version"])
    return Check("bwrap", True, ver)


def _check_uv() -> Check:
    uv = find_uv()
    if uv is None:
        return Check("uv", False, "uv not found (builds repository environments)", "pip install uv")
    _, ver = _run([uv, "--version"])
    return Check("uv", True, ver)


def _check_git() -> Check:
    path = shutil.which("git")
    if not path:
        return Check("git", False, "git not found", "apt-get install -y git")
    return Check("git", True, _run([path, "--version"])[1])


def _check_docker() -> Check:
    path = shutil.which("docker")
    if not path:
        return Check("docker", False, "docker client not found (optional backend)",
                     "install Docker Engine", optional=True)
    rc, out = _run([path, "info", "--format", "{{.ServerVersion}}"], timeout=5)
    if rc != 0:
        return Check("docker engine", False, "client present, no engine answers (optional backend)",
                     "start dockerd, or use the default bwrap sandbox", optional=True)
    rc, runtimes = _run([path, "info", "--format", "{{json .Runtimes}}"], timeout=5)
    gvisor = "runsc" in runtimes
    return Check("docker engine", True, f"server {out}; gVisor runsc: {'yes' if gvisor else 'no'}",
                 None if gvisor else "install gVisor (runsc) for untrusted model-written code",
                 optional=True)


def _check_cgroups() -> Check:
    support = cgroup_support()
    if support.pids and support.memory:
        return Check("cgroups", True, f"{support.version}: pids and memory controllers writable")
    missing = [n for n, ok in (("pids", support.pids), ("memory", support.memory)) if not ok]
    return Check("cgroups", False,
                 f"{support.version or 'none'}: {', '.join(missing)} not writable; "
                 "falling back to rlimits",
                 "run as root, or delegate a cgroup subtree to this user", optional=True)


def _check_aws() -> Check:
    env = os.environ
    has_env = any(env.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE",
                                         "AWS_WEB_IDENTITY_TOKEN_FILE"))
    has_file = (Path.home() / ".aws" / "credentials").exists()
    if has_env or has_file:
        where = "environment" if has_env else "~/.aws/credentials"
        return Check("aws credentials", True, f"found ({where})",
                     optional=True)
    return Check("aws credentials", False, "none found (needed only for S3 / Batch / Bedrock)",
                 "aws configure   # or export AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
                 optional=True)


def _check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", ok, sys.version.split()[0], None if ok else "install Python >= 3.11")


def run_checks() -> list[Check]:
    return [_check_python(), _check_bwrap(), _check_uv(), _check_git(), _check_cgroups(),
            _check_docker(), _check_aws()]
