"""Output capping keeps a bounded head and tail, whatever flows through."""

from __future__ import annotations

from swemill.sandbox._run import Capture


def test_small_output_is_kept_whole() -> None:
    c = Capture(100)
    for part in (b"hello ", b"world"):
        c.add(part)
    assert c.text() == "hello world" and not c.truncated


def test_large_output_keeps_head_and_tail_within_the_cap() -> None:
    c = Capture(1000)
    data = b"".join(f"{i:07d}\n".encode() for i in range(500_000))  # 4 MB in odd chunks
    for i in range(0, len(data), 70_001):
        c.add(data[i:i + 70_001])
    text = c.text()
    assert c.truncated and c.total == len(data)
    assert text.startswith("0000000\n0000001\n") and text.endswith("0499999\n")
    head, _, tail = text.partition("\n[... swemill: ")
    assert len(head) == 500 and len(tail.split("dropped ...]\n", 1)[1]) == 500
    assert len(text) <= 1000 + 60
    assert len(c.tail) <= 2 * 500 + (1 << 20) + 70_001  # memory stays bounded


def test_exactly_the_cap_is_not_truncated() -> None:
    c = Capture(10)
    c.add(b"0123456789")
    assert c.text() == "0123456789" and not c.truncated
    c.add(b"X")
    assert c.truncated and c.text().endswith("6789X")


def test_split_utf8_is_decoded_safely() -> None:
    c = Capture(4)
    c.add("ééééé".encode())
    assert isinstance(c.text(), str)
