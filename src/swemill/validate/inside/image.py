"""The head image: a process that imported the project and collected the whole suite once,
at the head commit, and forks a child per request that runs only the requested items.

It is forked from the server while the workspace is the head tree, records (with the C
profiler) which code ran while importing and collecting, and serves :class:`RunInImage`
requests: the workspace must equal the head tree except for the listed ``.py`` files, whose
edited functions the child swaps in (:mod:`.hotpatch` says when that is exact; the
``hotpatch`` flag off: only head-identical trees are served). When it is not exact -- a
module-level edit, an edited function that ran at import, a test the image did not collect
-- the answer is a refusal (``unservable``) and the caller runs the tree the ordinary way.
This drives pytest's run-test loop itself (``_pytest.main.pytest_runtestloop`` on the
collected session), the one private pytest entry point it relies on.

The tree image is the same process over whatever tree the workspace holds when it starts
(``record`` off: no profiler, no code to swap): a fork of it runs that tree's tests as a
fork of the head image runs the head's, and the host asks it only while the workspace is
still that tree.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
from typing import Any

from . import hotpatch
from .codecache import CodeCache
from .forkrun import Collector, as_pytest_argv, outcomes_only, serve_one, write_result
from .protocol import ImageReady, Lines, Result, RunInImage, refusal, write
from .report_cache import ReportCache
from .texts import cpu_self, decoded, digest, is_inside, read_source, report_text


class HeadImage:
    """The image process's state: after collection it serves requests instead of running
    the suite."""

    def __init__(self, workdir: str, requests: int, replies: int, log_path: str,
                 profiler: Any, started: float, codes: CodeCache, reports: ReportCache,
                 patch: bool) -> None:
        self.workdir, self.log_path = workdir, log_path
        self.requests, self.replies = Lines(requests), replies
        self.codes, self.reports, self.patch = codes, reports, patch
        self.profiler, self.started = profiler, started
        """The C profiler recording what runs before the fork; None: nothing is recorded
        (the tree image, which swaps no code)."""
        self.record = profiler is not None
        self.ran: set[int] = set()
        """Ids of the code that ran before the fork (kept alive in ``self.ran_code``)."""
        self.ran_code: list[Any] = []
        self.session: Any = None
        self.items: dict[str, Any] = {}
        self.order: list[Any] = []
        """Every item collected, in collection order (a ``whole`` request runs them all)."""
        self.functions: dict[int, list[Any]] = {}
        self.suspended: dict[int, str] = {}
        """Code that cannot be swapped, and why (:func:`hotpatch.index_functions`)."""
        self.known: set[str] = set()
        """Digests (as :class:`.ReportCache` takes them) of the head's test and project files."""
        self.texts: dict[str, str] = {}
        """Real path -> head text (as :class:`.ReportCache` takes it) of the project's modules."""
        self.sources: dict[str, str] = {}
        """Real path -> head source (:func:`.decoded`) of the project's modules."""
        self._real: tuple[dict[str, tuple[str, list[Any]]], set[str]] | None = None

    def loop(self, session: Any) -> None:
        """pytest's run-test loop in the image: report ready, then serve until told to exit."""
        gc.collect()  # finalizers that run now are code that ran before the fork, too
        if self.profiler is not None:
            self.profiler.disable()
            self.ran_code = [e.code for e in self.profiler.getstats()
                             if not isinstance(e.code, str)]
            self.ran = {id(code) for code in self.ran_code}
            self.profiler = None
        self.session = session
        self.items = {item.nodeid: item for item in session.items}
        self.order = list(session.items)
        ready = ImageReady(id=0, ready=True, items=len(self.items),
                           collect_errors=int(session.testsfailed))
        compiled = self.codes.compiled or {}
        if threading.active_count() > 1:  # a fork would copy only this thread
            ready = ImageReady(id=0, ready=False, error="threads were started while collecting")
        elif not self.record:
            gc.freeze()  # the tree image: nothing to swap: no functions to index, no texts to know
        else:
            files = set(compiled)
            mine = {id(self.ran_code), id(self.codes.compiled), *map(id, compiled.values())}
            self.functions, self.suspended = hotpatch.index_functions(gc.get_objects(), files,
                                                                     mine)
            modules = {f for f in files if is_inside(f, self.workdir)}
            ours = {str(getattr(i, "path", None) or i.fspath) for i in session.items} | modules
            read = {f: read_source(f) for f in sorted(ours)}
            sources = {f: source for f, source in read.items() if source is not None}
            texts = {f: report_text(source) for f, source in sources.items()}
            self.known = {digest(t) for t in texts.values()}
            self.texts = {os.path.realpath(f): t for f, t in texts.items() if f in modules}
            self.sources = {os.path.realpath(f): s for f, s in sources.items() if f in modules}
            with contextlib.suppress(Exception):  # inspect maps files to modules once, here
                import inspect

                inspect.getmodule(self.loop.__code__)  # (every failure report asks it)
            gc.freeze()
        ready.startup_s, ready.cpu_s = time.monotonic() - self.started, cpu_self()
        write(self.replies, ready)
        if ready.ready:
            while True:
                request = self.requests.read()
                if not isinstance(request, RunInImage):
                    break  # an Exit, or the server gone
                cpu0 = cpu_self()
                reply = self.serve(request)
                reply.cpu_s += cpu_self() - cpu0
                write(self.replies, reply)
        os._exit(0)

    def _sources(self) -> tuple[dict[str, tuple[str, list[Any]]], set[str]]:
        """(real path -> (name compiled under, module code), real paths of every module
        loaded), taken once: the image imports nothing after collection."""
        if self._real is None:
            compiled = {os.path.realpath(p): (p, c)
                        for p, c in (self.codes.compiled or {}).items()}
            loaded = {os.path.realpath(f) for m in list(sys.modules.values())
                      if isinstance(f := getattr(m, "__file__", None), str)}
            self._real = (compiled, loaded)
        return self._real

    def _swaps(self, paths: list[str]) -> tuple[list[Any], dict[str, Any]]:
        """The code swaps that turn the head image into the workspace's ``paths``, and
        stand-in trees for the reports on the edited texts (:meth:`.ReportCache.stand_in`)."""
        compiled, loaded = self._sources()
        swaps: list[Any] = []
        trees: dict[str, Any] = {}
        for rel in paths:
            real = os.path.realpath(os.path.join(self.workdir, rel))
            if real not in compiled:
                if real in loaded:
                    raise hotpatch.Unservable("not imported from source", rel)
                continue  # never imported here: a child imports the edited file from disk
            name, codes = compiled[real]
            with open(real, "rb") as fh:
                data = fh.read()
            head, source = self.texts.get(real), self.sources.get(real)
            try:
                edited: str | None = decoded(data)
            except (SyntaxError, UnicodeDecodeError):
                edited = None  # compile() below says what is wrong with it
            edit = None
            if len(codes) == 1 and head is not None and source is not None and edited:
                edit = hotpatch.plan_edit(codes[0], self.reports.head_tree(head), source,
                                          edited, name, self.ran)
            if edit is not None:
                swaps += edit
            else:  # compile it all
                new = compile(data, name, "exec", dont_inherit=True)
                for old in codes:
                    swaps += hotpatch.plan(old, new, self.ran)
            if head is not None and edited is not None:
                text = report_text(edited)
                tree = self.reports.stand_in(head, text)
                if tree is not None:
                    trees[text] = tree
        return swaps, trees

    def serve(self, request: RunInImage) -> Result:
        nodeids = [str(n) for n in request.nodeids]
        missing = [n for n in nodeids if n not in self.items]
        rid = request.id
        if request.whole:  # every test collected at head (the runner says when edits allow)
            if nodeids:
                return refusal(rid, "whole suite asked for with tests")
            if not self.order:
                return refusal(rid, "no tests asked for")
        elif not nodeids or missing:
            return refusal(rid, "test not collected at head" if missing else "no tests asked for",
                           missing[0] if missing else "")
        if request.hotpatch and not self.patch:
            return refusal(rid, "hotpatch switched off", request.hotpatch[0])
        try:
            swaps, trees = self._swaps([str(p) for p in request.hotpatch])
        except hotpatch.Unservable as exc:
            return refusal(rid, exc.reason, str(exc))
        except (OSError, SyntaxError, ValueError) as exc:
            return refusal(rid, "edited file unreadable or not compilable", f"{exc!r}")
        selected = list(self.order) if request.whole else [
            self.items[n] for n in dict.fromkeys(nodeids)]

        def child(result_path: str, log_path: str, progress: int) -> None:
            self.reports.trees.update(trees)
            self._child(selected, swaps, result_path, progress, request)

        return serve_one(request, self.workdir, child, self.reports, log_path=self.log_path,
                         known=self.known)

    def _child(self, selected: list[Any], swaps: list[Any], result_path: str,
               progress: int, request: RunInImage) -> None:
        """In a fork of the image: swap the edited code in, run ``selected``, report."""
        import linecache

        from _pytest.main import pytest_runtestloop

        os.setpgid(0, 0)
        os.ftruncate(1, 0)  # the image's log (opened for appending) is this run's log now
        session = self.session
        collector = Collector(progress)
        result: dict[str, Any] = {}
        code = 3
        try:
            try:
                result["hotpatched"] = hotpatch.apply(swaps, self.functions, self.suspended)
            except hotpatch.Unservable as exc:
                result.update(unservable=exc.reason, log_tail=str(exc))
                code = 0
                return
            linecache.clearcache()
            if request.terse:
                outcomes_only(session.config)
            if request.maxfail:
                session.config.option.maxfail = request.maxfail
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
            write_result(result_path, code, collector, self.reports, **result)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def image_main(args: list[str], workdir: str, requests: int, replies: int, log_path: str,
               codes: CodeCache, reports: ReportCache, patch: bool, record: bool = True) -> None:
    """The image process: import and collect, then serve (see the module docs); ``record``:
    note the code that ran before the fork (the head image; without it ``patch`` is off)."""
    started = time.monotonic()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.chdir(workdir)
    codes.compiled = {}
    import cProfile

    import pytest

    # which code runs while importing and collecting: the C profiler, Python functions only,
    # adds half the work a Python sys.setprofile callback does (counted by callgrind on
    # more-itertools' collection: 1.4 against 2.8 billion instructions; the same code seen)
    profiler = cProfile.Profile(builtins=False) if record else None
    as_pytest_argv(args)
    image = HeadImage(workdir, requests, replies, log_path, profiler, started, codes, reports,
                      patch and record)

    class Plugin:
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(self, session: Any) -> None:
            image.loop(session)  # never returns

    try:
        if profiler is not None:
            profiler.enable()
        pytest.main(args, plugins=[Plugin()])
        if profiler is not None:
            profiler.disable()
        write(replies, ImageReady(id=0, ready=False, error="pytest ended before running tests"))
    finally:
        os._exit(0)


