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
``hung`` names it; ``cpu_deadlines`` (optional) do the same in CPU seconds of the test
process since the test started. The project is never imported in this parent
process, so every child sees the workspace as it is on disk at that moment -- except the
workspace files the server did import before forking (``"preloaded"`` in the ready line: the
project is a dependency of pytest or a plugin). A request with ``"cold": true`` runs in a
fresh interpreter instead (the fork execs one), for a tree that edits one of those.

The head image. ``{"op": "image", "args": [...], "timeout": s}`` forks, while the workspace
is at the head commit, a long-lived *image*: a process that imports the project and collects
the whole suite once (as ``args`` would), records which code ran meanwhile, and then forks a
child per request that runs only the requested items of that collected session. A request
``{"id", "image": true, "nodeids": [...], "hotpatch": [paths], "timeout", "deadlines"}`` is
served there: the workspace must equal the head tree except for the listed ``.py`` files,
whose edited functions the child swaps in before running (:mod:`hotpatch` says when that is
exact). When it is not -- a module-level edit, an edited function that ran at import, a test
the image did not collect -- the answer is ``{"id", "unservable": reason}`` and the caller runs
the tree the ordinary way. A golden run on a head-identical tree thus costs a fork and the
selected tests, instead of a fresh interpreter importing and collecting everything.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.util
import json
import marshal
import os
import resource
import selectors
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Container
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

    _as_pytest_argv(args)
    collector = _Collector(progress)
    code = 4
    try:
        code = int(pytest.main(args, plugins=[collector]))
    except BaseException:  # escaped pytest (a warning made an error at start-up): to the log
        import traceback

        traceback.print_exc()
        raise
    finally:
        with open(result_path, "w") as fh:
            json.dump({"exit_code": code, "outcomes": collector.outcomes,
                       "durations": collector.durations, "messages": collector.messages,
                       "ast_hot": _ASTS.hot, "ast_noted": _ASTS.noted}, fh)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _as_pytest_argv(args: list[str]) -> None:
    """``sys.argv`` as ``python -m pytest ARGS`` has it (a conftest may read it)."""
    import pytest

    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *args]


def _exec_cold(args: list[str], result_path: str, log_path: str, progress: int) -> None:
    """Become a fresh interpreter that runs ``args`` as :func:`_child` would: for a tree that
    edits a file this server imported before forking (a dependency of pytest itself, a
    plugin), which no fork of it can see."""
    os.set_inheritable(progress, True)
    spec = json.dumps({"args": args, "result": result_path, "log": log_path,
                       "progress": progress})
    os.execv(sys.executable, [sys.executable, "-u", os.path.abspath(__file__), "--cold", spec])


def _cold_main(spec: dict) -> None:
    """The fresh interpreter of a cold run (see :func:`_exec_cold`)."""
    _child(list(spec["args"]), str(spec["result"]), str(spec["log"]), int(spec["progress"]))


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
        hung = progress.running if progress.over(now) else None
        if now >= deadline or hung is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return -9, True, usage.ru_utime + usage.ru_stime, hung
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def _serve_one(request: dict, workdir: str, child: Callable[[str, str, int], None] | None = None,
               log_path: str | None = None, known: Container[str] = ()) -> dict:
    """Fork ``child`` (result path, log path, progress pipe; it never returns), default: pytest
    with the request's args, and wait for it within the request's budget. Texts the child
    parsed for its failure reports are kept for later children when a second child needed
    them too, or at once when their digest is ``known`` (the head image's own files)."""
    start = time.monotonic()
    if child is None:
        args = list(request["args"])

        def child(result: str, log: str, progress: int) -> None:
            if request.get("cold"):
                _exec_cold(args, result, log, progress)
            _child(args, result, log, progress)

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
        deadlines = {str(k): float(v) for k, v in (request.get("deadlines") or {}).items()}
        cpu = {str(k): float(v) for k, v in (request.get("cpu_deadlines") or {}).items()}
        try:
            exit_code, timed_out, cpu_s, hung = _wait(pid, float(request.get("timeout", 60)),
                                                      _Progress(read_end, deadlines, pid, cpu))
        finally:
            os.close(read_end)
        result = {"exit_code": exit_code, "outcomes": {}, "durations": {}, "messages": {},
                  "cpu_s": cpu_s, "hung": hung}
        if not timed_out and os.path.exists(result_path):
            with open(result_path) as fh:
                result.update(json.load(fh))
            result["exit_code"] = exit_code  # the process's own word wins over the report's
            result["cpu_s"] = cpu_s
        hot, noted = result.pop("ast_hot", None), result.pop("ast_noted", None)
        adopt = hot if isinstance(hot, list) else []
        adopt += [d for d in (noted if isinstance(noted, list) else []) if d in known]
        _ASTS.adopt(list(dict.fromkeys(adopt)))
        with open(log_path, "rb") if os.path.exists(log_path) else open(os.devnull, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - LOG_TAIL))
            tail = log.read().decode("utf-8", "replace")
    return {"id": request.get("id"), "timed_out": timed_out, "log_tail": tail,
            "wall_s": time.monotonic() - start, "cached_asts": len(_ASTS.trees), **result}


_COMPILED: dict[str, list[Any]] | None = None
"""In the head image: the module code every imported source file was executed from."""


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
            if _COMPILED is not None:
                _COMPILED.setdefault(str(path), []).append(code)
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
        self.noted: list[str] = []
        """Digests of every text this child parsed (the head image adopts the known ones)."""
        self._linenos: Any = None
        self._memo = False
        self.heads: dict[str, Any] = {}
        """Head texts' trees, for :meth:`stand_in` (the head image's edited files only)."""

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
        self.noted.append(digest)
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

    def stand_in(self, head: str, new: str) -> Any | None:
        """A tree for the reports on ``new``, an edit of the head text ``head`` that stays
        inside one function or class, without parsing all of ``new``.

        pytest needs a report's tree only for the line numbers of its statements (memoized on
        the tree). Those of ``new`` are head's, shifted below the edited statement, with the
        edited statement's own from a parse of that statement alone: a Python module is a
        sequence of statements that parse independently. The edited lines, with the blank and
        comment lines after them, must parse as exactly one statement of the same kind; None
        when anything is out of the ordinary (the child then parses ``new`` whole, as before).
        """
        if not self._memo or head == new:
            return None
        try:
            values = self._edited_linenos(head, new)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if values is None:
            return None
        import ast

        node = ast.Module(body=[], type_ignores=[])
        node._pytest_statement_linenos = values  # type: ignore[attr-defined]
        return node

    def head_tree(self, head: str) -> Any:
        """The parse of a head text (parsed once)."""
        tree = self.heads.get(head) or self.trees.get(head)
        if tree is None:
            tree = self.heads[head] = self._parse(head)
        return tree

    def _edited_linenos(self, head: str, new: str) -> list[int] | None:
        import ast

        hotpatch = _hotpatch()
        old_lines, new_lines = head.split("\n"), new.split("\n")
        first, end, shift = hotpatch.edited_lines(old_lines, new_lines)
        head_tree = self.head_tree(head)
        chain = hotpatch.enclosing(head_tree, first, end)
        if chain is None:
            return None
        lo, hi, st = chain[-1]
        text = "\n".join(new_lines[lo:hi + shift + 1])
        indented = st.col_offset > 0  # a method: parse it as the body of an "if"
        tree = ast.parse(f"if 1:\n{text}" if indented else text, "source", "exec")
        body, base = tree.body, lo
        if indented:
            if len(body) != 1 or not isinstance(body[0], ast.If):
                return None
            body, base = body[0].body, lo - 1
        if len(body) != 1 or type(body[0]) is not type(st):
            return None  # the rest of the text parsed is blank lines and comments
        old = self._linenos(head_tree)
        mine = [v + base for v in self._linenos(body[0])]
        return sorted([v for v in old if v < lo] + mine + [v + shift for v in old if v > hi])

    def detect(self) -> None:
        """Learn how this pytest finds statement lines (nothing of pytest's is changed)."""
        try:
            from _pytest._code import source
        except ImportError:
            return
        self._linenos = getattr(source, "_statement_linenos", None)
        if self._linenos is not None:  # pytest reads the statement lines a tree carries?
            import ast

            with contextlib.suppress(Exception):
                probe, mark = ast.Module(body=[], type_ignores=[]), [7]
                probe._pytest_statement_linenos = mark  # type: ignore[attr-defined]
                self._memo = self._linenos(probe) is mark

    def install(self, root: str) -> None:
        self.root = root
        try:
            from _pytest._code import code, source
        except ImportError:
            return
        original = getattr(source, "getstatementrange_ast", None)
        if original is None or getattr(code, "getstatementrange_ast", None) is not original:
            return
        self.detect()
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


_HOTPATCH: Any = None


def _hotpatch() -> Any:
    """:mod:`hotpatch`, from the file next to this one (no package here, and the script's
    own directory is taken off ``sys.path`` so it cannot shadow the project's modules)."""
    global _HOTPATCH
    if _HOTPATCH is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hotpatch.py")
        spec = importlib.util.spec_from_file_location("swemill_hotpatch", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _HOTPATCH = module
    return _HOTPATCH


class _Lines:
    """Newline-delimited JSON over a pipe, with a deadline per line."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def read(self, timeout: float | None = None) -> dict | None:
        """The next object; None at end of file or when ``timeout`` passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.fd, selectors.EVENT_READ)
            while b"\n" not in self.buf:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and (left <= 0 or not sel.select(left)):
                    return None
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def _write_line(fd: int, obj: dict) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _inside(path: str, root: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _decoded(data: bytes) -> str:
    """Source bytes as the compiler reads them: decoded by their coding cookie (or BOM),
    every line end made ``\n``. Raises SyntaxError or UnicodeDecodeError when it cannot."""
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    with io.TextIOWrapper(io.BytesIO(data), encoding, newline=None) as fh:
        return fh.read()


def _report_text(source: str) -> str:
    """A decoded source as pytest reads it for a report, the key of :class:`_AstCache`: its
    lines (as :mod:`linecache` reads them), trailing whitespace stripped."""
    import io

    return "\n".join(line.rstrip() for line in io.StringIO(source, newline="\n").readlines())


def _read_source(path: str) -> str | None:
    """:func:`_decoded` of a file; None if unreadable."""
    try:
        with open(path, "rb") as fh:
            return _decoded(fh.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _refusal(rid: object, reason: str, detail: str = "") -> dict:
    """The head image's answer when it cannot serve a run exactly (nothing ran)."""
    return {"id": rid, "unservable": reason, "log_tail": detail or reason}


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _HeadImage:
    """The image process's state: after collection it serves requests instead of running
    the suite."""

    def __init__(self, workdir: str, requests: int, replies: int, log_path: str,
                 profiler: Any, started: float) -> None:
        self.workdir, self.log_path = workdir, log_path
        self.requests, self.replies = _Lines(requests), replies
        self.profiler, self.started = profiler, started
        self.ran: set[int] = set()
        """Ids of the code that ran before the fork (kept alive in ``self.ran_code``)."""
        self.ran_code: list[Any] = []
        self.hotpatch = _hotpatch()
        self.session: Any = None
        self.items: dict[str, Any] = {}
        self.functions: dict[int, list[Any]] = {}
        self.suspended: dict[int, str] = {}
        """Code that cannot be swapped, and why (:func:`hotpatch.index_functions`)."""
        self.known: set[str] = set()
        """Digests (as :class:`_AstCache` takes them) of the head's test and project files."""
        self.texts: dict[str, str] = {}
        """Real path -> head text (as :class:`_AstCache` takes it) of the project's modules."""
        self.sources: dict[str, str] = {}
        """Real path -> head source (:func:`_decoded`) of the project's modules."""
        self._real: tuple[dict[str, tuple[str, list[Any]]], set[str]] | None = None

    def loop(self, session: Any) -> None:
        """pytest's run-test loop in the image: report ready, then serve until told to exit."""
        gc.collect()  # finalizers that run now are code that ran before the fork, too
        self.profiler.disable()
        self.ran_code = [e.code for e in self.profiler.getstats() if not isinstance(e.code, str)]
        self.ran = {id(code) for code in self.ran_code}
        self.profiler = None
        self.session = session
        self.items = {item.nodeid: item for item in session.items}
        ready: dict[str, Any] = {"ready": True, "items": len(self.items),
                                 "collect_errors": int(session.testsfailed)}
        if threading.active_count() > 1:  # a fork would copy only this thread
            ready = {"ready": False, "error": "threads were started while collecting"}
        else:
            files = set(_COMPILED or ())
            mine = {id(self.ran_code), id(_COMPILED), *map(id, (_COMPILED or {}).values())}
            self.functions, self.suspended = self.hotpatch.index_functions(gc.get_objects(),
                                                                          files, mine)
            modules = {f for f in files if _inside(f, self.workdir)}
            ours = {str(getattr(i, "path", None) or i.fspath) for i in session.items} | modules
            read = {f: _read_source(f) for f in sorted(ours)}
            sources = {f: source for f, source in read.items() if source is not None}
            texts = {f: _report_text(source) for f, source in sources.items()}
            self.known = {_digest(t) for t in texts.values()}
            self.texts = {os.path.realpath(f): t for f, t in texts.items() if f in modules}
            self.sources = {os.path.realpath(f): s for f, s in sources.items() if f in modules}
            with contextlib.suppress(Exception):  # inspect maps files to modules once, here
                import inspect

                inspect.getmodule(self.loop.__code__)  # (every failure report asks it)
            gc.freeze()
        ready.update(startup_s=time.monotonic() - self.started, cpu_s=_cpu_self())
        _write_line(self.replies, ready)
        if ready["ready"]:
            while True:
                request = self.requests.read()
                if request is None or request.get("op") == "exit":
                    break
                cpu0 = _cpu_self()
                reply = self.serve(request)
                reply["cpu_s"] = float(reply.get("cpu_s", 0.0)) + _cpu_self() - cpu0
                _write_line(self.replies, reply)
        os._exit(0)

    def _sources(self) -> tuple[dict[str, tuple[str, list[Any]]], set[str]]:
        """(real path -> (name compiled under, module code), real paths of every module
        loaded), taken once: the image imports nothing after collection."""
        if self._real is None:
            compiled = {os.path.realpath(p): (p, c) for p, c in (_COMPILED or {}).items()}
            loaded = {os.path.realpath(f) for m in list(sys.modules.values())
                      if isinstance(f := getattr(m, "__file__", None), str)}
            self._real = (compiled, loaded)
        return self._real

    def _swaps(self, paths: list[str]) -> tuple[list[Any], dict[str, Any]]:
        """The code swaps that turn the head image into the workspace's ``paths``, and
        stand-in trees for the reports on the edited texts (:meth:`_AstCache.stand_in`)."""
        compiled, loaded = self._sources()
        swaps: list[Any] = []
        trees: dict[str, Any] = {}
        for rel in paths:
            real = os.path.realpath(os.path.join(self.workdir, rel))
            if real not in compiled:
                if real in loaded:
                    raise self.hotpatch.Unservable("not imported from source", rel)
                continue  # never imported here: a child imports the edited file from disk
            name, codes = compiled[real]
            with open(real, "rb") as fh:
                data = fh.read()
            head, source = self.texts.get(real), self.sources.get(real)
            try:
                edited: str | None = _decoded(data)
            except (SyntaxError, UnicodeDecodeError):
                edited = None  # compile() below says what is wrong with it
            edit = None
            if len(codes) == 1 and head is not None and source is not None and edited:
                edit = self.hotpatch.plan_edit(codes[0], _ASTS.head_tree(head), source,
                                               edited, name, self.ran)
            if edit is not None:
                swaps += edit
            else:  # compile it all
                new = compile(data, name, "exec", dont_inherit=True)
                for old in codes:
                    swaps += self.hotpatch.plan(old, new, self.ran)
            if head is not None and edited is not None:
                text = _report_text(edited)
                tree = _ASTS.stand_in(head, text)
                if tree is not None:
                    trees[text] = tree
        return swaps, trees

    def serve(self, request: dict) -> dict:
        nodeids = [str(n) for n in request.get("nodeids") or []]
        missing = [n for n in nodeids if n not in self.items]
        rid = request.get("id")
        if not nodeids or missing:
            return _refusal(rid, "test not collected at head" if missing else "no tests asked for",
                            missing[0] if missing else "")
        try:
            swaps, trees = self._swaps([str(p) for p in request.get("hotpatch") or []])
        except self.hotpatch.Unservable as exc:
            return _refusal(rid, exc.reason, str(exc))
        except (OSError, SyntaxError, ValueError) as exc:
            return _refusal(rid, "edited file unreadable or not compilable", f"{exc!r}")
        selected = [self.items[n] for n in dict.fromkeys(nodeids)]

        def child(result_path: str, log_path: str, progress: int) -> None:
            _ASTS.trees.update(trees)
            self._child(selected, swaps, result_path, progress)

        return _serve_one(request, self.workdir, child, log_path=self.log_path,
                          known=self.known)

    def _child(self, selected: list[Any], swaps: list[Any], result_path: str,
               progress: int) -> None:
        """In a fork of the image: swap the edited code in, run ``selected``, report."""
        import linecache

        from _pytest.main import pytest_runtestloop

        os.setpgid(0, 0)
        os.ftruncate(1, 0)  # the image's log (opened for appending) is this run's log now
        session = self.session
        collector = _Collector(progress)
        result: dict[str, Any] = {}
        code = 3
        try:
            try:
                result["hotpatched"] = self.hotpatch.apply(swaps, self.functions,
                                                           self.suspended)
            except self.hotpatch.Unservable as exc:
                result.update(_refusal(None, exc.reason, str(exc)))
                code = 0
                return
            linecache.clearcache()
            session.config.pluginmanager.register(collector, "swemill-warm-collector")
            session.items = selected
            session.testscollected = len(selected)
            session.testsfailed = 0
            try:
                pytest_runtestloop(session)
                code = 1 if session.testsfailed else 0
            except session.Failed:
                code = 1
            except (session.Interrupted, KeyboardInterrupt):
                code = 2
            except BaseException as exc:  # noqa: BLE001 - pytest.exit() and the like
                code = int(getattr(exc, "returncode", None) or 3)
        finally:
            with open(result_path, "w") as fh:
                json.dump({"exit_code": code, "outcomes": collector.outcomes,
                           "durations": collector.durations, "messages": collector.messages,
                           "ast_hot": _ASTS.hot, "ast_noted": _ASTS.noted, **result}, fh)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def _image_main(args: list[str], workdir: str, requests: int, replies: int,
                log_path: str) -> None:
    """The image process: import and collect at head, then serve (see the module docs)."""
    global _COMPILED
    started = time.monotonic()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.chdir(workdir)
    _COMPILED = {}
    import cProfile

    import pytest

    # which code runs while importing and collecting: the C profiler, Python functions only,
    # adds half the work a Python sys.setprofile callback does (counted by callgrind on
    # more-itertools' collection: 1.4 against 2.8 billion instructions; the same code seen)
    profiler = cProfile.Profile(builtins=False)
    _as_pytest_argv(args)
    image = _HeadImage(workdir, requests, replies, log_path, profiler, started)

    class Plugin:
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(self, session: Any) -> None:
            image.loop(session)  # never returns

    try:
        profiler.enable()
        pytest.main(args, plugins=[Plugin()])
        profiler.disable()
        _write_line(replies, {"ready": False, "error": "pytest ended before running tests"})
    finally:
        os._exit(0)


class _ImageHandle:
    """The server's handle on its head image (at most one at a time)."""

    def __init__(self) -> None:
        self.pid = 0
        self.to_image = -1
        self.from_image: _Lines | None = None

    def start(self, request: dict, workdir: str, tmp: str) -> dict:
        self.stop()
        log_path = os.path.join(tmp, "image.log")
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the image process
            try:
                os.close(req_w)
                os.close(rep_r)
                sys.stdin.close()
                _image_main(list(request["args"]), workdir, req_r, rep_w, log_path)
            finally:
                os._exit(70)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.to_image, self.from_image = pid, req_w, _Lines(rep_r)
        ready = self.from_image.read(float(request.get("timeout", 120)))
        if not ready or not ready.get("ready"):
            self.stop()
            error = (ready or {}).get("error") or "no answer"
            with contextlib.suppress(OSError), open(log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 800))
                error += "\n" + fh.read().decode("utf-8", "replace")
            return {"id": request.get("id"), "ready": False, "error": error}
        return {"id": request.get("id"), **ready}

    def ask(self, request: dict) -> dict:
        if not self.pid or self.from_image is None:
            return _refusal(request.get("id"), "no head image")
        try:
            _write_line(self.to_image, request)
        except OSError:
            reply = None
        else:
            reply = self.from_image.read(float(request.get("timeout", 60)) + 30.0)
        if reply is None:
            self.stop()
            return _refusal(request.get("id"), "no head image", "the head image is gone")
        return reply

    def stop(self) -> None:
        if not self.pid:
            return
        with contextlib.suppress(OSError):
            _write_line(self.to_image, {"op": "exit"})
        with contextlib.suppress(OSError):
            os.close(self.to_image)
        if self.from_image is not None:
            with contextlib.suppress(OSError):
                os.close(self.from_image.fd)
        deadline = time.monotonic() + 5
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.01)
        self.pid, self.to_image, self.from_image = 0, -1, None


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
    _quiet_preloaded(set(sys.modules))
    # Everything imported so far lives as long as the server: keep it out of the children's
    # collections (pytest runs gc.collect() at the end of every session).
    gc.collect()
    gc.freeze()
    return time.monotonic() - start


def _quiet_preloaded(names: set[str]) -> None:
    """pytest warns that a plugin it was told to assertion-rewrite was "already imported so
    cannot be rewritten"; for a module this server imported before pytest started that is
    the warm-up, not the suite, and under ``filterwarnings = error`` the warning would end
    every run (exit 4). Only that one warning, only for those modules, is left out."""
    try:
        from _pytest.assertion.rewrite import AssertionRewritingHook
    except ImportError:
        return
    warn = getattr(AssertionRewritingHook, "_warn_already_imported", None)
    if warn is None:
        return

    def _warn_already_imported(self, name):  # noqa: ANN001, ANN202 - pytest's signature
        if name not in names:
            warn(self, name)

    AssertionRewritingHook._warn_already_imported = _warn_already_imported  # type: ignore[method-assign]


def _preloaded_files(workdir: str) -> list[str]:
    """Workspace files (relative) of the modules this server has imported: a child forked
    from it never re-imports them, so a tree that edits one must run cold."""
    top = os.path.realpath(workdir)
    files = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and _inside(path, top):
            files.add(os.path.relpath(os.path.realpath(path), top))
    return sorted(files)


def _fix_path(workdir: str) -> None:
    """``sys.path`` as ``python -m pytest`` run in ``workdir`` has it: the working directory
    first (rootdir-relative imports, ``-p tests.plugin``), never swemill's own directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # swemill's own files must not shadow the project's modules
    sys.path.insert(0, workdir)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--cold":
        _fix_path(os.getcwd())
        _cold_main(json.loads(sys.argv[2]))
        return
    workdir = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    _fix_path(workdir)
    out = sys.stdout
    image = _ImageHandle()
    with tempfile.TemporaryDirectory(prefix="swemill-code-") as cache_dir:
        ready = {"ready": True, "startup_s": _warm_up(cache_dir), "pid": os.getpid(),
                 "preloaded": _preloaded_files(workdir)}
        out.write(json.dumps(ready) + "\n")
        out.flush()
        try:
            for line in sys.stdin:
                line = line.strip()
                if not line:
                    continue
                request = json.loads(line)
                if request.get("op") == "exit":
                    break
                if request.get("op") == "image":
                    reply = image.start(request, workdir, cache_dir)
                elif request.get("image"):
                    reply = image.ask(request)
                else:
                    reply = _serve_one(request, workdir)
                out.write(json.dumps(reply) + "\n")
                out.flush()
        finally:
            image.stop()


if __name__ == "__main__":
    main()
