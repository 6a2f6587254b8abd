"""``swemill export trajectories``: the demo's rollouts (its policies, oracle and noisy oracle,
on the sample's tasks) as ATIF documents and OpenAI-messages rows, each one valid against
the schema checks written from the formats' public descriptions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import ValidationError

from swemill.agent.rollout import run_rollouts
from swemill.core.records import Trajectory
from swemill.exports.atif import check_atif
from swemill.exports.openai_messages import check_messages_row
from swemill.pipeline.config import DEFAULT_POLICIES
from swemill.store import Store

from .conftest import SampleTasks

pytestmark = pytest.mark.slow

RUN = "export-demo"


@dataclass
class Rolled:
    root: Path
    trajectories: list[Trajectory]


@pytest.fixture(scope="module")
def rolled(sample_tasks: SampleTasks, tmp_path_factory: pytest.TempPathFactory) -> Rolled:
    root = tmp_path_factory.mktemp("export") / "store"
    shutil.copytree(sample_tasks.root, root)
    store = Store.open(str(root))
    config = sample_tasks.config(",".join(DEFAULT_POLICIES), max_tasks=2, workers=2,
                                 test_timeout_s=120.0)
    run_rollouts(store, sample_tasks.run_id, config, run_id=RUN)
    trajs = store.read_records("trajectories", RUN, Trajectory)
    assert trajs and any(t.outcome and t.outcome.resolved for t in trajs)
    return Rolled(root, trajs)


def _export(rolled: Rolled, fmt: str, dest: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", "swemill", "export", "trajectories", "--run",
                           RUN, "--out", str(rolled.root), "--format", fmt, "--dest", str(dest),
                           "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_atif_documents_validate_and_key_observations_to_calls(rolled: Rolled,
                                                                tmp_path: Path) -> None:
    summary = _export(rolled, "atif", tmp_path / "atif")
    assert summary["written"] == len(rolled.trajectories) and summary["dropped_schema"] == 0
    files = sorted((tmp_path / "atif").glob("*.json"))
    assert len(files) == len(rolled.trajectories)
    by_id = {t.trajectory_id: t for t in rolled.trajectories}
    for path in files:
        doc = check_atif(json.loads(path.read_text()))
        traj = by_id[doc.session_id]
        calls = [c for m in traj.messages for c in m.tool_calls]
        atif_calls = [c for s in doc.steps for c in s.tool_calls or []]
        assert [(c.id, c.name, c.args) for c in calls] == \
            [(c.tool_call_id, c.function_name, c.arguments) for c in atif_calls]
        answered = {r.source_call_id for s in doc.steps if s.observation
                    for r in s.observation.results}
        assert answered == {c.id for c in calls}  # every call's result, keyed by its id
        assert doc.steps[0].source == "system" and doc.steps[1].source == "user"
        assert doc.extra is not None
        assert doc.extra["resolved"] == (traj.outcome.resolved if traj.outcome else None)


def test_openai_rows_validate_with_tools_column(rolled: Rolled, tmp_path: Path) -> None:
    dest = tmp_path / "rows.jsonl"
    summary = _export(rolled, "openai-messages", dest)
    rows = [json.loads(line) for line in dest.read_text().splitlines()]
    assert summary["written"] == len(rows) == len(rolled.trajectories)
    for row in rows:
        checked = check_messages_row(row)
        assert [t.function["name"] for t in checked.tools][-1] == "submit"
        roles = [m.role for m in checked.messages]
        assert roles[:2] == ["system", "user"] and "tool" in roles
        assert any(m.tool_calls for m in checked.messages if m.role == "assistant")


def test_the_schema_checks_refuse_malformed_records(rolled: Rolled) -> None:
    from swemill.exports.atif import to_atif
    from swemill.exports.openai_messages import to_messages_row

    traj = rolled.trajectories[0]
    doc = to_atif(traj)
    doc["steps"][1]["step_id"] = 7
    with pytest.raises(ValidationError, match="step_id must run"):
        check_atif(doc)
    doc = to_atif(traj)
    agent = next(s for s in doc["steps"] if s.get("observation"))
    agent["observation"]["results"][0]["source_call_id"] = "nobody"
    with pytest.raises(ValidationError, match="unknown call"):
        check_atif(doc)
    doc = to_atif(traj)
    doc["steps"][0]["tool_calls"] = []
    with pytest.raises(ValidationError, match="only agent steps"):
        check_atif(doc)
    row = to_messages_row(traj)
    tool = next(m for m in row["messages"] if m["role"] == "tool")
    tool["tool_call_id"] = "nobody"
    with pytest.raises(ValidationError, match="unknown call"):
        check_messages_row(row)
    row = to_messages_row(traj)
    call = next(m for m in row["messages"] if m.get("tool_calls"))["tool_calls"][0]
    call["function"]["arguments"] = "[1, 2]"
    with pytest.raises(ValidationError, match="JSON object"):
        check_messages_row(row)


def test_bad_format_and_missing_run_are_one_error_line(rolled: Rolled, tmp_path: Path) -> None:
    for args, needle in ((["--run", RUN, "--format", "csv"], "unknown --format"),
                         (["--run", "nope"], "no run nope")):
        proc = subprocess.run([sys.executable, "-m", "swemill", "export", "trajectories",
                               "--out", str(rolled.root), "--dest", str(tmp_path / "x"), *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and needle in errors[0], proc.stderr
