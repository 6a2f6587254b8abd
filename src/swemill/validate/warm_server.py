"""A warm pytest worker that runs *inside* the sandbox, under the repository's interpreter.

It imports pytest and its plugins once, then forks a child per request, so each request pays
only for importing the project's own modules and running the selected tests (the trick that
makes mutation-testing tools fast). It deliberately imports nothing from swemill: the
repository's environment does not contain swemill.

Protocol, one JSON object per line: the first line written is ``{"ready": true, ...}``; each
request ``{"id", "args": [...pytest args], "timeout": seconds}`` is answered by
``{"id", "exit_code", "timed_out", "outcomes": {nodeid: outcome}, "durations": {...},
"messages": {...}, "log_tail", "wall_s"}``. The project is never imported in this parent
process, so every child sees the workspace as it is on disk at that moment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # a stale .pyc from one candidate must never serve another
LOG_TAIL = 4000


class _Collector:
    """An in-process pytest plugin that records one outcome per test node id."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.messages: dict[str, str] = {}

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


def _child(args: list[str], result_path: str, log_path: str) -> None:
    os.setpgid(0, 0)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    import pytest

    collector = _Collector()
    code = 4
    try:
        code = int(pytest.main(args, plugins=[collector]))
    finally:
        with open(result_path, "w") as fh:
            json.dump({"exit_code": code, "outcomes": collector.outcomes,
                       "durations": collector.durations, "messages": collector.messages}, fh)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return -9, True
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def _serve_one(request: dict, workdir: str) -> dict:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="warm-") as tmp:
        result_path, log_path = os.path.join(tmp, "result.json"), os.path.join(tmp, "log.txt")
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the forked child
            try:
                os.chdir(workdir)
                _child(list(request["args"]), result_path, log_path)
            finally:
                os._exit(70)
        exit_code, timed_out = _wait(pid, float(request.get("timeout", 60)))
        result = {"exit_code": exit_code, "outcomes": {}, "durations": {}, "messages": {}}
        if not timed_out and os.path.exists(result_path):
            with open(result_path) as fh:
                result.update(json.load(fh))
            result["exit_code"] = exit_code  # the process's own word wins over the report's
        with open(log_path, "rb") if os.path.exists(log_path) else open(os.devnull, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - LOG_TAIL))
            tail = fh.read().decode("utf-8", "replace")
    return {"id": request.get("id"), "timed_out": timed_out, "log_tail": tail,
            "wall_s": time.monotonic() - start, **result}


def _warm_up() -> float:
    start = time.monotonic()
    import importlib.metadata as md

    import pytest  # noqa: F401

    for ep in md.entry_points(group="pytest11"):
        with contextlib.suppress(Exception):  # a broken plugin is the child's problem
            ep.load()
    for name in os.environ.get("SWEMILL_WARM_PREIMPORT", "").split(","):
        if name:
            with contextlib.suppress(Exception):
                __import__(name)
    return time.monotonic() - start


def main() -> None:
    workdir = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    out = sys.stdout
    out.write(json.dumps({"ready": True, "startup_s": _warm_up(), "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        request = json.loads(line)
        if request.get("op") == "exit":
            break
        out.write(json.dumps(_serve_one(request, workdir)) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
