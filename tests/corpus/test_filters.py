"""Quality filters: code and tool output pass, junk is dropped with a counted reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swemill.core.errors import ConfigError
from swemill.corpus.filters import (
    FilterChain,
    MaximumLineLengthFilter,
    SpecialCharactersFilter,
    TextLengthFilter,
    WordsNumFilter,
    special_char_ratio,
    word_count,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "swemill"


def test_default_chain_keeps_ordinary_code() -> None:
    chain = FilterChain()
    files = [p for p in sorted(SRC.rglob("*.py")) if p.stat().st_size > 200]
    kept = [p for p in files if chain.keep(p.read_text(encoding="utf-8"))]
    assert len(files) > 20
    assert kept == files, dict(chain.counts)


def _history(root: Path) -> Path:
    """A small repository of its own, so the test runs outside a git checkout too."""
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "dev", "GIT_COMMITTER_NAME": "dev",
           "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_EMAIL": "dev@example.com",
           "PATH": os.environ["PATH"]}
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    for name in ("filters.py", "dedup.py", "split.py"):
        (root / name).write_text((SRC / "corpus" / name).read_text())
        subprocess.run(["git", "-C", str(root), "add", name], check=True, env=env)
        subprocess.run(["git", "-C", str(root), "commit", "-qm", f"corpus: {name} lands"],
                       check=True, env=env)
    return root


def test_default_chain_keeps_real_tool_output(tmp_path: Path) -> None:
    chain = FilterChain()
    repo = _history(tmp_path / "repo")
    outputs = [
        subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        for cmd in (
            ["ls", "-la", str(SRC)],
            [
                sys.executable,
                "-c",
                "import sys, platform; print(sys.version); print(platform.uname())",
            ],
            ["git", "-C", str(repo), "log", "--stat", "-3"],
            ["df", "-h"],
        )
    ]
    for out in outputs:
        assert chain.check(out).keep, (chain.counts, out[:200])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "text_too_short"),
        ("ok", "text_too_short"),
        ("x" * 3_000_000, "text_too_long"),
        ("--> ==> ### *** ||| @@@ ~~~ ", "too_few_words"),
        (str(list(range(2000))), "special_chars_too_high"),
        ("var a=" + "b" * 60_000 + ";\nreturn a", "line_too_long"),
    ],
)
def test_junk_is_dropped_with_reason(text: str, reason: str) -> None:
    chain = FilterChain()
    result = chain.check(text)
    assert (result.keep, result.reason) == (False, reason)
    assert chain.counts == {"in": 1, f"dropped_{reason}": 1}


def test_counts_add_up() -> None:
    chain = FilterChain()
    texts = [
        "def f(x):\n    return x + 1\n",
        "",
        "1 2 3 4 5 6 7 8 9 0 " * 50,
        "print('hello, dear world')",
    ]
    kept = [t for t in texts if chain.keep(t)]
    drops = sum(v for k, v in chain.counts.items() if k.startswith("dropped_"))
    assert chain.counts["in"] == 4 and chain.counts["out"] == len(kept) == 2
    assert drops == 2


def test_data_juicer_recipe_names() -> None:
    chain = FilterChain.from_ops(
        [
            {"text_length_filter": {"min_len": 5, "max_len": 100}},
            {"words_num_filter": {"min_num": 2, "max_num": 50}},
            {"special_characters_filter": {"min_ratio": 0.0, "max_ratio": 0.25}},
            {"maximum_line_length_filter": {"max_len": 40}},
        ]
    )
    assert [f.name for f in chain.filters] == [
        "text_length_filter",
        "words_num_filter",
        "special_characters_filter",
        "maximum_line_length_filter",
    ]
    assert chain.check("plain words here").keep
    assert chain.check("x" * 101).reason == "text_too_long"
    assert chain.check("a, b, c; d: (e) [f] {g}").reason == "special_chars_too_high"
    assert chain.check("word " * 9 + "\n" + "y" * 41).reason == "line_too_long"


@pytest.mark.parametrize(
    "ops",
    [
        [{"nope_filter": {}}],
        [{"text_length_filter": {"min_length": 3}}],
        [{"words_num_filter": {"min_num": 10, "max_num": 1}}],
        [{"special_characters_filter": {"min_ratio": -0.1}}],
    ],
)
def test_bad_recipe_is_a_config_error(ops: list) -> None:
    with pytest.raises(ConfigError):
        FilterChain.from_ops(ops)


def test_measures() -> None:
    assert word_count("def f(x): return x  # --> ok") == 5
    assert special_char_ratio("") == 0.0
    assert special_char_ratio("abcd") == 0.0
    assert special_char_ratio("a1 !") == 0.75
    assert special_char_ratio("ab🙂→") == 0.5
    assert TextLengthFilter(min_len=0, max_len=3)("abcd").reason == "text_too_long"
    assert WordsNumFilter(min_num=0, max_num=1)("a b").reason == "too_many_words"
    assert SpecialCharactersFilter(min_ratio=0.5)("abc").reason == "special_chars_too_low"
    assert MaximumLineLengthFilter(min_len=5)("ab\ncd").reason == "line_too_short"
