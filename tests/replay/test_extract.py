"""extract_dpo_pairs: every source, its rules, and the run's divergence rate."""

from __future__ import annotations

from swemill.core.records import Message, TextBlock, Usage
from swemill.core.tools import ToolCall
from swemill.policies.scripted import ScriptedPolicy
from swemill.replay.extract import PolicyJudge, extract_dpo_pairs, extract_run
from swemill.replay.replies import TeacherReply, reply_from_message

from .conftest import bash, state


def reply(state_id: str, teacher: str, family: str, cmd: str | None) -> TeacherReply:
    msg = bash(cmd, f"t-{teacher}") if cmd is not None else Message(
        role="assistant", content=[TextBlock(text="I think we are done.")])
    return reply_from_message(state_id, teacher, f"openai:{teacher}", family, "realtime", msg,
                              Usage(), [])


def test_consensus_of_three_families_rejects_the_outlier_original() -> None:
    s = state(action="rm -rf build")
    replies = [reply(s.state_id, "a", "qwen", "ls"), reply(s.state_id, "b", "meta", "ls  "),
               reply(s.state_id, "c", "mistral", "ls")]
    (pair,) = extract_dpo_pairs(s, replies)
    assert pair.preference_source == "consensus"
    assert pair.metadata["rejected_by"] == "original"
    assert pair.chosen[0].tool_calls[0].args == {"command": "ls"}
    assert pair.rejected[0].tool_calls[0].args == {"command": "rm -rf build"}
    assert pair.prompt == s.messages and pair.state_id == s.state_id
    assert pair.metadata["votes"] == 3 and pair.metadata["voters"] == 4


def test_consensus_needs_three_families_and_a_strict_majority() -> None:
    s = state(action="rm -rf build")
    two_families = [reply(s.state_id, "a", "qwen", "ls"), reply(s.state_id, "b", "qwen", "ls"),
                    reply(s.state_id, "c", "meta", "ls")]
    assert extract_dpo_pairs(s, two_families) == []
    assert extract_dpo_pairs(s, two_families, min_families=2)[0].preference_source == "consensus"
    split = [reply(s.state_id, "a", "qwen", "ls"), reply(s.state_id, "b", "meta", "pwd"),
             reply(s.state_id, "c", "mistral", "whoami")]
    assert extract_dpo_pairs(s, split) == []


def test_teacher_outlier_is_rejected_when_the_original_is_in_the_majority() -> None:
    s = state(action="ls")
    replies = [reply(s.state_id, "a", "qwen", "ls"), reply(s.state_id, "b", "meta", "ls"),
               reply(s.state_id, "c", "mistral", "cat /etc/passwd")]
    (pair,) = extract_dpo_pairs(s, replies)
    assert (pair.metadata["rejected_by"], pair.preference_source) == ("c", "consensus")
    assert pair.metadata["chosen_by"] in {"a", "b"}


def test_error_signal_prefers_a_differing_teacher_over_the_failed_original() -> None:
    s = state(action="cat missing.txt", error=True)
    replies = [reply(s.state_id, "a", "qwen", "ls"), reply(s.state_id, "b", "meta", "ls"),
               reply(s.state_id, "c", "mistral", "cat missing.txt")]
    pairs = extract_dpo_pairs(s, replies)
    assert [p.preference_source for p in pairs] == ["error_signal"]
    assert pairs[0].metadata["rejected_by"] == "original"
    # No error, no error_signal; the same disagreement with 2 families gives nothing.
    assert extract_dpo_pairs(state(action="cat missing.txt"), replies) == []


def test_execution_scores_decide_first_and_ties_give_nothing() -> None:
    s = state(action="ls", error=True)
    replies = [reply(s.state_id, "a", "qwen", "pytest"), reply(s.state_id, "b", "meta", "ls")]

    def score(_s: object, m: Message) -> float:
        return 1.0 if m.tool_calls and m.tool_calls[0].args["command"] == "pytest" else 0.0

    pairs = extract_dpo_pairs(s, replies, scorer=score)
    assert pairs[0].preference_source == "execution"
    assert (pairs[0].chosen_score, pairs[0].rejected_score) == (1.0, 0.0)
    # b and the original share an action, and error_signal would pair a over the original
    # again: one (chosen, rejected) action pair is emitted once, by its strongest source.
    assert [(p.metadata["rejected_by"], p.preference_source) for p in pairs] == [
        ("original", "execution")]
    assert extract_dpo_pairs(s, replies[1:], scorer=lambda *_: 0.5) == []


def test_judge_is_asked_only_where_actions_differ() -> None:
    s = state(action="ls")
    judge = PolicyJudge(ScriptedPolicy(["B", "A"]), name="scripted-judge")
    replies = [reply(s.state_id, "a", "qwen", "pytest -q"), reply(s.state_id, "b", "meta", "ls")]
    (pair,) = extract_dpo_pairs(s, replies, judge=judge, min_families=5)
    assert pair.preference_source == "judge" and pair.metadata["judge"] == "scripted-judge"
    assert pair.metadata["chosen_by"] == "a"


def test_invalid_teacher_actions_are_not_candidates() -> None:
    s = state(action="rm -rf build")
    bad = Message(role="assistant", content=[])
    bad.content.append(bash("x").content[0].model_copy(
        update={"call": ToolCall("launch_rockets", {"n": 1})}))
    broken = reply_from_message(s.state_id, "c", "x", "mistral", "realtime", bad, Usage(), [])
    assert broken.status == "invalid_action" and not broken.usable
    replies = [reply(s.state_id, "a", "qwen", "ls"), reply(s.state_id, "b", "meta", "ls"), broken]
    assert extract_dpo_pairs(s, replies) == []  # two families left: no consensus


def test_run_divergence_rate_and_counts() -> None:
    states = [state(f"s::{i:04d}", action="ls") for i in range(4)]
    replies = []
    for i, s in enumerate(states):
        other = "ls" if i < 3 else "pwd"  # only the last state diverges
        replies += [reply(s.state_id, "a", "qwen", other), reply(s.state_id, "b", "meta", "ls"),
                    reply(s.state_id, "c", "mistral", "ls")]
    pairs, stats = extract_run(states + [state("s::0009")], replies)
    assert stats.states == 5 and stats.states_with_replies == 4
    assert stats.divergent_states == 1 and stats.divergence_rate == 0.25
    assert stats.as_counts()["pairs_consensus"] == len(pairs) == 1
    assert pairs[0].metadata["rejected_by"] == "a"
