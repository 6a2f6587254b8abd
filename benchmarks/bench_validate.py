"""Validation throughput: swemill's validator against a naive one, on the same candidates.

For each repository: the procedural strategy makes ``--candidates`` candidates (seeded); on the
sample, pr-mirror's candidates are validated too (their own row). swemill validates them on
``--workers`` warm workers. A naive validator (the reference pipeline's method: swemill's
gates, but every run the *whole* suite, cold, in a fresh copy of the repository) validates a
spread-out subsample of the same procedural candidates, once with a fixed 120 s timeout and
once with timeouts from the baseline durations. Rates are valid tasks per CPU-minute (this
process and every sandboxed child). The naive subsample is stratified by swemill's verdict
(accepted, no_fail_to_pass, timeout ...: at least one of each), and the naive figures are
extrapolated to all candidates per stratum, so hanging candidates weigh on the naive side as
much as they do on swemill's. The naive verdicts double as an audit: a task swemill accepted
whose FAIL_TO_PASS does not fail, or whose PASS_TO_PASS does not pass, in the naive
full-suite runs is counted invalid. Every subsampled candidate on which the two disagree
(one accepted it, the other did not) gets a line of its own: its id, target, mutator, and
each side's reason and detail.

    python benchmarks/bench_validate.py [--candidates 40] [--naive 10] [--workers 2]
        [--no-head-image] [--repeat 3] [--near-misses 2]
    python benchmarks/bench_validate.py --against REV [--repos SPEC] [--rounds 3]
        [--repeat 3 --near-misses 2]

``--against REV`` measures REV's validator and this checkout's side by side on the same
candidates of one repository (default toolz), alternating; see ``validate_against.py``
(without ``--repeat``/``--near-misses``: both with one broken run and no near misses, as
validators before those had; with them: both with those gates).

The same gates on both sides. swemill validates as ``swemill tasks`` does by default: a
candidate whose broken run shows no newly failing test stops there; the survivors' newly
failing tests run ``--repeat`` - 1 more times on the broken tree; the golden tree runs twice
where it is the head tree byte for byte (the baseline ran that tree), else ``max(2,
--repeat)`` times; each accepted task's ``--near-misses`` variants are run against its
lists. The naive validator makes the same decisions (``validate.gates.decide``) from the same
number of runs, each the whole suite cold: the broken tree once (stop there, as swemill does),
``--repeat`` - 1 more times, the golden tree twice or ``max(2, --repeat)`` times by the same
rule, and each accepted task's near-miss variants once (a variant is caught when a
FAIL_TO_PASS or PASS_TO_PASS test does not pass, or the run times out). Before 2026-12-05 the
naive side ran the broken tree once and the golden tree twice and no near misses, less than
swemill did per candidate. The sampled cold audit that ``swemill tasks`` runs after
validation is on neither side: it costs the same on both (two cold runs of the whole suite
and one graded run of the task's two lists per audited task).

Environments and baselines are built (and cached) before anything is timed. The cached
baseline ran in the default sandbox (bwrap, as an unprivileged user, where it is usable);
with another ``--backend`` (the default ``local`` runs as the caller, root on a CI box) a test
whose outcome depends on who runs it differs between the baseline and every run here (pyflakes
3.2.0's ``test_permissionDenied``: passed at baseline, skipped as root). Both validators then
get the baseline as this backend sees it (:func:`as_backend`): one untimed whole-suite run
here, and a test whose outcome differs from the cached baseline's counts as flaky (in neither
list), as it would in a baseline measured in this backend. Without that, swemill's whole-suite
run of every selection saw the test "not pass", took the coverage map for wrong and judged
every pyflakes candidate on the whole suite (in ``swemill tasks`` the baseline and the runs
share a sandbox, so this happens in the benchmark only).

CPU is counted with ``getrusage(RUSAGE_CHILDREN)``, which only sees processes that are waited
for all the way down; bwrap's pid-namespace init is not accounted that way (a bwrap run shows
almost no child CPU), so the default ``--backend local`` runs both validators unisolated to
count their CPU honestly. Both sides pay the same per-exec cost; bwrap adds a few ms per exec,
which only the naive side (more execs) would pay more of.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from swemill.core.git import run_git
from swemill.core.records import Baseline, Candidate
from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox import Limits, open_sandbox
from swemill.sandbox.bwrap import usable
from swemill.suite.baseline import fresh_sandbox, run_baseline
from swemill.suite.runner import run_tests
from swemill.suite.timeouts import adaptive_timeout
from swemill.synth import make_strategy
from swemill.synth.patches import reverse_patch
from swemill.synth.strategy import RepoView
from swemill.validate.check import CheckContext, Checked
from swemill.validate.gates import GateVerdict4, RunEvidence, decide, with_collect_errors
from swemill.validate.pool import WorkerPool

REPOS = ("sample", "pypi:toolz==1.0.0", "pypi:more-itertools==10.5.0")
NAIVE_N = {"pypi:more-itertools==10.5.0": 6}


def cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


@dataclass
class Naive:
    verdicts: list[GateVerdict4] = field(default_factory=list)
    broken: list[RunEvidence | None] = field(default_factory=list)
    golden: list[list[RunEvidence]] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """CPU seconds per candidate."""
    cpu_s: float = 0.0
    wall_s: float = 0.0
    timeouts: int = 0
    """Runs that timed out (any gate's)."""
    runs: int = 0
    """Whole-suite cold runs, all gates together."""
    near_miss: list[tuple[int, int] | None] = field(default_factory=list)
    """Per candidate: (variants tried, caught) where accepted and a variant applied."""

    @property
    def valid(self) -> int:
        return sum(v.accepted for v in self.verdicts)

    def estimate(self, strata: list[str], sizes: dict[str, int]) -> tuple[float, float]:
        """(valid tasks, CPU seconds) extrapolated to every candidate: per stratum (swemill's
        verdict reason) the subsample's mean CPU and valid share, times the stratum's size."""
        valid = cpu_s = 0.0
        for name, size in sizes.items():
            idx = [i for i, s in enumerate(strata) if s == name]
            if idx:
                valid += size * sum(self.verdicts[i].accepted for i in idx) / len(idx)
                cpu_s += size * sum(self.cpu[i] for i in idx) / len(idx)
        return valid, cpu_s


BACKEND = "local"
IMAGE = True
REPEAT = 3
NEAR_MISSES = 2


def naive_run(env: RepoEnv, patches: list[str], timeout: float
              ) -> tuple[RunEvidence | None, bool]:
    """The whole suite, cold, in a fresh copy of the repository with ``patches`` applied;
    (None when a patch does not apply, whether the patched tree is the head tree)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-naive-"))
    try:
        ws = tmp / "ws"
        shutil.copytree(env.source_path, ws, symlinks=True)
        for p in patches:
            if run_git(["apply", "-"], ws, input=p).returncode != 0:
                return None, False
        at_head = not run_git(["status", "--porcelain", "--untracked-files=all"],
                              ws).stdout.strip()
        with open_sandbox(ws, binds=env.binds(), backend=BACKEND) as sb:
            r = run_tests(sb, env, None, timeout=timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return RunEvidence(outcomes={k: v.outcome for k, v in r.results.items()},
                       exit_code=r.exit_code, timed_out=r.timed_out,
                       trusted=r.trustworthy or (r.exit_code == 1 and bool(r.results))), at_head


def naive_check(env: RepoEnv, baseline: Baseline, cand: Candidate, timeout: float,
                out: Naive) -> tuple[GateVerdict4, RunEvidence | None, list[RunEvidence]]:
    """swemill's gates, each run the whole suite cold: the broken tree once (no newly failing
    test: refused there, as swemill does), ``REPEAT - 1`` more times, the golden tree twice
    when it is the head tree (the baseline ran it) or ``max(2, REPEAT)`` times, and an
    accepted task's ``NEAR_MISSES`` variants once each."""
    def run(patches: list[str]) -> tuple[RunEvidence | None, bool]:
        ev, at_head = naive_run(env, patches, timeout)
        out.runs += 1
        out.timeouts += bool(ev and ev.timed_out)
        return ev, at_head

    broken, _ = run([cand.bug_patch])
    verdict = decide(baseline=baseline, applied=broken is not None,
                     imports=broken is not None, broken=broken, golden_runs=[], selected=None)
    if verdict.reason != "not_solvable":
        return verdict, broken, []
    repeats = [ev for ev, _ in (run([cand.bug_patch]) for _ in range(REPEAT - 1))
               if ev is not None]
    needed = max(2, REPEAT)

    def judge(golden: list[RunEvidence]) -> GateVerdict4:
        return decide(baseline=baseline, applied=True, imports=True, broken=broken,
                      golden_runs=golden, selected=None, repeats=repeats, golden_needed=needed)

    verdict = judge([])
    if verdict.reason != "not_solvable":  # flaky under the bug
        return verdict, broken, []
    fix = cand.golden_patch or reverse_patch(cand.bug_patch)
    golden: list[RunEvidence] = []
    first, at_head = run([cand.bug_patch, fix])
    if first is None:
        return GateVerdict4(False, "golden_failed"), broken, []
    needed = 2 if at_head else needed
    golden = [first, *(ev for ev, _ in (run([cand.bug_patch, fix]) for _ in range(needed - 1))
                       if ev is not None)]
    verdict = judge(golden)
    if verdict.accepted:
        variants = [str(v) for v in cand.metadata.get("near_miss") or []
                    if str(v).strip()][:NEAR_MISSES]
        lists = [*verdict.fail_to_pass, *verdict.pass_to_pass]
        tried = caught = 0
        for variant in variants:
            ev, _ = run([variant])
            if ev is None:
                continue
            tried += 1
            caught += not ev.usable or any(ev.outcomes.get(t) != "passed" for t in lists)
        out.near_miss[-1] = (tried, caught) if tried else None
    return verdict, broken, golden


def naive(env: RepoEnv, baseline: Baseline, cands: list[Candidate], fixed: float | None) -> Naive:
    out = Naive()
    c0, t0 = cpu(), time.monotonic()
    timeout = fixed or adaptive_timeout(baseline, None)
    for cand in cands:
        c1 = cpu()
        out.near_miss.append(None)
        verdict, broken, golden = naive_check(env, baseline, cand, timeout, out)
        out.verdicts.append(verdict)
        out.broken.append(broken)
        out.golden.append(golden)
        out.cpu.append(cpu() - c1)
    out.cpu_s, out.wall_s = cpu() - c0, time.monotonic() - t0
    return out


def audit(checked: Checked, runs: list[tuple[RunEvidence | None, list[RunEvidence]]],
          baseline: Baseline) -> str:
    """``ok``, ``invalid`` (the naive full-suite runs contradict the task's lists) or
    ``inconclusive`` (no naive run of it finished: both timed out)."""
    for broken, golden in runs:
        if broken is not None and broken.usable and len(golden) >= 2 and \
                all(g.usable for g in golden):
            # a module that failed to collect stands for its tests, as in the gates
            broken = with_collect_errors(broken, baseline)
            return "invalid" if invalid(checked, broken, golden) else "ok"
    return "inconclusive"


def invalid(checked: Checked, broken: RunEvidence, golden: list[RunEvidence]) -> bool:
    """A swemill-accepted task whose lists the naive full-suite runs contradict."""
    v = checked.verdict
    if any(broken.outcomes.get(t) not in ("failed", "error") for t in v.fail_to_pass):
        return True
    if any(broken.outcomes.get(t) != "passed" for t in v.pass_to_pass):
        return True
    return any(g.outcomes.get(t) != "passed" for g in golden
               for t in [*v.fail_to_pass, *v.pass_to_pass])


def swemill(env: RepoEnv, baseline: Baseline, head: str, cands: list[Candidate],
            workers: int) -> tuple[list[Checked], float, float, dict[str, object]]:
    ctx = CheckContext(baseline, head, repeat=REPEAT, near_misses=NEAR_MISSES)
    c0, t0 = cpu(), time.monotonic()
    pool = WorkerPool(env, head, ctx, n=workers, backend=BACKEND,
                      limits=Limits(timeout_s=900, memory_mb=4096), image=IMAGE)
    try:
        res = pool.stream(iter(cands), target=10**9)
    finally:
        pool.close()
    return res.checked, cpu() - c0, time.monotonic() - t0, pool.image_stats()


def stratified(cands: list[Candidate], reasons: list[str], n: int) -> list[Candidate]:
    """About ``n`` candidates, every swemill verdict reason represented in proportion (at
    least one each), spread evenly within a reason: hangs must be in the naive sample too."""
    out: list[Candidate] = []
    for reason in dict.fromkeys(reasons):
        group = [c for c, r in zip(cands, reasons, strict=True) if r == reason]
        k = max(1, round(n * len(group) / len(cands)))
        step = len(group) / k
        out += [group[int(i * step)] for i in range(k)]
    return out


def as_backend(env: RepoEnv, baseline: Baseline) -> tuple[Baseline, list[str]]:
    """The baseline as :data:`BACKEND` sees it, and the tests whose outcome differs there
    (see the module docstring); unchanged when the baseline's own sandbox is this one."""
    own = "bwrap" if usable()[0] else "local"  # where run_baseline's "auto" ran it
    if own == BACKEND:
        return baseline, []
    with fresh_sandbox(env, BACKEND) as sb:
        report = run_tests(sb, env, None, timeout=max(120.0, 10 * baseline.suite_wall_s))
    if not report.trustworthy and not (report.exit_code == 1 and report.results):
        return baseline, []  # it says nothing: keep the baseline as it is
    seen = {k: v.outcome for k, v in report.results.items()}
    differ = sorted(t for t, o in baseline.outcomes.items() if seen.get(t) != o)
    if not differ:
        return baseline, []
    return baseline.model_copy(update={"flaky": sorted({*baseline.flaky, *differ})}), differ


def per_min(n: float, cpu_s: float) -> float:
    return n / (cpu_s / 60) if cpu_s else 0.0


def bench(spec: str, args: argparse.Namespace) -> list[str]:
    return measure(spec, args)[0]


def measure(spec: str, args: argparse.Namespace) -> tuple[list[str], dict[str, float]]:
    """The printed lines and the rates: swemill's and both naive validators' valid tasks per
    CPU-minute on the same procedural candidates, and the audit's invalid count."""
    src = resolve_source(spec)
    env = build_env(src)
    baseline, differ = as_backend(env, run_baseline(env))
    view = RepoView(root=src.path, repo=src.repo, commit=src.commit, baseline=baseline,
                    seed=args.seed, max_candidates=args.candidates)
    proc = list(make_strategy("procedural").candidates(view))
    pr = list(make_strategy("pr-mirror").candidates(view)) if spec == "sample" else []
    checked, s_cpu, s_wall, image = swemill(env, baseline, src.commit, proc + pr, args.workers)
    by_id = {c.candidate.candidate_id: c for c in checked}
    n = NAIVE_N.get(spec, args.naive)
    reasons = [by_id[c.candidate_id].reason for c in proc]
    sizes = {r: reasons.count(r) for r in dict.fromkeys(reasons)}
    sub = stratified(proc, reasons, n)
    fixed = naive(env, baseline, sub, 120.0)
    adapt = naive(env, baseline, sub, None)
    sub_checked = [by_id[c.candidate_id] for c in sub]
    strata = [c.reason for c in sub_checked]
    p_valid = sum(c.verdict.accepted for c in checked if c.candidate.strategy == "procedural")
    p_cpu = s_cpu * len(proc) / len(checked)  # pr-mirror's share (sample only) taken out
    audits = [audit(c, [(fixed.broken[i], fixed.golden[i]), (adapt.broken[i], adapt.golden[i])],
                    baseline)
              for i, c in enumerate(sub_checked) if c.verdict.accepted]
    bad, unsure = audits.count("invalid"), audits.count("inconclusive")
    agree = sum(c.verdict.accepted == v.accepted for c, v in zip(sub_checked, adapt.verdicts,
                                                                  strict=True))
    both = [(c.near_miss, nm) for c, nm in zip(sub_checked, adapt.near_miss, strict=True)
            if c.near_miss and nm]
    nm_line = (f"near misses caught on the {len(both)} tasks both accepted: swemill "
               f"{sum(a[1] for a, _ in both)}/{sum(a[0] for a, _ in both)}, naive "
               f"{sum(b[1] for _, b in both)}/{sum(b[0] for _, b in both)}")
    lines = [f"{spec:30s} baseline as the {BACKEND!r} backend sees it: {len(differ)} test(s) "
             f"differ, counted flaky{': ' + ', '.join(differ[:3]) if differ else ''}"]
    for name, group in (("procedural", proc), ("pr-mirror", pr)):
        if group:
            ok = sum(by_id[c.candidate_id].verdict.accepted for c in group)
            lines.append(f"{spec:30s} {name:11s} candidates {len(group):3d}  valid {ok:3d}  "
                         f"yield {100 * ok / len(group):5.1f}%")
    drops: dict[str, int] = {}
    for c in checked:
        if not c.verdict.accepted:
            drops[c.reason] = drops.get(c.reason, 0) + 1
    lines.append(f"{spec:30s} swemill drops: "
                 + ", ".join(f"{k} {v}" for k, v in sorted(drops.items())))
    walls = [c.wall_s for c in checked]
    s_valid = sum(c.verdict.accepted for c in checked)
    s_rate = per_min(p_valid, p_cpu)
    f_valid, f_cpu = fixed.estimate(strata, sizes)
    a_valid, a_cpu = adapt.estimate(strata, sizes)
    f_rate, a_rate = f_valid / (f_cpu / 60), a_valid / (a_cpu / 60)
    lines += [
        f"{spec:30s} suite {baseline.suite_wall_s:.2f} s wall, start-up {baseline.startup_s:.2f}"
        f" s, {len(baseline.outcomes)} tests",
        f"{spec:30s} swemill  {len(checked):3d} cands {s_valid:3d} valid  cpu {s_cpu:7.1f} s  "
        f"wall {s_wall:6.1f} s  median/cand {statistics.median(walls):.3f} s  "
        f"-> procedural {p_valid} valid in ~{p_cpu:.0f} CPU s: {s_rate:7.1f} valid/CPU-min",
        f"{spec:30s} head image: {image.get('served', 0)} runs served, fell back: "
        f"{image.get('fallbacks') or 'none'}{' (off)' if not IMAGE else ''}; tree image: "
        f"{image.get('tree') or 'none'}",
        f"{spec:30s} naive120 {len(sub):3d} cands {fixed.valid:3d} valid  cpu {fixed.cpu_s:7.1f}"
        f" s  wall {fixed.wall_s:6.1f} s  runs {fixed.runs} (timeouts {fixed.timeouts})"
        f"  -> est. over "
        f"{len(proc)}: {f_valid:.1f} valid, {f_cpu:.0f} CPU s -> {f_rate:7.1f} valid/CPU-min",
        f"{spec:30s} naiveAd  {len(sub):3d} cands {adapt.valid:3d} valid  cpu {adapt.cpu_s:7.1f}"
        f" s  wall {adapt.wall_s:6.1f} s  runs {adapt.runs} (timeouts {adapt.timeouts})"
        f"  -> est. over "
        f"{len(proc)}: {a_valid:.1f} valid, {a_cpu:.0f} CPU s -> {a_rate:7.1f} valid/CPU-min",
        f"{spec:30s} ratio swemill/naive120 {s_rate / f_rate if f_rate else float('inf'):6.1f}x"
        f"   swemill/naive-adaptive {s_rate / a_rate if a_rate else float('inf'):6.1f}x",
        f"{spec:30s} audit: {bad} invalid of "
        f"{sum(c.verdict.accepted for c in sub_checked)} swemill tasks in the subsample "
        f"({unsure} inconclusive); "
        f"verdicts agree with naive on {agree}/{len(sub)}; {nm_line}",
    ]
    for c, v in zip(sub_checked, adapt.verdicts, strict=True):
        if c.verdict.accepted != v.accepted:  # say which, and why each side said so
            cand = c.candidate
            where = ", ".join(f"{ch.file}:{ch.qualname}" for ch in cand.changed)
            lines.append(f"{spec:30s} disagree {cand.candidate_id} ({where}, "
                         f"{cand.metadata.get('mutator', cand.strategy)}):"
                         f" swemill {c.reason} {c.verdict.detail[:160]!r}; naive {v.reason} "
                         f"{v.detail[:160]!r}")
    return lines, {"swemill": s_rate, "naive120": f_rate, "naive_adaptive": a_rate,
                   "invalid": float(bad)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=40)
    ap.add_argument("--naive", type=int, default=10, help="naive subsample per repository")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repos", default=",".join(REPOS))
    ap.add_argument("--backend", default="local", help="sandbox backend (see the docstring)")
    ap.add_argument("--no-head-image", action="store_true",
                    help="validate without the workers' head images (every run a fresh pytest)")
    ap.add_argument("--repeat", type=int, help="runs of a surviving broken tree (default 3; "
                    "with --against: REV's work, 1, unless given)")
    ap.add_argument("--near-misses", type=int, help="near-miss variants per task (default 2; "
                    "with --against: 0 unless given)")
    ap.add_argument("--against", metavar="REV",
                    help="compare with REV's validator instead (see validate_against.py)")
    ap.add_argument("--rounds", type=int, default=3, help="alternations (--against)")
    args = ap.parse_args()
    if args.against:
        from validate_against import against

        spec = args.repos.split(",")[0] if args.repos != ",".join(REPOS) else REPOS[1]
        given = args.repeat is not None or args.near_misses is not None
        gates = (3 if args.repeat is None else args.repeat,
                 2 if args.near_misses is None else args.near_misses) if given else None
        against(args.against, spec, args.rounds, args.candidates, args.workers, args.seed,
                gates)
        return
    global BACKEND, IMAGE, REPEAT, NEAR_MISSES
    BACKEND, IMAGE = args.backend, not args.no_head_image
    REPEAT = 3 if args.repeat is None else args.repeat
    NEAR_MISSES = 2 if args.near_misses is None else args.near_misses
    warnings.filterwarnings("ignore", message=".*'local' sandbox")
    for spec in args.repos.split(","):  # build everything before timing anything
        run_baseline(build_env(resolve_source(spec)))
    out: list[str] = []
    for spec in args.repos.split(","):
        lines = bench(spec, args)
        print("\n".join(lines), flush=True)
        out += lines
    print("\n== summary ==")
    print("\n".join(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
