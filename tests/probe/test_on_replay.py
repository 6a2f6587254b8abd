"""A replay corpus (see the ``replay_corpus`` fixture): every DPO row trains. The card's TRL
example runs on it in ``test_on_build.py``, in the same process as the demo corpus."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow


def test_every_replay_dpo_row_has_a_prompt_and_two_different_sides(replay_corpus) -> None:
    root, run_id = replay_corpus
    rows = [r for p in sorted(Path(root, "corpus", "dpo", f"run_id={run_id}").glob("*.parquet"))
            for r in pq.read_table(p).to_pylist()]
    assert rows and {r["preference_source"] for r in rows} <= {"consensus", "error_signal"}
    for r in rows:
        assert r["prompt"] and r["chosen"] and r["rejected"], r["pair_id"]
        assert r["prompt"][0]["role"] in ("system", "user")
        assert r["chosen"] != r["rejected"]
        assert all(m["content"] or m["tool_calls"] for m in r["chosen"] + r["rejected"])
