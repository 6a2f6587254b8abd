"""How hard a task is: measured by rollouts where they ran, else guessed from cheap proxies.

Every task gets its proxies when it is written (``Task.metadata["difficulty"]``, see
:func:`proxies_of`): lines the bug changed, FAIL_TO_PASS count, how much the failures say
(:func:`informativeness`), the strategy, the points these add up to and the label they give.
A rollout run writes ``difficulty/run_id=<id>/`` (:func:`write_difficulty`), one
:class:`TaskDifficulty` row per task of the run: the solve rate over the N graded samples,
the policies that produced them, the unbiased pass@k for k = 1..N (:func:`pass_at_k`), and
the label, from the solve rate where the task was rolled out, else from the proxies.
:func:`load_difficulty` is what readers (the corpus, the report) use: the table where it is
there, the tasks' own proxies for the rest.

Labels. From a solve rate s: ``easy`` when s >= 0.8, ``hard`` when s < 0.2, else ``medium``.
From proxies, points (0..8): lines changed <= 2: 0, 3-10: 1, more: 2; FAIL_TO_PASS >= 5: 0,
2-4: 1, one: 2; informativeness >= 2/3: 0, >= 1/3: 1, less: 2, unknown: 1; strategy
:data:`STRATEGY_POINTS`. ``easy`` <= 2 points, ``hard`` >= 5, else ``medium``. The
proxy weights are a prior (bigger edits, fewer and vaguer failures, combined or rewritten
bugs are harder), not yet calibrated against solve rates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from swemill.core.records import Golden, Task
from swemill.store import Store, shard_name
from swemill.synth.leaks import LeakCheck, changed_lines

__all__ = ["LABELS", "EASY_SOLVE_RATE", "HARD_SOLVE_RATE", "STRATEGY_POINTS", "Label",
           "SolveStats", "TaskDifficulty", "DIFFICULTY_STAGE", "message_level",
           "informativeness", "proxies_of", "proxy_points", "proxy_label", "solve_label",
           "pass_at_k", "difficulty_rows", "write_difficulty", "load_difficulty"]

Label = Literal["easy", "medium", "hard"]
LABELS: tuple[Label, ...] = ("easy", "medium", "hard")
EASY_SOLVE_RATE = 0.8
HARD_SOLVE_RATE = 0.2
STRATEGY_POINTS = {"procedural": 0, "rows": 1, "lm-modify": 1, "pr-mirror": 2, "combine": 2,
                   "lm-rewrite": 2}
"""Unknown strategies get 1. Combined and rewritten bugs are rated hardest in SWE-smith's
published analysis; real fixes (pr-mirror) span more code than one mutation."""
DIFFICULTY_STAGE = "difficulty"

_E_LINE = re.compile(r"^E(\s|$)")
_BARE = re.compile(r"^(\w+(Error|Exception|Failure|Exit|Interrupt)|Failed|assert\s+\S+)?:?\s*$")
_VALUES = re.compile(r"\bassert\b.*\s(==|!=|<=|>=|<|>|not in|in|is not|is)\s|^[+-]?\s*where\b"
                     r"|\b(expected|got|actual|differ)\w*\b|^[+-]\s|^(Left|Right) contains\b",
                     re.IGNORECASE)
_NAME_ERROR = re.compile(r"\b(NameError|UnboundLocalError)\b")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _lines(message: str) -> list[str]:
    lines = message.splitlines()
    picked = [ln[1:].strip() for ln in lines if _E_LINE.match(ln)]
    return [ln for ln in (picked or [ln.strip() for ln in lines]) if ln]


def message_level(message: str, check: LeakCheck | None = None) -> int:
    """How much one failure message says, 0..3.

    3: it points at the edit (a ``NameError`` / ``UnboundLocalError``, or it names an
    identifier only the changed lines contain, or quotes a changed line: ``check`` holds
    those); 2: it shows values (pytest's ``assert a == b`` with its ``where`` lines, an
    expected/got pair, a diff of the compared values); 1: an error with words of its own
    (``ValueError: not a date``); 0: nothing but an exception name, ``assert False`` or an
    empty message (a crash, a timeout)."""
    lines = _lines(message)
    if not lines:
        return 0
    text = "\n".join(lines)
    if _NAME_ERROR.search(text):
        return 3
    if check is not None and (check.names & set(_IDENT.findall(text))
                              or any(ln in " ".join(text.split()) for ln in check.lines)):
        return 3
    if any(_VALUES.search(ln) for ln in lines):
        return 2
    if all(_BARE.match(ln) for ln in lines):
        return 0
    return 1


def informativeness(messages: Iterable[str], check: LeakCheck | None = None) -> float | None:
    """The mean :func:`message_level` over the FAIL_TO_PASS tests' messages, divided by 3
    (0: the failures say nothing, 1: each points at the edit); None without a message."""
    levels = [message_level(m, check) for m in messages]
    return sum(levels) / (3 * len(levels)) if levels else None


def proxy_points(lines_changed: int, n_fail_to_pass: int, info: float | None,
                 strategy: str) -> int:
    size = 0 if lines_changed <= 2 else 1 if lines_changed <= 10 else 2
    signal = 0 if n_fail_to_pass >= 5 else 1 if n_fail_to_pass >= 2 else 2
    eps = 1e-9  # k / (3n) against 2/3 and 1/3, in floating point
    vague = 1 if info is None else 0 if info >= 2 / 3 - eps else 1 if info >= 1 / 3 - eps else 2
    return size + signal + vague + STRATEGY_POINTS.get(strategy, 1)


def proxy_label(points: int) -> Label:
    return "easy" if points <= 2 else "hard" if points >= 5 else "medium"


def solve_label(rate: float) -> Label:
    return "easy" if rate >= EASY_SOLVE_RATE else "hard" if rate < HARD_SOLVE_RATE else "medium"


def proxies_of(bug_patch: str, strategy: str, fail_to_pass: Sequence[str],
               messages: Mapping[str, str] | None = None,
               check: LeakCheck | None = None) -> dict[str, Any]:
    """A task's proxies as stored in ``Task.metadata["difficulty"]``; ``messages`` (node id ->
    failure text on the broken tree) None when unknown. ``check``: a LeakCheck built without
    the messages, so names the messages share only with the edit count as pointing at it."""
    removed, added = changed_lines(bug_patch) if bug_patch.strip() else ([], [])
    info = (informativeness([messages.get(t, "") for t in fail_to_pass], check)
            if messages is not None else None)
    points = proxy_points(len(removed) + len(added), len(fail_to_pass), info, strategy)
    return {"lines_changed": len(removed) + len(added), "n_fail_to_pass": len(fail_to_pass),
            "informativeness": info, "strategy": strategy, "points": points,
            "label": proxy_label(points)}


def pass_at_k(n: int, c: int) -> list[float]:
    """The unbiased pass@k estimate 1 - C(n-c, k) / C(n, k) for k = 1..n, from n graded
    samples of which c resolved the task."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got n={n}, c={c}")
    return [round(1.0 - comb(n - c, k) / comb(n, k), 6) for k in range(1, n + 1)]


@dataclass(frozen=True, slots=True)
class SolveStats:
    """A task's rollouts: graded samples, how many resolved it, the policies that ran them."""

    samples: int
    resolved: int
    policy: str


class TaskDifficulty(BaseModel):
    """A row of ``difficulty/``: one task of the run."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    repo: str
    strategy: str
    label: Label
    label_source: Literal["rollouts", "proxies"]
    solve_rate: float | None = None
    samples: int = 0
    """Graded samples of decision point 0 (0: not rolled out, or no sample was graded)."""
    resolved: int = 0
    policy: str = ""
    """The samples' policies, each once, comma-separated in sample order ("" without
    rollouts)."""
    pass_at_k: list[float] = Field(default_factory=list)
    lines_changed: int | None = None
    n_fail_to_pass: int = 0
    informativeness: float | None = None
    proxy_points: int = 0
    proxy_label: Label = "medium"


def _proxies(task: Task, golden: Golden | None) -> dict[str, Any]:
    stored = task.metadata.get("difficulty")
    if isinstance(stored, dict) and "points" in stored:
        return stored
    # a task written before proxies were stored: what its golden row still tells
    out = proxies_of(golden.bug_patch if golden else "", task.strategy, task.FAIL_TO_PASS)
    return {**out, "lines_changed": out["lines_changed"] if golden else None}


def difficulty_rows(tasks: Iterable[Task], goldens: Mapping[str, Golden],
                    stats: Mapping[str, SolveStats]) -> list[TaskDifficulty]:
    rows = []
    for task in sorted(tasks, key=lambda t: t.instance_id):
        p = _proxies(task, goldens.get(task.instance_id))
        row = TaskDifficulty(
            instance_id=task.instance_id, repo=task.repo, strategy=task.strategy,
            label=p["label"], label_source="proxies", lines_changed=p["lines_changed"],
            n_fail_to_pass=len(task.FAIL_TO_PASS), informativeness=p["informativeness"],
            proxy_points=p["points"], proxy_label=p["label"])
        s = stats.get(task.instance_id)
        if s is not None:
            row.samples, row.resolved, row.policy = s.samples, s.resolved, s.policy
            if s.samples:
                row.solve_rate = s.resolved / s.samples
                row.pass_at_k = pass_at_k(s.samples, s.resolved)
                row.label, row.label_source = solve_label(row.solve_rate), "rollouts"
        rows.append(row)
    return rows


def write_difficulty(store: Store, run_id: str,
                     stats: Mapping[str, SolveStats]) -> list[TaskDifficulty]:
    """(Re)write the run's whole ``difficulty/`` table from its tasks, goldens and ``stats``
    (every rolled-out task's, recomputed from the rollout records); returns its rows."""
    tasks = store.read_records("tasks", run_id, Task)
    goldens = ({g.instance_id: g for g in store.read_records("golden", run_id, Golden)}
               if store.complete_shards("golden", run_id) else {})
    rows = difficulty_rows(tasks, goldens, stats)
    if rows:
        store.write_records(DIFFICULTY_STAGE, run_id, shard_name(0, 1), rows)
    return rows


def load_difficulty(store: Store, run_id: str,
                    tasks: Iterable[Task] | None = None) -> dict[str, TaskDifficulty]:
    """Each task's difficulty: the run's ``difficulty/`` rows, and for a task without one (no
    rollout run wrote the table) a row from the task's stored proxies. ``tasks``: the run's
    tasks when the caller has read them already."""
    out: dict[str, TaskDifficulty] = {}
    if store.complete_shards(DIFFICULTY_STAGE, run_id):
        out = {r.instance_id: r
               for r in store.read_records(DIFFICULTY_STAGE, run_id, TaskDifficulty)}
    if tasks is None:
        tasks = (store.read_records("tasks", run_id, Task)
                 if store.complete_shards("tasks", run_id) else [])
    missing = [t for t in tasks if t.instance_id not in out]
    out.update({r.instance_id: r for r in difficulty_rows(missing, {}, {})})
    return out
