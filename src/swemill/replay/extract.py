"""Preference pairs from disagreement at a state.

The candidates at a state are the original agent's action and every usable teacher reply.
Actions are compared by their canonical keys (:meth:`ToolCall.canonical_key`), so two calls
that mean the same thing agree whatever their ids, paths or whitespace. Each pair records
where its preference came from, strongest first:

``execution``
    a scorer ran the candidates in the state's task environment (only for states grounded in
    one); the higher score is chosen. Ties give no pair.
``error_signal``
    the original action's tool result was an error and a teacher did something else: the
    teacher's action is chosen over the original.
``consensus``
    one action is shared by candidates of at least ``min_families`` model families and is the
    strict majority; every candidate that differs is an outlier and rejected against it.
``judge``
    optional: a judge compares the original with a differing teacher action.

A (chosen, rejected) pair of actions is emitted once per state, by its strongest source.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from swemill.core.errors import SwemillError
from swemill.core.records import Message, PreferencePair, PreferenceSource, TextBlock
from swemill.policies.budget import call_with_budget
from swemill.policies.policy import family_of
from swemill.policies.textproto import render_call
from swemill.replay.replies import TeacherReply
from swemill.traces.states import TraceState

__all__ = ["Candidate", "Judge", "PolicyJudge", "ExtractStats", "candidates_of",
           "extract_dpo_pairs", "extract_run"]

ORIGINAL = "original"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One action at a state: who proposed it, their family, the message and its key."""

    by: str
    family: str
    message: Message
    key: tuple[str, ...]


class Judge(Protocol):
    name: str

    def prefer(self, state: TraceState, first: Message, second: Message) -> int | None:
        """0 when ``first`` is better, 1 when ``second`` is, None when it cannot tell."""


Scorer = Callable[[TraceState, Message], float | None]


def candidates_of(state: TraceState, replies: Iterable[TeacherReply]) -> list[Candidate]:
    original_family = str(state.metadata.get("family", "")) or _family_from_model(state.model)
    out = [Candidate(ORIGINAL, original_family, state.response, tuple(state.action_keys))]
    # In teacher order, so the pairs do not depend on the order replies arrived or were read.
    for r in sorted(replies, key=lambda r: r.teacher):
        if r.usable and r.message is not None:
            out.append(Candidate(r.teacher, r.family, r.message, tuple(r.action_keys)))
    return out


def _family_from_model(model: str) -> str:
    return family_of(model) if model else "unknown"


def _pair_id(state_id: str, chosen: Candidate, rejected: Candidate) -> str:
    blob = "\x1f".join([state_id, chosen.by, *chosen.key, "|", rejected.by, *rejected.key])
    return "rp-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


def _pair(state: TraceState, chosen: Candidate, rejected: Candidate, source: PreferenceSource,
          scores: tuple[float | None, float | None] = (None, None),
          extra: dict[str, Any] | None = None) -> PreferencePair:
    return PreferencePair(
        pair_id=_pair_id(state.state_id, chosen, rejected), prompt=list(state.messages),
        chosen=[chosen.message], rejected=[rejected.message], preference_source=source,
        chosen_score=scores[0], rejected_score=scores[1], state_id=state.state_id,
        metadata={"source": "replay", "policy": chosen.by, "chosen_by": chosen.by,
                  "rejected_by": rejected.by, "chosen_family": chosen.family,
                  "rejected_family": rejected.family, "trajectory_id": state.trajectory_id,
                  **(extra or {})},
    )


def _execution(state: TraceState, cands: list[Candidate], scorer: Scorer) -> list[PreferencePair]:
    scored = [(c, scorer(state, c.message)) for c in cands]
    known = [(c, s) for c, s in scored if s is not None]
    if len(known) < 2:
        return []
    best = max(known, key=lambda x: x[1])
    return [_pair(state, best[0], c, "execution", (best[1], s))
            for c, s in known if s < best[1] and c.key != best[0].key]


def _error_signal(state: TraceState, cands: list[Candidate]) -> list[PreferencePair]:
    if not state.has_error:
        return []
    original = cands[0]
    seen: set[tuple[str, ...]] = set()
    out = []
    for c in cands[1:]:
        if c.key != original.key and c.key and c.key not in seen:
            seen.add(c.key)
            out.append(_pair(state, c, original, "error_signal"))
    return out


def _consensus(state: TraceState, cands: list[Candidate], min_families: int
               ) -> list[PreferencePair]:
    votes = Counter(c.key for c in cands)
    key, n = votes.most_common(1)[0]
    if n * 2 <= len(cands):
        return []  # no strict majority
    families = {c.family for c in cands if c.key == key}
    if len(families) < min_families:
        return []
    majority = [c for c in cands if c.key == key]
    # A teacher's message stands for the majority when there is one (it is clean of the
    # original agent's thinking and ids); else the original's.
    winner = next((c for c in majority if c.by != ORIGINAL), majority[0])
    extra = {"votes": n, "voters": len(cands), "majority_families": sorted(families)}
    return [_pair(state, winner, c, "consensus", extra=extra) for c in cands if c.key != key]


def _judged(state: TraceState, cands: list[Candidate], judge: Judge) -> list[PreferencePair]:
    original = cands[0]
    out, seen = [], set()
    for c in cands[1:]:
        if c.key == original.key or c.key in seen:
            continue
        seen.add(c.key)
        verdict = judge.prefer(state, original.message, c.message)
        if verdict in (0, 1):
            chosen, rejected = (original, c) if verdict == 0 else (c, original)
            out.append(_pair(state, chosen, rejected, "judge", extra={"judge": judge.name}))
    return out


def extract_dpo_pairs(
    state: TraceState,
    replies: Iterable[TeacherReply],
    *,
    min_families: int = 3,
    scorer: Scorer | None = None,
    judge: Judge | None = None,
) -> list[PreferencePair]:
    """The preference pairs of one state (see the module docstring for the sources)."""
    cands = candidates_of(state, replies)
    if len(cands) < 2:
        return []
    found: list[PreferencePair] = []
    if scorer is not None:
        found += _execution(state, cands, scorer)
    found += _error_signal(state, cands)
    found += _consensus(state, cands, min_families)
    if judge is not None:
        found += _judged(state, cands, judge)
    out, seen = [], set()
    for pair in found:  # strongest source first: a later duplicate is dropped
        marker = (pair.metadata["chosen_by"], pair.metadata["rejected_by"])
        keyed = _keys(pair)
        if marker in seen or keyed in seen:
            continue
        seen.update({marker, keyed})
        out.append(pair)
    return out


def _keys(pair: PreferencePair) -> tuple[str, str]:
    def key(ms: list[Message]) -> str:
        return "/".join(c.canonical_key() for m in ms for c in m.tool_calls) or "text"

    return key(pair.chosen), key(pair.rejected)


@dataclass(slots=True)
class ExtractStats:
    states: int = 0
    states_with_replies: int = 0
    divergent_states: int = 0
    """States where at least one usable teacher action differs from the original's."""
    pairs_by_source: Counter[str] = field(default_factory=Counter)

    @property
    def divergence_rate(self) -> float:
        return self.divergent_states / self.states_with_replies if self.states_with_replies else 0.0

    def as_counts(self) -> dict[str, int]:
        out = {"states": self.states, "states_with_replies": self.states_with_replies,
               "divergent_states": self.divergent_states}
        out.update({f"pairs_{k}": v for k, v in sorted(self.pairs_by_source.items())})
        out["pairs"] = sum(self.pairs_by_source.values())
        return out


def extract_run(states: Sequence[TraceState], replies: Iterable[TeacherReply], *,
                min_families: int = 3, scorer: Scorer | None = None,
                judge: Judge | None = None) -> tuple[list[PreferencePair], ExtractStats]:
    """Pairs for every state of a run, and the run's divergence statistics."""
    by_state: dict[str, list[TeacherReply]] = defaultdict(list)
    for r in replies:
        by_state[r.state_id].append(r)
    stats, pairs = ExtractStats(), []
    for state in states:
        stats.states += 1
        mine = [r for r in by_state.get(state.state_id, []) if r.usable]
        if not mine:
            continue
        stats.states_with_replies += 1
        original = tuple(state.action_keys)
        if any(tuple(r.action_keys) != original for r in mine):
            stats.divergent_states += 1
        got = extract_dpo_pairs(state, mine, min_families=min_families, scorer=scorer,
                                judge=judge)
        stats.pairs_by_source.update(p.preference_source for p in got)
        pairs += got
    return pairs, stats


class PolicyJudge:
    """A judge backed by any policy: it is shown the history and two actions, A and B, and
    must answer with the letter of the better one."""

    def __init__(self, policy: Any, *, name: str | None = None, budget: Any = None) -> None:
        self.policy = policy
        self.budget = budget
        """A :class:`swemill.policies.budget.Budget`: judge calls spend from the run's budget."""
        self.name: str = str(name or getattr(policy, "name", "judge"))

    def prefer(self, state: TraceState, first: Message, second: Message) -> int | None:
        def show(m: Message) -> str:
            calls = "\n".join(render_call(c) for c in m.tool_calls)
            return (m.text + "\n" + calls).strip() or "(no action)"

        history = "\n\n".join(f"[{m.role}] {m.text or ''}".strip() for m in state.messages[-6:])
        question = (f"Conversation so far (last turns):\n{history}\n\nAction A:\n{show(first)}"
                    f"\n\nAction B:\n{show(second)}\n\nWhich action is better as the next step? "
                    "Answer with exactly one letter: A or B.")
        asked = [Message(role="user", content=[TextBlock(text=question)])]
        if self.budget is None:
            reply = self.policy.act(asked, [])
        else:

            try:
                reply = call_with_budget(self.policy, self.budget, asked, [])
            except SwemillError:  # refused by the budget or failed: no verdict
                return None
        answer = reply.message.text.strip().upper()[:1]
        return {"A": 0, "B": 1}.get(answer)
