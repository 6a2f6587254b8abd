"""Rows shaped to train: SFT rows open with a user turn and end on an assistant turn; DPO rows
keep in ``prompt`` all the two sides share, and only the continuations as chosen/rejected."""

from __future__ import annotations

from typing import Any

from swemill.corpus.rows import shape_pair, shape_sft


def _m(role: str, content: str = "", **kw: Any) -> dict[str, Any]:
    out = {"role": role, "content": content, "reasoning_content": None, "tool_calls": None,
           "tool_call_id": None, "name": None}
    out.update(kw)
    return out


def _call(cid: str, cmd: str) -> dict[str, Any]:
    return _m("assistant", tool_calls=[{"id": cid, "type": "function", "function": {
        "name": "bash", "arguments": f'{{"command": "{cmd}"}}'}}])


def _result(cid: str, out: str) -> dict[str, Any]:
    return _m("tool", out, tool_call_id=cid, name="bash")


SYSTEM, TASK = _m("system", "you fix bugs"), _m("user", "fix the cart total")


def test_sft_trims_trailing_user_turns_and_dangling_calls() -> None:
    rows = [SYSTEM, TASK, _call("a", "ls"), _result("a", "cart.py"), _m("assistant", "done"),
            _m("user", "thanks!"), _call("b", "rm -rf /tmp/x")]
    shaped, reason = shape_sft(rows)
    assert reason is None and shaped == rows[:5]


def test_sft_keeps_calls_whose_results_are_all_there_and_drops_empty_turns() -> None:
    rows = [TASK, _m("assistant"), _call("a", "ls"), _result("a", "cart.py")]
    shaped, reason = shape_sft(rows)
    assert reason is None and shaped == [TASK, rows[2], rows[3]]
    half = [TASK, _m("assistant", tool_calls=[*_call("a", "ls")["tool_calls"],
                                               *_call("b", "pwd")["tool_calls"]]),
            _result("a", "x")]
    assert shape_sft(half)[1] == "no_assistant_turn"


def test_sft_without_a_user_turn_is_dropped() -> None:
    assert shape_sft([SYSTEM, _m("assistant", "hello")])[1] == "no_user_turn"


def test_pair_prompt_takes_the_shared_turns_and_sides_start_where_they_differ() -> None:
    shared = [_call("x1", "cat cart.py"), _result("x1", "def total(): ...")]
    chosen = [*shared, _call("c9", "sed -i s/a/b/ cart.py"), _result("c9", ""),
              _m("assistant", "fixed")]
    rejected = [*shared, _m("assistant", "looks fine to me"), _m("user", "are you sure?")]
    # the same calls under other ids must not count as a difference
    rejected[0] = _call("r1", "cat cart.py")
    rejected[1] = _result("r1", "def total(): ...")
    row = {"prompt": [SYSTEM, TASK], "chosen": chosen, "rejected": rejected}
    assert shape_pair(row) is None
    assert [m["role"] for m in row["prompt"]] == ["system", "user", "assistant", "tool"]
    assert row["divergence_depth"] == 4
    assert row["chosen"][0]["tool_calls"][0]["id"] == "call_1"  # renumbered after the prompt's
    assert row["chosen"][-1]["content"] == "fixed"
    assert row["rejected"] == [_m("assistant", "looks fine to me")]  # trailing user trimmed


def test_pairs_differing_only_in_ids_or_with_empty_sides_or_prompts_are_refused() -> None:
    same = {"prompt": [TASK], "chosen": [_call("a", "ls")], "rejected": [_call("b", "ls")]}
    assert shape_pair(same) == "chosen_equals_rejected"
    empty = {"prompt": [TASK], "chosen": [_m("assistant", "x")], "rejected": [_m("assistant")]}
    assert shape_pair(empty) == "empty_side"
    no_prompt = {"prompt": [], "chosen": [_m("assistant", "a")], "rejected": [_m("assistant", "b")]}
    assert shape_pair(no_prompt) == "no_prompt"
