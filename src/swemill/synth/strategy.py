"""The ``Strategy`` protocol and what every strategy shares.

A strategy reads a :class:`RepoView` (a working copy at its base commit, plus the baseline
when one exists) and yields :class:`~swemill.core.records.Candidate` records, lazily and in
an order fixed by the seed. Anything it passes over is counted in its :class:`SynthReport`
with a reason; when it yields nothing at all, ``report.reason`` says why.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol, runtime_checkable

from swemill.core.errors import SynthesisError
from swemill.core.git import run_git
from swemill.core.records import Baseline, Candidate, Drop

__all__ = [
    "RepoView",
    "Strategy",
    "SynthReport",
    "candidate_id",
    "git",
    "is_test_path",
    "python_sources",
    "tests_by_symbol",
]

log = logging.getLogger("swemill.synth")

# Folders that never hold the project's own importable code.
_SKIP_DIRS = {
    ".git", ".hg", ".venv", "venv", ".tox", ".nox", "node_modules", "build", "dist",
    "__pycache__", ".eggs", "site-packages", "docs", "doc", "examples", "benchmarks",
}
# Build and release tooling: a bug there breaks packaging, not behaviour tests can see.
_SKIP_FILES = {
    "setup.py", "conftest.py", "noxfile.py", "fabfile.py", "tasks.py", "versioneer.py",
    "_version.py",
}


@dataclass(slots=True)
class RepoView:
    """What a strategy may look at: a git working copy at ``commit`` and its baseline."""

    root: Path
    repo: str
    """Normalised ``owner/name`` (or a local name) the candidates are filed under."""
    commit: str
    baseline: Baseline | None = None
    """With a coverage map, procedural targets only functions some test executes."""
    seed: int = 0
    max_candidates: int | None = None


@dataclass(slots=True)
class SynthReport:
    """What one ``candidates()`` pass produced and passed over."""

    strategy: str
    yielded: int = 0
    reason: str | None = None
    """Why the strategy produced nothing (shallow clone, no tests, no history ...)."""
    skipped: Counter[str] = field(default_factory=Counter)
    drops: list[Drop] = field(default_factory=list)
    refused: list[Drop] = field(default_factory=list)
    """Candidates the strategy made and found unusable before validation (a model's invalid
    answer): each is a dropped row of ``candidates/`` under its reason."""
    cost_usd: float = 0.0
    """Settled cost of the model calls this pass made (0 for strategies without a model)."""
    calls: int = 0

    def skip(self, reason: str, item_id: str = "", detail: str = "", keep: bool = False) -> None:
        """Count one passed-over item; ``keep`` also records it as a :class:`Drop`."""
        self.skipped[reason] += 1
        if keep:
            self.drops.append(
                Drop(stage=f"synth.{self.strategy}", reason=reason, item_id=item_id, detail=detail)
            )

    def refuse(self, reason: str, item_id: str, detail: str = "") -> None:
        """Count one made-but-unusable candidate (see ``refused``)."""
        self.refused.append(Drop(stage=f"synth.{self.strategy}", reason=reason,
                                 item_id=item_id, detail=detail))

    def nothing(self, reason: str) -> None:
        self.reason = reason
        log.info("synth %s yields nothing: %s", self.strategy, reason)


@runtime_checkable
class Strategy(Protocol):
    """A source of candidate bugs for one repository."""

    name: str
    report: SynthReport
    """Reset at the start of each ``candidates()`` call."""

    def candidates(self, repo: RepoView) -> Iterator[Candidate]: ...


def candidate_id(strategy: str, *parts: str) -> str:
    """Stable id: the same strategy, location, mutator and patch always give the same id."""
    h = hashlib.sha256("\x00".join((strategy, *parts)).encode("utf-8")).hexdigest()
    return f"{strategy}-{h[:16]}"


def is_test_path(relpath: str) -> bool:
    """True for files a bug must never be put in: test modules, test folders, conftest."""
    p = PurePosixPath(relpath)
    name = p.name
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return True
    if name == "tests.py":
        return True
    return any(part in ("tests", "test") for part in p.parts[:-1])


def git(root: Path, *args: str, check: bool = True) -> str:
    """Run git in ``root`` without any user or system configuration getting in the way."""
    proc = run_git(args, root)
    if check and proc.returncode != 0:
        raise SynthesisError(f"git {args[0]} failed in {root}: {proc.stderr.strip()[:200]}")
    return proc.stdout


def python_sources(root: Path) -> list[str]:
    """Repository-relative paths of the project's non-test Python files, sorted."""
    if (root / ".git").exists():
        out = git(root, "ls-files", "-z", "--", "*.py", check=False)
        rels = [r for r in out.split("\0") if r]
    else:
        rels = [p.relative_to(root).as_posix() for p in root.rglob("*.py")]
    keep = []
    for rel in rels:
        parts = PurePosixPath(rel).parts
        if any(part in _SKIP_DIRS or part.startswith(".") for part in parts[:-1]):
            continue
        if parts[-1] in _SKIP_FILES or is_test_path(rel):
            continue
        if (root / rel).is_file():
            keep.append(rel)
    return sorted(keep)


def tests_by_symbol(repo: RepoView) -> dict[str, dict[str, list[str]]] | None:
    """``file -> qualname -> passing tests``; None when there is no coverage map to aim by."""
    base = repo.baseline
    if base is None or not base.coverage:
        return None
    passing = base.passing() if base.outcomes else None
    out: dict[str, dict[str, list[str]]] = {}
    for key, tests in base.coverage.items():
        file, sep, qual = key.rpartition("::")
        if not sep:
            continue
        keep = sorted(t for t in tests if passing is None or t in passing)
        if keep:
            out.setdefault(file, {})[qual] = keep
    return out
