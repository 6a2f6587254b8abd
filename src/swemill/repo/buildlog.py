"""The log of an environment build: every command and its output, and the one line that
says why a failed step failed (not the package manager's advice around it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

from swemill.core.errors import EnvBuildError
from swemill.repo.sources import ResolvedSource
from swemill.sandbox.contract import ExecResult

__all__ = ["INSTALL_TIMEOUT_S", "fail", "last_step", "log_inside", "log_result", "reason_line",
           "run_logged"]

INSTALL_TIMEOUT_S = 1800
_LOG_TAIL = 15


def log_result(result: ExecResult, log: Path, what: str) -> None:
    with open(log, "a") as fh:
        fh.write(f"$ (in the sandbox) {what}\n{result.stdout}{result.stderr}")
        if not result.ok:
            fh.write(f"({what}: exit {result.exit_code}; going on without)\n")


def log_inside(result: ExecResult, log: Path, src: ResolvedSource, what: str, *,
               check: bool = True) -> None:
    with open(log, "a") as fh:
        fh.write(f"$ (in the sandbox) {what}\n{result.stdout}{result.stderr}")
    if not check:
        return
    if result.timed_out:
        fail(f"{what} of {src.repo} did not finish within {INSTALL_TIMEOUT_S} s", log)
    if not result.ok:
        why = f"killed: {result.killed_reason}" if result.killed_reason else \
            f"exit {result.exit_code}"
        fail(f"{what} of {src.repo}@{src.commit[:12]} failed ({why})", log)


def run_logged(cmd: list[str], log: Path, src: ResolvedSource, *, cwd: Path | None = None,
         check: bool = True) -> int:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "PYTHONDONTWRITEBYTECODE": "1",
           "VIRTUAL_ENV": ""}
    env.pop("VIRTUAL_ENV")
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                  timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            fail(f"install of {src.repo} did not finish within {INSTALL_TIMEOUT_S} s", log)
    if check and proc.returncode != 0:
        fail(f"install of {src.repo}@{src.commit[:12]} failed (exit {proc.returncode})", log)
    return proc.returncode


def fail(summary: str, log: Path, *, step: list[str] | None = None) -> NoReturn:
    """Raise with the log's tail, keeping a copy of the log outside the doomed temp dir. The
    cause line is read from ``step`` (a step's output) or else the log's last step."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    tail = lines[-_LOG_TAIL:]
    cause = reason_line(step if step is not None else last_step(log))
    raise EnvBuildError(f"{summary}: {cause}\n" + "\n".join(tail)
                        + f"\n(full log: {_keep_log(log)})")


def last_step(log: Path) -> list[str]:
    """The output of the log's last command."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    last = max((i for i, ln in enumerate(lines) if ln.startswith("$ ")), default=-1)
    return lines[last + 1:]


_COMPILER = re.compile(r"\b(fatal error|error):\s", re.I)
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|NotFound)"
                        r"(?::\s.*)?$")
_HINT = re.compile(r"^(hint|help|note|warning)\b", re.I)


def reason_line(step: list[str]) -> str:
    """The line of a failed step's output that says why, not the package manager's advice:
    a compiler's first error, else the last exception a traceback raised, else the first
    error line (with the cause it announces)."""
    clean = [ln.strip(" ×╰─▶│|").strip() for ln in step]
    clean = [ln for ln in clean if ln and not _HINT.match(ln)]
    for ln in clean:
        if _COMPILER.search(ln) and re.match(r"^\S+\.(c|cc|cpp|h|pyx|f90|rs):\d+", ln):
            return ln
    exceptions = [ln for ln in clean if _EXCEPTION.match(ln)]
    if exceptions:
        return exceptions[-1]
    for i, ln in enumerate(clean):
        if re.search(r"\berror\b|No solution|not found|failed", ln, re.I):
            nxt = clean[i + 1] if i + 1 < len(clean) else ""
            return f"{ln}: {nxt}" if nxt and (ln.endswith(":") or nxt.startswith("cause:")) \
                else ln
    return clean[-1] if clean else "(the log is empty)"


def _keep_log(log: Path) -> Path:
    kept = log.parent.parent.parent / "logs" / f"{log.parent.name.lstrip('.')}.build.log"
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, kept)
    return kept
