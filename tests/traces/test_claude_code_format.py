"""The real session format: merged responses, the parentUuid tree, sidechains, sub-agents."""

from __future__ import annotations

from pathlib import Path

from swemill.core.records import TextBlock, ThinkingBlock, Trajectory
from swemill.traces.claude_code import IngestOptions, ingest_session_file
from swemill.traces.states import IngestCounts, TraceState
from swemill_testkit.fake_sessions import SessionWriter, text, thinking, tool_use

CWD = "/home/dev/proj"


def _run(path: Path, opts: IngestOptions | None = None) -> tuple[
    IngestCounts, list[TraceState], dict[str, Trajectory]
]:
    counts = IngestCounts()
    items = list(ingest_session_file(path, counts, set(), opts))
    states = [i for i in items if isinstance(i, TraceState)]
    trajs = {i.trajectory_id: i for i in items if isinstance(i, Trajectory)}
    return counts, states, trajs


def test_lines_of_one_response_merge_and_usage_counts_once(tmp_path: Path) -> None:
    w = SessionWriter("merge", CWD)
    w.user("fix the failing test")
    # One response written as four lines (thinking, text, two tool calls), same message.id.
    w.assistant([thinking("look first"), text("Reading both files."),
                 tool_use("t1", "Read", {"file_path": f"{CWD}/a.py"}),
                 tool_use("t2", "Read", {"file_path": f"{CWD}/b.py", "offset": 5, "limit": 10})],
                {"input_tokens": 100, "output_tokens": 40, "cache_read": 900, "cache_write": 50})
    w.tool_result("t1", "a = 1")
    w.tool_result("t2", "No such file", is_error=True)
    w.assistant([text("Done.")], {"input_tokens": 7, "output_tokens": 3})
    counts, states, trajs = _run(w.write(tmp_path / "merge.jsonl"))
    assert counts.record_types == {"user": 3, "assistant": 5}
    assert counts.assistant_turns == 2
    assert counts.tool_calls == 2
    # Four lines repeat the usage; it is counted once: 100 + 7, 40 + 3, 900, 50.
    assert (counts.input_tokens, counts.output_tokens) == (107, 43)
    assert (counts.cache_read_tokens, counts.cache_write_tokens) == (900, 50)
    first = states[0]
    assert [type(b).__name__ for b in first.response.content] == [
        "ThinkingBlock", "TextBlock", "ToolUseBlock", "ToolUseBlock"]
    assert first.response.content[0].signature  # type: ignore[union-attr]
    assert [a.args for a in first.actions] == [
        {"path": "a.py"}, {"path": "b.py", "start_line": 5, "end_line": 14}]
    assert [(r.call_id, r.is_error) for r in first.results] == [("t1", False), ("t2", True)]
    assert first.has_error and counts.tool_errors == 1
    assert states[1].prefix_len == 4  # user, assistant, tool, tool
    (traj,) = trajs.values()
    assert traj.usage.input_tokens == 107


def test_thinking_can_be_dropped(tmp_path: Path) -> None:
    w = SessionWriter("think", CWD)
    w.user("hi")
    w.assistant([thinking("secret plan"), text("hello")], {"output_tokens": 5})
    path = w.write(tmp_path / "think.jsonl")
    _, kept, _ = _run(path)
    assert isinstance(kept[0].response.content[0], ThinkingBlock)
    _, dropped, _ = _run(path, IngestOptions(keep_thinking=False))
    assert [type(b) for b in dropped[0].response.content] == [TextBlock]


def test_rewind_makes_a_branch_kept_apart_from_the_main_chain(tmp_path: Path) -> None:
    w = SessionWriter("rw", CWD)
    w.user("add a flag")
    w.assistant([text("Plan A")], {"output_tokens": 10})
    fork = w.head
    w.user("do it with argparse")
    w.assistant([tool_use("a1", "Bash", {"command": "git   status"})], {"output_tokens": 11})
    w.tool_result("a1", "clean")
    w.assistant([text("Old path done")], {"output_tokens": 12})
    # The user rewinds to after "Plan A" and asks differently: a new branch, written later.
    w.head = fork
    w.user("use click instead")
    w.assistant([text("Click it is")], {"output_tokens": 13})
    counts, states, trajs = _run(w.write(tmp_path / "rw.jsonl"))
    main, branch = trajs["claude_code:rw"], trajs["claude_code:rw/branch-1"]
    # The main chain is the path to the latest leaf: the click conversation.
    assert [m.text for m in main.messages] == [
        "add a flag", "Plan A", "use click instead", "Click it is"]
    assert branch.parent_id == "claude_code:rw" and branch.branch_point == 2
    assert branch.metadata["branch"] == "branch"
    assert [m.role for m in branch.messages] == [
        "user", "assistant", "user", "assistant", "tool", "assistant"]
    # Four responses in the file, each a state once; the shared "Plan A" is not repeated.
    assert counts.assistant_turns == 4 and counts.branches == 1
    assert counts.output_tokens == 10 + 11 + 12 + 13
    by_id = {s.state_id: s for s in states}
    assert set(by_id) == {"rw::0000", "rw::0001", "rw/branch-1::0001", "rw/branch-1::0002"}
    assert by_id["rw/branch-1::0001"].branch == "branch"
    assert by_id["rw/branch-1::0001"].actions[0].canonical().args == {"command": "git status"}


def test_sidechains_are_kept_apart(tmp_path: Path) -> None:
    main = SessionWriter("sc", CWD)
    side = SessionWriter("sc", CWD, sidechain=True)
    main.user("explore the repo")
    main.assistant([tool_use("task1", "Task", {"prompt": "find the config loader"})],
                   {"output_tokens": 20})
    side.user("find the config loader")
    side.assistant([tool_use("g1", "Grep", {"pattern": "load_config"})], {"output_tokens": 5})
    side.tool_result("g1", "src/config.py:10")
    side.assistant([text("It is in src/config.py")], {"output_tokens": 6})
    main.tool_result("task1", "It is in src/config.py")
    main.assistant([text("Found it.")], {"output_tokens": 7})
    path = tmp_path / "sc.jsonl"
    # Interleave as the program does: the sidechain lines land between the main ones.
    main_lines, side_lines = main.lines, side.lines
    main.lines = main_lines[:2] + side_lines + main_lines[2:]
    main.write(path)
    counts, states, trajs = _run(path)
    assert counts.sidechains == 1 and counts.sessions == 1
    top, sub = trajs["claude_code:sc"], trajs["claude_code:sc/sidechain-1"]
    assert all("load_config" not in str(m.content) for m in top.messages)
    assert [m.role for m in top.messages] == ["user", "assistant", "tool", "assistant"]
    assert sub.parent_id == "claude_code:sc"
    assert sub.messages[1].tool_calls[0].name == "search"
    assert {s.branch for s in states} == {"main", "sidechain"}
    assert counts.assistant_turns == 4 and counts.output_tokens == 20 + 5 + 6 + 7


def test_subagent_files_are_their_own_sessions_linked_to_the_parent(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-home-dev-proj"
    w = SessionWriter("parent-sess", CWD)
    w.user("go")
    w.assistant([text("ok")], {"output_tokens": 1})
    w.write(project / "parent-sess.jsonl")
    sub = SessionWriter("parent-sess", CWD, sidechain=True, agent_id="a1b2")
    sub.user("sub task")
    sub.assistant([text("sub done")], {"output_tokens": 2})
    sub_path = sub.write(project / "parent-sess" / "subagents" / "agent-a1b2.jsonl")
    counts, states, trajs = _run(sub_path)
    assert counts.subagent_sessions == 1 and counts.sessions == 0
    (traj,) = trajs.values()
    assert traj.trajectory_id == "claude_code:parent-sess/agent-a1b2"
    assert traj.parent_id == "claude_code:parent-sess"
    assert states[0].state_id == "parent-sess/agent-a1b2::0000"
    assert states[0].branch == "subagent"


def test_compaction_keeps_the_chain_and_states_see_only_the_summary_onwards(
    tmp_path: Path,
) -> None:
    w = SessionWriter("cmp", CWD)
    w.user("long task")
    w.assistant([text("step 1")], {"output_tokens": 1})
    w.compact("Summary: the user wants X; step 1 is done.")
    w.user("continue")
    w.assistant([text("step 2")], {"output_tokens": 2})
    counts, states, trajs = _run(w.write(tmp_path / "cmp.jsonl"))
    (traj,) = trajs.values()
    assert [m.text for m in traj.messages] == [
        "long task", "step 1", "Summary: the user wants X; step 1 is done.", "continue", "step 2"]
    assert traj.metadata["compactions"] == [2]
    assert counts.skipped_types == {"system": 1}
    assert states[1].context_start == 2
    assert [m.text for m in states[1].messages] == [
        "Summary: the user wants X; step 1 is done.", "continue"]


def test_unknown_and_non_message_records_are_counted_and_skipped(tmp_path: Path) -> None:
    w = SessionWriter("kinds", CWD)
    w.raw({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}})
    w.user("hi")
    w.raw({"type": "queue-operation", "operation": "enqueue"})
    w.raw({"type": "brand-new-kind", "payload": [1, 2, 3]})
    w.raw({"type": "ai-title", "title": "greeting"})
    w.raw({"no_type_at_all": True})
    w.assistant([text("hello")], {"output_tokens": 3})
    w.raw({"type": "summary", "summary": "A greeting", "leafUuid": w.head})
    counts, states, trajs = _run(w.write(tmp_path / "kinds.jsonl"))
    assert counts.assistant_turns == 1
    assert counts.skipped_types == {
        "file-history-snapshot": 1, "queue-operation": 1, "brand-new-kind": 1, "ai-title": 1,
        "<no type>": 1, "summary": 1}
    assert next(iter(trajs.values())).metadata["summaries"] == ["A greeting"]


def test_a_session_id_seen_twice_keeps_both_apart(tmp_path: Path) -> None:
    w = SessionWriter("dup", CWD)
    w.user("hi")
    w.assistant([text("hello")], {"output_tokens": 3})
    a, b = w.write(tmp_path / "a.jsonl"), w.write(tmp_path / "b.jsonl")
    counts, keys = IngestCounts(), set()
    ids = [i.state_id for p in (a, b) for i in ingest_session_file(p, counts, keys)
           if isinstance(i, TraceState)]
    assert ids == ["dup::0000", "dup#2::0000"]


def test_late_records_off_the_chain_do_not_pick_the_main_chain(tmp_path: Path) -> None:
    w = SessionWriter("late", CWD)
    first = w.user("start")
    w.assistant([text("one")], {"output_tokens": 1})
    w.user("next")
    w.assistant([text("two")], {"output_tokens": 2})
    last = w.head
    # Written after the last message: a progress line on an old node, a timing note below
    # the last message. Neither is a message; the chain still ends at "two".
    w.raw({"type": "progress", "uuid": "p1", "parentUuid": first, "data": {}})
    w.raw({"type": "system", "subtype": "turn_duration", "uuid": "s1", "parentUuid": last})
    counts, states, trajs = _run(w.write(tmp_path / "late.jsonl"))
    (traj,) = trajs.values()
    assert [m.text for m in traj.messages] == ["start", "one", "next", "two"]
    assert counts.branches == 0
    assert counts.dropped == {"dead_leaf": 1}  # the progress line; the timing note is a tail
    assert counts.skipped_types == {"progress": 1, "system": 1}


def test_rewind_to_the_first_prompt_is_a_second_root(tmp_path: Path) -> None:
    w = SessionWriter("root2", CWD)
    w.user("first try")
    w.assistant([text("answer one")], {"output_tokens": 1})
    w.head = None  # the user edits the very first prompt: a new root, parentUuid null
    w.user("second try")
    w.assistant([text("answer two")], {"output_tokens": 2})
    counts, states, trajs = _run(w.write(tmp_path / "root2.jsonl"))
    main, alt = trajs["claude_code:root2"], trajs["claude_code:root2/branch-1"]
    assert [m.text for m in main.messages] == ["second try", "answer two"]
    assert [m.text for m in alt.messages] == ["first try", "answer one"]
    assert alt.branch_point == 0 and counts.assistant_turns == 2


def test_tool_results_given_as_blocks_keep_text_and_mark_images(tmp_path: Path) -> None:
    w = SessionWriter("blocks", CWD)
    w.user("show me")
    w.assistant([tool_use("r1", "Read", {"file_path": f"{CWD}/shot.png"})], {"output_tokens": 1})
    w.user([{"type": "tool_result", "tool_use_id": "r1", "content": [
        {"type": "text", "text": "Image read"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVB"}},
    ]}, {"type": "text", "text": "what is it?"}])
    _, states, trajs = _run(w.write(tmp_path / "blocks.jsonl"))
    assert states[0].results[0].content == "Image read\n[image: image/png]"
    roles = [m.role for m in next(iter(trajs.values())).messages]
    assert roles == ["user", "assistant", "tool", "user"]  # results and text split apart
