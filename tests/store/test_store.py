"""The store contract, run the same way on a plain path, a file:// URL and local S3."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from swemill.core.errors import StoreError
from swemill.core.records import (
    Message,
    Outcome,
    RunManifest,
    Task,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
    Usage,
)
from swemill.core.tools import ToolCall
from swemill.store import Store, layout, new_run_id, shard_name


def _task(i: int) -> Task:
    return Task(
        instance_id=f"demo__{i}",
        repo="acme/demo",
        base_commit="abc123",
        problem_statement=f"Function f{i} returns the wrong value — ünïcode kept.",
        FAIL_TO_PASS=[f"tests/test_f.py::test_f{i}"],
        PASS_TO_PASS=["tests/test_g.py::test_g"],
        test_cmd="pytest -q",
        strategy="procedural",
        license_tier="redistributable",
        env_recipe="envs/acme__demo@abc123",
        snapshot="snap-1",
        solve_rate=None if i % 2 else 0.5,
        metadata={"depth": i, "nested": {"k": [1, 2, None]}},
        created_at="2026-12-01T00:00:00+00:00",  # fixed: records built twice must compare equal
    )


def _trajectory(i: int) -> Trajectory:
    call = ToolCall("bash", {"command": "pytest -q"}, id="c1")
    return Trajectory(
        trajectory_id=f"t{i}",
        task_id=f"demo__{i}",
        source="rollout",
        policy="scripted:oracle",
        messages=[
            Message(role="system", content=[TextBlock(text="You fix bugs.")]),
            Message(role="assistant", content=[ToolUseBlock(call=call)], usage=Usage(cost_usd=0.1)),
            Message(role="tool", content=[ToolResultBlock(call_id="c1", content="ok")]),
        ],
        outcome=Outcome(grade=1.0, resolved=True, fail_to_pass={"a": "passed"}),
        flags=["none"],
        created_at="2026-12-01T00:00:00+00:00",
    )


def test_typed_records_round_trip(store: Store) -> None:
    tasks = [_task(i) for i in range(5)]
    trajs = [_trajectory(i) for i in range(3)]
    store.write_records("tasks", "r1", shard_name(0, 1), tasks)
    store.write_records("trajectories", "r1", shard_name(0, 1), trajs)
    assert store.read_records("tasks", "r1", Task) == tasks
    assert store.read_records("trajectories", "r1", Trajectory) == trajs
    raw = store.read_records("tasks", "r1")
    assert raw[0]["metadata"] == {"depth": 0, "nested": {"k": [1, 2, None]}}
    assert raw[0]["FAIL_TO_PASS"] == ["tests/test_f.py::test_f0"]


def test_scalar_fields_are_native_columns(store: Store) -> None:
    store.write_records("tasks", "r1", "a", [_task(1)])
    (_, table), = store.read_tables("tasks", "r1")
    assert table.schema.field("instance_id").type == pa.string()
    assert table.schema.field("solve_rate").type == pa.float64()
    assert table.schema.field("FAIL_TO_PASS").type == pa.list_(pa.string())
    assert table.schema.field("metadata").type == pa.string()  # free-form: JSON text


def test_dict_rows_keep_nested_arrow_types(store: Store) -> None:
    rows = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
         "task_id": "x", "grade": 1.0},
        {"messages": [{"role": "user", "content": "q"}], "task_id": "y", "grade": 0.0},
    ]
    store.write_records("corpus/sft", "r1", "00000", rows)
    (_, table), = store.read_tables("corpus/sft", "r1")
    assert pa.types.is_list(table.schema.field("messages").type)
    assert pa.types.is_struct(table.schema.field("messages").type.value_type)
    assert store.read_records("corpus/sft", "r1") == rows


def test_explicit_schema_is_used(store: Store) -> None:
    schema = pa.schema([("a", pa.int32()), ("b", pa.list_(pa.string()))])
    store.write_records("corpus/dpo", "r1", "0", [{"a": 1, "b": ["x"]}], schema=schema)
    (_, table), = store.read_tables("corpus/dpo", "r1")
    assert table.schema.field("a").type == pa.int32()


def test_unfinished_part_is_ignored(store: Store) -> None:
    store.write_records("tasks", "r1", "00000", [_task(0)])
    # A crash after the part landed but before its marker: the shard counts as unfinished.
    store.put_bytes(layout.part_key("tasks", "r1", "00001"), b"half a parquet file")
    assert store.is_complete("tasks", "r1", "00000")
    assert not store.is_complete("tasks", "r1", "00001")
    assert store.read_records("tasks", "r1", Task) == [_task(0)]
    assert store.complete_shards("tasks", "r1") == ["00000"]


def test_part_changed_after_marker_is_a_clear_error(store: Store) -> None:
    store.write_records("tasks", "r1", "00000", [_task(0)])
    key = layout.part_key("tasks", "r1", "00000")
    store.put_bytes(key, store.get_bytes(key)[:40])
    with pytest.raises(StoreError, match=r"corrupt Parquet part .*part-00000\.parquet"):
        store.read_records("tasks", "r1", Task)


def test_corrupt_part_with_matching_marker_is_a_clear_error(store: Store) -> None:
    data = b"PAR1 not really parquet"
    store.put_bytes(layout.part_key("tasks", "r1", "7"), data)
    marker = {"shard": "7", "rows": 1, "sha256": hashlib.sha256(data).hexdigest()}
    store.write_json(layout.marker_key("tasks", "r1", "7"), marker)
    with pytest.raises(StoreError, match=r"corrupt Parquet part .*part-7\.parquet") as info:
        store.read_records("tasks", "r1")
    assert "\n" not in str(info.value)


def test_rewriting_a_shard_replaces_it(store: Store) -> None:
    store.write_records("tasks", "r1", "00000", [_task(0), _task(1)])
    store.write_records("tasks", "r1", "00000", [_task(2)])
    assert store.read_records("tasks", "r1", Task) == [_task(2)]


def test_shards_read_in_order(store: Store) -> None:
    for k in (2, 0, 1):
        store.write_records("tasks", "r1", shard_name(k, 3), [_task(k)])
    got = [t.instance_id for t in store.read_records("tasks", "r1", Task)]
    assert got == ["demo__0", "demo__1", "demo__2"]
    assert len(store.part_urls("tasks", "r1")) == 3


def test_missing_run_and_run_without_finished_shards(store: Store) -> None:
    with pytest.raises(StoreError, match="no run nope under tasks/"):
        store.read_records("tasks", "nope")
    store.put_bytes(layout.part_key("tasks", "r2", "0"), b"x")
    with pytest.raises(StoreError, match="no finished shards"):
        store.read_records("tasks", "r2")


def test_empty_shard_is_a_finished_shard(store: Store) -> None:
    store.write_records("tasks", "r1", "0", [])
    store.write_records("corpus/sft", "r1", "0", [], schema=pa.schema([("x", pa.string())]))
    assert store.read_records("tasks", "r1", Task) == []
    assert store.read_records("corpus/sft", "r1") == []


def test_list_runs_and_manifests(store: Store) -> None:
    ids = [new_run_id() for _ in range(3)]
    assert len(set(ids)) == 3
    for rid in reversed(ids):
        store.write_records("tasks", rid, "0", [_task(0)])
        store.write_manifest(RunManifest(run_id=rid, counts={"tasks": {"in": 3, "out": 1}}))
    assert store.list_runs("tasks") == sorted(ids)
    assert store.list_runs("manifests") == sorted(ids)
    assert store.list_runs("golden") == []
    back = store.read_manifest(ids[0])
    assert back.counts == {"tasks": {"in": 3, "out": 1}}
    with pytest.raises(StoreError, match="no run missing-run"):
        store.read_manifest("missing-run")


def test_json_jsonl_and_text(store: Store) -> None:
    store.write_json("envs/acme__demo@abc/recipe.json", {"python": "3.11", "deps": ["x"]})
    assert store.read_json("envs/acme__demo@abc/recipe.json") == {"python": "3.11", "deps": ["x"]}
    store.write_jsonl(layout.gate_verdicts_key("r1"), [{"a": 1}, {"b": "é"}])
    assert store.read_jsonl(layout.gate_verdicts_key("r1")) == [{"a": 1}, {"b": "é"}]
    store.write_text("reports/run_id=r1/README.md", "# card\n")
    assert store.read_text("reports/run_id=r1/README.md") == "# card\n"
    assert store.exists("reports/run_id=r1/README.md")
    store.write_text("bad.jsonl", '{"ok": 1}\nnot json\n')
    with pytest.raises(StoreError, match="line 2"):
        store.read_jsonl("bad.jsonl")
    with pytest.raises(StoreError, match="not found"):
        store.read_text("nothing/here.txt")


def test_no_temporary_objects_are_left(store: Store) -> None:
    for k in range(3):
        store.write_records("tasks", "r1", str(k), [_task(k)])
    store.write_json("x/y.json", {})
    store.check_writable()
    everything = store.fs.find(store.root, withdirs=True)
    leftovers = [p for p in everything if ".tmp-" in p or "probe" in p]
    assert leftovers == []


def test_bad_rows_and_names(store: Store) -> None:
    with pytest.raises(StoreError, match="one kind"):
        store.write_records("tasks", "r1", "0", [_task(0), {"a": 1}])  # type: ignore[list-item]
    with pytest.raises(StoreError, match="invalid shard"):
        store.write_records("tasks", "r1", "../escape", [])
    with pytest.raises(StoreError, match="invalid run id"):
        store.write_records("tasks", "a/b", "0", [])
    with pytest.raises(StoreError, match="do not match Task"):
        store.write_records("golden", "r1", "0", [{"nope": 1}])
        store.read_records("golden", "r1", Task)


def test_resume_redoes_only_pending_shards(store: Store) -> None:
    shards = [shard_name(k, 4) for k in range(4)]
    assert store.pending_shards("tasks", "r1", shards) == shards
    store.write_records("tasks", "r1", shards[0], [_task(0)])
    store.write_records("tasks", "r1", shards[2], [_task(2)])
    store.put_bytes(layout.part_key("tasks", "r1", shards[3]), b"killed mid-shard")
    todo = store.pending_shards("tasks", "r1", shards)
    assert todo == [shards[1], shards[3]]
    for shard in todo:
        store.write_records("tasks", "r1", shard, [_task(int(shard[:5]))])
    got = [t.instance_id for t in store.read_records("tasks", "r1", Task)]
    assert got == [f"demo__{k}" for k in range(4)]


def test_store_pickles_for_worker_processes(store: Store) -> None:
    import pickle

    store.write_json("x.json", {"a": 1})
    clone = pickle.loads(pickle.dumps(store))
    assert clone.read_json("x.json") == {"a": 1}


def test_policy_view_cannot_touch_golden(store: Store) -> None:
    store.write_records("golden", "r1", "0", [{"instance_id": "a", "golden_patch": "diff"}])
    store.write_records("tasks", "r1", "0", [_task(0)])
    view = store.policy_view()
    assert view.read_records("tasks", "r1", Task) == [_task(0)]
    for attempt in (
        lambda: view.read_records("golden", "r1"),
        lambda: view.get_bytes("golden/run_id=r1/part-0.parquet"),
        lambda: view.list_keys("golden"),
        lambda: view.write_json("golden/x.json", {}),
    ):
        with pytest.raises(StoreError, match="outside what this view"):
            attempt()
    assert store.read_records("golden", "r1")[0]["golden_patch"] == "diff"
    # candidates/ names the function each task's bug is in: oracle-side as well
    store.write_records("candidates", "r1", "0", [{"instance_id": "a", "symbol": "f"}])
    with pytest.raises(StoreError, match="outside what this view"):
        view.read_records("candidates", "r1")


def test_part_written_row_group_by_row_group(store: Store) -> None:
    from swemill.store.parquet import rows_to_table

    trajs = [_trajectory(i) for i in range(5)]
    store.write_records("trajectories", "r1", "00000", trajs[:1])
    part = store.open_part("trajectories", "r1", "00000")  # rewrites the finished shard
    assert not store.is_complete("trajectories", "r1", "00000")
    for chunk in (trajs[:2], trajs[2:3], trajs[3:]):
        part.write(rows_to_table(chunk))
    marker = part.close()
    assert marker["rows"] == 5 and store.is_intact("trajectories", "r1", "00000")
    data = store.get_bytes(layout.part_key("trajectories", "r1", "00000"))
    assert marker["sha256"] == hashlib.sha256(data).hexdigest() and marker["bytes"] == len(data)
    assert store.read_records("trajectories", "r1", Trajectory) == trajs
    import pyarrow.parquet as pq

    assert pq.ParquetFile(pa.BufferReader(data)).num_row_groups == 3
    abandoned = store.open_part("trajectories", "r1", "00001")
    abandoned.write(rows_to_table(trajs[:1]))
    abandoned.abort()
    assert store.complete_shards("trajectories", "r1") == ["00000"]
    leftovers = [p for p in store.fs.find(store.root) if ".tmp-" in p]
    assert leftovers == []
