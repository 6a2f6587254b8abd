"""What validation stands on: the source, its gate verdict, the environment and the baseline.

``swemill tasks`` makes them itself (:func:`prepare`). ``swemill build`` makes them in its
gate and env stages, which write the verdict, the environment's recipe and the baseline into
the store; its tasks stage reads them back (:func:`from_store`) instead of gating the source
and running the suite again. On another machine (a Step Functions state) the environment is
built again from the same recipe and the recorded baseline is used as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from swemill.core.errors import StoreError
from swemill.core.records import Baseline, GateVerdict
from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.gate import GatePolicy, ensure_allowed, gate_directory
from swemill.repo.recipe import Recipe, load_recipe
from swemill.repo.runner_code import refuse_runner_repository
from swemill.repo.sources import ResolvedSource, resolve_source
from swemill.store import Store
from swemill.store.layout import env_prefix, gate_verdicts_key
from swemill.suite.baseline import run_baseline
from swemill.suite.timeouts import suite_timeout_for
from swemill.validate.tasks_config import TasksConfig

__all__ = ["Prepared", "prepare", "prepare_env", "from_store", "recipe_key", "baseline_key"]

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Prepared:
    src: ResolvedSource
    verdict: GateVerdict
    """Allowed (a refused source never gets this far)."""
    env: RepoEnv
    baseline: Baseline
    recipe: Recipe | None
    """The user's recipe (``--recipe``); None when it was detected (per commit, for the
    environments of older commits)."""
    suite_timeout_s: float
    """The bound on one run of the whole suite (given, or derived from the suite's size)."""


def recipe_key(src: ResolvedSource) -> str:
    return f"{env_prefix(src.repo, src.commit)}/recipe.json"


def baseline_key(src: ResolvedSource) -> str:
    return f"{env_prefix(src.repo, src.commit)}/baseline.json"


def _user_recipe(config: TasksConfig) -> Recipe | None:
    return load_recipe(config.recipe) if config.recipe else None


def gate(src: ResolvedSource, source: str, config: TasksConfig) -> GateVerdict:
    """The source's license and decontamination verdict (not yet enforced)."""
    return gate_directory(src.path, source=source, repo=src.repo,
                          policy=GatePolicy(allow_contaminated=config.allow_contaminated))


def prepare_env(src: ResolvedSource, config: TasksConfig, say: Say) -> tuple[RepoEnv, Baseline]:
    """Build (or reuse) the environment and its baseline, both cached per repo@commit. A
    repository that holds the test runner's own code is refused first, one that ships a pytest
    plugin the environment loads once it is built
    (:func:`~swemill.repo.runner_code.refuse_runner_repository`)."""
    refuse_runner_repository(src.path, src.repo)
    env = build_env(src, recipe=_user_recipe(config))
    refuse_runner_repository(src.path, src.repo, env.site_packages)
    baseline = run_baseline(env, backend=config.backend, suite_timeout=config.suite_timeout_s,
                            step=say)
    return env, baseline


def _prepared(src: ResolvedSource, verdict: GateVerdict, env: RepoEnv, baseline: Baseline,
              config: TasksConfig) -> Prepared:
    bound = suite_timeout_for(env.source_path, config.suite_timeout_s).seconds
    return Prepared(src, ensure_allowed(verdict), env, baseline, _user_recipe(config), bound)


def prepare(source: str, config: TasksConfig, say: Say) -> Prepared:
    """Resolve and gate ``source`` (a refused one raises), then its environment and baseline."""
    say("resolving the source")
    src = resolve_source(source)
    verdict = ensure_allowed(gate(src, source, config))
    say(f"environment of {src.repo}")
    env, baseline = prepare_env(src, config, say)
    return _prepared(src, verdict, env, baseline, config)


def from_store(source: str, store: Store, run_id: str, config: TasksConfig,
               say: Say) -> Prepared:
    """What the gate and env stages of run ``run_id`` wrote, read back: the verdict and the
    baseline as recorded, and the environment they were made in (a cache hit where the env
    stage ran; elsewhere built again from the same recipe, and checked to be the same one)."""
    src = resolve_source(source)
    verdicts = store.read_jsonl(gate_verdicts_key(run_id))
    if len(verdicts) != 1:
        raise StoreError(f"run {run_id}: the gate stage wrote {len(verdicts)} verdicts, not one")
    verdict = GateVerdict.model_validate(verdicts[0])
    key = baseline_key(src)
    if not store.exists(key):
        raise StoreError(f"run {run_id}: no baseline of {src.repo}@{src.commit[:12]} at "
                         f"{store.url_for(key)}: the env stage has not run")
    baseline = Baseline.model_validate(store.read_json(key))
    say(f"environment of {src.repo}")
    env = build_env(src, recipe=_user_recipe(config))
    if baseline.env_key != env.key or baseline.commit != src.commit:
        raise StoreError(f"run {run_id}: the recorded baseline is of {baseline.env_key} at "
                         f"{baseline.commit[:12]}, not of {env.key} at {src.commit[:12]}")
    return _prepared(src, verdict, env, baseline, config)
