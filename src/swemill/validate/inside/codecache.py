"""Compiled code keyed by (path, exact source bytes), shared by every forked child.

Bytecode is never written next to the sources (a stale ``.pyc`` with the same size and
mtime as a mutated file would hide the mutation), so without this each child would compile
-- and pytest would assertion-rewrite -- every module it imports, every time. Keying by
content rather than by mtime makes a stale hit impossible. Switched off by the
``code_cache`` flag; the hook on the source loader then only records what the head image
compiled (:attr:`CodeCache.compiled`), which hot-patching needs.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
from typing import Any


class CodeCache:
    """The cache under ``root`` (a folder of the server's own), ``enabled`` or recording."""

    def __init__(self, root: str, enabled: bool = True) -> None:
        self.root = root
        self.enabled = enabled
        self.compiled: dict[str, list[Any]] | None = None
        """In the head image: the module code every imported source file was executed from
        (None elsewhere: nothing is recorded)."""

    def _path(self, path: object, data: bytes, kind: str) -> str:
        digest = hashlib.sha256(f"{kind}\0{path}\0".encode() + data).hexdigest()
        return os.path.join(self.root, digest)

    def load(self, path: object, data: bytes, kind: str) -> Any:
        """The code stored for this text, or None."""
        if not self.enabled:
            return None
        try:
            with open(self._path(path, data, kind), "rb") as fh:
                return marshal.load(fh)
        except (OSError, EOFError, ValueError, TypeError):
            return None

    def store(self, path: object, data: bytes, kind: str, code: Any) -> None:
        if not self.enabled:
            return
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
            if cache.compiled is not None:
                cache.compiled.setdefault(str(path), []).append(code)
            return code

        SourceFileLoader.source_to_code = source_to_code  # type: ignore[method-assign,assignment]
        if not self.enabled:
            return
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
