"""The stage list is data an orchestrator can be generated from: ordered, resolvable, closed."""

from __future__ import annotations

import json

import pytest

from swemill.agent.rollout_config import RolloutConfig
from swemill.core.errors import ConfigError
from swemill.corpus.assemble import CorpusConfig
from swemill.pipeline import STAGES, BuildConfig, stage_named
from swemill.pipeline.config import FLAGS, RUNTIME_SETTINGS
from swemill.pipeline.stages import StageContext
from swemill.validate.tasks_config import TasksConfig


def test_order_is_the_build_order() -> None:
    assert [s.name for s in STAGES] == ["gate", "env", "tasks", "rollouts", "corpus", "report"]


def test_every_entry_point_is_a_function_of_a_context() -> None:
    import inspect

    for stage in STAGES:
        fn = stage.function()
        (param,) = inspect.signature(fn).parameters.values()
        assert param.annotation in (StageContext, "StageContext"), stage.name


def _top(key: str) -> str:
    """The stage prefix of a layout key (``tasks/run_id=<id>/`` -> ``tasks``)."""
    parts = [p for p in key.split("/") if p and not p.startswith("run_id=")]
    return "/".join(p for p in parts if "." not in p and p != "*") or parts[0]


def test_every_read_is_written_by_an_earlier_stage_or_is_an_input() -> None:
    inputs = {"source", "envs", "index/dedup", "manifests"}  # given, cached or cross-run
    written: set[str] = set()
    for stage in STAGES:
        for key in stage.reads:
            top = _top(key)
            if top == "corpus":  # the report reads every corpus table
                assert any(w.startswith("corpus/") for w in written), stage.name
                continue
            assert top in inputs or top in written, f"{stage.name} reads {key} before it exists"
        written |= {_top(k) for k in stage.writes}
    assert {"corpus/sft", "corpus/dpo", "reports"} <= written


def test_stage_list_serialises_for_an_orchestrator() -> None:
    data = json.loads(json.dumps([s.to_dict() for s in STAGES]))
    assert data[2]["entry"] == "swemill.pipeline.steps:tasks"
    assert all(d["writes"] and d["doc"] for d in data)


def test_unknown_stage_is_one_clear_error() -> None:
    assert stage_named("corpus").name == "corpus"
    with pytest.raises(ConfigError, match="unknown stage 'train'.*gate, env, tasks"):
        stage_named("train")


def test_config_hash_ignores_runtime_settings_only() -> None:
    base = BuildConfig()
    assert base.hash() == BuildConfig(workers=9, executor="ray", suite_timeout_s=30).hash()
    assert base.hash() != BuildConfig(seed=1).hash()
    assert base.hash() != BuildConfig(policies=("oracle",)).hash()
    assert base.hash() != BuildConfig(tasks=TasksConfig(near_misses=0)).hash()
    assert BuildConfig.from_manifest(base.resolved()) == base


def test_defaults_are_the_scripted_pair() -> None:
    assert BuildConfig().policies == ("oracle", "noisy-oracle:0.5")


def test_one_set_of_defaults() -> None:
    """A build nests the stages' own configs: what it does not set is what the stage alone
    would do (the build chooses only its teachers, as RolloutConfig has none)."""
    built = BuildConfig()
    assert built.tasks == TasksConfig()
    assert built.corpus == CorpusConfig()
    assert built.rollouts == RolloutConfig(policy="oracle,noisy-oracle:0.5", samples=4)


def test_flags_set_every_field_they_name() -> None:
    c = BuildConfig(workers=3, seed=7, max_tasks=2, holdout=0.2, executor="ray",
                    policies=("oracle",), emit_wm=True, issue_writer="oracle",
                    difficulty="hard", curriculum=True)
    assert (c.tasks.workers, c.rollouts.workers) == (3, 3)
    assert (c.tasks.seed, c.rollouts.seed, c.corpus.split.seed) == (7, 7, 7)
    assert (c.tasks.executor, c.rollouts.executor) == ("ray", "ray")
    assert c.tasks.max_tasks == 2 and c.corpus.split.holdout_fraction == 0.2
    assert c.rollouts.policy == "oracle" and c.rollouts.samples == 4 and c.corpus.emit_wm
    assert c.tasks.problem_writer == "oracle"
    assert (c.corpus.difficulty, c.corpus.curriculum) == ("hard", True)
    assert set(FLAGS) >= {"workers", "seed", "max_tasks", *RUNTIME_SETTINGS}
    # a nested value and a flag together: both apply
    both = BuildConfig(tasks=TasksConfig(near_misses=0), max_tasks=2)
    assert (both.tasks.near_misses, both.tasks.max_tasks) == (0, 2)


def test_a_build_recorded_with_flat_settings_is_read() -> None:
    """Manifests written before the configs were nested name the flags at the top level."""
    old = {"policies": ["oracle", "noisy-oracle:1.0"], "samples": 2, "max_tasks": 3,
           "strategies": ["procedural"], "workers": 2, "seed": 5, "max_usd": None,
           "executor": "local", "backend": "auto", "suite_timeout_s": None, "repeat": 3,
           "audit": None, "holdout": 0.1, "issue_writer": None, "emit_wm": False,
           "allow_contaminated": False}
    c = BuildConfig.from_manifest(old)
    assert c.policies == ("oracle", "noisy-oracle:1.0") and c.rollouts.samples == 2
    assert c.tasks.strategies == ["procedural"] and c.tasks.max_tasks == 3
    assert (c.tasks.seed, c.rollouts.seed, c.corpus.split.seed) == (5, 5, 5)


@pytest.mark.parametrize("bad", [{"policies": ()}, {"samples": 0}, {"holdout": 1.0},
                                 {"backend": "vm"}, {"colour": "red"}, {"policies": ("gpt4",)},
                                 {"tasks": {"strategies": ["fuzz"]}}])
def test_bad_settings_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        BuildConfig(**bad)


def test_unreadable_recorded_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="recorded build config"):
        BuildConfig.from_manifest({"samples": "many"})


def test_a_resumed_run_may_change_only_runtime_settings(tmp_path) -> None:
    from swemill.core.records import RunManifest
    from swemill.pipeline import run_build
    from swemill.store import Store

    store = Store.open(str(tmp_path))
    recorded = BuildConfig(workers=1, seed=5)
    store.write_manifest(RunManifest(run_id="r", command="build", source="sample",
                                     config=recorded.resolved(), status="complete"))
    with pytest.raises(ConfigError, match="run r resumes under its recorded settings; seed"):
        run_build(None, str(tmp_path), BuildConfig(seed=6), resume=True, run_id="r")
    done = run_build(None, str(tmp_path), BuildConfig(workers=3), resume=True, run_id="r")
    assert done.skipped == [s.name for s in STAGES]  # complete: nothing to do
