"""Patches we write must round-trip through real ``git apply``, both ways."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swemill.core.errors import SynthesisError
from swemill.synth.patches import (
    apply_patch,
    check_patch,
    file_diff,
    parse_patch,
    patch_files,
    reverse_patch,
)

CASES = {
    "plain": ("a = 1\nb = 2\nc = 3\n", "a = 1\nb = 20\nc = 3\n"),
    "no newline before": ("x = 1\ny = 2", "x = 1\ny = 3\n"),
    "no newline after": ("x = 1\ny = 2\n", "x = 1\ny = 3"),
    "no newline both": ("x = 1\ny = 2", "x = 1\ny = 3"),
    "crlf": ("a = 1\r\nb = 2\r\n", "a = 1\r\nb = 5\r\n"),
    "form feed and line separator inside lines": (
        "a = 1\x0c  # page\ns = 'x\u2028y'\nb = 2\n", "a = 1\x0c  # page\ns = 'x\u2028y'\nb = 3\n"),
    "lone carriage return": ("a = 1\rb = 2\nc = 3\n", "a = 1\rb = 2\nc = 4\n"),
    "to empty": ("only = 1\n", ""),
    "from empty": ("", "made = 1\n"),
    "far apart": ("".join(f"l{i}\n" for i in range(40)),
                  "".join(f"l{i}\n" if i not in (3, 30) else "changed\n" for i in range(40))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_file_diff_applies_with_git_and_reverses(name: str, tmp_path: Path, git) -> None:
    before, after = CASES[name]
    git(tmp_path, "init", "-q")
    (tmp_path / "pkg").mkdir()
    target = tmp_path / "pkg" / "mod.py"
    target.write_bytes(before.encode())
    patch = file_diff("pkg/mod.py", before, after)
    assert patch.startswith("diff --git a/pkg/mod.py b/pkg/mod.py\n")
    assert check_patch(tmp_path, patch) is None
    apply_patch(tmp_path, patch)
    assert target.read_bytes() == after.encode()
    back = reverse_patch(patch)
    assert check_patch(tmp_path, back) is None
    apply_patch(tmp_path, back)
    assert target.read_bytes() == before.encode()


def test_equal_texts_give_no_patch() -> None:
    assert file_diff("a.py", "x = 1\n", "x = 1\n") == ""


def test_reverse_of_a_git_multi_file_patch(git_repo, git) -> None:
    root, commit = git_repo
    old = commit({"a.py": "one\ntwo\nthree\n", "gone.py": "bye\n", "b.py": "keep\n"}, "old")
    new = commit({"a.py": "one\n2\nthree\nfour", "gone.py": None, "new.py": "hi\n"}, "new")
    forward = git(root, "diff", "--no-renames", old, new)
    assert patch_files(forward) == ["a.py", "gone.py", "new.py"]
    created = [fp for fp in parse_patch(forward) if fp.old_path is None]
    assert [fp.new_path for fp in created] == ["new.py"]
    # Working tree is at `new`; the reverse must take it back to `old` exactly.
    back = reverse_patch(forward)
    assert check_patch(root, back) is None
    apply_patch(root, back)
    assert (root / "a.py").read_text() == "one\ntwo\nthree\n"
    assert (root / "gone.py").read_text() == "bye\n"
    assert not (root / "new.py").exists()


def test_stale_patch_is_refused_with_gits_reason(tmp_path: Path, git) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "m.py").write_text("a = 1\n")
    patch = file_diff("m.py", "a = 2\n", "a = 3\n")
    reason = check_patch(tmp_path, patch)
    assert reason is not None and "m.py" in reason
    with pytest.raises(SynthesisError, match="does not apply"):
        apply_patch(tmp_path, patch)
    assert (tmp_path / "m.py").read_text() == "a = 1\n"


def test_malformed_hunk_is_an_error() -> None:
    bad = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\nGARBAGE\n"
    with pytest.raises(SynthesisError, match="malformed"):
        parse_patch(bad)


_line = st.sampled_from(["a", "b", "c", "", "  d", "e = 1"])
_edit = st.tuples(st.sampled_from(["drop", "insert", "replace"]), st.integers(0, 40), _line)


def _edited(lines: list[str], edits: list[tuple[str, int, str]]) -> list[str]:
    out = list(lines)
    for op, at, text in edits:
        if op == "insert":
            out.insert(at % (len(out) + 1), text)
        elif out and op == "drop":
            out.pop(at % len(out))
        elif out:
            out[at % len(out)] = text
    return out


# Few distinct lines on purpose: long runs of equal lines are where a diff can misalign.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(_line, max_size=30), edits=st.lists(_edit, min_size=1, max_size=4),
       end_nl=st.tuples(st.booleans(), st.booleans()))
def test_any_edit_round_trips(before: list[str], edits, end_nl) -> None:
    after = _edited(before, edits)
    a = "\n".join(before) + ("\n" if end_nl[0] and before else "")
    b = "\n".join(after) + ("\n" if end_nl[1] and after else "")
    patch = file_diff("f.txt", a, b)
    if a == b:
        assert patch == ""
        return
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "f.txt").write_text(a)
        apply_patch(root, patch)
        assert (root / "f.txt").read_text() == b
        apply_patch(root, reverse_patch(patch))
        assert (root / "f.txt").read_text() == a
