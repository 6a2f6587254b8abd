"""The stage functions named in :data:`swemill.pipeline.stages.STAGES`.

Each takes a :class:`StageContext`, does its stage's work through the stage's own public
function, records its counts in the run manifest and returns a short summary (numbers the
CLI shows). Heavy modules are imported inside the functions, so listing the stages is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from swemill.core.errors import ConfigError
from swemill.core.records import RunManifest
from swemill.pipeline.manifest import update_manifest
from swemill.pipeline.stages import StageContext
from swemill.store.layout import env_prefix, gate_verdicts_key

__all__ = ["gate", "env", "tasks", "rollouts", "corpus", "report"]


def _contract(module: str, *names: str) -> list[Any]:
    """Functions and configs of a stage built elsewhere, with one clear error when absent."""
    try:
        mod = importlib.import_module(module)
        return [getattr(mod, n) for n in names]
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"this swemill has no {module}.{names[0]} ({type(exc).__name__}: {exc}); "
            "the stage cannot run"
        ) from exc


def gate(ctx: StageContext) -> dict[str, int]:
    from swemill.repo.gate import GatePolicy, ensure_allowed, gate_directory
    from swemill.repo.sources import resolve_source

    ctx.say(f"resolving {ctx.source}")
    src = resolve_source(ctx.source)
    ctx.say(f"license and decontamination of {src.repo}")
    verdict = gate_directory(src.path, source=ctx.source, repo=src.repo,
                             policy=GatePolicy(allow_contaminated=ctx.config.allow_contaminated))
    ctx.store.write_jsonl(gate_verdicts_key(ctx.run_id), [verdict])

    def record(m: RunManifest) -> None:
        m.counts["gate"] = {"in": 1, "out": int(verdict.allowed),
                            **({} if verdict.allowed else {"dropped_refused": 1})}
        m.license_tiers = {verdict.license_tier: 1}
        m.metadata["source"] = {"spec": ctx.source, "repo": src.repo, "commit": src.commit,
                                "kind": src.kind, "license_spdx": verdict.license_spdx,
                                "license_tier": verdict.license_tier,
                                "contaminated": verdict.contaminated,
                                "gate_reason": verdict.reason}

    update_manifest(ctx.store, ctx.run_id, record)
    ensure_allowed(verdict)
    return {"allowed": 1}


def env(ctx: StageContext) -> dict[str, int]:
    from swemill.repo.envbuild import build_env
    from swemill.repo.sources import resolve_source
    from swemill.testing.baseline import run_baseline

    src = resolve_source(ctx.source)
    ctx.say(f"environment of {src.repo}@{src.commit[:12]} (uv)")
    repo_env = build_env(src)
    baseline = run_baseline(repo_env, backend=ctx.config.backend, step=ctx.say)
    prefix = env_prefix(src.repo, src.commit)
    ctx.store.write_json(f"{prefix}/recipe.json", repo_env.recipe.model_dump(mode="json"))
    ctx.store.write_json(f"{prefix}/baseline.json", baseline.model_dump(mode="json"))
    outcomes: dict[str, int] = {}
    for outcome in baseline.outcomes.values():
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    counts = {"tests": len(baseline.outcomes), "flaky": len(baseline.flaky),
              "coverage_functions": len(baseline.coverage),
              **{f"tests_{k}": v for k, v in sorted(outcomes.items())}}

    def record(m: RunManifest) -> None:
        m.counts["env"] = counts
        m.metadata["env"] = {"key": repo_env.key, "python": repo_env.python_version,
                             "suite_wall_s": baseline.suite_wall_s}

    update_manifest(ctx.store, ctx.run_id, record)
    return {"tests": counts["tests"], "flaky": counts["flaky"]}


def _fields(config_cls: type, wanted: dict[str, Any]) -> dict[str, Any]:
    """The build settings a stage's config has fields for (dataclass or pydantic)."""
    names = set(getattr(config_cls, "model_fields", None) or
                getattr(config_cls, "__dataclass_fields__", {}))
    return {k: v for k, v in wanted.items() if k in names and v is not None}


def tasks(ctx: StageContext) -> dict[str, int]:
    run_tasks, config_cls = _contract("swemill.validate.validator", "run_tasks", "TasksConfig")
    c = ctx.config
    config = config_cls(**_fields(config_cls, {
        "max_tasks": c.max_tasks, "workers": c.workers, "seed": c.seed, "backend": c.backend,
        "strategies": c.strategies, "allow_contaminated": c.allow_contaminated}))
    result = run_tasks(ctx.source, ctx.store, ctx.run_id, config, resume=ctx.resume,
                       progress=_progress(ctx))
    return _summary(result, ("tasks", "candidates"))


def rollouts(ctx: StageContext) -> dict[str, int]:
    run_rollouts, config_cls = _contract("swemill.agent.rollout", "run_rollouts",
                                         "RolloutConfig")
    c = ctx.config
    config = config_cls(**_fields(config_cls, {
        "policies": c.policies, "samples": c.samples, "workers": c.workers, "seed": c.seed,
        "max_usd": c.max_usd, "backend": c.backend}))
    result = run_rollouts(ctx.store, ctx.run_id, config, run_id=ctx.run_id, resume=ctx.resume,
                          progress=_progress(ctx))
    return _summary(result, ("trajectories", "pairs"))


def corpus(ctx: StageContext) -> dict[str, int]:
    from swemill.corpus.assemble import CorpusConfig
    from swemill.corpus.split import SplitConfig
    from swemill.corpus.stage import run_corpus

    c = ctx.config
    ctx.say("filter, scrub, dedup, split")
    config = CorpusConfig(emit_wm=c.emit_wm,
                          split=SplitConfig(holdout_fraction=c.holdout, seed=c.seed))
    summary = run_corpus(ctx.store, ctx.run_id, config, resume=ctx.resume)
    return dict(summary.rows)


def report(ctx: StageContext) -> dict[str, int]:
    from swemill.corpus.report import write_report

    ctx.say("rendering the HTML report")
    write_report(ctx.store, ctx.run_id)
    return {}


def _progress(ctx: StageContext) -> Any:
    """The ``progress(label, done, total)`` callback the tasks and rollouts stages take."""
    def progress(label: str, done: int = 0, total: int = 0) -> None:
        ctx.say(f"{label} ({done}/{total})" if total else label)
    return progress


def _summary(result: Any, names: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for name in names:
        value = getattr(result, name, None)
        if isinstance(value, int):
            out[name] = value
        elif isinstance(value, list | tuple | dict):
            out[name] = len(value)
    return out
