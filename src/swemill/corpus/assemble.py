"""The corpus stage as one function: trajectories and pairs in, split row lists out.

Order per item: the ``difficulty`` selection (a row of a task of another label, or of no
known label, is dropped as ``difficulty``) -> admission (a flagged trajectory is never an SFT
row, a pair whose ``chosen`` side was flagged is never a DPO row) -> tools outside the algebra
-> secrets scrub -> row -> golden guard (nothing golden in what the policy was shown) ->
quality filters -> exact and near dedup (against earlier runs too, when given a loaded
:class:`NearDupIndex`). Every drop is a :class:`Drop` with a reason and is counted as
``dropped_<reason>``; then the held-out split, then, with ``curriculum``, easy to hard order.
Nothing here touches the store: :func:`swemill.corpus.write.write_corpus` does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import ConfigError, CorpusError
from swemill.core.records import (
    Drop,
    Golden,
    Message,
    PreferencePair,
    Task,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
)
from swemill.corpus.dedup import NearDupIndex
from swemill.corpus.filters import FilterChain
from swemill.corpus.redact import scrub, scrub_value
from swemill.corpus.rows import (
    dpo_row,
    prompt_messages,
    sft_row,
    shape_pair,
    shape_sft,
    tools_json,
    wm_rows,
)
from swemill.corpus.split import Split, SplitConfig, SplitItem, family_of, split
from swemill.validate.difficulty import LABELS, TaskDifficulty
from swemill.validate.guard import GoldenGuard

__all__ = ["CorpusConfig", "CorpusTables", "assemble", "admit", "row_text", "dedup_text",
           "pair_digest", "empty_reason", "curriculum_key", "DIFFICULTIES"]


@dataclass(frozen=True, slots=True)
class CorpusConfig:
    reasoning: bool = True
    """Keep thinking as ``reasoning_content`` (never inside ``content``)."""
    include_ungraded: bool = True
    """Admit ungraded imported sessions (no outcome) to SFT when nothing flags them."""
    emit_wm: bool = False
    """Also build world-model tuples from every trajectory, failures included."""
    filters: tuple[dict[str, dict[str, Any] | None], ...] | None = None
    """data-juicer style filter ops; None uses the defaults of :class:`FilterChain`."""
    dedup: bool = True
    scrub_keep: frozenset[str] = frozenset()
    """PII kinds the scrub leaves in place (``--scrub-keep``); secrets never."""
    split: SplitConfig = field(default_factory=SplitConfig)
    difficulty: str = "all"
    """``easy``, ``medium``, ``hard``: keep only the rows of tasks of that label; ``all``."""
    curriculum: bool = False
    """Order every table easy to hard (:func:`curriculum_key`) instead of input order."""

    def __post_init__(self) -> None:
        if self.difficulty not in DIFFICULTIES:
            raise ConfigError(f"unknown difficulty {self.difficulty!r}: choose one of "
                              f"{', '.join(DIFFICULTIES)}")


DIFFICULTIES = ("all", *LABELS)


def curriculum_key(row: dict[str, Any], known: Mapping[str, TaskDifficulty]) -> tuple[Any, ...]:
    """Easy to hard: the label, then within it the measured solve rate (highest first)
    before the proxy points (fewest first); rows of no known task last."""
    d = known.get(row.get("task_id") or "")
    if d is None:
        return (len(LABELS), 1, 0.0, 0, "", row.get("trajectory_id") or row.get("pair_id"))
    rate = d.solve_rate
    return (LABELS.index(d.label), rate is None, -(rate or 0.0), d.proxy_points, d.instance_id,
            row.get("trajectory_id") or row.get("pair_id"))


@dataclass(slots=True)
class CorpusTables:
    """Rows ready for the store, and everything the manifest, card and report need."""

    sft: list[dict[str, Any]] = field(default_factory=list)
    sft_holdout: list[dict[str, Any]] = field(default_factory=list)
    dpo: list[dict[str, Any]] = field(default_factory=list)
    dpo_holdout: list[dict[str, Any]] = field(default_factory=list)
    wm: list[dict[str, Any]] = field(default_factory=list)
    drops: list[Drop] = field(default_factory=list)
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    scrubbed: Counter[str] = field(default_factory=Counter)
    split: Split | None = None

    def manifest_counts(self) -> dict[str, dict[str, int]]:
        return {stage: dict(c) for stage, c in self.counts.items()}


def admit(traj: Trajectory, include_ungraded: bool = True) -> str | None:
    """None when the trajectory may become an SFT row, else the drop reason."""
    if traj.flags:
        return "hack_flagged"
    if traj.error:
        return "errored"
    if traj.admission in ("withheld", "preference"):
        return f"admission_{traj.admission}"
    if not any(m.role == "assistant" for m in traj.messages):
        return "no_assistant_turn"
    if traj.admission == "sft":
        return None
    if traj.outcome is None:
        return None if include_ungraded else "ungraded"
    return None if traj.outcome.resolved else "unresolved"


def _foreign_tool(messages: Sequence[Message]) -> bool:
    return any(c.is_other for m in messages for c in m.tool_calls)


def _scrub_block(block: Any, counts: Counter[str], keep: frozenset[str]) -> Any:
    if isinstance(block, TextBlock | ThinkingBlock):
        res = scrub(block.text, keep)
        counts.update(res.counts)
        return block.model_copy(update={"text": res.text})
    if isinstance(block, ToolResultBlock):
        res = scrub(block.content, keep)
        counts.update(res.counts)
        return block.model_copy(update={"content": res.text})
    if isinstance(block, ToolUseBlock):
        args, _ = scrub_value(block.call.args, counts, keep)
        return block.model_copy(update={"call": block.call.model_copy(update={"args": args})})
    return block


def _scrubbed(messages: Sequence[Message], counts: Counter[str],
              keep: frozenset[str] = frozenset()) -> list[Message]:
    return [
        m.model_copy(update={"content": [_scrub_block(b, counts, keep) for b in m.content]})
        for m in messages
    ]


def row_text(messages: Sequence[dict[str, Any]], *, system: bool = True) -> str:
    """A conversation row as one text, for filters and dedup (tool arguments included).

    ``system=False`` leaves system messages out: the split compares rows by what differs
    between them, not by the system prompt every rollout shares.
    """
    parts = []
    for m in messages:
        if not system and m["role"] == "system":
            continue
        parts.append(m["content"] or "")
        for call in m["tool_calls"] or ():
            parts.append(f"{call['function']['name']} {call['function']['arguments']}")
    return "\n".join(p for p in parts if p)


def dedup_text(messages: Sequence[dict[str, Any]]) -> str:
    """What near-dedup compares: the task statement and the agent's own turns and actions.

    Tool results are left out: file reads and test logs of one repository dominate a row's text
    and made different agents' runs on different tasks of one module look alike (Jaccard
    0.66-0.77 on the sample, above the 0.7 threshold); the shared system prompt is left out too.
    """
    return row_text([m for m in messages if m["role"] != "tool"], system=False)


class _Run:
    """State of one assemble call: counters, drops, dedup indexes, guards."""

    def __init__(self, cfg: CorpusConfig, goldens: Mapping[str, Golden],
                 index: NearDupIndex | None,
                 difficulty: Mapping[str, TaskDifficulty] | None = None) -> None:
        self.cfg = cfg
        self.difficulty = difficulty or {}
        self.tables = CorpusTables()
        self.guards = {k: GoldenGuard.of(g) for k, g in goldens.items()}
        self.filters = FilterChain.from_ops(cfg.filters) if cfg.filters else FilterChain()
        self.index = index if index is not None else NearDupIndex()
        self.tools = tools_json()

    def count(self, stage: str, key: str) -> None:
        self.tables.counts.setdefault(stage, Counter())[key] += 1

    def drop(self, stage: str, item_id: str, reason: str, detail: str = ""
             ) -> dict[str, Any] | None:
        """Count and record a drop; returns None (no row), so callers ``return`` it."""
        self.count(stage, f"dropped_{reason}")
        self.tables.drops.append(Drop(stage=stage, reason=reason, item_id=item_id, detail=detail))
        return None

    def label(self, task_id: str | None) -> str | None:
        d = self.difficulty.get(task_id or "")
        return d.label if d is not None else None

    def other_label(self, task_id: str | None) -> str | None:
        """The drop detail when ``--difficulty`` leaves this task's rows out, else None."""
        if self.cfg.difficulty == "all" or self.label(task_id) == self.cfg.difficulty:
            return None
        return f"task label {self.label(task_id) or 'unknown'}"

    def leak(self, task_id: str | None, messages: list[dict[str, Any]]) -> str | None:
        guard = self.guards.get(task_id or "")
        if guard is None:
            return None
        found = guard.leaks_in(m["content"] or "" for m in prompt_messages(messages))
        return f"{len(found)} golden-only piece(s) in the prompt" if found else None

    def sft(self, traj: Trajectory, task: Task | None) -> dict[str, Any] | None:
        if detail := self.other_label(traj.task_id):
            return self.drop("corpus.sft", traj.trajectory_id, "difficulty", detail)
        reason = admit(traj, self.cfg.include_ungraded)
        if reason is None and _foreign_tool(traj.messages):
            reason = "non_algebra_tool"
        if reason:
            return self.drop("corpus.sft", traj.trajectory_id, reason)
        clean = traj.model_copy(update={"messages": _scrubbed(
            traj.messages, self.tables.scrubbed, self.cfg.scrub_keep)})
        row = sft_row(clean, task, tools=self.tools, reasoning=self.cfg.reasoning)
        row["difficulty"] = self.label(traj.task_id) or row["difficulty"]
        row["messages"], reason = shape_sft(row["messages"])
        if reason:
            return self.drop("corpus.sft", traj.trajectory_id, reason)
        if detail := self.leak(traj.task_id, row["messages"]):
            return self.drop("corpus.sft", traj.trajectory_id, "golden_leak", detail)
        text = row_text(row["messages"])
        verdict = self.filters.check(text)
        if not verdict.keep:
            return self.drop("corpus.sft", traj.trajectory_id, verdict.reason or "filtered")
        if self.cfg.dedup and (dup := self.index.check_and_add(traj.trajectory_id,
                                                                 dedup_text(row["messages"]))):
            return self.drop("corpus.sft", traj.trajectory_id, dup.reason, dup.row_id)
        return row

    def dpo(self, pair: PreferencePair, task: Task | None) -> dict[str, Any] | None:
        if detail := self.other_label(pair.task_id):
            return self.drop("corpus.dpo", pair.pair_id, "difficulty", detail)
        if pair.metadata.get("chosen_flags"):  # a hack is never the side to learn from
            return self.drop("corpus.dpo", pair.pair_id, "chosen_flagged")
        if _foreign_tool(pair.prompt + pair.chosen + pair.rejected):
            return self.drop("corpus.dpo", pair.pair_id, "non_algebra_tool")
        counts, keep = self.tables.scrubbed, self.cfg.scrub_keep
        clean = pair.model_copy(update={side: _scrubbed(getattr(pair, side), counts, keep)
                                        for side in ("prompt", "chosen", "rejected")})
        row = dpo_row(clean, task, tools=self.tools, reasoning=self.cfg.reasoning)
        row["difficulty"] = self.label(pair.task_id) or row["difficulty"]
        if reason := shape_pair(row):
            return self.drop("corpus.dpo", pair.pair_id, reason)
        if detail := self.leak(pair.task_id, row["prompt"]):
            return self.drop("corpus.dpo", pair.pair_id, "golden_leak", detail)
        if self.cfg.dedup and (dup := self.index.check_and_add(pair.pair_id, pair_digest(row))):
            return self.drop("corpus.dpo", pair.pair_id, dup.reason, dup.row_id)
        return row


def pair_digest(row: dict[str, Any]) -> str:
    """Pairs are deduplicated exactly, across runs too: their digest goes into the same index
    as one opaque token, which can only match itself (pairs from one state share most text,
    so near-matching them would drop real alternatives)."""
    key = json.dumps([row["prompt"], row["chosen"], row["rejected"]], sort_keys=True)
    return "dpo-" + hashlib.sha256(key.encode()).hexdigest()


def _split_rows(run: _Run, sft: list[dict[str, Any]], dpo: list[dict[str, Any]],
                tasks: Mapping[str, Task]) -> None:
    items = [
        SplitItem(f"sft:{r['trajectory_id']}", r["repo"], r["task_id"],
                  family_of(tasks.get(r["task_id"] or "")), row_text(r["messages"], system=False))
        for r in sft
    ] + [
        SplitItem(f"dpo:{r['pair_id']}", r["repo"], r["task_id"],
                  family_of(tasks.get(r["task_id"] or "")))
        for r in dpo
    ]
    result = split(items, run.cfg.split)
    t = run.tables
    t.split = result
    for r in sft:
        (t.sft_holdout if result.is_holdout(f"sft:{r['trajectory_id']}") else t.sft).append(r)
    for r in dpo:
        (t.dpo_holdout if result.is_holdout(f"dpo:{r['pair_id']}") else t.dpo).append(r)
    t.counts["corpus.split"] = Counter({
        "sft_train": len(t.sft), "sft_holdout": len(t.sft_holdout), "dpo_train": len(t.dpo),
        "dpo_holdout": len(t.dpo_holdout), "groups": len(result.sizes),
        "holdout_groups": len(result.holdout_groups),
        "merged_near_dup_groups": result.merged_groups,
    })


def empty_reason(tables: CorpusTables) -> str:
    drops = Counter(d.reason for d in tables.drops)
    why = ", ".join(f"{r}={n}" for r, n in drops.most_common()) or "no input rows"
    return f"the corpus is empty after filtering ({why})"


def assemble(
    trajectories: Sequence[Trajectory],
    pairs: Sequence[PreferencePair] = (),
    *,
    tasks: Mapping[str, Task] | None = None,
    goldens: Mapping[str, Golden] | None = None,
    config: CorpusConfig | None = None,
    dedup_index: NearDupIndex | None = None,
    allow_empty: bool = False,
    difficulty: Mapping[str, TaskDifficulty] | None = None,
) -> CorpusTables:
    """Build the corpus rows. ``goldens`` arms the golden guard; ``dedup_index`` (from
    ``NearDupIndex.load(store, run_id)``) makes dedup cross-run — save it after writing.
    ``difficulty`` (``load_difficulty``) labels the rows and serves ``config.difficulty``
    and ``config.curriculum``.

    Raises :class:`CorpusError` when nothing is left: an empty dataset is never a success.
    ``allow_empty`` returns the empty tables instead (their counts say why), for a caller
    that records the counts before it fails.
    """
    tasks = tasks or {}
    run = _Run(config or CorpusConfig(), goldens or {}, dedup_index, difficulty)
    if run.cfg.difficulty not in DIFFICULTIES:
        raise CorpusError(f"unknown difficulty {run.cfg.difficulty!r}: choose one of "
                          f"{', '.join(DIFFICULTIES)}")
    sft: list[dict[str, Any]] = []
    dpo: list[dict[str, Any]] = []
    for traj in trajectories:
        run.count("corpus.sft", "in")
        if run.cfg.emit_wm:
            run.tables.wm.extend(wm_rows(traj))
        if (row := run.sft(traj, tasks.get(traj.task_id or ""))) is not None:
            sft.append(row)
            run.count("corpus.sft", "out")
    for pair in pairs:
        run.count("corpus.dpo", "in")
        if (row := run.dpo(pair, tasks.get(pair.task_id or ""))) is not None:
            dpo.append(row)
            run.count("corpus.dpo", "out")
    if not sft and not dpo and not allow_empty:
        raise CorpusError(empty_reason(run.tables))
    _split_rows(run, sft, dpo, tasks)
    if run.cfg.curriculum:
        t = run.tables
        for rows in (t.sft, t.sft_holdout, t.dpo, t.dpo_holdout):
            rows.sort(key=lambda r: curriculum_key(r, run.difficulty))
    run.tables.counts["corpus.scrub"] = Counter(run.tables.scrubbed)
    return run.tables
