"""``run_tasks``: a source in, validated SWE tasks out (``tasks/`` + ``golden/`` + snapshots).

Steps: resolve and gate the source (a benchmark's repository is refused unless allowed; the
license tier goes on every row), build the environment and the baseline (both cached; or take
what ``swemill build``'s gate and env stages made, :mod:`swemill.validate.prepare`), then
for each strategy generate candidates lazily and validate them on parallel workers (see
:mod:`swemill.validate.pool` and :mod:`swemill.validate.check`); ``combine`` runs last, over
the bugs the other strategies validated. Each strategy's rows are one shard, golden first
then tasks, and the manifest records its counts, so ``resume`` skips finished strategies
whose shards are intact (a missing or corrupt one is redone). Combine is fed from what the
earlier strategies *wrote* (:mod:`swemill.validate.feed`), on a fresh run as on a resume, and
is redone when what it would be fed differs from what it was fed.
"""

from __future__ import annotations

import resource
import time
from collections import Counter

from swemill.core.progress import Progress, no_progress
from swemill.core.records import CandidateRecord, Golden, RunManifest, Task, utcnow
from swemill.executors import Executor
from swemill.repo.commitenv import CommitEnvs
from swemill.sandbox import Limits
from swemill.store import Store, schema_for_model
from swemill.store.layout import check_run_id, gate_verdicts_key, manifest_key
from swemill.suite.runner import command_line
from swemill.synth import make_strategy
from swemill.synth.combine import ValidatedBug
from swemill.synth.dataset_rows import RowsSource
from swemill.synth.strategy import RepoView
from swemill.validate.audit import audit_size, run_audit
from swemill.validate.check import CheckContext, Checked
from swemill.validate.chunks import ExecutorPool, executor_for_tasks
from swemill.validate.drops import CANDIDATES_STAGE, candidate_records, refused_records, summarize
from swemill.validate.emit import instance_id_of
from swemill.validate.feed import FEED_STAGE, feed_digest, read_feed, write_feed
from swemill.validate.inside.protocol import Flags
from swemill.validate.pool import WorkerPool
from swemill.validate.prepare import Prepared, prepare
from swemill.validate.resume import resumed as _resumed
from swemill.validate.resume import shard_name as _shard
from swemill.validate.resume import sources_of as _sources
from swemill.validate.runstate import RunState, bug_writer, charge, problem_writer, run_budget
from swemill.validate.shadow import ShadowStats
from swemill.validate.tasks_config import (
    MODEL_STRATEGIES,
    StrategyYield,
    TasksConfig,
    TasksResult,
)

__all__ = ["run_tasks", "TasksConfig", "TasksResult"]


def _cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    return s.ru_utime + s.ru_stime


def _quotas(total: int, names: list[str]) -> dict[str, int]:
    k = len(names)
    return {n: total // k + (1 if i < total % k else 0) for i, n in enumerate(names)}


def _share_barren(quotas: dict[str, int], order: list[str], run: RunState,
                  view: RepoView) -> dict[str, str]:
    """Move the share of a strategy that can yield nothing on this repository (pr-mirror on
    a one-commit history) to the first strategy that may, before any runs; returns why each
    such strategy yields nothing. What a strategy leaves unfilled passes on in the loop."""
    barren = {n: reason for n in order
              if (reason := getattr(_strategy(n, run, []), "barren", lambda _view: None)(view))}
    able = [n for n in order if n not in barren and n != "combine"]
    if able:
        quotas[able[0]] += sum(quotas[n] for n in barren)
        quotas.update(dict.fromkeys(barren, 0))
    return barren


def _strategy(name: str, run: RunState, bugs: list[ValidatedBug]):  # type: ignore[no-untyped-def]
    config = run.config
    if name in MODEL_STRATEGIES:
        return make_strategy(name, writer=run.bug_writer)
    if name == "combine":
        return make_strategy(name, bugs=bugs)
    if name == "rows":
        return make_strategy(name, source=RowsSource(rows_path=config.rows,  # type: ignore[arg-type]
                                                     repo_dir=config.rows_repo))
    return make_strategy(name)


def _manifest(store: Store, run_id: str, spec: str, config: TasksConfig) -> RunManifest:
    if store.exists(manifest_key(run_id)):
        return store.read_manifest(run_id)
    return RunManifest(run_id=run_id, command="swemill tasks", source=spec,
                       config={"tasks": config.model_dump(mode="json")})


def run_tasks(source: str, store: Store, run_id: str, config: TasksConfig | None = None, *,
              prepared: Prepared | None = None,
              resume: bool = False,
              progress: Progress | None = None,
              executor: Executor | None = None) -> TasksResult:
    """Turn ``source`` into validated tasks under ``run_id`` in ``store``; see the module
    docstring. ``prepared`` is the gate verdict, environment and baseline when they were made
    already (``swemill build``'s gate and env stages, :func:`~swemill.validate.prepare.
    from_store`); without it they are made here. ``progress(label, done, total)`` is called as
    work advances. ``executor``, when given, validates the candidates instead of the one
    ``config.executor`` names (an :class:`~swemill.executors.aws_batch.AwsBatchExecutor` with
    its own client, say)."""
    config = (config or TasksConfig()).check()
    check_run_id(run_id)
    if executor is None and config.executor != "local":  # bad settings fail before any work
        executor = executor_for_tasks(config.executor, config.workers, store, source)
    manifest = _manifest(store, run_id, source, config)
    budget = run_budget(config, manifest)  # bug writing and issue writing share it
    writer, issues = bug_writer(config, budget), problem_writer(config, budget)
    say: Progress = progress or no_progress
    started = time.monotonic()
    prep = prepared or prepare(source, config, lambda msg: say(msg, 0, 0))
    src, verdict, env, baseline = prep.src, prep.verdict, prep.env, prep.baseline
    suite_timeout, recipe = prep.suite_timeout_s, prep.recipe
    setup_s = time.monotonic() - started
    store.write_jsonl(gate_verdicts_key(run_id), [verdict])
    envs = CommitEnvs(env, src, recipe=recipe, limit=config.commit_envs,
                      say=lambda line: say(line, 0, 0))
    run = RunState(source, src, env, store, run_id, config, verdict.license_tier,
                   command_line(env), say, envs, bug_writer=writer, issue_writer=issues)
    result = TasksResult(run_id, source, src.repo, src.commit, verdict.license_tier,
                         timings_s={"setup": round(setup_s, 3)},
                         env_skipped=[f"{k.requirement}: {k.reason}" for k in env.skipped])
    ctx = CheckContext(baseline, src.commit, config.timeout_factor, config.timeout_margin_s,
                       repeat=config.repeat, near_misses=config.near_misses)
    limits = Limits(timeout_s=suite_timeout, memory_mb=config.memory_mb)
    if executor is None:  # config.executor is local: anything else was built above
        pool = WorkerPool(env, src.commit, ctx, n=config.workers, backend=config.backend,
                          limits=limits, image=config.head_image, envs=envs,
                          flags=Flags.without(config.fast_paths_off),
                          shadow_every=config.shadow_every)
    else:  # the same stream contract on a distributed executor (swemill.executors)
        pool = ExecutorPool(executor, env, src.commit, ctx, n=config.workers,
                            backend=config.backend, limits=limits, source=source,
                            image=config.head_image)
    quotas = _quotas(config.max_tasks, config.strategies)
    order = [s for s in config.strategies if s != "combine"]
    order += ["combine"] if "combine" in config.strategies else []
    view = RepoView(root=src.path, repo=src.repo, commit=src.commit, baseline=baseline,
                    seed=config.seed)
    bugs: list[ValidatedBug] = []
    barren = _share_barren(quotas, order, run, view)
    cpu0 = _cpu()
    v_start = time.monotonic()
    unfilled = 0  # a strategy's share it could not fill passes on to the next one
    try:
        for i, name in enumerate(order):
            quota = quotas[name] + unfilled
            old = (_resumed(store, run.spec, run.src.repo, run_id, name, manifest, bugs)
                   if resume else None)
            if old is not None:
                result.yields[name], pairs = old
                result.resumed.append(name)
            else:
                feed = config.combine_feed if i == 0 and "combine" in order else 0
                fed = feed_digest(bugs) if name == "combine" else None
                pairs, n_feed = _one_strategy(run, pool, view, name, quota, feed, bugs, result)
                _record(store, manifest, run, result, name, feed=n_feed, fed=fed)
            unfilled = max(0, quota - result.yields[name].tasks)
            result.yields[name].note = result.yields[name].note or barren.get(name)
            _collect(result, name, pairs)
            if _sources(manifest)[source][name].get("feed", 0):
                bugs += read_feed(store, run_id, _shard(src.repo, name))
    finally:
        pool.close()
    result.cpu_s = _cpu() - cpu0 + pool.cpu_s
    result.commit_envs = dict(envs.notes)
    result.head_image = pool.image_stats()
    _shadowed(result, pool.shadow.stats, say)
    if result.head_flaky:
        _unflake(store, manifest, run, result)
    result.timings_s["validate"] = round(time.monotonic() - v_start, 3)
    k = audit_size(len(result.instance_ids), config.audit)
    if k:
        a_start = time.monotonic()
        findings = run_audit(store, _read_pairs(store, run_id, result.instance_ids), k,
                             lambda t: envs.by_key(str(t.metadata.get("env_key"))) or
                             envs.for_commit(t.base_commit),
                             baseline, seed=config.seed, backend=config.backend, say=say)
        result.audited = len(findings)
        # a test that did not pass on the head tree is flaky for the run, not this task's
        # fault: out of every list (apscheduler 3.10.4's test_broken_pool failed the audit's
        # graded run of one task and was in the PASS_TO_PASS of the four others)
        flaky = {t for f in findings if f.flaky_only for t in f.head_failed}
        result.audit_rejected = {f.instance_id: f.describe() for f in findings
                                 if not f.ok and not f.flaky_only}
        if flaky - set(result.head_flaky):
            result.head_flaky = sorted({*result.head_flaky, *flaky})
            _unflake(store, manifest, run, result)
        _remove(store, manifest, run, result)
        result.timings_s["audit"] = round(time.monotonic() - a_start, 3)
    result.timings_s["total"] = round(time.monotonic() - started, 3)
    result.drop_summary = summarize(
        r for name in order
        for r in store.read_shard(CANDIDATES_STAGE, run_id, _shard(src.repo, name),
                                  CandidateRecord))
    _finish(store, manifest, result)
    return result


def _one_strategy(run: RunState, pool: WorkerPool, view: RepoView, name: str, quota: int,
                  feed: int, bugs: list[ValidatedBug], result: TasksResult
                  ) -> tuple[list[tuple[Task, Golden]], int]:
    """Validate and write one strategy's shards; returns its pairs and how many bugs it
    wrote to its feed shard for combine. Shards it has nothing for are removed, so no
    earlier attempt's rows outlive a redo."""
    config = run.config
    target = max(quota, feed)
    strategy = _strategy(name, run, bugs)
    view.max_candidates = config.max_candidates or 8 * target + 8
    made = iter(strategy.candidates(view))
    try:
        stream = pool.stream(made, target, lambda label, done, _total: run.progress(
            f"{name}: {label}", done, view.max_candidates or 0))
    finally:  # a model strategy's calls in flight end (and are paid) before costs are read
        getattr(made, "close", lambda: None)()
    accepted = stream.accepted
    written = accepted[:quota]
    fed = _fed(run, accepted) if "combine" in config.strategies and name != "combine" else []
    report = strategy.report
    if report.calls and report.yielded > len(stream.checked):  # a model's answers validated
        report.skipped["not_needed"] += report.yielded - len(stream.checked)  # past the prefix
    y = StrategyYield(candidates=len(stream.checked) + len(report.refused), tasks=len(written),
                      valid=len(accepted), drops=dict(Counter(
                          [c.reason for c in stream.checked if not c.verdict.accepted]
                          + [d.reason for d in report.refused])),
                      note=report.reason, skipped=dict(report.skipped),
                      cost_usd=report.cost_usd, calls=report.calls)
    result.yields[name] = y
    iw = run.issue_writer
    calls0, cost0 = (iw.calls, iw.cost_usd) if iw else (0, 0.0)
    result.head_flaky = sorted({*result.head_flaky,
                                *(t for c in stream.checked for t in c.verdict.head_failed)})
    pairs = run.emit(written)
    if iw is not None:
        y.statement_calls, y.statement_cost_usd = iw.calls - calls0, iw.cost_usd - cost0
    y.statement_fallbacks = dict(Counter(str(t.metadata.get("statement_fallback", "leak"))
                                         for t, _ in pairs
                                         if t.metadata.get("statement") == "fallback"))
    shard, store = _shard(run.src.repo, name), run.store
    rows = candidate_records(stream.checked, [t.instance_id for t, _ in pairs], run.src.repo)
    rows += refused_records(report.refused, name, run.src.repo, run.src.commit, len(rows))
    store.write_records(CANDIDATES_STAGE, run.run_id, shard, rows,
                        schema_for_model(CandidateRecord))
    if pairs:
        store.write_records("golden", run.run_id, shard, [g for _, g in pairs])
        store.write_records("tasks", run.run_id, shard, [t for t, _ in pairs])
    else:
        store.drop_shard("tasks", run.run_id, shard)
        store.drop_shard("golden", run.run_id, shard)
    if fed:
        write_feed(store, run.run_id, shard, fed)
    else:
        store.drop_shard(FEED_STAGE, run.run_id, shard)
    return pairs, len(fed)


def _fed(run: RunState, accepted: list[Checked]) -> list[ValidatedBug]:
    """Every accepted bug combine can merge (made on the base commit itself), not only the
    ones written as tasks: the first strategy validates extra ones for combine."""
    return [ValidatedBug(instance_id=instance_id_of(c.candidate.repo or run.src.repo,
                                                    c.candidate.candidate_id),
                         bug_patch=c.candidate.bug_patch, base_commit=c.base_commit,
                         fail_to_pass=tuple(c.verdict.fail_to_pass),
                         pass_to_pass=tuple(c.verdict.pass_to_pass),
                         changed=tuple(c.candidate.changed))
            for c in accepted if not c.base_patch.strip()]


def _collect(result: TasksResult, name: str, pairs: list[tuple[Task, Golden]]) -> None:
    y = result.yields[name]
    result.tasks += len(pairs)
    result.candidates += y.candidates
    for reason, n in y.drops.items():
        result.drops[reason] = result.drops.get(reason, 0) + n
    result.instance_ids += [t.instance_id for t, _ in pairs]


def _counts(y: StrategyYield) -> dict[str, int]:
    fell = y.statement_fallbacks
    return {"in": y.candidates, "out": y.tasks, "valid": y.valid,
            **({"statement_fallback": sum(fell.values())} if fell else {}),
            **{f"statement_fallback_{k}": v for k, v in sorted(fell.items())},
            **{f"dropped_{k}": v for k, v in sorted(y.drops.items())},
            **{f"skipped_{k}": v for k, v in sorted(y.skipped.items())}}


def _record(store: Store, manifest: RunManifest, run: RunState, result: TasksResult,
            name: str, *, feed: int, fed: str | None) -> None:
    """The strategy's counts, how many bugs it fed combine and (for combine) a digest of
    what it was fed: written after its shards, so a record always means they are there."""
    y = result.yields[name]
    entry: dict[str, object] = {"counts": _counts(y), "tier": run.tier, "feed": feed}
    if y.calls:
        entry["cost_usd"] = round(y.cost_usd, 9)
        charge(manifest, "bug_writer", run.bug_writer, y.calls, y.cost_usd)
    if y.statement_calls:
        entry["statement_cost_usd"] = round(y.statement_cost_usd, 9)
        charge(manifest, "issue_writer", run.issue_writer, y.statement_calls,
               y.statement_cost_usd)
    if fed is not None:
        entry["fed"] = fed
    _sources(manifest).setdefault(run.spec, {})[name] = entry
    _totals(manifest)
    store.write_manifest(manifest)


def _totals(manifest: RunManifest) -> None:
    """counts["tasks"], counts["tasks.<strategy>"] and license tiers, over every source."""
    total: Counter[str] = Counter()
    per: dict[str, Counter[str]] = {}
    tiers: Counter[str] = Counter()
    for strategies in _sources(manifest).values():
        for name, entry in strategies.items():
            counts: dict[str, int] = entry["counts"]  # type: ignore[assignment]
            per.setdefault(name, Counter()).update(counts)
            total.update(counts)
            tiers[str(entry["tier"])] += counts.get("out", 0)
    for name, c in per.items():
        manifest.counts[f"tasks.{name}"] = dict(c)
    manifest.counts["tasks"] = dict(total)
    for tier, n in tiers.items():
        manifest.license_tiers[tier] = n


def _unflake(store: Store, manifest: RunManifest, run: RunState, result: TasksResult) -> None:
    """Tests that did not pass on the head tree, in some candidate's golden run or in the
    audit's runs, are flaky for the whole run (a candidate's own verdict left them out
    already; other tasks may hold them): out of every task's PASS_TO_PASS, and a task whose
    FAIL_TO_PASS holds one is removed (its bug's evidence rests on it)."""
    flaky = set(result.head_flaky)
    say = run.progress
    for name in _sources(manifest).get(run.spec, {}):
        shard = _shard(run.src.repo, name)
        if not store.is_complete("tasks", run.run_id, shard):
            continue
        tasks = store.read_shard("tasks", run.run_id, shard, Task)
        if not any(flaky & {*t.FAIL_TO_PASS, *t.PASS_TO_PASS} for t in tasks):
            continue
        for t in tasks:  # (a task to remove goes with its shard's other rows, by _remove)
            if held := sorted(flaky & set(t.FAIL_TO_PASS)):
                result.flaky_removed[t.instance_id] = held[0]
        store.write_records("tasks", run.run_id, shard, [
            t.model_copy(update={"PASS_TO_PASS": p2p, "n_pass_to_pass": len(p2p)})
            for t in tasks for p2p in [[x for x in t.PASS_TO_PASS if x not in flaky]]])
    say(f"{len(flaky)} test(s) did not pass on the head tree: out of every list (first "
        f"{sorted(flaky)[0]})", 0, 0)
    if result.flaky_removed:
        _remove(store, manifest, run, result, {
            i: f"its FAIL_TO_PASS test {test} did not pass on the head tree (a golden run "
               "or the audit)" for i, test in result.flaky_removed.items()},
            "flaky_at_head")


def _remove(store: Store, manifest: RunManifest, run: RunState, result: TasksResult,
            why: dict[str, str] | None = None, reason: str = "audit_rejected") -> None:
    """Take the tasks ``why`` names (default: the ones the audit rejected) out of their shards
    (rows, goldens, snapshots), mark their ``candidates/`` rows dropped (``reason``) and
    count them per strategy, so nothing exports them."""
    why = result.audit_rejected if why is None else why
    gone = set(why)
    if not gone:
        return
    for name, entry in _sources(manifest).get(run.spec, {}).items():
        shard = _shard(run.src.repo, name)
        counts: dict[str, int] = entry["counts"]  # type: ignore[assignment]
        if not counts.get("out", 0) or not store.is_complete("tasks", run.run_id, shard):
            continue
        tasks = store.read_shard("tasks", run.run_id, shard, Task)
        drop = [t for t in tasks if t.instance_id in gone]
        if not drop:
            continue
        keep = [t for t in tasks if t.instance_id not in gone]
        goldens = [g for g in store.read_shard("golden", run.run_id, shard, Golden)
                   if g.instance_id not in gone]
        if keep:
            store.write_records("golden", run.run_id, shard, goldens)
            store.write_records("tasks", run.run_id, shard, keep)
        else:
            store.drop_shard("tasks", run.run_id, shard)
            store.drop_shard("golden", run.run_id, shard)
        for t in drop:
            store.delete(t.snapshot)
        rows = [r.model_copy(update={"verdict": "dropped", "reason": reason,
                                     "detail": why[r.instance_id]})
                if r.instance_id in gone else r
                for r in store.read_shard(CANDIDATES_STAGE, run.run_id, shard, CandidateRecord)]
        store.write_records(CANDIDATES_STAGE, run.run_id, shard, rows,
                            schema_for_model(CandidateRecord))
        counts["out"] = len(keep)
        counts[reason] = counts.get(reason, 0) + len(drop)
        if name in result.yields:
            result.yields[name].tasks = len(keep)
    result.tasks -= len(gone & set(result.instance_ids))
    result.instance_ids = [i for i in result.instance_ids if i not in gone]
    manifest.metadata.setdefault(reason, {}).update(why)
    _totals(manifest)
    store.write_manifest(manifest)


def _read_pairs(store: Store, run_id: str, ids: list[str]) -> list[tuple[Task, Golden]]:
    if not ids:
        return []
    tasks = {t.instance_id: t for t in store.read_records("tasks", run_id, Task)}
    goldens = {g.instance_id: g for g in store.read_records("golden", run_id, Golden)}
    return [(tasks[i], goldens[i]) for i in sorted(ids) if i in tasks and i in goldens]


def _shadowed(result: TasksResult, stats: ShadowStats, say: Progress) -> None:
    """The shadow checks' counts into the result; a mismatch is said at once."""
    result.shadow_checks, result.shadow_mismatches = stats.checks, stats.mismatches
    result.shadow_details = list(stats.details)
    if stats.mismatches:
        say(f"shadow check: the head image disagreed with an ordinary run ({stats.details[0]}); "
            "the image was off for the rest of the run", 0, 0)


def _finish(store: Store, manifest: RunManifest, result: TasksResult) -> None:
    _sources(manifest).setdefault(result.source, {})
    _totals(manifest)
    manifest.counts.setdefault("tasks", {"in": 0, "out": 0})
    manifest.timings_s["tasks"] = round(manifest.timings_s.get("tasks", 0.0)
                                        + result.timings_s["total"], 3)
    manifest.metadata.setdefault("tasks_cpu_s", {})[result.source] = round(result.cpu_s, 3)
    manifest.metadata.setdefault("tasks_audited", {})[result.source] = result.audited
    manifest.metadata.setdefault("shadow_checks", {})[result.source] = result.shadow_checks
    manifest.metadata.setdefault("shadow_mismatches", {})[result.source] = \
        result.shadow_mismatches
    if manifest.command == "swemill tasks":
        manifest.status = "complete"
        manifest.finished_at = utcnow()
    store.write_manifest(manifest)
