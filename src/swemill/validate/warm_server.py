"""A warm pytest worker that runs *inside* the sandbox, under the repository's interpreter.

It imports pytest and its plugins once, then forks a child per request, so each request pays
only for importing the project's own modules and running the selected tests (the trick that
makes mutation-testing tools fast). It deliberately imports nothing from swemill: the
repository's environment does not contain swemill.

Protocol, one JSON object per line: the first line written is ``{"ready": true, ...}``; each
request ``{"id", "args": [...pytest args], "timeout": seconds, "deadlines": {nodeid: seconds}}``
is answered by ``{"id", "exit_code", "timed_out", "hung", "outcomes": {nodeid: outcome},
"durations": {...}, "messages": {...}, "log_tail", "wall_s", "cached_asts"}``. ``timeout``
bounds the whole run; ``deadlines`` (optional) bound single tests: a test still running
that long after it started (setup, call and teardown) has the run killed as timed out, and
``hung`` names it. The project is never imported in this parent
process, so every child sees the workspace as it is on disk at that moment.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import marshal
import os
import signal
import sys
import tempfile
import time
from typing import Any

sys.dont_write_bytecode = True  # a stale .pyc from one candidate must never serve another
LOG_TAIL = 4000


class _Collector:
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


def _child(args: list[str], result_path: str, log_path: str, progress: int) -> None:
    os.setpgid(0, 0)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    import pytest

    collector = _Collector(progress)
    code = 4
    try:
        code = int(pytest.main(args, plugins=[collector]))
    finally:
        with open(result_path, "w") as fh:
            json.dump({"exit_code": code, "outcomes": collector.outcomes,
                       "durations": collector.durations, "messages": collector.messages,
                       "ast_hot": _ASTS.hot}, fh)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class _Progress:
    """The server's end of the progress pipe: the deadline of the test running now."""

    def __init__(self, fd: int, deadlines: dict[str, float]) -> None:
        self.fd = fd
        self.deadlines = deadlines
        self.buf = b""
        self.running: str | None = None
        self.until = float("inf")
        os.set_blocking(fd, False)

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
                if line.startswith("S "):
                    self.running = line[2:]
                    limit = self.deadlines.get(self.running)
                    self.until = time.monotonic() + limit if limit is not None else float("inf")
                else:
                    self.running, self.until = None, float("inf")


def _wait(pid: int, timeout: float, progress: _Progress) -> tuple[int, bool, float, str | None]:
    """(exit code, timed out, CPU seconds of the child and everything it reaped, the test
    that went past its own deadline)."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False, usage.ru_utime + usage.ru_stime, None
        progress.poll()
        now = time.monotonic()
        hung = progress.running if now >= progress.until else None
        if now >= deadline or hung is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return -9, True, usage.ru_utime + usage.ru_stime, hung
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def _serve_one(request: dict, workdir: str) -> dict:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="warm-") as tmp:
        result_path, log_path = os.path.join(tmp, "result.json"), os.path.join(tmp, "log.txt")
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the forked child
            try:
                os.close(read_end)
                os.chdir(workdir)
                _child(list(request["args"]), result_path, log_path, write_end)
            finally:
                os._exit(70)
        os.close(write_end)
        deadlines = {str(k): float(v) for k, v in (request.get("deadlines") or {}).items()}
        try:
            exit_code, timed_out, cpu_s, hung = _wait(pid, float(request.get("timeout", 60)),
                                                      _Progress(read_end, deadlines))
        finally:
            os.close(read_end)
        result = {"exit_code": exit_code, "outcomes": {}, "durations": {}, "messages": {},
                  "cpu_s": cpu_s, "hung": hung}
        if not timed_out and os.path.exists(result_path):
            with open(result_path) as fh:
                result.update(json.load(fh))
            result["exit_code"] = exit_code  # the process's own word wins over the report's
            result["cpu_s"] = cpu_s
        hot = result.pop("ast_hot", None)
        _ASTS.adopt(hot if isinstance(hot, list) else [])
        with open(log_path, "rb") if os.path.exists(log_path) else open(os.devnull, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - LOG_TAIL))
            tail = fh.read().decode("utf-8", "replace")
    return {"id": request.get("id"), "timed_out": timed_out, "log_tail": tail,
            "wall_s": time.monotonic() - start, "cached_asts": len(_ASTS.trees), **result}


class _CodeCache:
    """Compiled code keyed by (path, exact source bytes), shared by every forked child.

    Bytecode is never written next to the sources (a stale ``.pyc`` with the same size and
    mtime as a mutated file would hide the mutation), so without this each child would
    compile -- and pytest would assertion-rewrite -- every module it imports, every time.
    Keying by content rather than by mtime makes a stale hit impossible.
    """

    def __init__(self, root: str) -> None:
        self.root = root

    def _path(self, path: object, data: bytes, kind: str) -> str:
        digest = hashlib.sha256(f"{kind}\0{path}\0".encode() + data).hexdigest()
        return os.path.join(self.root, digest)

    def load(self, path: object, data: bytes, kind: str):  # noqa: ANN201 - code or None
        try:
            with open(self._path(path, data, kind), "rb") as fh:
                return marshal.load(fh)
        except (OSError, EOFError, ValueError, TypeError):
            return None

    def store(self, path: object, data: bytes, kind: str, code: Any) -> None:
        target = self._path(path, data, kind)
        tmp = f"{target}.{os.getpid()}"
        with contextlib.suppress(OSError, ValueError):
            with open(tmp, "wb") as fh:
                marshal.dump(code, fh)
            os.replace(tmp, target)

    def install(self) -> None:
        """Wrap the source loader's compile step and pytest's assertion rewriting."""
        from importlib.machinery import SourceFileLoader

        cache = self
        compile_source = SourceFileLoader.source_to_code

        def source_to_code(loader, data, path, *args, **kwargs):  # noqa: ANN001, ANN202
            raw = bytes(data) if not isinstance(data, str) else data.encode()
            code = cache.load(path, raw, f"py{args}{sorted(kwargs.items())}")
            if code is None:
                code = compile_source(loader, data, path, *args, **kwargs)
                cache.store(path, raw, f"py{args}{sorted(kwargs.items())}", code)
            return code

        SourceFileLoader.source_to_code = source_to_code  # type: ignore[method-assign,assignment]
        try:
            from _pytest.assertion import rewrite
        except ImportError:
            return
        rewrite_test = getattr(rewrite, "_rewrite_test", None)
        if rewrite_test is None:
            return

        def cached_rewrite(fn, config):  # noqa: ANN001, ANN202
            try:
                with open(fn, "rb") as fh:
                    raw = fh.read()
            except OSError:
                return rewrite_test(fn, config)
            code = cache.load(fn, raw, "pytest-rewrite")
            if code is None:
                first, code = rewrite_test(fn, config)
                cache.store(fn, raw, "pytest-rewrite", code)
                return first, code
            # the first item (a stat or a source hash) only matters when pytest writes its
            # own pyc files, which it never does here (sys.dont_write_bytecode)
            return os.stat(fn), code

        rewrite._rewrite_test = cached_rewrite


class _AstCache:
    """Parsed modules for pytest's failure reports, keyed by exact source text.

    To show the statement a traceback line belongs to, pytest parses the *whole* file of
    every traceback entry, once per failing test (and walks the tree), so on a
    several-thousand-line test module a failing test costs a few tenths of a second of
    parsing alone. Here a child parses each distinct source text once; a text that a second
    child also needed (the unchanged test modules) is parsed once more in this parent, and
    every later fork inherits the tree. Keyed by content, a stale tree is impossible, and the
    reports are exactly the ones pytest would write.
    """

    MAX_TREES = 32

    def __init__(self) -> None:
        self.root = ""
        self.trees: dict[str, Any] = {}
        self.hot: list[str] = []
        """Digests this child parsed that an earlier child had parsed too (for the parent)."""
        self._linenos: Any = None

    def _path(self, digest: str) -> str:
        return os.path.join(self.root, f"ast-{digest}.py")

    def _parse(self, content: str) -> Any:
        import ast
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(content, "source", "exec")
        if self._linenos is not None:
            with contextlib.suppress(Exception):
                self._linenos(tree)  # pytest memoizes the statement line numbers on the tree
        return tree

    def _note(self, content: str) -> None:
        """Leave the text where the parent can find it; say so if an earlier child did."""
        data = content.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if os.path.exists(path):
            self.hot.append(digest)
            return
        with contextlib.suppress(OSError):
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)

    def adopt(self, digests: list[str]) -> None:
        """In the parent: parse the texts two children needed, for every later child."""
        for digest in digests:
            if len(self.trees) >= self.MAX_TREES:
                return
            with contextlib.suppress(Exception):
                with open(self._path(str(digest)), "rb") as fh:
                    data = fh.read()
                if hashlib.sha256(data).hexdigest() != digest:
                    continue
                content = data.decode("utf-8", "surrogatepass")
                if content not in self.trees:
                    self.trees[content] = self._parse(content)

    def install(self, root: str) -> None:
        self.root = root
        try:
            from _pytest._code import code, source
        except ImportError:
            return
        original = getattr(source, "getstatementrange_ast", None)
        if original is None or getattr(code, "getstatementrange_ast", None) is not original:
            return
        self._linenos = getattr(source, "_statement_linenos", None)
        cache = self

        def getstatementrange_ast(lineno, src, assertion=False, astnode=None):  # noqa: ANN001, ANN202, FBT002
            if astnode is None:
                content = str(src)
                astnode = cache.trees.get(content)
                if astnode is None:
                    astnode = cache._parse(content)  # a SyntaxError propagates, as in pytest
                    cache.trees[content] = astnode
                    cache._note(content)
            return original(lineno, src, assertion, astnode)

        source.getstatementrange_ast = getstatementrange_ast
        code.getstatementrange_ast = getstatementrange_ast


_ASTS = _AstCache()


def _warm_up(cache_dir: str) -> float:
    start = time.monotonic()
    import importlib.metadata as md

    import pytest  # noqa: F401

    _CodeCache(cache_dir).install()
    _ASTS.install(cache_dir)
    with contextlib.suppress(Exception):  # pytest imports its own plugins lazily, per session
        import importlib

        from _pytest.config import builtin_plugins, default_plugins

        for name in sorted(set(default_plugins) | set(builtin_plugins)):
            with contextlib.suppress(Exception):
                importlib.import_module(name if "." in name else f"_pytest.{name}")

    for ep in md.entry_points(group="pytest11"):
        with contextlib.suppress(Exception):  # a broken plugin is the child's problem
            ep.load()
    for name in os.environ.get("SWEMILL_WARM_PREIMPORT", "").split(","):
        if name:
            with contextlib.suppress(Exception):
                __import__(name)
    # Everything imported so far lives as long as the server: keep it out of the children's
    # collections (pytest runs gc.collect() at the end of every session).
    gc.collect()
    gc.freeze()
    return time.monotonic() - start


def main() -> None:
    workdir = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    out = sys.stdout
    with tempfile.TemporaryDirectory(prefix="swemill-code-") as cache_dir:
        ready = {"ready": True, "startup_s": _warm_up(cache_dir), "pid": os.getpid()}
        out.write(json.dumps(ready) + "\n")
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
