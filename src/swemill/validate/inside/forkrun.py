"""Fork a child per request and run pytest in it, within the request's time limits.

The server imported pytest and its plugins once; each run is a fork of it (or, for a tree
that edits a file the server imported itself, or with the ``fork`` flag off, a fresh
interpreter the fork execs), so a run pays only for importing the project's own modules and
running the selected tests. The child reports which test runs now down a pipe, so a test
past its own deadline (wall or CPU seconds since it started) ends the run as timed out,
``hung`` naming it; the whole run is bounded by the request's ``timeout``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Container
from typing import Any

from .protocol import Result, Run, RunInImage
from .report_cache import ReportCache

LOG_TAIL = 4000
ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")
"""The package's entry script: a cold run execs it (``--cold``)."""

Child = Callable[[str, str, int], None]


class Collector:
    """An in-process pytest plugin that records one outcome per test node id."""

    def __init__(self, progress: int | None = None) -> None:
        self.outcomes: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.messages: dict[str, str] = {}
        self.progress = progress
        """A pipe to the server: which test is running now (for per-test deadlines)."""

    def _say(self, line: str) -> None:
        if self.progress is not None:
            with contextlib.suppress(OSError):
                os.write(self.progress, line.encode("utf-8", "replace") + b"\n")

    def pytest_runtest_logstart(self, nodeid, location):  # noqa: ANN001, ANN201, ARG002
        self._say(f"S {nodeid}")

    def pytest_runtest_logfinish(self, nodeid, location):  # noqa: ANN001, ANN201, ARG002
        self._say("E")

    def pytest_runtest_logreport(self, report):  # noqa: ANN001, ANN201 - pytest hook
        nodeid = report.nodeid
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + float(report.duration)
        wasxfail = hasattr(report, "wasxfail")
        if report.when == "call":
            outcome = ("xpassed" if report.passed else "xfailed") if wasxfail else report.outcome
        elif report.failed:
            outcome = "error"
        elif report.skipped:
            outcome = "xfailed" if wasxfail else "skipped"
        else:
            return
        if self.outcomes.get(nodeid) in ("failed", "error"):
            return  # a teardown error never hides a failure, nor the reverse
        self.outcomes[nodeid] = outcome
        if report.failed:
            self.messages[nodeid] = str(getattr(report, "longreprtext", ""))[-1500:]

    def pytest_collectreport(self, report):  # noqa: ANN001, ANN201 - pytest hook
        if report.failed:
            self.outcomes[report.nodeid or "<collection>"] = "error"
            self.messages[report.nodeid or "<collection>"] = str(report.longreprtext)[-1500:]


def outcomes_only(config: Any = None) -> None:
    """For a run whose outcomes alone are wanted (a repeat of the broken tree, a golden or a
    near-miss run): a failure's report is its exception's last line, not a formatted
    traceback (source read and parsed, locals and assertion diffs laid out), and the log
    gets no failure sections (``--tb=no``). Formatting a failure costs more than running
    most tests, and comes after the outcome is decided: pytest formats the report of a
    test that has already failed. Call in the child only, before its tests run."""
    from _pytest import nodes

    full = nodes.Node._repr_failure_py

    def exception_only(self: Any, excinfo: Any, style: Any = None) -> Any:
        # "line" is the style of a module that skips itself at import (importorskip,
        # unittest.SkipTest): pytest wants its repr object there, and a str was INTERNALERROR
        if style == "line":
            return full(self, excinfo, style)
        return str(excinfo.exconly())

    nodes.Node._repr_failure_py = exception_only  # type: ignore[method-assign]
    if config is not None:
        config.option.tbstyle = "no"


def child(args: list[str], result_path: str, log_path: str, progress: int,
          reports: ReportCache, terse: bool = False, maxfail: int = 0) -> None:
    os.setpgid(0, 0)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    import pytest

    as_pytest_argv(args)
    if terse:
        outcomes_only()
        args = [*args, "--tb=no"]
    if maxfail:
        args = [*args, f"--maxfail={maxfail}"]
    collector = Collector(progress)
    code = 4
    try:
        code = int(pytest.main(args, plugins=[collector]))
    except BaseException:  # escaped pytest (a warning made an error at start-up): to the log
        import traceback

        traceback.print_exc()
        raise
    finally:
        write_result(result_path, code, collector, reports)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def as_pytest_argv(args: list[str]) -> None:
    """``sys.argv`` as ``python -m pytest ARGS`` has it (a conftest may read it)."""
    import pytest

    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *args]


def _exec_cold(args: list[str], result_path: str, log_path: str, progress: int,
               terse: bool, maxfail: int) -> None:
    """Become a fresh interpreter that runs ``args`` as :func:`_child` would: for a tree that
    edits a file this server imported before forking (a dependency of pytest itself, a
    plugin), which no fork of it can see, or for every run with the ``fork`` flag off."""
    os.set_inheritable(progress, True)
    spec = json.dumps({"args": args, "result": result_path, "log": log_path,
                       "progress": progress, "terse": terse, "maxfail": maxfail})
    os.execv(sys.executable, [sys.executable, "-u", ENTRY, "--cold", spec])


def cold_main(spec: dict[str, Any]) -> None:
    """The fresh interpreter of a cold run (see :func:`_exec_cold`): no cache of any kind."""
    child(list(spec["args"]), str(spec["result"]), str(spec["log"]), int(spec["progress"]),
          ReportCache(), bool(spec.get("terse")), int(spec.get("maxfail") or 0))


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds process ``pid`` has used so far (all its threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class _Progress:
    """The server's end of the progress pipe: the deadlines of the test running now, in wall
    time and in the test process's CPU time (a busy loop is caught by the second however
    loaded the machine is, a test waiting on something that never comes by the first)."""

    def __init__(self, fd: int, deadlines: dict[str, float], pid: int = 0,
                 cpu_deadlines: dict[str, float] | None = None) -> None:
        self.fd = fd
        self.deadlines = deadlines
        self.cpu_deadlines = cpu_deadlines or {}
        self.pid = pid
        self.buf = b""
        self.running: str | None = None
        self.until = float("inf")
        self.cpu_until = float("inf")
        os.set_blocking(fd, False)

    def over(self, now: float) -> bool:
        """Is the running test past one of its deadlines?"""
        if self.running is None:
            return False
        if now >= self.until:
            return True
        if self.cpu_until != float("inf"):
            used = _proc_cpu(self.pid)
            return used is not None and used >= self.cpu_until
        return False

    def poll(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                return
            self.buf += chunk
            *lines, self.buf = self.buf.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace")
                self.cpu_until = float("inf")
                if line.startswith("S "):
                    self.running = line[2:]
                    limit = self.deadlines.get(self.running)
                    self.until = time.monotonic() + limit if limit is not None else float("inf")
                    cpu_limit = self.cpu_deadlines.get(self.running)
                    used = _proc_cpu(self.pid) if cpu_limit is not None else None
                    if cpu_limit is not None and used is not None:
                        self.cpu_until = used + cpu_limit
                else:
                    self.running, self.until = None, float("inf")


def _wait(pid: int, timeout: float, progress: _Progress,
          cpu_timeout: float = 0.0) -> tuple[int, bool, float, str | None]:
    """(exit code, timed out, CPU seconds of the child and everything it reaped, the test
    that went past its own deadline); ``cpu_timeout``: the child's own CPU seconds at which
    the run ends as timed out too (0: none)."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False, usage.ru_utime + usage.ru_stime, None
        progress.poll()
        now = time.monotonic()
        hung = progress.running if progress.over(now) else None
        spent = cpu_timeout > 0 and (_proc_cpu(pid) or 0.0) >= cpu_timeout
        if now >= deadline or hung is not None or spent:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return -9, True, usage.ru_utime + usage.ru_stime, hung
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def write_result(path: str, code: int, collector: Collector, reports: ReportCache,
                 **extra: Any) -> None:
    """The child's report to the server (read back by :func:`serve_one`)."""
    with open(path, "w") as fh:
        json.dump({"exit_code": code, "outcomes": collector.outcomes,
                   "durations": collector.durations, "messages": collector.messages,
                   "ast_hot": reports.hot, "ast_noted": reports.noted, **extra}, fh)


def run_child(request: Run, reports: ReportCache, cold: bool) -> Child:
    """The child of an ordinary run: pytest with the request's args, forked or ``cold``."""
    args = list(request.args)

    def run(result: str, log: str, progress: int) -> None:
        if cold:
            _exec_cold(args, result, log, progress, request.terse, request.maxfail)
        child(args, result, log, progress, reports, request.terse, request.maxfail)

    return run


def serve_one(request: Run | RunInImage, workdir: str, child: Child, reports: ReportCache,
              log_path: str | None = None, known: Container[str] = ()) -> Result:
    """Fork ``child`` (result path, log path, progress pipe; it never returns) and wait for
    it within the request's budget. Texts the child parsed for its failure reports are kept
    for later children when a second child needed them too, or at once when their digest is
    ``known`` (the head image's own files)."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="warm-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        log_path = log_path or os.path.join(tmp, "log.txt")
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the forked child
            try:
                os.close(read_end)
                os.chdir(workdir)
                child(result_path, log_path, write_end)
            finally:
                os._exit(70)
        os.close(write_end)
        deadlines = {str(k): float(v) for k, v in request.deadlines.items()}
        cpu = {str(k): float(v) for k, v in request.cpu_deadlines.items()}
        try:
            exit_code, timed_out, cpu_s, hung = _wait(pid, float(request.timeout),
                                                      _Progress(read_end, deadlines, pid, cpu),
                                                      float(request.cpu_timeout))
        finally:
            os.close(read_end)
        found: dict[str, Any] = {}
        if not timed_out and os.path.exists(result_path):
            with open(result_path) as fh:
                found = json.load(fh)
        hot, noted = found.pop("ast_hot", None), found.pop("ast_noted", None)
        adopt = hot if isinstance(hot, list) else []
        adopt += [d for d in (noted if isinstance(noted, list) else []) if d in known]
        reports.adopt(list(dict.fromkeys(adopt)))
        with open(log_path, "rb") if os.path.exists(log_path) else open(os.devnull, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - LOG_TAIL))
            tail = log.read().decode("utf-8", "replace")
    return Result(id=request.id, exit_code=exit_code,  # the process's own word, not the report's
                  timed_out=timed_out, outcomes=found.get("outcomes", {}),
                  durations=found.get("durations", {}), messages=found.get("messages", {}),
                  log_tail=found.get("log_tail") or tail, wall_s=time.monotonic() - start,
                  cpu_s=cpu_s, hung=hung, cached_asts=len(reports.trees),
                  hotpatched=found.get("hotpatched"), unservable=found.get("unservable"))
