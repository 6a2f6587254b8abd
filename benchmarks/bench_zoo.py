"""The zoo: ``swemill tasks`` on 40+ real Python projects it was not tuned on, then every task
re-validated by hand.

Each project is a pinned PyPI sdist that ships its tests, picked for its shape (layout, build
backend, C extensions, test style, pytest config). Per project, with a bounded budget:

1. ``swemill env SPEC --json``: the environment and the baseline (passed/skipped/errors);
2. ``swemill tasks SPEC --max-tasks N`` (no other flag), its CPU counted in a cpuacct cgroup
   of its own, so every sandboxed child is in the count;
3. every task it wrote re-validated with plain pytest and no swemill code: the task's snapshot
   (the broken tree a policy sees) unpacked with the build's products laid over it, the whole
   suite run with the task's ``test_cmd`` ``--repeat`` times (each run must fail every
   FAIL_TO_PASS test; the first must pass every PASS_TO_PASS test), then the golden patch
   applied with ``git apply`` and the suite run once more (both lists must pass).

It prints a table (environment, baseline, candidates, valid tasks, yield, top drop reasons,
re-validation, valid tasks per CPU-minute) and a summary against the goals: at least 90% of
projects with a valid task, median yield >= 50%, no false task. ``--naive K`` runs
``bench_validate.py``'s naive validator (same gates, whole suite per candidate) on K projects
spread over the zoo and prints swemill's ratio to it.

    .venv/bin/python benchmarks/bench_zoo.py [--only NAME,...] [--max-tasks 6] [--budget 420]
        [--repeat 5] [--naive 3] [--out DIR] [--json FILE] [--spec SPEC,...]

Projects marked ``holdout`` were never used while tuning swemill; the summary reports them
apart. ``--spec`` runs other sources the same way (each a holdout row): the check on projects
nobody here has looked at. A project that fails is a row with its one-line cause, never a
crash of the benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow.parquet as pq


@dataclass(frozen=True)
class Project:
    spec: str
    shape: str
    holdout: bool = False


ZOO: tuple[Project, ...] = (
    Project("pypi:toolz==1.0.0", "setuptools, flat layout"),
    Project("pypi:more-itertools==10.5.0", "flit, unittest-style tests"),
    Project("pypi:cachetools==5.5.0", "setuptools, src layout"),
    Project("pypi:six==1.16.0", "single module, setup.py"),
    Project("pypi:attrs==24.2.0", "hatch-vcs, hypothesis, test extra"),
    # pluggy 1.5.0 stood here: swemill refuses it since 2026-12-07 (the test runner's own code,
    # swemill.repo.runner_code); a project of the same shape, first run the same day, replaces it
    Project("pypi:license-expression==30.3.1", "setuptools-scm, src layout"),
    Project("pypi:packaging==24.1", "flit, src layout"),
    Project("pypi:idna==3.10", "flit, unittest suite", holdout=True),
    Project("pypi:wrapt==1.16.0", "optional C extension, setup.py"),
    Project("pypi:markupsafe==2.1.5", "optional C extension, src layout"),
    Project("pypi:itsdangerous==2.2.0", "flit, filterwarnings = error"),
    Project("pypi:click==8.1.7", "setuptools, CLI tests"),
    Project("pypi:jinja2==3.1.4", "flit, filterwarnings = error, dependency"),
    Project("pypi:pyparsing==3.1.4", "flit, large module"),
    Project("pypi:python-dateutil==2.9.0", "setuptools-scm, test requirements", holdout=True),
    Project("pypi:boltons==24.0.0", "setup.py, tox, many small modules"),
    Project("pypi:parse==1.20.2", "setuptools, single module"),
    Project("pypi:humanize==4.10.0", "hatch-vcs, filterwarnings = error, freezegun"),
    Project("pypi:tabulate==0.9.0", "setuptools-scm, CLI in subprocess"),
    Project("pypi:zipp==3.20.2", "setuptools-scm, jaraco test extras"),
    Project("pypi:simplejson==3.19.3", "optional C extension, unittest", holdout=True),
    Project("pypi:decorator==5.1.1", "setup.py, unittest + doctest"),
    Project("pypi:pathspec==0.12.1", "flit, unittest"),
    Project("pypi:isodate==0.6.1", "setup.py, unittest", holdout=True),
    Project("pypi:asttokens==2.4.1", "setuptools-scm, test extra"),
    Project("pypi:blinker==1.8.2", "flit, filterwarnings = error, async tests"),
    Project("pypi:glom==23.5.0", "setup.py, CLI"),
    Project("pypi:inflect==7.4.0", "setuptools-scm, typeguard", holdout=True),
    Project("pypi:marshmallow==3.22.0", "flit, tests extra"),
    Project("pypi:structlog==24.4.0", "hatch-vcs, filterwarnings = error"),
    Project("pypi:tomlkit==0.13.2", "poetry-core"),
    Project("pypi:cleo==2.1.0", "poetry-core, CLI", holdout=True),
    Project("pypi:pastel==0.2.1", "poetry-core, tiny"),
    Project("pypi:pyproject-metadata==0.8.0", "flit, filterwarnings = error"),
    Project("pypi:python-dotenv==1.0.1", "setup.py, CLI tests in subprocess", holdout=True),
    Project("pypi:sqlparse==0.5.1", "hatchling"),
    Project("pypi:prettytable==3.11.0", "hatch-vcs", holdout=True),
    Project("pypi:platformdirs==4.3.6", "hatch-vcs, src layout"),
    Project("pypi:filelock==3.16.1", "hatch-vcs, threads"),
    Project("pypi:h11==0.14.0", "setup.py, protocol state machine", holdout=True),
    Project("pypi:pyflakes==3.2.0", "setup.py, unittest"),
    Project("pypi:pycodestyle==2.12.1", "single module, subprocess tests"),
    Project("pypi:colorama==0.4.6", "hatchling, unittest + mock", holdout=True),
    Project("pypi:natsort==8.4.0", "setup.py, hypothesis"),
    Project("pypi:unearth==0.17.2", "pdm-backend"),
    Project("pypi:findpython==0.6.2", "pdm-backend, subprocess"),
    Project("pypi:markdown==3.7", "setuptools, unittest suite"),
    Project("pypi:semver==3.0.2", "setuptools, doctest in addopts", holdout=True),
)


@dataclass
class Row:
    spec: str
    shape: str
    holdout: bool
    env_ok: bool = False
    baseline: dict[str, int] = field(default_factory=dict)
    candidates: int = 0
    valid: int = 0
    written: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    revalidated: int = 0
    false_tasks: list[str] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    error: str = ""
    candidate_rows: int | None = None
    """Rows of the run's ``candidates/`` table (-1: the run wrote none; None: not looked at,
    a row from before the benchmark looked)."""
    drop_line: str | None = None
    """The drop summary's first line as ``swemill tasks`` printed it ('' if it did not)."""

    @property
    def yield_(self) -> float:
        return self.valid / self.candidates if self.candidates else 0.0

    @property
    def per_cpu_min(self) -> float:
        return self.valid / (self.cpu_s / 60) if self.cpu_s else 0.0


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:160] if lines else ""


class CpuGroup:
    """A cpuacct cgroup the measured command moves itself into (from inside, before exec):
    its CPU and every descendant's, sandboxed ones included, whatever namespaces they use."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self, name: str) -> None:
        self.path = self.ROOT / f"swemill-bench-zoo-{os.getpid()}-{name}"
        try:
            self.path.mkdir()
        except OSError:
            self.path = None  # type: ignore[assignment]

    def enter(self) -> None:  # runs in the child, between fork and exec
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def seconds(self) -> float | None:
        if self.path is None:
            return None
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        if self.path is not None:
            for _ in range(50):  # the last sandboxed children may still be exiting
                try:
                    self.path.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


def swemill(*argv: str, timeout: float, env: dict[str, str],
            group: CpuGroup | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "swemill", *argv], capture_output=True,
                          text=True, timeout=timeout, env=env,
                          preexec_fn=group.enter if group else None)


def read_table(root: Path, name: str, run_id: str) -> list[dict[str, object]]:
    parts = sorted((root / name / f"run_id={run_id}").glob("**/*.parquet"))
    return [r for p in parts for r in pq.read_table(p).to_pylist()]


def pytest_by_hand(python: Path, work: Path, roots: list[str], ids: list[str],
                   timeout: float, test_cmd: str = "") -> dict[str, str]:
    """Plain pytest in ``work``, with no root privilege, the whole suite as the task's
    ``test_cmd`` runs it (some suites hold only in their own order: semver's doctests need a
    namespace an earlier test fills); each of ``ids``' outcomes read from ``-rA``'s summary
    (``error`` for a test whose module failed to collect, ``missing`` if it never ran)."""
    if not ids:
        return {}
    words = shlex.split(test_cmd) if test_cmd else ["python", "-m", "pytest", "-q"]
    if words[0] == "python":
        words[0] = str(python)
    args = [*words, "-rA", "--tb=no", "--color=no", "-p", "no:cacheprovider"]
    if os.geteuid() == 0 and shutil.which("unshare"):
        # as no root: swemill's sandbox runs tests unprivileged, and root passes permission
        # checks some tests expect to fail (python-dotenv's unreadable-file test)
        args = ["unshare", "--user", "--map-user=65534", "--map-group=65534", *args]
    # the venv as activated: its console scripts first on PATH (glom's CLI test runs `glom`
    # in a subprocess; without them it failed by hand, at head as on every broken tree).
    # None of this machine's variables, as in the sandbox or a SWE-bench container: its
    # REQUESTS_CA_BUNDLE overrode the CA of unearth's self-signed-CA test, which then failed
    # by hand on every tree
    env = {"PYTHONPATH": ":".join(str(work / r) for r in roots), "HOME": "/tmp",
           "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
           "VIRTUAL_ENV": str(python.parent.parent),
           "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin"}
    try:
        proc = subprocess.run(args, cwd=work, capture_output=True, text=True, timeout=timeout,
                              env=env)
    except subprocess.TimeoutExpired:
        return {i: "timeout" for i in ids}
    return summary_outcomes(proc.stdout, ids)


_WORDS = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "XFAIL": "xfailed",
          "XPASS": "xpassed"}


def summary_outcomes(stdout: str, ids: list[str]) -> dict[str, str]:
    seen: dict[str, str] = {}
    broken_files: set[str] = set()
    wanted = set(ids)
    for line in stdout.splitlines():
        word, _, rest = line.partition(" ")
        node = _node(rest.strip(), wanted)
        if word.startswith("SUBFAILED"):  # a failed subTest: pytest reports the test PASSED
            tail = line.split(" - ", 1)[0]  # "SUBFAILED(params, with spaces) node"
            for i in ids:
                if tail.endswith(" " + i):
                    seen[i] = "failed"
            continue
        if word not in _WORDS:
            continue
        if seen.get(node) != "failed":
            seen[node] = _WORDS[word]
        if word == "ERROR" and "::" not in node:
            broken_files.add(node)
    out = {}
    for i in ids:
        if i in seen:
            out[i] = seen[i]
        else:
            out[i] = "error" if i.split("::", 1)[0] in broken_files else "missing"
    return out


def _node(rest: str, wanted: set[str]) -> str:
    """The node id at the start of a ``-rA`` line's ``rest`` ("id" or "id - message"): a
    parametrised id may itself hold " - " (sqlparse: ``test_compare_expr[... current_timestamp
    - interval '1 day'-...]``), so an id asked for wins over the first separator."""
    if rest in wanted:
        return rest
    at = rest.find(" - ")
    while at >= 0:
        if rest[:at] in wanted:
            return rest[:at]
        at = rest.find(" - ", at + 1)
    return rest.split(" - ", 1)[0].strip()


def revalidate(task: dict[str, object], golden: dict[str, object], root: Path, python: Path,
               roots: list[str], repeat: int, generated: Path | None = None) -> str:
    """'' when the task holds by hand, else what contradicts it. ``generated`` holds what the
    environment's build produced inside the tree (compiled extensions, ``_version.py``); it is
    laid over the snapshot, as a SWE-bench image carries its build."""
    f2p, p2p = list(task["FAIL_TO_PASS"]), list(task["PASS_TO_PASS"])  # type: ignore[call-overload]
    cmd = str(task.get("test_cmd") or "")
    with tempfile.TemporaryDirectory(prefix="zoo-reval-") as tmp:
        work = Path(tmp) / "w"
        data = (root / str(task["snapshot"])).read_bytes()
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(work, filter="data")
        if generated is not None and generated.is_dir():
            shutil.copytree(generated, work, dirs_exist_ok=True)
        for run in range(repeat):
            out = pytest_by_hand(python, work, roots, f2p if run else f2p + p2p, 900, cmd)
            bad = [i for i in f2p if out.get(i) not in ("failed", "error")]
            if bad:
                return f"broken run {run + 1}: F2P {bad[0]} {out.get(bad[0])}"
            if not run:
                bad = [i for i in p2p if out.get(i) != "passed"]
                if bad:
                    return f"broken: P2P {bad[0]} {out.get(bad[0])} ({len(bad)} of {len(p2p)})"
        patch = Path(tmp) / "golden.diff"
        patch.write_text(str(golden["golden_patch"]))
        applied = subprocess.run(["git", "apply", str(patch)], cwd=work, capture_output=True,
                                 text=True)
        if applied.returncode != 0:
            return f"golden patch does not apply: {last_line(applied.stderr)}"
        out = pytest_by_hand(python, work, roots, f2p + p2p, 900, cmd)
        bad = [i for i in f2p + p2p if out.get(i) != "passed"]
        return f"fixed: {bad[0]} {out.get(bad[0])}" if bad else ""


def one(project: Project, args: argparse.Namespace, base: Path) -> Row:
    row = Row(project.spec, project.shape, project.holdout)
    env = {**os.environ, "COLUMNS": "200"}
    t0 = time.monotonic()
    try:
        proc = swemill("env", project.spec, "--json", timeout=args.budget, env=env)
    except subprocess.TimeoutExpired:
        row.error = f"env: over {args.budget:.0f} s"
        return row
    if proc.returncode != 0:
        row.error = "env: " + last_line(proc.stderr or proc.stdout)
        return row
    info = json.loads(proc.stdout)
    row.env_ok = True
    row.baseline = {k: int(v) for k, v in info["counts"].items()}
    env_dir = Path(info["env"]["path"])
    python = env_dir / "venv" / "bin" / "python"
    roots = json.loads((env_dir / "env.json").read_text())["import_roots"]
    out = base / project.spec.replace(":", "_").replace("=", "_")
    shutil.rmtree(out, ignore_errors=True)
    group = CpuGroup(str(len(list(base.iterdir()))))
    r0 = os.times()
    try:
        proc = swemill("tasks", project.spec, "--out", str(out), "--max-tasks",
                       str(args.max_tasks), timeout=args.budget, env=env, group=group)
    except subprocess.TimeoutExpired:
        row.error = f"tasks: over {args.budget:.0f} s"
        return row
    finally:
        r1 = os.times()
        measured = group.seconds()
        group.close()
        row.cpu_s = measured if measured is not None else \
            (r1.children_user + r1.children_system - r0.children_user - r0.children_system)
        row.wall_s = time.monotonic() - t0
    manifests = list((out / "manifests").glob("run_id=*.json"))
    if proc.returncode != 0 or not manifests:
        row.error = "tasks: " + last_line(proc.stderr or proc.stdout)
        if not manifests:
            return row
    manifest = json.loads(manifests[0].read_text())
    counts, run_id = manifest["counts"].get("tasks", {}), manifest["run_id"]
    row.candidates, row.valid = int(counts.get("in", 0)), int(counts.get("valid", 0))
    row.written = int(counts.get("out", 0))
    row.drops = {k: int(v) for k, v in counts.items()
                 if k not in ("in", "out", "valid") and not k.startswith("skipped_")}
    table_dir = out / "candidates" / f"run_id={run_id}"
    row.candidate_rows = len(read_table(out, "candidates", run_id)) if table_dir.is_dir() else -1
    row.drop_line = next((ln.strip() for ln in proc.stdout.splitlines()
                          if ln.strip().startswith(DROP_LINES)), "")
    goldens = {g["instance_id"]: g for g in read_table(out, "golden", run_id)}
    for task in read_table(out, "tasks", run_id):
        why = revalidate(task, goldens[task["instance_id"]], out, python, roots, args.repeat,
                         env_dir / "generated")
        row.revalidated += 1
        if why:
            row.false_tasks.append(f"{task['instance_id']}: {why}")
    return row


DROP_LINES = ("top drop reasons (", "no drops among ", "no candidate was validated")
"""How the drop summary that ``swemill tasks`` ends with begins (validate.drops)."""


def table(rows: list[Row]) -> str:
    head = ("| project | shape | env | baseline p/s/e | candidates | valid | yield | top drops "
            "| re-validated (false) | CPU s | valid/CPU-min |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        b = r.baseline
        drops = ", ".join(f"{k} {v}" for k, v in sorted(r.drops.items(), key=lambda kv: -kv[1])[:3])
        note = f" — {r.error}" if r.error else ""
        lines.append(
            f"| `{r.spec}`{' (holdout)' if r.holdout else ''} | {r.shape} | "
            f"{'ok' if r.env_ok else 'FAIL'} | {b.get('passed', 0)}/{b.get('skipped', 0)}/"
            f"{b.get('error', 0) + b.get('failed', 0)} | {r.candidates} | {r.valid} | "
            f"{100 * r.yield_:.0f}% | {drops or '-'}{note} | {r.revalidated} "
            f"({len(r.false_tasks)}) | {r.cpu_s:.0f} | {r.per_cpu_min:.1f} |")
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    def part(sel: list[Row], name: str) -> str:
        if not sel:
            return f"{name}: none"
        some = sum(r.valid > 0 for r in sel)
        yields = [r.yield_ for r in sel]
        false = sum(len(r.false_tasks) for r in sel)
        rates = [r.per_cpu_min for r in sel if r.valid]
        return (f"{name}: {some}/{len(sel)} projects with a valid task "
                f"({100 * some / len(sel):.0f}%, goal 90%), median yield "
                f"{100 * statistics.median(yields):.0f}% (goal 50%), "
                f"{false} false of {sum(r.revalidated for r in sel)} re-validated tasks, "
                f"median {statistics.median(rates) if rates else 0:.1f} valid/CPU-min")
    lines = [part(rows, "all"), part([r for r in rows if r.holdout], "holdout"),
             part([r for r in rows if not r.holdout], "tuned-on")]
    ran = [r for r in rows if r.candidates and r.drop_line is not None]
    seen = [r for r in ran if r.candidate_rows == r.candidates and r.drop_line]
    unseen = sum(bool(r.candidates) and r.drop_line is None for r in rows)
    lines.append(f"candidates/ table (one row per candidate) and drop summary on {len(seen)} of "
                 f"{len(ran)} runs that validated" + (f" ({unseen} more not looked at)"
                                                       if unseen else ""))
    lines += [f"MISSING {r.spec}: candidates/ rows {r.candidate_rows} for {r.candidates} "
              f"candidates, drop summary {r.drop_line or 'not printed'}"
              for r in ran if r not in seen]
    for r in rows:
        lines += [f"FALSE {t}" for t in r.false_tasks]
    return "\n".join(lines)


def naive_ratios(rows: list[Row], k: int) -> list[str]:
    """bench_validate's swemill-vs-naive comparison on ``k`` projects spread over the zoo."""
    sys.path.insert(0, str(Path(__file__).parent))
    import bench_validate as bv

    ok = [r for r in rows if r.valid]
    if not ok or k <= 0:
        return []
    picks = [ok[int(i * len(ok) / k)] for i in range(min(k, len(ok)))]
    ns = argparse.Namespace(candidates=20, naive=5, workers=2, seed=0)
    out, ratios = [], []
    for r in picks:
        try:
            detail, rates = bv.measure(r.spec, ns)
        except Exception as exc:  # a project that breaks the comparison is reported, not fatal
            out.append(f"{r.spec}: naive comparison failed: {exc}")
            continue
        print("\n".join(detail), flush=True)
        # On a loaded machine the naive validator's adaptive timeouts (from the baseline's
        # durations) cut cold runs short and its valid count falls, which flatters swemill:
        # the ratio is taken to the better of its two timeout settings.
        adaptive, fixed = rates["naive_adaptive"], rates["naive120"]
        best = max(adaptive, fixed)
        ratio = rates["swemill"] / best if best else float("inf")
        ratios.append(ratio)
        out.append(f"{r.spec}: swemill {rates['swemill']:.1f} valid/CPU-min, naive "
                   f"{adaptive:.1f} (adaptive timeouts) / {fixed:.1f} (120 s): {ratio:.1f}x "
                   f"the better; invalid in the naive audit: {rates['invalid']:.0f}")
    if ratios:
        out.append(f"median ratio to the naive validator (the better of its two timeouts) over "
                   f"{len(ratios)} projects: {statistics.median(ratios):.1f}x (goal 10x)")
    return out


def merged(files: list[Path]) -> list[Row]:
    """The rows of earlier ``--json`` files in the zoo's order (a project's last row wins)."""
    by_spec = {}
    for f in files:
        for d in json.loads(f.read_text()):
            by_spec[d["spec"]] = Row(**d)
    order = {p.spec: i for i, p in enumerate(ZOO)}
    return sorted(by_spec.values(), key=lambda r: order.get(r.spec, len(order)))


def report(rows: list[Row], naive: int) -> None:
    print()
    print(table(rows))
    print()
    print(summary(rows))
    for line in naive_ratios(rows, naive):
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated names (e.g. toolz,six)")
    ap.add_argument("--holdout", action="store_true", help="only the holdout projects")
    ap.add_argument("--spec", default="", metavar="SPEC,...",
                    help="run these sources instead of the zoo's list (pypi:NAME==VER, a path, "
                         "a git URL): projects nobody here has looked at, each a holdout row")
    ap.add_argument("--max-tasks", type=int, default=6)
    ap.add_argument("--budget", type=float, default=420.0, help="seconds per swemill command")
    ap.add_argument("--repeat", type=int, default=5, help="F2P runs on the broken tree")
    ap.add_argument("--naive", type=int, default=0, help="projects for the naive comparison")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="write the rows here as JSON")
    ap.add_argument("--merge", type=Path, nargs="+", default=None, metavar="FILE",
                    help="run nothing: print the table and summary of rows earlier runs wrote "
                         "with --json (a zoo run in chunks); --naive picks from them")
    args = ap.parse_args()
    if args.merge:
        report(merged(args.merge), args.naive)
        return
    names = {n.strip().lower() for n in args.only.split(",") if n.strip()}
    zoo = [p for p in ZOO if (not names or p.spec[5:].split("==")[0].lower() in names)
           and (p.holdout or not args.holdout)]
    if args.spec:
        zoo = [Project(spec.strip(), "outside the zoo's list", holdout=True)
               for spec in args.spec.split(",") if spec.strip()]
    base = args.out or Path(tempfile.mkdtemp(prefix="swemill-bench-zoo-"))
    base.mkdir(parents=True, exist_ok=True)
    rows = []
    for project in zoo:
        try:
            row = one(project, args, base)
        except Exception as exc:  # the benchmark's own failure on a project is a row too
            row = Row(project.spec, project.shape, project.holdout,
                      error=f"bench: {type(exc).__name__}: {exc}"[:160])
        rows.append(row)
        print(f"{row.spec:34} env {'ok' if row.env_ok else 'FAIL'}  cands {row.candidates:3d}  "
              f"valid {row.valid:3d}  yield {100 * row.yield_:4.0f}%  false "
              f"{len(row.false_tasks)}/{row.revalidated}  cpu {row.cpu_s:6.1f}s  "
              f"{row.error}", flush=True)
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    report(rows, args.naive)
    with contextlib.suppress(OSError):
        if not args.out:
            shutil.rmtree(base)


if __name__ == "__main__":
    main()
