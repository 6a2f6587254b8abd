"""Oracle and noisy oracle: diffs become ordinary tool calls that rebuild the fixed tree.

A tiny executor in this file gives the tools their meaning on a temporary directory (read,
edit = exact single str_replace, write, bash via a real subprocess), so the test checks the
calls, not the oracle's own idea of them.
"""

from __future__ import annotations

import difflib
import random
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swemill.agent.actions import clip, number_lines
from swemill.core.errors import PolicyError
from swemill.core.records import Message, TextBlock, ToolResultBlock
from swemill.core.tools import ToolCall, tool_schemas, validate_call
from swemill.policies.patchplan import edit_pairs, parse_patch
from swemill.policies.policy import policy_from_spec
from swemill.policies.scripted import NoisyOraclePolicy, OraclePolicy, strip_line_numbers

TOOLS = tool_schemas()

BROKEN = {
    "pkg/calc.py": (
        "def add(a, b):\n    return a - b\n\n\n"
        + "".join(f"def f{i}(x):\n    return x\n\n\n" for i in range(12))
        + "def mul(a, b):\n    return a + b\n"
    ),
    # The same block twice: an edit of the second one needs extra context to be unique.
    "pkg/dup.py": "x = 1\ny = 2\nz = 3\n\n" + "if x:\n    y = 2\n" * 2 + "end = True",
    "pkg/old.py": "OLD = 1\n",
}
FIXED = {
    "pkg/calc.py": BROKEN["pkg/calc.py"]
    .replace("a - b", "a + b")
    .replace("def mul(a, b):\n    return a + b\n", "def mul(a, b):\n    return a * b\n"),
    "pkg/dup.py": "x = 1\ny = 2\nz = 3\n\nif x:\n    y = 2\nif x:\n    y = 3\nend = True",
    "pkg/new.py": "NEW = 2\n",
}


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.parts}


def _git_diff(tmp: Path, before: dict[str, str], after: dict[str, str]) -> str:
    repo = tmp / "diffrepo"
    repo.mkdir()
    run = {"cwd": repo, "check": True, "capture_output": True, "text": True}
    subprocess.run(["git", "init", "-q"], **run)  # type: ignore[call-overload]
    _write_tree(repo, before)
    subprocess.run(["git", "add", "-A"], **run)  # type: ignore[call-overload]
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"],
                   **run)  # type: ignore[call-overload]
    for rel in before:
        (repo / rel).unlink()
    _write_tree(repo, after)
    subprocess.run(["git", "add", "-A"], **run)  # type: ignore[call-overload]
    out = subprocess.run(["git", "diff", "--cached"], **run)  # type: ignore[call-overload]
    return str(out.stdout)


def _execute(root: Path, call: ToolCall, numbered: bool,
             limit: int | None = None) -> tuple[str, bool]:
    """The tools' meaning, on a plain directory; with ``limit``, ``read`` answers as swemill's
    own does (numbered lines of the asked range, clipped to ``limit`` characters)."""
    assert validate_call(call) == [], call
    args = call.args
    path = root / args.get("path", ".")
    if call.name == "read":
        if not path.is_file():
            return f"no such file: {args['path']}", True
        text = path.read_text()
        if limit is not None:
            shown = number_lines(text, args.get("start_line") or 1, args.get("end_line"))
            return clip(shown, limit), False
        if numbered:  # like `cat -n`
            text = "".join(f"{i:6d}\t{line}" for i, line in
                           enumerate(text.splitlines(keepends=True), 1))
        return text, False
    if call.name == "edit":
        text = path.read_text()
        if text.count(args["old_str"]) != 1:
            return f"old_str occurs {text.count(args['old_str'])} times", True
        path.write_text(text.replace(args["old_str"], args["new_str"]))
        return "edited", False
    if call.name == "write":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(args["content"])
        return "written", False
    if call.name == "bash":
        proc = subprocess.run(["bash", "-c", args["command"]], cwd=root, capture_output=True,
                              text=True, timeout=30)
        return proc.stdout + proc.stderr, proc.returncode != 0
    return "ok", False  # run_tests, submit


def _rollout(policy: OraclePolicy, root: Path, numbered: bool = False,
             limit: int | None = None) -> list[ToolCall]:
    messages = [Message(role="user", content=[TextBlock(text="Fix the bug.")])]
    calls: list[ToolCall] = []
    for _ in range(100):
        reply = policy.act(messages, TOOLS)
        messages.append(reply.message)
        (call,) = reply.message.tool_calls
        calls.append(call)
        if call.name == "submit":
            return calls
        content, is_error = _execute(root, call, numbered, limit)
        assert not is_error or call.name == "read", content
        messages.append(Message(role="tool", content=[
            ToolResultBlock(call_id=call.id, content=content, is_error=is_error)]))
    raise AssertionError("the oracle never submitted")


@pytest.mark.parametrize("numbered", [False, True])
def test_oracle_rebuilds_the_fixed_tree(tmp_path: Path, numbered: bool) -> None:
    patch = _git_diff(tmp_path, BROKEN, FIXED)
    work = tmp_path / "work"
    _write_tree(work, BROKEN)
    calls = _rollout(OraclePolicy(patch), work, numbered)
    assert _tree(work) == FIXED
    names = [c.name for c in calls]
    assert names[:2] == ["read", "read"] and names[-2:] == ["run_tests", "submit"]
    assert names.count("edit") == 3 and "write" in names
    assert len({c.id for c in calls}) == len(calls)  # every result pairs with one call


def _long(blocks: int, *, end: str = "\n") -> str:
    """A long module whose blocks repeat: the context of an edit in one is unique only with
    the surrounding lines (``# block N``)."""
    return "".join(f"# block {i}\ndef f(x):\n    if x:\n        return x + 1\n    return 0\n\n"
                   for i in range(blocks)).rstrip("\n") + end


@pytest.mark.parametrize("end", ["\n", ""])
def test_a_file_whose_read_is_clipped_is_read_in_pages(tmp_path: Path, end: str) -> None:
    """A long file's ``read`` shows its head and tail only; the oracle reads the lines left
    out with ranged reads until it has the whole file, and so can widen an edit's context
    until it is unique (without them the edit's text occurs 60 times and fails)."""
    before = {"pkg/long.py": _long(60, end=end)}
    fixed = before["pkg/long.py"].replace("# block 31\ndef f(x):\n    if x:\n        return x + 1",
                                          "# block 31\ndef f(x):\n    if x:\n        return x + 2")
    assert fixed != before["pkg/long.py"]
    patch = _git_diff(tmp_path, before, {"pkg/long.py": fixed})
    work = tmp_path / "work"
    _write_tree(work, before)
    calls = _rollout(OraclePolicy(patch), work, limit=2000)
    assert _tree(work) == {"pkg/long.py": fixed}
    pages = [c for c in calls if c.name == "read" and "start_line" in c.args]
    assert pages and all(c.args["end_line"] >= c.args["start_line"] for c in pages)
    assert len({c.id for c in calls}) == len(calls)


def test_paging_stops_at_a_line_longer_than_the_output(tmp_path: Path) -> None:
    """A line that no page can show whole (minified code) ends the paging: the oracle goes
    on with what it has (the hunk's own text) instead of asking forever."""
    text = "a = 1\n" * 200 + "b = '" + "x" * 5000 + "'\n" + "c = 1\n" * 200 + "d = 2\n"
    patch = _git_diff(tmp_path, {"m.py": text}, {"m.py": text.replace("d = 2", "d = 3")})
    work = tmp_path / "work"
    _write_tree(work, {"m.py": text})
    calls = _rollout(OraclePolicy(patch), work, limit=1500)
    assert _tree(work) == {"m.py": text.replace("d = 2", "d = 3")}
    assert len(calls) < 40


def test_oracle_without_read_results_falls_back_to_hunk_text(tmp_path: Path) -> None:
    patch = _git_diff(tmp_path, {"a.py": "a = 1\nb = 2\n"}, {"a.py": "a = 1\nb = 3\n"})
    policy = OraclePolicy(patch)
    plan = policy.plan([])  # no read results in the history
    assert plan[1] == ToolCall("edit", {"path": "a.py", "old_str": "a = 1\nb = 2\n",
                                        "new_str": "a = 1\nb = 3\n"})


def test_no_newline_at_end_of_file(tmp_path: Path) -> None:
    before, after = {"a.txt": "one\ntwo"}, {"a.txt": "one\nTWO"}
    patch = _git_diff(tmp_path, before, after)
    assert "No newline at end of file" in patch
    work = tmp_path / "work"
    _write_tree(work, before)
    _rollout(OraclePolicy(patch), work)
    assert _tree(work) == after


def test_oracle_refuses_what_is_not_a_diff() -> None:
    with pytest.raises(PolicyError, match="changes no files"):
        OraclePolicy("this is not a patch\n")


def test_strip_line_numbers_only_when_every_line_is_numbered() -> None:
    assert strip_line_numbers("     1\ta\n     2\tb\n") == "a\nb\n"
    assert strip_line_numbers("3: x\n4: y") == "x\ny"
    assert strip_line_numbers("1: x\n5: y\n") == "1: x\n5: y\n"  # not consecutive
    assert strip_line_numbers("plain\ntext\n") == "plain\ntext\n"


_LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "    pass\n", "\n", "x = 1\n"]),
                  min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(before=_LINES, seed=st.integers(0, 10_000))
def test_edits_from_any_diff_rebuild_the_target(before: list[str], seed: int) -> None:
    """Property: with many repeated lines, every hunk's edit is still unique and exact."""
    rng = random.Random(seed)
    after = list(before)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(after) + 1)
        op = rng.choice(["insert", "delete", "replace"])
        if op == "insert" or not after:
            after.insert(i, rng.choice(["new\n", "b\n", "    return 2\n"]))
        elif op == "delete":
            del after[min(i, len(after) - 1)]
        else:
            after[min(i, len(after) - 1)] = "changed\n"
    old_text, new_text = "".join(before), "".join(after)
    context = rng.choice([0, 1, 3])  # -U0 hunks need the widening most
    diff = "".join(difflib.unified_diff(before, after, "a/f.py", "b/f.py", n=context))
    if not diff:
        return
    (change,) = parse_patch(diff)
    text = old_text
    for old, new in edit_pairs(old_text, change.hunks):
        if not old:
            text = new
            continue
        assert text.count(old) == 1
        text = text.replace(old, new)
    assert text == new_text


def _outcome(tmp_path: Path, patch: str, p: float, seed: int) -> tuple[bool, dict[str, str]]:
    work = tmp_path / f"w{seed}"
    _write_tree(work, BROKEN)
    policy = NoisyOraclePolicy(patch, p, seed)
    _rollout(policy, work)
    return policy.wrong, _tree(work)


def test_noisy_oracle_is_deterministic_per_seed_and_wrong_fixes_differ(tmp_path: Path) -> None:
    patch = _git_diff(tmp_path, BROKEN, FIXED)
    seen_wrong = seen_right = 0
    for seed in range(12):
        wrong, tree = _outcome(tmp_path, patch, 0.5, seed)
        again = NoisyOraclePolicy(patch, 0.5, seed)
        assert again.wrong == wrong and again.plan([]) == NoisyOraclePolicy(patch, 0.5,
                                                                          seed).plan([])
        assert (tree != FIXED) == wrong
        seen_wrong += wrong
        seen_right += not wrong
    assert seen_wrong and seen_right


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_noisy_oracle_wrong_rate_is_near_p(p: float) -> None:
    patch = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a = 0\n-b = 1\n+b = 2\n"
    n = 600
    rate = sum(NoisyOraclePolicy(patch, p, seed).wrong for seed in range(n)) / n
    assert abs(rate - p) < 0.06  # ~3 standard deviations at p = 0.3


def test_single_hunk_wrong_fix_changes_the_result(tmp_path: Path) -> None:
    patch = _git_diff(tmp_path, {"a.py": "a = 1\nb = 2\n"}, {"a.py": "a = 1\nb = 3\nc = 4\n"})
    policy = NoisyOraclePolicy(patch, 1.0, seed=7)
    work = tmp_path / "work"
    _write_tree(work, {"a.py": "a = 1\nb = 2\n"})
    _rollout(policy, work)
    assert policy.wrong and _tree(work)["a.py"] != "a = 1\nb = 3\nc = 4\n"


def test_oracle_spec_marks_output_synthetic() -> None:
    patch = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    policy = policy_from_spec("noisy-oracle:0.5", golden_patch=patch, seed=1)
    assert policy.synthetic and policy.worst_case_cost([], TOOLS) == 0.0


def test_wrong_fixes_prefer_code_over_comments(tmp_path: Path) -> None:
    before = {"a.py": "def f(x):\n    return x\n"}
    after = {"a.py": "def f(x):\n    # double it\n    y = x * 2\n    return y\n"}
    patch = _git_diff(tmp_path, before, after)
    for seed in range(20):
        policy = NoisyOraclePolicy(patch, 1.0, seed)
        (hunk,) = policy.changes[0].hunks
        assert "    # double it\n" in hunk.new  # the comment is never the line dropped
        assert len(hunk.new) == 3
