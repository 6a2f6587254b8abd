"""The held-out split: grouped, deterministic under a seed, near-duplicates kept together.

Rows are grouped (by repository, task family or task) and whole groups go to one side, so
the held-out side measures generalisation to unseen code, not recall of a sibling row.
Groups whose rows are near-duplicates of each other (MinHash, Jaccard >= the split's
threshold, looser than dedup's) are merged first, so no near-duplicate sits on both sides.

Assignment: groups are ordered by ``sha256(seed, group)`` and taken into the held-out side
until it holds ``holdout_fraction`` of the rows; with two or more groups each side gets at
least one. The same rows and seed always give the same split, in any process.

``group_by="auto"`` uses repositories when there are at least ``min_repos`` of them, and
task families otherwise (one repository cannot be split by repository): a task's family is
``Task.metadata["family"]`` when synthesis recorded one, else its changed file, else the task.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from swemill.core.errors import ConfigError
from swemill.core.records import Task
from swemill.corpus.dedup import MinHashConfig, NearDupIndex

__all__ = ["GroupBy", "SplitConfig", "SplitItem", "Split", "split", "family_of"]

GroupBy = Literal["auto", "repo", "family", "task"]


@dataclass(frozen=True, slots=True)
class SplitConfig:
    holdout_fraction: float = 0.1
    seed: int = 0
    group_by: GroupBy = "auto"
    min_repos: int = 4
    """``auto`` groups by repository only when there are at least this many."""
    near_dup_threshold: float | None = 0.5
    """Jaccard similarity above which two rows' groups are merged; None turns merging off."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.holdout_fraction < 1.0:
            raise ConfigError(f"holdout fraction {self.holdout_fraction} is not in [0, 1)")
        if self.group_by not in ("auto", "repo", "family", "task"):
            raise ConfigError(f"unknown split grouping {self.group_by!r}")


@dataclass(frozen=True, slots=True)
class SplitItem:
    """One row as the split sees it."""

    key: str
    repo: str | None
    task_id: str | None
    family: str | None
    text: str = ""


@dataclass(slots=True)
class Split:
    group_by: str
    group_of: dict[str, str]
    """Row key -> its (merged) group."""
    holdout_groups: set[str]
    merged_groups: int = 0
    """Groups folded into another because a row of each was a near-duplicate."""
    sizes: Counter[str] = field(default_factory=Counter)

    def is_holdout(self, key: str) -> bool:
        return self.group_of[key] in self.holdout_groups

    @property
    def holdout_rows(self) -> int:
        return sum(n for g, n in self.sizes.items() if g in self.holdout_groups)


def family_of(task: Task | None) -> str | None:
    if task is None:
        return None
    fam = task.metadata.get("family") or task.metadata.get("file")
    return f"{task.repo}:{fam}" if fam else f"{task.repo}:{task.instance_id}"


def _base_group(item: SplitItem, by: str) -> str:
    if by == "repo":
        return f"repo:{item.repo or 'unknown'}"
    if by == "family" and item.family:
        return f"family:{item.family}"
    return f"task:{item.task_id}" if item.task_id else f"row:{item.key}"


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        self.parent[x] = root
        return root

    def union(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        lo, hi = sorted((ra, rb))  # the smaller name leads: order-independent result
        self.parent[hi] = lo
        return True


def _merge_near_dups(items: Sequence[SplitItem], base: dict[str, str], t: float) -> int:
    uf, merged = _UnionFind(), 0
    index = NearDupIndex(config=MinHashConfig(jaccard_threshold=t))
    for item in sorted(items, key=lambda i: i.key):
        if not item.text:
            continue
        match = index.check_and_add(item.key, item.text)
        if match is not None:
            merged += uf.union(base[item.key], base[match.row_id])
    for key, group in base.items():
        base[key] = uf.find(group)
    return merged


def _choose(sizes: Counter[str], fraction: float, seed: int) -> set[str]:
    order = sorted(sizes, key=lambda g: hashlib.sha256(f"{seed}\0{g}".encode()).hexdigest())
    if fraction <= 0 or len(order) < 2:
        return set()
    target = fraction * sum(sizes.values())
    chosen: set[str] = set()
    held = 0
    for group in order[:-1]:  # the last group always trains: both sides non-empty
        if held and held + sizes[group] > target:
            continue
        chosen.add(group)
        held += sizes[group]
        if held >= target:
            break
    return chosen


def split(items: Sequence[SplitItem], config: SplitConfig | None = None) -> Split:
    """Assign every item to train or held-out, whole groups at a time."""
    cfg = config or SplitConfig()
    by = cfg.group_by
    if by == "auto":
        repos = {i.repo for i in items if i.repo}
        by = "repo" if len(repos) >= cfg.min_repos else "family"
    group_of = {i.key: _base_group(i, by) for i in items}
    merged = 0
    if cfg.near_dup_threshold is not None:
        merged = _merge_near_dups(items, group_of, cfg.near_dup_threshold)
    sizes = Counter(group_of.values())
    return Split(by, group_of, _choose(sizes, cfg.holdout_fraction, cfg.seed), merged, sizes)
