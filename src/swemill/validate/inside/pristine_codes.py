"""The grading server's compiled code of the pristine tree, made before its first run.

A grading run reads no bytecode from anywhere (the tree holds none, nothing is written), so a
cold run compiles every module of the project it imports, and assertion-rewrites every test
module and ``conftest.py``, from source. Most of those files are byte for byte the pristine
snapshot's: the tests and their configuration always are, and the policy changes a few
source files at most.

So the grading server, while its workspace still holds the pristine tree and before any run,
compiles each ``.py`` file of it the way the import system would
(``SourceFileLoader.source_to_code``) and assertion-rewrites the test-like ones with pytest's
own ``_rewrite_test``, keeping the code objects in its own memory. In a forked run, a file
whose path and *exact bytes* are those it compiled gets that code instead of compiling it
again; any other file, a file whose compiling or rewriting warned (the run must warn, or
under ``filterwarnings = error`` fail, as a cold one does), or a rewrite under another
configuration (pytest's ``enable_assertion_pass_hook`` on), is compiled as usual.

swemill's reporter (``-p _swemill_report``, in the environment's site-packages) is rewritten
by pytest in every run too (a plugin named by ``-p`` is marked for rewriting): the server
rewrites it once the same way, and a run whose reporter file has those exact bytes gets that
code (:meth:`PristineCodes.fill`'s ``plugins``).

Nothing a run does can reach this cache: it was filled before the first run, lives only in
the server's memory (the server is not dumpable: no run can read or write it), and a run's
own copy dies with the run.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

INSTALLED: PristineCodes | None = None
"""The cache this process serves from (its tests look at it from inside a run)."""

_MAX_FILE_BYTES = 2_000_000
_MAX_TOTAL_BYTES = 16_000_000
"""Source compiled in all (test-like files first): the code objects stay in the server's
memory, a few times the source's size, in every grading server of the task."""
_TEST_DIRS = frozenset({"tests", "test", "testing"})
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})


def _test_like(rel: str) -> bool:
    parts = rel.split("/")
    name = parts[-1]
    return (name == "conftest.py" or name.startswith("test") or name.endswith("_test.py")
            or any(part in _TEST_DIRS for part in parts[:-1]))


def _python_files(top: str) -> list[tuple[str, bytes]]:
    """(path, bytes) of the ``.py`` files under ``top`` (no links, no hidden or cache
    folders), test-like files first, within :data:`_MAX_TOTAL_BYTES`."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        found += [os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".py")]
    found.sort(key=lambda path: not _test_like(os.path.relpath(path, top)))
    out, total = [], 0
    for path in found:
        try:
            if os.path.islink(path) or os.path.getsize(path) > _MAX_FILE_BYTES:
                continue
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        total += len(data)
        if total > _MAX_TOTAL_BYTES:
            break
        out.append((path, data))
    return out


class PristineCodes:
    """Code objects by exact path and bytes; see the module docstring."""

    def __init__(self) -> None:
        self.compiled: dict[str, tuple[bytes, Any]] = {}
        """path -> (source bytes, module code), as ``source_to_code`` makes it."""
        self.rewritten: dict[str, tuple[bytes, Any, Any]] = {}
        """path -> (source bytes, first item of ``_rewrite_test``'s answer, rewritten code)."""

    def fill(self, workdir: str, plugins: tuple[str, ...] = ()) -> None:
        """Compile the tree under ``workdir`` (call it before the first run), and rewrite the
        modules of ``plugins`` (by name, looked up outside ``workdir``: pytest rewrites a
        plugin named by ``-p`` in every run, and swemill's reporter is one). A file whose
        compiling or rewriting warns is left out: the run must warn (under
        ``filterwarnings = error``, fail) as a cold one would."""
        from importlib.machinery import PathFinder

        top = os.path.abspath(workdir)
        for path, data in _python_files(top):
            if self._compile(path, data):
                self._rewrite(path, data, _test_like(os.path.relpath(path, top)))
        outside = [p for p in sys.path if os.path.abspath(p or ".") != top]
        for name in plugins:
            spec = PathFinder.find_spec(name, outside)
            origin = getattr(spec, "origin", None) if spec is not None else None
            if not origin or not origin.endswith(".py") or os.path.islink(origin):
                continue
            try:
                with open(origin, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            self._rewrite(origin, data, True)

    def _compile(self, path: str, data: bytes) -> bool:
        from importlib.machinery import SourceFileLoader

        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                code = SourceFileLoader("_", path).source_to_code(data, path)
            except (SyntaxError, ValueError):  # the run reports it, as a cold run would
                return False
        if warned:
            return False
        self.compiled[path] = (data, code)
        return True

    def _rewrite(self, path: str, data: bytes, test_like: bool) -> None:
        from pathlib import Path

        rewrite_test = _pytest_rewrite()
        if rewrite_test is None or not test_like:
            return
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                first, rewritten = rewrite_test(Path(path), None)
                with open(path, "rb") as fh:
                    same = fh.read() == data  # what pytest read is what was compiled
            except Exception:  # noqa: BLE001 - pytest raises what it likes; rewritten in the run
                return
        if same and not warned:
            self.rewritten[str(Path(path))] = (data, first, rewritten)

    def install(self) -> None:
        """Serve the compiled code to the import system and to pytest's rewriting hook (in
        this process and every fork of it)."""
        from importlib.machinery import SourceFileLoader

        global INSTALLED
        cache = INSTALLED = self
        compile_source = SourceFileLoader.source_to_code

        def source_to_code(loader, data, path, *args, **kwargs):  # noqa: ANN001, ANN202
            known = cache.compiled.get(path) if not args and not kwargs else None
            if known is not None and isinstance(data, bytes) and data == known[0]:
                return known[1]
            return compile_source(loader, data, path, *args, **kwargs)

        SourceFileLoader.source_to_code = source_to_code  # type: ignore[method-assign,assignment]
        rewrite_test = _pytest_rewrite()
        if rewrite_test is None:
            return
        from _pytest.assertion import rewrite

        def cached_rewrite(fn, config):  # noqa: ANN001, ANN202
            known = cache.rewritten.get(str(fn))
            if known is not None and not _pass_hook(config):
                try:
                    with open(fn, "rb") as fh:
                        same = fh.read() == known[0]
                except OSError:
                    same = False
                if same:
                    # a stat (older pytest) or the source hash: only used to write pytest's
                    # own pyc, which a grading run never does; a stat is taken anew
                    first = known[1] if isinstance(known[1], bytes) else os.stat(fn)
                    return first, known[2]
            return rewrite_test(fn, config)

        rewrite._rewrite_test = cached_rewrite


def _pytest_rewrite() -> Any:
    """pytest's ``_rewrite_test(fn, config)``, or None where it has none of that shape."""
    if "_pytest.assertion.rewrite" not in sys.modules:
        return None
    rewrite = sys.modules["_pytest.assertion.rewrite"]
    func = getattr(rewrite, "_rewrite_test", None)
    code = getattr(func, "__code__", None)
    if code is None or code.co_varnames[:code.co_argcount] != ("fn", "config"):
        return None
    return func


def _pass_hook(config: Any) -> bool:
    """Whether the run's rewriting differs from one without a configuration (pytest's
    ``enable_assertion_pass_hook``); True when it cannot tell."""
    if config is None:
        return False
    try:
        return bool(config.getini("enable_assertion_pass_hook"))
    except Exception:  # noqa: BLE001 - an unknown setting: do not guess
        return True
