"""What the store writes opens in other tools: `datasets`, pyarrow datasets with Hive runs."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest

from swemill.store import Store, layout

_CALL = {"type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
ROWS = [
    {
        "messages": [
            {"role": "system", "content": "fix it", "tool_calls": None},
            {"role": "assistant", "content": "", "tool_calls": [_CALL]},
        ],
        "task_id": f"t{i}",
    }
    for i in range(4)
]


@pytest.mark.slow
def test_datasets_loads_finished_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    store = Store.open(str(tmp_path / "root"))
    store.write_records("corpus/sft", "r1", "00000-of-00002", ROWS[:2])
    store.write_records("corpus/sft", "r1", "00001-of-00002", ROWS[2:])
    loaded = datasets.load_dataset(
        "parquet", data_files=store.part_urls("corpus/sft", "r1"), split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    assert loaded.num_rows == 4
    assert loaded[0]["messages"][1]["tool_calls"][0]["function"]["name"] == "bash"


def test_hive_partitions_skip_markers(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "root"))
    store.write_records("corpus/sft", "r1", "0", ROWS[:1])
    store.write_records("corpus/sft", "r2", "0", ROWS[1:])
    table = ds.dataset(store.path("corpus/sft"), format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("run_id").to_pylist()) == ["r1", "r2", "r2", "r2"]


def test_layout_keys() -> None:
    assert layout.manifest_key("r") == "manifests/run_id=r.json"
    assert layout.gate_verdicts_key("r") == "gate/run_id=r/verdicts.jsonl"
    assert layout.env_prefix("acme/demo", "abc") == "envs/acme__demo@abc"
    assert layout.part_key("tasks", "r", "00000") == "tasks/run_id=r/part-00000.parquet"
    assert layout.part_key("golden", "r", "0") == "golden/run_id=r/part-0.parquet"
    assert layout.part_key("corpus/sft", "r", "0") == "corpus/sft/run_id=r/part-0.parquet"
    assert layout.marker_key("tasks", "r", "0") == "tasks/run_id=r/_completions/0.json"
    assert layout.replay_input_key("r", "batch-0") == "replay/run_id=r/input/batch-0.jsonl"
    assert (
        layout.replay_output_key("r", "anthropic/claude", "batch-0")
        == "replay/run_id=r/teacher=anthropic__claude/batch-0.jsonl.out"
    )
    assert layout.report_key("r") == "reports/run_id=r/index.html"
    assert layout.shard_name(3, 16) == "00003-of-00016"
    for stage in layout.STAGES:
        assert layout.run_prefix(stage, "r") == f"{stage}/run_id=r"
