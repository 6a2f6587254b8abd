"""Docker with the lockdown recipe, through the ``docker`` CLI (no SDK dependency).

Each command runs in a fresh container: no network (``--network none`` unless ``limits.net``),
read-only root with a private tmpfs ``/tmp``, every capability dropped, ``no-new-privileges``,
pid and memory limits (no swap beyond the limit), a file-size ulimit, an unprivileged user, the
workspace bound read-write at ``/workspace``, and gVisor (``--runtime=runsc``) when the engine
lists it. The image comes from ``SWEMILL_DOCKER_IMAGE`` (default ``python:3.11-slim``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from swemill.core.errors import SandboxError, SandboxUnavailable
from swemill.sandbox._run import run_guarded
from swemill.sandbox._spawn import Spawned
from swemill.sandbox._tree_sandbox import TreeSandbox
from swemill.sandbox.contract import WORKSPACE, Bind, ExecResult, Limits

__all__ = ["DockerSandbox", "engine_info"]

DEFAULT_LIMITS = Limits()  # frozen, so one shared default is safe

DEFAULT_IMAGE = "python:3.11-slim"


@functools.cache
def engine_info() -> tuple[bool, str, bool]:
    """(engine answers, why not, gVisor runsc available)."""
    exe = shutil.which("docker")
    if exe is None:
        return False, "docker client not found", False
    try:
        p = subprocess.run([exe, "info", "--format", "{{json .Runtimes}}"], capture_output=True,
                           text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"docker info failed: {exc}", False
    if p.returncode != 0:
        return False, "no Docker engine answers: " + (p.stderr.strip().splitlines() or [""])[-1], \
            False
    try:
        runtimes = json.loads(p.stdout or "{}")
    except json.JSONDecodeError:
        runtimes = {}
    return True, "", "runsc" in runtimes


class DockerSandbox(TreeSandbox):
    """One locked-down container per command (see the module docstring)."""

    workdir = WORKSPACE

    def __init__(self, workspace: Path, *, binds: Sequence[Bind] = (),
                 env: Mapping[str, str] | None = None, limits: Limits = DEFAULT_LIMITS,
                 **kwargs: object) -> None:
        ok, why, self._gvisor = engine_info()
        if not ok:
            raise SandboxUnavailable(f"docker sandbox unusable ({why}); fix: start the Docker "
                                     "engine, or use the default bwrap sandbox")
        super().__init__(workspace, binds=binds, env=env, limits=limits, **kwargs)  # type: ignore[arg-type]
        self.image = os.environ.get("SWEMILL_DOCKER_IMAGE", DEFAULT_IMAGE)
        self._docker = shutil.which("docker") or "docker"

    def run_args(self, name: str, env: Mapping[str, str], cwd: str | None,
                 interactive: bool) -> list[str]:
        lim = self.limits
        where = WORKSPACE if cwd is None else (cwd if cwd.startswith("/") else
                                               f"{WORKSPACE}/{cwd}")
        args = [self._docker, "run", "--name", name, "--read-only", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--user", "1000:1000",
                "--network", "bridge" if lim.net else "none"]
        tmp_size = f",size={lim.memory_mb}m" if lim.memory_mb else ""
        args += ["--tmpfs", f"/tmp:rw,exec,mode=1777{tmp_size}"]
        if lim.pids is not None:
            args += ["--pids-limit", str(lim.pids)]
        if lim.memory_mb is not None:
            args += ["--memory", f"{lim.memory_mb}m", "--memory-swap", f"{lim.memory_mb}m"]
        if lim.file_size_mb is not None:
            args += ["--ulimit", f"fsize={lim.file_size_mb << 20}"]
        if self._gvisor:
            args.append("--runtime=runsc")
        if interactive:
            args.append("-i")
        args += ["-v", f"{self._tree.path}:{WORKSPACE}:rw", "-w", where]
        for b in self.binds:
            args += ["-v", f"{b.host}:{b.inside}:{'rw' if b.writable else 'ro'}"]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        return [*args, self.image]

    def _exec(self, cmd: Sequence[str] | str, *, timeout: float, env: dict[str, str],
              cwd: str | None, stdin: bytes | None) -> ExecResult:
        inner = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not inner:
            raise SandboxError("empty command")
        name = f"swemill-{uuid.uuid4().hex[:16]}"
        argv = [*self.run_args(name, env, cwd, stdin is not None), *inner]
        # the container's own limits do the work; the client process needs none of its own
        client = dataclasses.replace(self.limits, pids=None, memory_mb=None, file_size_mb=None)
        try:
            result = run_guarded(argv, env=dict(os.environ), cwd="/", stdin=stdin,
                                 limits=client, timeout=timeout)
            if not result.timed_out and self._oom_killed(name):
                result.killed_reason = "memory"
            return result
        finally:
            subprocess.run([self._docker, "rm", "-f", name], capture_output=True, timeout=60)

    def _oom_killed(self, name: str) -> bool:
        p = subprocess.run([self._docker, "inspect", "-f", "{{.State.OOMKilled}}", name],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip() == "true"

    def spawn(self, cmd: Sequence[str] | str, *, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> Spawned:
        raise SandboxError("long-lived processes (spawn) are not supported by the docker "
                           "backend; use bwrap")
