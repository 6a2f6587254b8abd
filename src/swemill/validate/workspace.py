"""A worker's workspace as tree states: a commit with patches on top, reset and applied.

Within one commit, :meth:`Workspace.reset` writes the files the patches touched back from
memory (a few files, not a checkout); every :attr:`Workspace.GIT_EVERY`-th reset lets git put
everything back instead, files a test run left behind included. Because it remembers each
touched file's bytes at the commit, it can also say whether the tree is the head tree except
for edited ``.py`` files (:meth:`Workspace.changed_py`): what the head image can serve.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from swemill.core.errors import SandboxError, SynthesisError
from swemill.core.git import run_git
from swemill.synth.patches import parse_patch

__all__ = ["TreeState", "Workspace"]

@dataclass(frozen=True, slots=True)
class TreeState:
    """A commit with patches applied on top, in order (``base_patch``, bug, golden ...)."""

    commit: str
    patches: tuple[str, ...] = ()


class Workspace:
    """The files under ``root``, at ``head`` to begin with; not thread-safe."""

    GIT_EVERY = 50
    """One reset in this many within a commit is git's (a full checkout and clean)."""

    def __init__(self, root: Path, head: str) -> None:
        self.root, self.head = root, head
        self.state = TreeState(head)
        self._saved: dict[str, bytes | None] = {}
        """Files the patches touched, as they are at the state's commit."""
        self._unknown = False
        """A patch touched files this could not tell (unparseable): only git can reset."""
        self._resets = 0

    @property
    def at_head(self) -> bool:
        return self.state == TreeState(self.head)

    def read(self, rel: str) -> bytes | None:
        target = self.root / rel
        return target.read_bytes() if target.is_file() else None

    def checkout(self, state: TreeState) -> None:
        """Put the workspace into ``state``; SynthesisError("patch_failed: ...") if a patch
        does not apply. A state that extends the current one only applies the extra patches."""
        if state == self.state:
            return
        cur = self.state
        if state.commit == cur.commit and state.patches[: len(cur.patches)] == cur.patches:
            extra = state.patches[len(cur.patches):]
        else:
            self.reset(state.commit)
            extra = state.patches
        for patch in extra:
            if not patch.strip():
                continue
            self._save(patch)
            proc = run_git(["apply", "--whitespace=nowarn", "-"], self.root, input=patch)
            if proc.returncode != 0:
                self.state = TreeState(state.commit, ("<broken>",))
                raise SynthesisError(f"patch_failed: {proc.stderr.strip()[:300]}")
        self.state = state

    def _save(self, patch: str) -> None:
        try:
            paths = {p for fp in parse_patch(patch) for p in (fp.old_path, fp.new_path) if p}
        except Exception:  # noqa: BLE001 - unparseable here: git apply will judge it
            self._unknown = True
            return
        for rel in paths:
            if rel not in self._saved:
                self._saved[rel] = self.read(rel)

    def reset(self, commit: str) -> None:
        """The workspace exactly at ``commit``. Within one commit the files the patches
        touched are written back from memory; moving between commits is git's job."""
        if self.state == TreeState(commit):
            return
        self._resets += 1
        if self.state.commit == commit and not self._unknown and self._resets % self.GIT_EVERY:
            for rel, data in self._saved.items():
                target = self.root / rel
                if data is None:
                    target.unlink(missing_ok=True)
                else:
                    target.write_bytes(data)
        else:
            for step in (("checkout", "-q", "-f", "--detach", commit),
                         ("clean", "-q", "-f", "-d")):
                proc = run_git(step, self.root)
                if proc.returncode != 0:
                    raise SandboxError(f"git {step[0]} in a worker failed: {proc.stderr[:200]}")
        self._saved.clear()
        self._unknown = False
        self.state = TreeState(commit)

    def changed_py(self) -> list[str] | None:
        """The ``.py`` files that differ from the head tree, if nothing else does (files
        added, removed or not Python: None, the head image cannot serve that tree)."""
        if self._unknown or self.state.commit != self.head:
            return None
        changed = []
        for rel, data in self._saved.items():
            now = self.read(rel)
            if now == data:
                continue
            if data is None or now is None or not rel.endswith(".py"):
                return None
            changed.append(rel)
        return changed

    def fingerprint(self) -> tuple[TreeState, tuple[bytes | None, ...]] | None:
        """The tree as it is now: its state and the bytes of every file the patches touched
        (None when a patch touched files this cannot tell). Equal fingerprints, equal trees,
        as far as the patches go (a file a test run wrote elsewhere is not seen)."""
        if self._unknown:
            return None
        return self.state, tuple(self.read(rel) for rel in sorted(self._saved))

    def equals_head(self) -> bool:
        """Every file the patches touched is back to its bytes at the head commit."""
        return self.changed_py() == []
