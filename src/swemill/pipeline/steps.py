"""The stage functions named in :data:`swemill.pipeline.stages.STAGES`.

Each takes a :class:`StageContext`, does its stage's work through the stage's own public
function, records its counts in the run manifest and returns a short summary (numbers the
CLI shows). The stage list names them by dotted path, so listing the stages imports none.
"""

from __future__ import annotations

from typing import Any

from swemill.agent.rollout import run_rollouts
from swemill.core.errors import CorpusError, ValidationError
from swemill.core.records import RunManifest
from swemill.corpus.report import write_report
from swemill.corpus.stage import run_corpus
from swemill.pipeline.manifest import update_manifest
from swemill.pipeline.stages import StageContext
from swemill.repo.gate import ensure_allowed
from swemill.repo.sources import resolve_source
from swemill.store.layout import gate_verdicts_key
from swemill.validate.prepare import baseline_key, from_store, prepare_env, recipe_key
from swemill.validate.prepare import gate as gate_source
from swemill.validate.runstate import tasks_spent
from swemill.validate.validator import run_tasks

__all__ = ["gate", "env", "tasks", "rollouts", "corpus", "report"]


def gate(ctx: StageContext) -> dict[str, int]:
    ctx.say(f"resolving {ctx.source}")
    src = resolve_source(ctx.source)
    ctx.say(f"license and decontamination of {src.repo}")
    verdict = gate_source(src, ctx.source, ctx.config.tasks)
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
    src = resolve_source(ctx.source)
    ctx.say(f"environment of {src.repo}@{src.commit[:12]} (uv)")
    repo_env, baseline = prepare_env(src, ctx.config.tasks, ctx.say)
    ctx.store.write_json(recipe_key(src), repo_env.recipe.model_dump(mode="json"))
    ctx.store.write_json(baseline_key(src), baseline.model_dump(mode="json"))
    outcomes: dict[str, int] = {}
    for outcome in baseline.outcomes.values():
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    counts = {"tests": len(baseline.outcomes), "flaky": len(baseline.flaky),
              "coverage_functions": len(baseline.coverage),
              "env_skipped": len(repo_env.skipped),
              **{f"tests_{k}": v for k, v in sorted(outcomes.items())}}

    def record(m: RunManifest) -> None:
        m.counts["env"] = counts
        m.metadata["env"] = {"key": repo_env.key, "python": repo_env.python_version,
                             "suite_wall_s": baseline.suite_wall_s,
                             "skipped": [k.to_json() for k in repo_env.skipped]}

    update_manifest(ctx.store, ctx.run_id, record)
    return {"tests": counts["tests"], "flaky": counts["flaky"]}


def tasks(ctx: StageContext) -> dict[str, int]:
    config = ctx.config.tasks
    prepared = from_store(ctx.source, ctx.store, ctx.run_id, config, ctx.say)
    result = run_tasks(ctx.source, ctx.store, ctx.run_id, config, prepared=prepared,
                       resume=ctx.resume, progress=_progress(ctx))
    if result.audit_rejected:
        first, why = next(iter(result.audit_rejected.items()))
        ctx.say(f"the audit removed {len(result.audit_rejected)} of {result.audited} audited "
                f"task(s) (lists a cold full-suite run contradicts), e.g. {first}: {why}")
    if result.shadow_mismatches:
        ctx.say(f"shadow checks: the head image disagreed with an ordinary run "
                f"{result.shadow_mismatches} time(s) (image off for the rest of the run), "
                f"e.g. {result.shadow_details[0] if result.shadow_details else '?'}")
    if not result.tasks:  # the rollouts would only say "no tasks": say why there are none
        summary = result.drop_summary
        why = (summary.advice or summary.lines()[0]) if summary else "nothing was validated"
        notes = [f"{n}: {y.note}" for n, y in result.yields.items() if y.note]
        raise ValidationError(f"no task from {result.candidates} candidate(s) of "
                              f"{result.repo}: {why}" + "".join(f"; {n}" for n in notes))
    return {"tasks": result.tasks, "candidates": result.candidates}


def rollouts(ctx: StageContext) -> dict[str, int]:
    config = ctx.config.rollouts
    if config.max_usd is not None and (ctx.config.tasks.bug_writer
                                       or ctx.config.tasks.issue_writer):
        # the bug and issue writers spent from the same ceiling: the rollouts get the rest
        spent = tasks_spent(ctx.store.read_manifest(ctx.run_id))
        config = config.model_copy(update={"max_usd": max(0.0, config.max_usd - spent)})
    result = run_rollouts(ctx.store, ctx.run_id, config, run_id=ctx.run_id, resume=ctx.resume,
                          progress=_progress(ctx))
    if result.stopped:  # the dollar budget ran out: the corpus is built from what was paid for
        note = (f"--max-usd {config.max_usd} stopped the rollouts: {result.shards_stopped} task "
                "shard(s) not rolled out")
        ctx.say(note)
        update_manifest(ctx.store, ctx.run_id,
                        lambda m: m.metadata.setdefault("build", {}).setdefault(
                            "warnings", []).append(note))
    return {"trajectories": result.trajectories, "pairs": result.pairs}


def corpus(ctx: StageContext) -> dict[str, int]:
    ctx.say("filter, scrub, dedup, split")
    try:
        summary = run_corpus(ctx.store, ctx.run_id, ctx.config.corpus, resume=ctx.resume)
    except CorpusError as exc:
        counts = ctx.store.read_manifest(ctx.run_id).counts
        dups = sum(n for stage in ("corpus.sft", "corpus.dpo")
                   for k, n in counts.get(stage, {}).items() if k.endswith("_duplicate"))
        if not dups:
            raise
        raise CorpusError(f"{exc}; {dups} row(s) repeat earlier runs under {ctx.store.url}: "
                          "build into another --out, or with another --seed") from exc
    return dict(summary.rows)


def report(ctx: StageContext) -> dict[str, int]:
    ctx.say("rendering the HTML report")
    write_report(ctx.store, ctx.run_id)
    return {}


def _progress(ctx: StageContext) -> Any:
    """The ``progress(label, done, total)`` callback the tasks and rollouts stages take."""
    def progress(label: str, done: int = 0, total: int = 0) -> None:
        ctx.say(f"{label} ({done}/{total})" if total else label)
    return progress
