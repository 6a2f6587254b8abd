"""The ``combine`` strategy's candidate generator: several validated bugs in one file.

Bugs that were each validated on their own, against the same base commit and in the same
file, are merged 2..k at a time into one harder candidate (scope ``multi``: the validator
runs the full suite and validates it again like any other). Two bugs merge only when their
edits are separated by at least one untouched line, so each stays a distinct fault and the
merge is the same whatever order the patches are applied in.
"""

from __future__ import annotations

import ast
import random
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from swemill.core.errors import SynthesisError
from swemill.core.records import Candidate, ChangedSymbol, Golden, Task
from swemill.synth.patches import FilePatch, file_diff, parse_patch, split_lines
from swemill.synth.strategy import RepoView, SynthReport, candidate_id, git

__all__ = ["CombineStrategy", "ValidatedBug", "merge_edits"]


@dataclass(frozen=True, slots=True)
class ValidatedBug:
    """What combining needs from one validated task (its bug patch is golden-side data)."""

    instance_id: str
    bug_patch: str
    base_commit: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    changed: tuple[ChangedSymbol, ...] = ()

    @classmethod
    def from_task(
        cls, task: Task, golden: Golden, changed: Sequence[ChangedSymbol] = ()
    ) -> ValidatedBug:
        if task.instance_id != golden.instance_id:
            raise SynthesisError(
                f"task {task.instance_id} paired with golden {golden.instance_id}"
            )
        return cls(task.instance_id, golden.bug_patch, task.base_commit,
                   tuple(task.FAIL_TO_PASS), tuple(task.PASS_TO_PASS), tuple(changed))


@dataclass(slots=True)
class _Edit:
    """One change block: base lines ``[start, end)`` (0-based) become ``new``."""

    start: int
    end: int
    new: list[str]
    owner: str = ""


@dataclass(slots=True)
class _Group:
    file: str
    base_commit: str
    bugs: list[ValidatedBug] = field(default_factory=list)


def _hunk_edits(fp: FilePatch, base: list[str], owner: str) -> list[_Edit]:
    """The change blocks of one file patch, checked line by line against the base text."""
    edits: list[_Edit] = []
    for h in fp.hunks:
        pos = max(h.old_start - 1, 0) if h.old_len else h.old_start
        cur: _Edit | None = None
        lines = h.lines
        for i, line in enumerate(lines):
            if line.startswith("\\"):
                continue
            text = line[1:]
            if i + 1 < len(lines) and lines[i + 1].startswith("\\"):
                text = text.removesuffix("\n")
            if line[0] in " -" and (pos >= len(base) or base[pos] != text):
                raise SynthesisError(f"stale_patch: {owner} does not match the base text")
            if line[0] == " ":
                cur = None
                pos += 1
                continue
            if cur is None:
                cur = _Edit(pos, pos, [], owner)
                edits.append(cur)
            if line[0] == "-":
                pos += 1
                cur.end = pos
            else:
                cur.new.append(text)
    return edits


def merge_edits(base: str, patches: Sequence[tuple[str, FilePatch]]) -> str:
    """Apply several single-file patches to ``base`` at once.

    Raises SynthesisError (``conflict: ...``) when two patches' edits touch or are adjacent.
    """
    lines = split_lines(base)
    edits = sorted(
        (e for owner, fp in patches for e in _hunk_edits(fp, lines, owner)),
        key=lambda e: (e.start, e.end),
    )
    for prev, nxt in zip(edits, edits[1:], strict=False):
        if prev.owner != nxt.owner and nxt.start <= prev.end:
            raise SynthesisError(f"conflict: {prev.owner} and {nxt.owner} edit adjacent lines")
    out: list[str] = []
    at = 0
    for e in edits:
        out += lines[at : e.start] + e.new
        at = e.end
    return "".join(out + lines[at:])


class CombineStrategy:
    """Merge 2..k validated bugs of one file into one candidate."""

    name = "combine"

    def __init__(
        self, bugs: Sequence[ValidatedBug], max_k: int = 3, max_per_file: int = 20
    ) -> None:
        if max_k < 2:
            raise SynthesisError(f"combine needs max_k >= 2, got {max_k}")
        self.bugs = list(bugs)
        self.max_k = max_k
        self.max_per_file = max_per_file
        self.report = SynthReport(self.name)

    def candidates(self, repo: RepoView) -> Iterator[Candidate]:
        self.report = SynthReport(self.name)
        groups = [g for g in self._groups() if len(g.bugs) >= 2]
        if not groups:
            self.report.nothing("no two validated bugs share a file and a base commit")
            return
        for group in groups:
            base = self._base_text(repo, group)
            group.bugs = self._fresh(group, base)
            for combo in self._combos(group, repo.seed):
                if repo.max_candidates is not None and self.report.yielded >= repo.max_candidates:
                    return
                cand = self._merge(repo, group, base, combo)
                if cand is not None:
                    self.report.yielded += 1
                    yield cand

    def _groups(self) -> list[_Group]:
        groups: dict[tuple[str, str], _Group] = {}
        for bug in sorted(self.bugs, key=lambda b: b.instance_id):
            files = parse_patch(bug.bug_patch)
            if len(files) != 1 or files[0].old_path is None or files[0].new_path is None:
                self.report.skip("not_single_file", bug.instance_id, keep=True)
                continue
            key = (files[0].path, bug.base_commit)
            groups.setdefault(key, _Group(*key)).bugs.append(bug)
        return [groups[k] for k in sorted(groups)]

    def _fresh(self, group: _Group, base: str) -> list[ValidatedBug]:
        """The bugs whose patch still matches the base text (each stale one dropped once)."""
        lines = split_lines(base)
        fresh = []
        for b in group.bugs:
            try:
                _hunk_edits(parse_patch(b.bug_patch)[0], lines, b.instance_id)
            except SynthesisError as exc:
                self.report.skip("stale_patch", b.instance_id, str(exc)[:200], keep=True)
                continue
            fresh.append(b)
        return fresh

    def _combos(self, group: _Group, seed: int) -> Iterator[tuple[ValidatedBug, ...]]:
        """Seeded distinct combinations of 2..k bugs, at most ``max_per_file``."""
        n = len(group.bugs)
        if n < 2:
            return
        rng = random.Random(f"combine:{seed}:{group.file}:{group.base_commit}")
        seen: set[tuple[int, ...]] = set()
        for _ in range(self.max_per_file * 10):
            if len(seen) >= self.max_per_file:
                return
            size = rng.randint(2, min(self.max_k, n))
            pick = tuple(sorted(rng.sample(range(n), size)))
            if pick not in seen:
                seen.add(pick)
                yield tuple(group.bugs[i] for i in pick)

    def _base_text(self, repo: RepoView, group: _Group) -> str:
        if group.base_commit and group.base_commit != repo.commit and (repo.root / ".git").exists():
            return git(repo.root, "show", f"{group.base_commit}:{group.file}")
        return (repo.root / group.file).read_text(encoding="utf-8")

    def _merge(
        self, repo: RepoView, group: _Group, base: str, combo: tuple[ValidatedBug, ...]
    ) -> Candidate | None:
        ids = [b.instance_id for b in combo]
        try:
            parts = [(b.instance_id, parse_patch(b.bug_patch)[0]) for b in combo]
            merged = merge_edits(base, parts)
        except SynthesisError as exc:
            reason = str(exc).split(":", 1)[0]
            self.report.skip(reason, "+".join(ids), str(exc)[:200], keep=reason != "conflict")
            return None
        if not _compiles(merged, group.file):
            self.report.skip("does_not_compile", "+".join(ids))
            return None
        bug = file_diff(group.file, base, merged)
        f2p = sorted({t for b in combo for t in b.fail_to_pass})
        p2p = set.intersection(*(set(b.pass_to_pass) for b in combo)) - set(f2p)
        changed = {(s.file, s.qualname): s for b in combo for s in b.changed}
        return Candidate(
            candidate_id=candidate_id(self.name, group.file, ",".join(ids), bug),
            repo=repo.repo,
            strategy="combine",
            bug_patch=bug,
            golden_patch=file_diff(group.file, merged, base),
            changed=[changed[k] for k in sorted(changed)],
            scope="multi",
            parents=ids,
            fail_to_pass_hint=f2p,
            pass_to_pass_hint=sorted(p2p),
            metadata={"base_commit": group.base_commit or repo.commit},
        )


def _compiles(code: str, filename: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(ast.parse(code), filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True
