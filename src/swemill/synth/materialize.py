"""A scratch copy of just the files some patches touch, to check and apply them there.

Checking an imported or merged patch must not touch the user's working copy, and a row's
base commit is usually not the one checked out. So the touched files are read at the right
commit (``git show``) into a throw-away repository, where ``git apply`` runs for real.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import TracebackType

from swemill.core.errors import SynthesisError
from swemill.core.git import git, run_git
from swemill.core.records import ChangedSymbol
from swemill.sandbox.leftovers import scratch_dir
from swemill.synth.patches import apply_patch, parse_patch
from swemill.synth.symbols import changed_lines, symbols_at

__all__ = ["PatchedFiles"]


class PatchedFiles:
    """``with PatchedFiles(root, commit, patches) as pf: pf.apply(p, reason) ...``"""

    def __init__(self, root: Path, commit: str | None, patches: list[str]) -> None:
        self.root = root
        self.commit = commit
        self.paths = sorted({fp.old_path for p in patches for fp in parse_patch(p) if fp.old_path})
        self.dir: Path | None = None

    def __enter__(self) -> PatchedFiles:
        self.dir = scratch_dir("patch")
        # A repository of its own, so git apply resolves paths against this folder only.
        git(["init", "-q", str(self.dir)], error=SynthesisError)
        for rel in self.paths:
            data = self._read(rel)
            if data is None:
                continue  # not in the base tree: a patch may create it
            dest = self.dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _read(self, rel: str) -> bytes | None:
        if self.commit is None:
            path = self.root / rel
            return path.read_bytes() if path.is_file() else None
        proc = run_git(["show", f"{self.commit}:{rel}"], self.root, binary=True)
        return proc.stdout if proc.returncode == 0 else None

    def apply(self, patch: str, reason: str) -> None:
        """Apply ``patch`` here; SynthesisError starting with ``reason`` if it does not."""
        assert self.dir is not None, "use PatchedFiles as a context manager"
        try:
            apply_patch(self.dir, patch)
        except SynthesisError as exc:
            raise SynthesisError(f"{reason}: {exc}") from exc

    def text(self, rel: str) -> str | None:
        assert self.dir is not None
        path = self.dir / rel
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None

    def symbols(self, patch: str) -> list[ChangedSymbol]:
        """Functions the new side of ``patch`` changes, read from the files as they are now."""
        out: list[ChangedSymbol] = []
        for fp in parse_patch(patch):
            if not fp.path.endswith(".py") or fp.new_path is None:
                continue
            text = self.text(fp.path) or ""
            out += [ChangedSymbol(file=fp.path, qualname=q)
                    for q in symbols_at(text, changed_lines(fp))]
        return out
