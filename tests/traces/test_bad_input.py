"""Broken input is counted and quarantined with file and line number, never a crash."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from swemill.core.errors import IngestError
from swemill.traces.claude_code import IngestOptions, ingest_session_file
from swemill.traces.ingest import iter_items
from swemill.traces.scrub_hook import Scrubber
from swemill.traces.states import IngestCounts, Quarantine, TraceState
from swemill_testkit.fake_sessions import SessionWriter, text


def _good_session(path: Path) -> Path:
    w = SessionWriter("bad", "/home/dev/proj")
    w.user("hello")
    w.assistant([text("hi there")], {"input_tokens": 3, "output_tokens": 4})
    w.user("again")
    w.assistant([text("hi again")], {"input_tokens": 5, "output_tokens": 6})
    return w.write(path)


def _items(path: Path, opts: IngestOptions | None = None) -> tuple[IngestCounts, list]:
    counts = IngestCounts()
    return counts, list(iter_items([path], counts, opts or IngestOptions(), Scrubber()))


def _insert(path: Path, after_line: int, raw: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:after_line]) + raw + b"".join(lines[after_line:]))


def test_truncated_line_is_quarantined_and_the_rest_ingested(tmp_path: Path) -> None:
    path = _good_session(tmp_path / "s.jsonl")
    line2 = path.read_bytes().splitlines()[1]
    _insert(path, 2, line2[: len(line2) // 2] + b"\n")  # a write cut off half-way
    # The file's last line is cut off too, with no newline at the end.
    path.write_bytes(path.read_bytes() + b'{"type": "user", "message": {"role": "us')
    counts, items = _items(path)
    q = [i for i in items if isinstance(i, Quarantine)]
    assert [(x.line_no, x.reason) for x in q] == [(3, "truncated JSON"), (6, "truncated JSON")]
    assert q[0].file == str(path) and q[0].head.startswith('{"parentUuid"')
    assert counts.quarantined == 2
    assert counts.assistant_turns == 2 and counts.output_tokens == 10


def test_invalid_utf8_line_is_quarantined(tmp_path: Path) -> None:
    path = _good_session(tmp_path / "s.jsonl")
    _insert(path, 1, b'{"type": "user", "message": {"content": "caf\xe9 \xff"}}\n')
    counts, items = _items(path)
    (q,) = [i for i in items if isinstance(i, Quarantine)]
    assert q.line_no == 2 and q.reason.startswith("invalid UTF-8 at byte")
    assert "\ufffd" in q.head  # the head is kept readable, with replacement characters
    assert counts.assistant_turns == 2


def test_not_json_and_not_an_object_are_quarantined(tmp_path: Path) -> None:
    path = _good_session(tmp_path / "s.jsonl")
    _insert(path, 0, b"this is not json\n[1, 2, 3]\n\n   \n")
    counts, items = _items(path)
    q = [i for i in items if isinstance(i, Quarantine)]
    assert [(x.line_no, x.reason.split(":")[0]) for x in q] == [
        (1, "not JSON"), (2, "JSON list, not an object")]
    assert counts.assistant_turns == 2


def test_a_50_mb_line_is_quarantined_with_bounded_memory(tmp_path: Path) -> None:
    path = _good_session(tmp_path / "s.jsonl")
    huge = {"type": "user", "message": {"role": "user", "content": "x" * (50 * 2**20)}}
    _insert(path, 2, json.dumps(huge).encode() + b"\n")
    counts, items = _items(path)  # default ceiling: 32 MiB
    (q,) = [i for i in items if isinstance(i, Quarantine)]
    assert q.line_no == 3 and q.size > 50 * 2**20
    assert q.reason.startswith("line longer than 33554432 bytes")
    assert counts.assistant_turns == 2
    # With a 1 MiB ceiling the 50 MiB line is read in pieces and never held whole.
    tracemalloc.start()
    counts, _ = _items(path, IngestOptions(max_line_bytes=2**20))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert counts.quarantined == 1
    assert peak < 8 * 2**20, f"peak {peak} bytes while skipping a 50 MiB line"


def test_empty_file_and_a_folder_of_non_jsonl_files(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n\n  \n")
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("hello")
    (junk / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (junk / "data.json").write_text("{}")
    (junk / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    counts, items = _items(tmp_path)
    quarantined = [q for q in items if isinstance(q, Quarantine)]
    reasons = {(Path(q.file).name, q.reason.split(" (")[0].split(" at")[0].split(":")[0])
               for q in quarantined}
    assert reasons == {
        ("binary.jsonl", "invalid UTF-8"),
        ("binary.jsonl", "not JSON"),  # its few all-ASCII stretches decode but are no JSON
        ("blank.jsonl", "empty file"),
        ("data.json", "not a trace file"),
        ("empty.jsonl", "empty file"),
        ("image.png", "not a trace file"),
        ("notes.txt", "not a trace file"),
    }
    binary_lines = (bytes(range(256)) * 4).count(b"\n") + 1
    assert counts.quarantined == sum(Path(q.file).name == "binary.jsonl" for q in quarantined)
    assert counts.quarantined <= binary_lines and counts.quarantined_files == 5
    assert counts.files == 6 and counts.sessions == 0 and counts.assistant_turns == 0


def test_records_of_the_wrong_shape_do_not_crash(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    rows = [
        {"type": "user", "uuid": "u1", "message": "not a dict"},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1",
         "message": {"id": "m1", "content": "plain string content", "usage": "nope"}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "a1",
         "message": {"id": "m2", "content": [{"type": "tool_use", "name": "Bash"},
                                              {"type": "tool_use", "id": "t", "input": 7},
                                              "not a block", {"no": "type"}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "u2", "message": {"content": None}},
        {"type": "assistant", "uuid": "a3", "parentUuid": "a3", "message": {}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    counts = IngestCounts()
    items = list(ingest_session_file(path, counts, set()))
    states = [i for i in items if isinstance(i, TraceState)]
    assert counts.quarantined == 0
    assert [s.response.text for s in states][:1] == ["plain string content"]
    assert {a.name for s in states for a in s.actions} == {"other:Bash", "other:"}


def test_a_missing_path_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no such file or directory: .*nope"):
        _items(tmp_path / "nope")


def test_a_named_pipe_is_quarantined_not_opened(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "pipe.jsonl")
    _good_session(tmp_path / "ok.jsonl")
    counts, items = _items(tmp_path)
    (q,) = [i for i in items if isinstance(i, Quarantine)]
    assert Path(q.file).name == "pipe.jsonl" and q.reason == "not a regular file"
    assert counts.sessions == 1


def test_deep_nesting_is_quarantined_not_a_recursion_error(tmp_path: Path) -> None:
    # A line nested 200,000 deep ended the run in RecursionError and left it "running".
    path = _good_session(tmp_path / "s.jsonl")
    very = b'{"type": "user", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"
    just_past = json.dumps({"type": "user", "x": json.loads("[" * 150 + "]" * 150)}).encode()
    fine = json.dumps({"type": "progress", "x": json.loads("[" * 50 + "]" * 50),
                       "many": [[1], [2]] * 200}).encode()  # many brackets, shallow
    _insert(path, 1, very + just_past + b"\n" + fine + b"\n")
    counts, items = _items(path)
    q = [i for i in items if isinstance(i, Quarantine)]
    assert [(x.line_no, x.reason) for x in q] == [(2, "nested deeper than 100 levels"),
                                                 (3, "nested deeper than 100 levels")]
    assert q[0].size == len(very)
    assert counts.quarantined == 2 and counts.assistant_turns == 2
    assert counts.skipped_types == {"progress": 1}


def test_a_large_binary_file_is_given_up_after_100_bad_lines(tmp_path: Path) -> None:
    import random

    rng = random.Random(1)
    junk = b"".join(bytes(rng.randrange(256) for _ in range(60)) + b"\n" for _ in range(5000))
    (tmp_path / "blob.jsonl").write_bytes(junk)
    counts, items = _items(tmp_path / "blob.jsonl")
    q = [i for i in items if isinstance(i, Quarantine)]
    assert len(q) == 101 and counts.quarantined == 100 and counts.quarantined_files == 1
    assert q[-1].line_no == 0 and q[-1].reason.startswith("no JSON object in its first 100")
    assert q[-1].size == len(junk) - sum(len(x) + 1 for x in junk.split(b"\n")[:100])
    # one good record first: every bad line after it is its own row, as before
    path = _good_session(tmp_path / "s.jsonl")
    path.write_bytes(path.read_bytes() + b"not json\n" * 300)
    counts, items = _items(path)
    assert counts.quarantined == 300 and counts.quarantined_files == 0
