"""The warm server's loop: warm up once, then answer one request line after another.

Started inside the sandbox (by the package's ``__main__.py``) as ``python -u ENTRY WORKDIR
[--off flag,...]``. It imports pytest and its plugins once, installs the code and report
caches its flags allow, writes :class:`.Ready` and then serves: :class:`.Run` in a fork of
itself (:mod:`.forkrun`), :class:`.StartImage` and :class:`.RunInImage` through its head
image or its tree image (:mod:`.image`, one of each at a time), until :class:`.Exit` or the
end of its input. The project is never
imported in this process, so every fork sees the workspace as it is on disk at that moment:
an import of the warm-up that would run a workspace file is refused and left to the runs
(:func:`_import_outside`). Workspace files imported all the same (``preloaded``: pytest itself
imported one, or ``SWEMILL_WARM_PREIMPORT`` named one) are seen only by a cold run.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.machinery
import os
import signal
import sys
import tempfile
import time
from typing import TYPE_CHECKING

from .codecache import CodeCache
from .forkrun import cold_main, run_child, serve_one
from .image import image_main
from .protocol import (
    Exit,
    Flags,
    ImageReady,
    Lines,
    Ready,
    Result,
    Run,
    RunInImage,
    StartImage,
    decode,
    encode,
    refusal,
    write,
)
from .report_cache import ReportCache
from .texts import is_inside

if TYPE_CHECKING:
    from .protocol import Message


class ImageHandle:
    """The server's handle on its head image, or (``tree``) on its tree image; at most one
    process of each at a time."""

    def __init__(self, codes: CodeCache, reports: ReportCache, flags: Flags,
                 tree: bool = False) -> None:
        self.codes, self.reports, self.flags, self.tree = codes, reports, flags, tree
        self.pid = 0
        self.to_image = -1
        self.from_image: Lines | None = None

    def start(self, request: StartImage, workdir: str, tmp: str) -> ImageReady:
        self.stop()
        if not (self.flags.tree_image if self.tree else self.flags.head_image):
            kind = "tree image" if self.tree else "head image"
            return ImageReady(id=request.id, ready=False, error=f"{kind} switched off")
        log_path = os.path.join(tmp, "tree.log" if self.tree else "image.log")
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the image process
            try:
                os.close(req_w)
                os.close(rep_r)
                sys.stdin.close()
                image_main(list(request.args), workdir, req_r, rep_w, log_path, self.codes,
                           self.reports, self.flags.hotpatch and not self.tree,
                           record=not self.tree)
            finally:
                os._exit(70)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.to_image, self.from_image = pid, req_w, Lines(rep_r)
        ready = self.from_image.read(float(request.timeout))
        if not isinstance(ready, ImageReady) or not ready.ready:
            self.stop(wait=isinstance(ready, ImageReady))  # no answer: it may be in a loop
            error = (ready.error if isinstance(ready, ImageReady) else "") or "no answer"
            with contextlib.suppress(OSError), open(log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 800))
                error += "\n" + fh.read().decode("utf-8", "replace")
            return ImageReady(id=request.id, ready=False, error=error)
        ready.id = request.id
        return ready

    def ask(self, request: RunInImage) -> Result:
        if not self.pid or self.from_image is None:
            return refusal(request.id, "no head image")
        reply: Message | None
        try:
            write(self.to_image, request)
        except OSError:
            reply = None
        else:
            reply = self.from_image.read(float(request.timeout) + 30.0)
        if not isinstance(reply, Result):
            self.stop()
            return refusal(request.id, "no head image", "the head image is gone")
        return reply

    def stop(self, wait: bool = True) -> None:
        """End the image: told to exit, killed after 5 s (at once without ``wait``)."""
        if not self.pid:
            return
        with contextlib.suppress(OSError):
            write(self.to_image, Exit())
        with contextlib.suppress(OSError):
            os.close(self.to_image)
        if self.from_image is not None:
            with contextlib.suppress(OSError):
                os.close(self.from_image.fd)
        deadline = time.monotonic() + (5 if wait else 0)
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.01)
        self.pid, self.to_image, self.from_image = 0, -1, None


RUN_IMPORTS = ("readline", "pdb", "tomllib", "tomli", "getpass", "faulthandler",
               "encodings.unicode_escape", "_pytest._argcomplete", "doctest")
"""Modules every run imports after pytest has started, imported once by the warm-up instead of
in every fork: ``readline`` (the capture plugin imports it before capturing), ``pdb`` (the
debugging plugin's ``pytest_configure``), ``tomllib`` or ``tomli`` (reading ``pyproject.toml``),
``getpass`` (``tmp_path``'s user name), ``faulthandler``, ``encodings.unicode_escape``
(parametrized ids), ``_pytest._argcomplete`` (the argument parser) and ``doctest`` (swemill's
reporter in a grading run). Standard library or pytest's own: they read nothing of the
workspace, unless a workspace file shadows one of them or a module one of them imports
(``getpass.py``, or ``code.py`` for ``pdb``): :func:`_import_outside` then leaves that import
to the run, which imports the workspace file as a cold one does. About 10 ms of a grading run
of the sample's 104 tests (~130 ms)."""


def _warm_up(codes: CodeCache, reports: ReportCache, flags: Flags, workdir: str) -> float:
    start = time.monotonic()
    import importlib.metadata as md

    import pytest  # noqa: F401

    if flags.code_cache or flags.head_image:  # the image needs to know what it compiled
        codes.install()
    if flags.report_cache:
        reports.install(codes.root)
    with contextlib.suppress(Exception):  # pytest imports its own plugins lazily, per session
        from _pytest.config import builtin_plugins, default_plugins

        for name in sorted(set(default_plugins) | set(builtin_plugins)):
            _import_outside(name if "." in name else f"_pytest.{name}", workdir)

    for ep in md.entry_points(group="pytest11"):  # a broken plugin is the child's problem
        _import_outside(ep.value.split(":")[0].strip(), workdir)
    for name in RUN_IMPORTS:
        _import_outside(name, workdir)
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


class _RefuseWorkspace:
    """A meta path finder, placed just before the path finder, that refuses every module the
    path finder would load from the workspace (its file or package folder inside it)."""

    def __init__(self, workdir: str) -> None:
        self.workdir, self.refused = workdir, False

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        spec = importlib.machinery.PathFinder.find_spec(name, path)  # type: ignore[arg-type]
        places = [] if spec is None else [spec.origin, *(spec.submodule_search_locations or [])]
        if any(isinstance(p, str) and is_inside(p, self.workdir) for p in places):
            self.refused = True
            raise ImportError(f"{name} is a workspace file: left to the runs")
        return None  # the path finder itself finds it


def _import_outside(name: str, workdir: str) -> None:
    """Import ``name`` (pytest's own, an installed plugin's, the standard library's) for the
    forks to inherit, unless that would run a file of the workspace: that file is refused,
    never run here, and every module this import added is forgotten again, so each run imports
    them, the workspace file with them, as a cold run does.

    A fork never sees the policy's version of a workspace module the server imported: a
    grading server that had one is refused (all its task's gradings went cold), and a
    validation run of a tree that edits one runs cold (:func:`_preloaded_files`). Cases seen:
    a workspace module shadowing one of :data:`RUN_IMPORTS` or one they import (``code.py``
    for ``pdb``); an installed plugin that imports the project (attrs 24.2.0: its test extra's
    ``pytest-mypy-plugins`` imports ``attrs``, a plugin every run blocks); the project's own
    plugin (pytest-mock 3.14.0), which must be imported by the run in any case: pytest
    assertion-rewrites a ``pytest11`` plugin's modules, and one imported before pytest stays
    unrewritten in every fork (its introspection tests failed in every warm run and passed
    cold, and 19 of 33 candidates were dropped as not_solvable)."""
    before = set(sys.modules)
    guard = _RefuseWorkspace(workdir)
    finders = sys.meta_path
    at = next((i for i, f in enumerate(finders) if f is importlib.machinery.PathFinder),
              len(finders))
    finders.insert(at, guard)  # type: ignore[arg-type]
    try:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    finally:
        finders.remove(guard)  # type: ignore[arg-type]
    if not guard.refused:
        return
    for added in [m for m in sys.modules if m not in before]:
        module = sys.modules.pop(added)
        parent, _, child = added.rpartition(".")
        if parent in before and getattr(sys.modules.get(parent), child, None) is module:
            delattr(sys.modules[parent], child)


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
        if isinstance(path, str) and is_inside(path, top):
            files.add(os.path.relpath(os.path.realpath(path), top))
    return sorted(files)


def _fix_path(workdir: str) -> None:
    """``sys.path`` as ``python -m pytest`` run in ``workdir`` has it: the working directory
    first (rootdir-relative imports, ``-p tests.plugin``), never swemill's own directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # swemill's own files must not shadow the project's modules
    sys.path.insert(0, workdir)


def _dispatch(request: Message, workdir: str, images: tuple[ImageHandle, ImageHandle],
              reports: ReportCache, flags: Flags, tmp: str) -> Message:
    if isinstance(request, StartImage):
        return images[request.tree].start(request, workdir, tmp)
    if isinstance(request, RunInImage):
        return images[request.tree].ask(request)
    if isinstance(request, Run):
        cold = request.cold or not flags.fork
        return serve_one(request, workdir, run_child(request, reports, cold), reports)
    raise ValueError(f"not a request: {request!r}")


def main(argv: list[str]) -> None:
    """``[WORKDIR] [--off flag,...]``, or ``--cold SPEC`` (a cold run's fresh interpreter)."""
    if len(argv) > 1 and argv[0] == "--cold":
        import json

        _fix_path(os.getcwd())
        cold_main(json.loads(argv[1]))
        return
    off = argv[argv.index("--off") + 1].split(",") if "--off" in argv else []
    flags = Flags.without([name for name in off if name])
    rest = [a for i, a in enumerate(argv) if a != "--off" and (i == 0 or argv[i - 1] != "--off")]
    workdir = rest[0] if rest else os.getcwd()
    _fix_path(workdir)
    out = sys.stdout.buffer
    with tempfile.TemporaryDirectory(prefix="swemill-code-") as cache_dir:
        codes, reports = CodeCache(cache_dir, enabled=flags.code_cache), ReportCache()
        images = (ImageHandle(codes, reports, flags), ImageHandle(codes, reports, flags, True))
        ready = Ready(ready=True, startup_s=_warm_up(codes, reports, flags, workdir),
                      pid=os.getpid(),
                      preloaded=_preloaded_files(workdir), flags_off=flags.off())
        out.write(encode(ready))
        out.flush()
        try:
            for line in sys.stdin.buffer:
                if not line.strip():
                    continue
                request = decode(line)
                if isinstance(request, Exit):
                    break
                out.write(encode(_dispatch(request, workdir, images, reports, flags, cache_dir)))
                out.flush()
        finally:
            for image in images:
                image.stop()
