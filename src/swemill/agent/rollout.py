"""The rollout stage: a run's tasks -> graded trajectories and execution preference pairs.

Reads ``tasks/run_id=<tasks run>/`` (and, for the oracles only, ``golden/`` in this host
process), runs :func:`~swemill.agent.sampling.sample_task` per task on a pool of worker threads
(model calls are I/O; test runs are subprocesses), and writes, by default into the *same* run:

- ``trajectories/run_id=<id>/part-<shard>.parquet`` (the canonical IR),
- ``pairs/run_id=<id>/part-<shard>.parquet`` (:class:`PreferencePair`, when a shard has any),
- ``rollouts/run_id=<id>/shards/<shard>.json``: the shard's completion record (its task ids,
  counts, cost, solve rates); a resumed run skips a shard whose record names the same tasks
  and whose trajectory and pair shards are intact, and otherwise drops all three and redoes
  it (so deleting a corrupt part, with or without its marker, redoes exactly that shard),
- ``rollouts/run_id=<id>/inflight/<trajectory>.json``: each running trajectory, rewritten after
  every step and deleted once its shard is written (what a crash leaves behind),
- ``rollouts/run_id=<id>/config.json`` and the counts, cost and policy in the run's manifest.

One :class:`~swemill.policies.budget.Budget` is shared by all workers; once it refuses a call, no
new task starts, the shards it interrupted are left unwritten (a resume with more money redoes
them) and the run ends cleanly with ``stopped=True``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from swemill.agent.env import EnvConfig, EnvResolver, TaskEnv
from swemill.agent.harness import failed_trajectory
from swemill.agent.rollout_config import RolloutConfig
from swemill.agent.sampling import SampleResult, sample_task
from swemill.agent.shards import run_shards
from swemill.core.errors import ConfigError, StoreError, SwemillError
from swemill.core.progress import Progress, no_progress
from swemill.core.records import Golden, PreferencePair, RunManifest, Task, Trajectory, utcnow
from swemill.executors import Executor
from swemill.policies.budget import Budget
from swemill.policies.policy import Policy, policy_from_spec, split_spec
from swemill.store import Store
from swemill.store.layout import check_run_id, manifest_key, run_prefix, shard_name
from swemill.validate.difficulty import SolveStats, write_difficulty

__all__ = ["RolloutConfig", "RolloutResult", "RolloutStage", "run_rollouts", "run_shard",
           "PAIRS_STAGE"]

PAIRS_STAGE = "pairs"  # the corpus stage reads preference pairs from here
ORACLES = ("oracle", "noisy-oracle")


@dataclass(slots=True)
class RolloutResult:
    run_id: str
    tasks: int
    shards_written: int = 0
    shards_skipped: int = 0
    """Already complete (``resume``)."""
    shards_stopped: int = 0
    """Interrupted by the run's dollar budget and left for a resume."""
    trajectories: int = 0
    pairs: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    """Spent by this invocation (settled costs; never more than ``max_usd``)."""
    solve_rates: dict[str, float | None] = field(default_factory=dict)
    divergence_rate: float | None = None
    difficulty: dict[str, int] = field(default_factory=dict)
    """Tasks per label in the run's ``difficulty/`` table, and ``measured`` (by rollouts)."""
    stopped: bool = False
    budget: dict[str, Any] = field(default_factory=dict)


def _rollouts_key(run_id: str, *parts: str) -> str:
    return "/".join([f"rollouts/run_id={check_run_id(run_id)}", *parts])


class RolloutStage:
    """One invocation's shared state: config, store, policies, budget, stop flag."""

    def __init__(self, store: Store, tasks_run_id: str, run_id: str, config: RolloutConfig,
                 progress: Progress | None) -> None:
        self.store, self.run_id, self.config = store, run_id, config
        self.tasks_run_id = tasks_run_id
        self.say: Progress = progress or no_progress
        self.specs = config.candidate_specs()
        self.price = config.parsed_price()
        self.budget = Budget(config.max_usd, name="run")
        self.stop = threading.Event()
        self.env_config = EnvConfig(backend=config.backend, regression=config.regression,
                                    weights=config.reward_weights(), cache=config.cache_path(),
                                    command_timeout_s=config.command_timeout_s,
                                    test_timeout_s=config.test_timeout_s)
        self.resolver = EnvResolver(self.env_config.cache)
        self.goldens: dict[str, Golden] = {}
        if any(split_spec(s)[0] in ORACLES for s in self.specs):
            # only here, in the host process that drives the oracles, is golden/ read
            self.goldens = {g.instance_id: g for g in
                            store.read_records("golden", tasks_run_id, Golden)}

    def policy(self, spec: str, task: Task, i: int) -> Policy:
        ctx: dict[str, Any] = {"seed": f"{self.config.seed}:{task.instance_id}:{i}",
                               "retry": self.config.retry_policy(), "price": self.price,
                               "max_tokens": self.config.max_output_tokens,
                               "temperature": self.config.temperature}
        if split_spec(spec)[0] in ORACLES:
            golden = self.goldens.get(task.instance_id)
            if golden is not None:
                ctx["golden"] = golden
        return policy_from_spec(spec, **{k: v for k, v in ctx.items() if v is not None})

    def check(self, task: Task) -> None:
        """Build every policy once before any work: a bad spec, a missing key or a dollar
        budget without a price is one clear error, not a failure per trajectory."""
        for i, spec in enumerate(dict.fromkeys(self.specs)):
            p = self.policy(spec, task, i)
            if self.config.max_usd is not None and not p.synthetic:
                p.worst_case_cost([], [])

    def checkpoint(self, traj: Trajectory) -> None:
        if self.config.checkpoint:
            self.store.write_text(_rollouts_key(self.run_id, "inflight",
                                                _slug(traj.trajectory_id) + ".json"),
                                  traj.model_dump_json())

    def run_task(self, task: Task) -> SampleResult:
        try:
            policies = [self.policy(s, task, i) for i, s in enumerate(self.specs)]
        except SwemillError as exc:  # e.g. no golden row for this task: its samples fail
            fails = [failed_trajectory(task, s, f"policy: {exc}",
                                       f"{self.run_id}:{task.instance_id}#s{i}", "policy_error")
                     for i, s in enumerate(self.specs)]
            return SampleResult(fails, [], [], [])
        env = TaskEnv(self.env_config, store=self.store, resolver=self.resolver)
        return sample_task(env, task, policies, self.config.limits(), self.budget,
                           branch_turns=self.config.branch_turns, on_step=self.checkpoint,
                           id_prefix=f"{self.run_id}:{task.instance_id}",
                           max_pairs=self.config.max_pairs)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)[:200]


def _select(stage: RolloutStage, res: SampleResult, counts: Counter[str]) -> bool:
    rate = res.solve_rate
    for t in res.trajectories:
        t.metadata["solve_rate"] = rate
    for p in res.pairs:
        p.metadata["solve_rate"] = rate
    if stage.config.select == "fractional" and not (rate is not None and 0.0 < rate < 1.0):
        counts["dropped_not_fractional"] += 1
        return False
    return True


def run_shard(stage: RolloutStage, shard: str, tasks: list[Task]) -> dict[str, Any] | None:
    """Run and write one shard; None when the run's budget interrupted it."""
    trajs: list[Trajectory] = []
    pairs: list[PreferencePair] = []
    counts: Counter[str] = Counter()
    rates: dict[str, float | None] = {}
    samples: dict[str, dict[str, Any]] = {}
    points = divergent = 0
    for task in tasks:
        if stage.stop.is_set():
            return None
        res = stage.run_task(task)
        if any(t.metadata.get("stop_reason") == "budget" for t in res.trajectories):
            stage.stop.set()
            return None
        rates[task.instance_id] = res.solve_rate
        graded = [t for t in res.samples if t.outcome is not None]
        samples[task.instance_id] = {  # for difficulty/: n graded samples, c resolved
            "n": len(graded),
            "resolved": sum(1 for t in graded if t.outcome and t.outcome.resolved),
            "policy": ",".join(dict.fromkeys(t.policy for t in res.samples))}
        points, divergent = points + res.compared, divergent + res.divergent
        if _select(stage, res, counts):
            trajs += res.trajectories
            pairs += res.pairs
    for t in trajs:
        counts[t.admission] += 1
        counts["failed"] += bool(t.error)
        counts["flagged"] += bool(t.flags)
        counts["format_errors"] += len(t.metadata.get("format_errors") or [])
        for kind in t.flags:
            counts[f"flag_{kind}"] += 1
    for name, rows in ((PAIRS_STAGE, pairs), ("trajectories", trajs)):
        if rows:
            stage.store.write_records(name, stage.run_id, shard, rows)
        else:  # an earlier attempt's rows must not outlive this one
            stage.store.drop_shard(name, stage.run_id, shard)
    summary = {"shard": shard, "tasks": [t.instance_id for t in tasks], "trajectories": len(trajs),
               "pairs": len(pairs), "counts": dict(counts), "solve_rates": rates,
               "samples": samples,
               "decision_points": points, "divergent_points": divergent,
               "cost_usd": sum(t.usage.cost_usd for t in trajs), "written_at": utcnow()}
    stage.store.write_json(_rollouts_key(stage.run_id, "shards", f"{shard}.json"), summary)
    for t in trajs:
        stage.store.delete(_rollouts_key(stage.run_id, "inflight",
                                         _slug(t.trajectory_id) + ".json"))
    return summary


def _load_tasks(store: Store, tasks_run_id: str, run_id: str) -> list[Task]:
    tasks = sorted(store.read_records("tasks", tasks_run_id, Task), key=lambda t: t.instance_id)
    if not tasks:
        raise StoreError(f"run {tasks_run_id} in {store.url} has no tasks")
    if run_id != tasks_run_id and not store.list_keys(run_prefix("tasks", run_id)):
        # the corpus stage reads tasks and goldens of the run it builds; carry them over
        store.write_records("tasks", run_id, shard_name(0, 1), tasks)
        goldens = store.read_records("golden", tasks_run_id, Golden)
        if goldens:
            store.write_records("golden", run_id, shard_name(0, 1), goldens)
    return tasks


def _shard_intact(store: Store, run_id: str, name: str, tasks: list[Task]) -> bool:
    """Whether shard ``name``'s record names exactly ``tasks`` and every Parquet shard it
    counts is there, uncorrupted, and no other one is."""
    try:
        record = store.read_json(_rollouts_key(run_id, "shards", f"{name}.json"))
    except StoreError:
        return False
    if not isinstance(record, dict) or record.get("tasks") != [t.instance_id for t in tasks]:
        return False
    for stage, key in (("trajectories", "trajectories"), (PAIRS_STAGE, "pairs")):
        if record.get(key) and not store.is_intact(stage, run_id, name):
            return False
        if not record.get(key) and store.is_complete(stage, run_id, name):
            return False
    return True


def _keep_finished(store: Store, run_id: str, shards: dict[str, list[Task]]) -> set[str]:
    """The shards an earlier attempt finished and that are still whole. Every other shard
    record (a broken shard's, or one named for another number of tasks) is removed with its
    trajectory and pair shards, so the run holds only what this run will count."""
    keep: set[str] = set()
    for record in store.list_keys(_rollouts_key(run_id, "shards")):
        name = record.removesuffix(".json")
        if name in shards and _shard_intact(store, run_id, name, shards[name]):
            keep.add(name)
            continue
        store.delete(_rollouts_key(run_id, "shards", record))  # first: the shard is unfinished
        store.drop_shard("trajectories", run_id, name)
        store.drop_shard(PAIRS_STAGE, run_id, name)
    return keep


def run_rollouts(store: Store, tasks_run_id: str, config: RolloutConfig, *,
                 run_id: str | None = None, resume: bool = False,
                 progress: Progress | None = None,
                 executor: Executor | None = None) -> RolloutResult:
    """Roll ``config.policy`` out over the tasks of ``tasks_run_id``; see the module docstring.
    ``progress(label, done, total)`` is called as tasks finish. ``executor``, when given, runs
    the shards instead of the one ``config.executor`` names."""
    run_id = check_run_id(run_id or tasks_run_id)
    config = config.check()
    started = time.monotonic()
    tasks = _load_tasks(store, tasks_run_id, run_id)
    size = config.tasks_per_shard
    groups = [tasks[i:i + size] for i in range(0, len(tasks), size)]
    # shards are named over all the tasks, so --max-tasks only decides how many run now
    names = [shard_name(k, len(groups)) for k in range(len(groups))]
    all_names, all_groups = list(names), list(groups)
    if config.max_tasks is not None:
        keep = -(-config.max_tasks // size)
        groups, names = groups[:keep], names[:keep]
        tasks = [t for g in groups for t in g]
    done = set(store.list_keys(_rollouts_key(run_id, "shards")))
    recorded = [n for n in names if f"{n}.json" in done]
    if recorded and not resume:
        raise ConfigError(f"run {run_id} already has rollouts ({len(recorded)} of {len(names)} "
                          "shards); pass --resume to finish it or --run-id for a new run")
    whole = _keep_finished(store, run_id, dict(zip(all_names, all_groups, strict=True)))
    finished = [n for n in names if n in whole]
    stage = RolloutStage(store, tasks_run_id, run_id, config, progress)
    stage.check(tasks[0])
    store.write_json(_rollouts_key(run_id, "config.json"), config.model_dump(mode="json"))
    todo = [(n, g) for n, g in zip(names, groups, strict=True) if n not in finished]
    result = RolloutResult(run_id=run_id, tasks=len(tasks), shards_skipped=len(finished))
    stage.say("rollouts", 0, len(todo))
    if executor is not None or config.executor != "local":  # one shard per item
        summaries = run_shards(store, tasks_run_id, run_id, config, todo, executor)
        result.shards_written = sum(s is not None for s in summaries)
        result.shards_stopped = len(summaries) - result.shards_written
        result.stopped = result.shards_stopped > 0
        result.cost_usd = sum(float(s["cost_usd"]) for s in summaries if s is not None)
        result.budget = {"max_usd": config.max_usd, "spent_usd": result.cost_usd,
                         "shared_per_shard": True}
        _finish(store, run_id, config, result, time.monotonic() - started)
        return result
    with ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="rollout") as pool:
        futures = {pool.submit(run_shard, stage, n, g): n for n, g in todo}
        for k, fut in enumerate(as_completed(futures), 1):
            summary = fut.result()
            if summary is None:
                result.shards_stopped += 1
            else:
                result.shards_written += 1
            stage.say(f"rollouts ({stage.budget.spent_usd:.4f} $)", k, len(todo))
    result.stopped = stage.stop.is_set()
    result.cost_usd = stage.budget.spent_usd
    result.budget = stage.budget.summary()
    _finish(store, run_id, config, result, time.monotonic() - started)
    return result


def _finish(store: Store, run_id: str, config: RolloutConfig, result: RolloutResult,
            wall_s: float) -> None:
    """Totals over every written shard (also earlier invocations) into the run's manifest."""
    counts: Counter[str] = Counter()
    points = divergent = 0
    stats: dict[str, SolveStats] = {}
    for name in store.list_keys(_rollouts_key(run_id, "shards")):
        if not name.endswith(".json"):
            continue
        s = store.read_json(_rollouts_key(run_id, "shards", name))
        counts.update(s["counts"])
        counts["trajectories"] += s["trajectories"]
        counts["pairs"] += s["pairs"]
        counts["tasks_done"] += len(s["tasks"])
        result.solve_rates.update(s["solve_rates"])
        stats.update({iid: SolveStats(v["n"], v["resolved"], v["policy"])
                      for iid, v in (s.get("samples") or {}).items()})
        points, divergent = points + s["decision_points"], divergent + s["divergent_points"]
    counts["in"] = result.tasks
    counts["out"] = counts["trajectories"]
    counts["stopped_budget"] = result.shards_stopped
    result.trajectories, result.pairs = counts["trajectories"], counts["pairs"]
    result.divergence_rate = divergent / points if points else None
    labels = write_difficulty(store, run_id, stats)
    counts["difficulty_rows"] = len(labels)
    result.difficulty = dict(Counter(d.label for d in labels))
    result.difficulty["measured"] = sum(d.label_source == "rollouts" for d in labels)
    result.counts = dict(counts)
    manifest = (store.read_manifest(run_id) if store.exists(manifest_key(run_id))
                else RunManifest(run_id=run_id, command="rollout"))
    meta = dict(manifest.metadata.get("rollouts") or {})
    manifest.counts["rollouts"] = result.counts
    manifest.cost_usd += result.cost_usd
    manifest.policies = sorted(set(manifest.policies) | set(config.candidate_specs()))
    manifest.timings_s["rollouts"] = round(manifest.timings_s.get("rollouts", 0.0) + wall_s, 3)
    meta.update(config=config.model_dump(mode="json"), solve_rates=result.solve_rates,
                divergence_rate=result.divergence_rate, stopped=result.stopped,
                cost_usd=round(float(meta.get("cost_usd", 0.0)) + result.cost_usd, 9))
    manifest.metadata["rollouts"] = meta
    store.write_manifest(manifest)
