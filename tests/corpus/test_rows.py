"""SFT, DPO and world-model rows: shape, content, drops with reasons, and Parquet round trips."""

from __future__ import annotations

import json

import pytest

from swemill.core.errors import CorpusError
from swemill.core.records import Message, TextBlock, ToolUseBlock
from swemill.core.tools import TOOL_NAMES, ToolCall
from swemill.corpus.assemble import CorpusConfig, assemble
from swemill.corpus.rows import (
    DPO_SCHEMA,
    SFT_SCHEMA,
    WM_SCHEMA,
    chat_messages,
    dpo_row,
    sft_row,
    wm_rows,
)
from swemill.corpus.split import SplitConfig
from swemill.corpus.write import write_corpus
from swemill.store import Store
from swemill.store.parquet import rows_to_table


def test_sft_row_is_trl_conversational(corpus, build):
    traj = corpus.trajectories[0]
    row = sft_row(traj, corpus.tasks[traj.task_id])
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                     "tool", "assistant", "tool"]
    first = row["messages"][2]
    assert first["content"] == "Let me read the module."
    assert first["reasoning_content"] == "The restock of item 0 probably subtracts."
    assert "subtracts" not in first["content"]  # thinking never inside content
    (call,) = first["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "read"
    assert json.loads(call["function"]["arguments"]) == {"path": "inventory/mod.py"}
    tool = row["messages"][3]
    assert (tool["tool_call_id"], tool["name"]) == (call["id"], "read")
    assert [t["function"]["name"] for t in json.loads(row["tools"])] == list(TOOL_NAMES)
    assert (row["repo"], row["strategy"], row["grade"], row["resolved"]) == (
        "acme/inventory", "pr-mirror", 1.0, True)
    assert row["synthetic"] is True and row["policy"] == "scripted:oracle"


def test_reasoning_can_be_dropped(corpus):
    row = sft_row(corpus.trajectories[0], reasoning=False)
    assert all(m["reasoning_content"] is None for m in row["messages"])


def test_anthropic_style_user_turn_with_results_and_text():
    msgs = [
        Message(role="user", content=[TextBlock(text="fix it")]),
        Message(role="assistant", content=[ToolUseBlock(call=ToolCall("bash", {"command": "ls"}))]),
        Message(role="user", content=[
            {"type": "tool_result", "call_id": "call_0_0", "content": "a.py"},
            TextBlock(text="also check b.py"),
        ]),
    ]
    out = chat_messages(msgs)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user"]
    assert out[1]["tool_calls"][0]["id"] == "call_0_0" == out[2]["tool_call_id"]
    assert out[2]["name"] == "bash" and out[3]["content"] == "also check b.py"


def test_dpo_row_prompt_is_shared_history(corpus):
    p = corpus.pairs[0]
    row = dpo_row(p, corpus.tasks[p.task_id])
    assert [m["role"] for m in row["prompt"]] == ["system", "user", "assistant", "tool"]
    assert row["chosen"][0]["role"] == "assistant" and row["rejected"][0]["role"] == "assistant"
    chosen_args = json.loads(row["chosen"][0]["tool_calls"][0]["function"]["arguments"])
    rejected_args = json.loads(row["rejected"][0]["tool_calls"][0]["function"]["arguments"])
    assert chosen_args["new_str"] != rejected_args["new_str"]
    assert row["preference_source"] == "execution"
    assert (row["chosen_score"], row["rejected_score"]) == (1.0, 0.0)


def test_wm_rows_cover_every_step_failures_included(corpus, build):
    t = next(iter(corpus.tasks.values()))
    rows = wm_rows(build.trajectory(t, 0, fixed=False))
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert rows[0]["observation"].startswith(build.system)
    assert "self.count_0 -= quantity_0" in rows[0]["next_observation"]
    assert rows[1]["observation"] == rows[0]["next_observation"]
    assert rows[2]["is_error"] is True and "1 failed" in rows[2]["next_observation"]
    assert [r["reward"] for r in rows] == [0.0, 0.0, 0.0, 0.0]
    assert rows[-1]["done"] and not rows[0]["done"]
    assert json.loads(rows[3]["action"])["tool_calls"] == [{"name": "submit", "args": {}}]
    assert wm_rows(build.trajectory(t, 0))[-1]["reward"] == 1.0


@pytest.mark.parametrize("schema,builder", [(SFT_SCHEMA, "sft"), (DPO_SCHEMA, "dpo"),
                                            (WM_SCHEMA, "wm")])
def test_rows_fit_their_fixed_schema(corpus, schema, builder):
    rows = {
        "sft": lambda: [sft_row(t) for t in corpus.trajectories],
        "dpo": lambda: [dpo_row(p) for p in corpus.pairs],
        "wm": lambda: [r for t in corpus.trajectories for r in wm_rows(t)],
    }[builder]()
    table = rows_to_table(rows, schema)
    assert table.schema.equals(schema) and table.num_rows == len(rows)


def test_assemble_drops_with_reasons(corpus, build):
    t = next(iter(corpus.tasks.values()))
    extra = [
        build.trajectory(t, 0, trajectory_id="flagged", flags=["edited_tests"]),
        build.trajectory(t, 0, trajectory_id="unresolved", fixed=False),
        build.trajectory(t, 0, trajectory_id="withheld", admission="withheld"),
        build.trajectory(t, 0, trajectory_id="dup"),  # same text as the first trajectory
        build.trajectory(t, 0, trajectory_id="leaky", messages=[
            Message(role="system", content=[TextBlock(text=build.system)]),
            Message(role="user", content=[TextBlock(text=t.problem_statement
                                                    + "\nhint: self.count_0 += quantity_0")]),
            *build.conversation(t, 0)[2:]]),
        build.trajectory(t, 0, trajectory_id="foreign", messages=[
            *build.conversation(t, 0)[:2],
            Message(role="assistant", content=[ToolUseBlock(call=ToolCall("other:TodoWrite"))])]),
    ]
    out = assemble(corpus.trajectories + extra, corpus.pairs, tasks=corpus.tasks,
                   goldens=corpus.goldens)
    reasons = {d.item_id: d.reason for d in out.drops}
    assert reasons == {"flagged": "hack_flagged", "unresolved": "unresolved",
                       "withheld": "admission_withheld", "dup": "exact_duplicate",
                       "leaky": "golden_leak", "foreign": "non_algebra_tool"}
    sft = out.counts["corpus.sft"]
    assert sft["in"] == 14 and sft["out"] == 8 and sft["dropped_golden_leak"] == 1
    assert len(out.sft) + len(out.sft_holdout) == 8
    assert len(out.dpo) + len(out.dpo_holdout) == 8
    # The agent's own edit carries the fixed line; that is its work, not a leak.
    assert any("+= quantity_0" in json.dumps(r["messages"]) for r in out.sft + out.sft_holdout)


def test_a_pair_whose_chosen_side_was_flagged_is_never_a_row(corpus):
    hacked = corpus.pairs[0].model_copy(update={
        "pair_id": "hacked", "metadata": {**corpus.pairs[0].metadata,
                                          "chosen_flags": ["runner_tamper"]}})
    out = assemble(corpus.trajectories, [hacked, *corpus.pairs[1:]], tasks=corpus.tasks)
    assert {d.item_id: d.reason for d in out.drops if d.stage == "corpus.dpo"} == {
        "hacked": "chosen_flagged"}
    assert "hacked" not in {r["pair_id"] for r in out.dpo + out.dpo_holdout}
    assert out.counts["corpus.dpo"]["dropped_chosen_flagged"] == 1


def test_secrets_are_scrubbed_in_rows(corpus, build):
    t = next(iter(corpus.tasks.values()))
    key = "AKIA" + "Q3EGRT7XKM2PLW4N"
    msgs = build.conversation(t, 0)
    msgs[3] = msgs[3].model_copy(update={"content": [
        msgs[3].content[0].model_copy(update={"content": f"AWS_ACCESS_KEY_ID={key}"})]})
    out = assemble([build.trajectory(t, 0, messages=msgs)], tasks=corpus.tasks,
                   config=CorpusConfig(split=SplitConfig(holdout_fraction=0.0)))
    text = json.dumps(out.sft + out.sft_holdout)
    assert key not in text and "<REDACTED:aws_access_key>" in text
    assert out.counts["corpus.scrub"]["aws_access_key"] == 1


def test_empty_corpus_is_an_error(corpus, build):
    t = next(iter(corpus.tasks.values()))
    with pytest.raises(CorpusError, match="empty after filtering.*hack_flagged=1"):
        assemble([build.trajectory(t, 0, flags=["x"])])
    with pytest.raises(CorpusError, match="no input rows"):
        assemble([])


def test_write_corpus_round_trips_through_the_store(tmp_path, corpus):
    out = assemble(corpus.trajectories, corpus.pairs, tasks=corpus.tasks, goldens=corpus.goldens,
                   config=CorpusConfig(emit_wm=True))
    store = Store.open(str(tmp_path / "root"))
    written = write_corpus(store, "run1", out)
    assert written["sft"] + written["sft_holdout"] == 8 and written["wm"] == 32
    back = store.read_records("corpus/sft", "run1")
    assert back == out.sft  # JSON columns read back as the JSON text they were written as


def test_rows_carry_the_solve_rate(corpus):
    traj = corpus.trajectories[0]
    task = corpus.tasks[traj.task_id]
    assert sft_row(traj, task)["solve_rate"] is None  # no rollouts measured it
    rated = traj.model_copy(update={"metadata": {**traj.metadata, "solve_rate": 0.25}})
    assert sft_row(rated, task)["solve_rate"] == 0.25
    from_task = task.model_copy(update={"solve_rate": 0.5})
    assert sft_row(traj, from_task)["solve_rate"] == 0.5
    pair = corpus.pairs[0]
    rated_pair = pair.model_copy(update={"metadata": {**pair.metadata, "solve_rate": 0.75}})
    row = dpo_row(rated_pair, corpus.tasks[pair.task_id])
    assert row["solve_rate"] == 0.75
    table = rows_to_table([row], DPO_SCHEMA)
    assert table.column("solve_rate").to_pylist() == [0.75]


def test_near_dedup_ignores_tool_output_but_not_actions():
    from swemill.corpus.assemble import dedup_text

    def msgs(action: str, output: str) -> list[dict]:
        call = {"id": "c", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": action})}}
        return [
            {"role": "system", "content": "shared prompt", "tool_calls": None},
            {"role": "user", "content": "fix the bug", "tool_calls": None},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": output, "tool_calls": None},
        ]

    assert dedup_text(msgs("ls", "a.py")) == dedup_text(msgs("ls", "b.py"))
    assert dedup_text(msgs("ls", "a.py")) != dedup_text(msgs("cat a.py", "a.py"))
    assert "shared prompt" not in dedup_text(msgs("ls", "a.py"))
