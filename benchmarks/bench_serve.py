"""The environment server under load, side by side with a fresh sandbox per episode.

Builds a few validated tasks of the bundled sample (``run_tasks``, once, in a temporary store
and cache; or ``--store ROOT --run RUN_ID`` reuses a built run), starts ``swemill serve`` on
loopback, and for each K runs K concurrent HTTP clients, each playing scripted episodes (read
a file, write a note naming the client and episode, so that no two episodes leave the same
tree, three ``bash true`` steps, ``run_tests``, ``submit``) over the tasks in turn; every
``--solve-every``-th episode (default 2; 0: none) also writes the task's golden fix before
``run_tests``, so that some runs pass and some episodes earn 1 (a served ``run_tests`` of the
grading's selection is that grading when the tree is its own grading tree, and ``submit``
takes it only when it did not resolve the task: episodes that all fail would show that path
alone).
Reports reset latency p50/p99 (``POST /sessions``), ``bash true`` step latency p50/p99,
grading latency p50 (the ``submit`` step), episodes per minute, CPU seconds per episode (the
server process and everything it started, its sandboxes and grading servers included, while
the episodes ran; its start-up, the tasks' workspaces and the untimed rounds of K episodes in
which the grading servers the K clients need start (until a round starts none, at most
``--warm-rounds``: a long-lived server's steady state) is reported apart; for the naive path
this process and everything it started), the machine's load average at the start and end of
each K, and the server's peak RSS (VmHWM; test processes are its children and not counted).
``--cold-grading`` runs the server with cold grading too, as another row (its ``run_tests`` is
cold too); ``--cold-tests`` with warm grading but the policy's ``run_tests`` cold, in the
session's sandbox, as another row; ``--per-command``
runs it with ``--sandbox-per-command`` (a new sandbox for every command instead of one
long-lived sandbox per session whose runner forks them), as another row; ``--no-spares`` runs
it with ``--spare-sessions 0`` (no spare sessions: a reset's runner starts at the reset), as
another row; ``--nice0`` runs it with ``--test-nice 0`` (test runs and their scheduling
autogroups at the policy's commands' niceness), as another row; ``--per-session`` runs it
with ``--grading-servers`` set to the larger of the cores and K (the default before
2026-12-06 21:10, one per core now), as another row. Then the same
episodes, K at a time, through a fresh per-episode sandbox (no fork, no server:
``TaskEnv.reset`` unpacks the snapshot and opens a new sandbox each time; in-process, so it
pays no HTTP; graded cold; the repository's built environment looked up once per K, as the
server does), as the naive comparison.

    .venv/bin/python benchmarks/bench_serve.py [--clients 1,8,32] [--episodes 2] [--tasks 3]
        [--solve-every 2]
        [--per-command] [--cold-grading] [--cold-tests] [--no-spares] [--per-session] [--nice0]
        [--no-naive]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from swemill.envs.launch import ServerProcess


@dataclass
class Timings:
    reset: list[float] = field(default_factory=list)
    bash: list[float] = field(default_factory=list)
    grade: list[float] = field(default_factory=list)
    episodes: int = 0
    rewards: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, key: str, value: float) -> None:
        with self.lock:
            getattr(self, key).append(value)


Fix = list[tuple[str, str]]
"""The files a task's golden patch changes, with their fixed contents."""


def _actions(path: str, tag: str, fix: Fix | None = None) -> list[dict[str, Any]]:
    """Read, write a note (``tag``: no two episodes leave the same tree), write the fix when
    given, three ``bash true``, ``run_tests``, ``submit``."""
    return [{"name": "read", "arguments": {"path": path}},
            {"name": "write", "arguments": {"path": "NOTES.txt", "content": f"looked: {tag}\n"}},
            *[{"name": "write", "arguments": {"path": rel, "content": text}}
              for rel, text in fix or []],
            *[{"name": "bash", "arguments": {"command": "true"}}] * 3,
            {"name": "run_tests", "arguments": {}},
            {"name": "submit", "arguments": {}}]


def _episode(offset: int, e: int, solve_every: int) -> tuple[str, bool]:
    """The episode's note tag, and whether it writes the fix (every ``solve_every``-th
    episode, counted from the client's offset; 0: never)."""
    return (f"client {offset} episode {e}",
            bool(solve_every) and (offset + e) % solve_every == solve_every - 1)


def _fixes(store: Any, tasks: list[Any], goldens: dict[str, Any], tmp: Path) -> dict[str, Fix]:
    """Each task's golden patch applied to its snapshot: the fixed files' contents."""
    import subprocess

    from swemill.validate.snapshot import unpack_tree

    out: dict[str, Fix] = {}
    for task in tasks:
        tree = unpack_tree(store.get_bytes(task.snapshot), tmp / "fixes" / task.instance_id)
        patch = goldens[task.instance_id].golden_patch
        subprocess.run(["git", "apply", "-"], input=patch.encode(), check=True, cwd=tree)
        rels = [ln[6:] for ln in patch.splitlines() if ln.startswith("+++ b/")]
        out[task.instance_id] = [(rel, (tree / rel).read_text()) for rel in rels]
    return out


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def http_client(url: str, tasks: list[tuple[str, str]], episodes: int, t: Timings,
                offset: int, fixes: dict[str, Fix], solve_every: int) -> None:
    with httpx.Client(base_url=url, timeout=900) as client:
        for e in range(episodes):
            task_id, path = tasks[(offset + e) % len(tasks)]
            tag, solve = _episode(offset, e, solve_every)
            start = time.perf_counter()
            opened = client.post("/sessions", json={"task_id": task_id})
            while opened.status_code == 429:
                time.sleep(float(opened.headers.get("Retry-After", "1")))
                start = time.perf_counter()
                opened = client.post("/sessions", json={"task_id": task_id})
            opened.raise_for_status()
            t.add("reset", time.perf_counter() - start)
            sid = opened.json()["session_id"]
            for action in _actions(path, tag, fixes[task_id] if solve else None):
                start = time.perf_counter()
                res = client.post(f"/sessions/{sid}/step", json={"action": action})
                res.raise_for_status()
                took = time.perf_counter() - start
                if action["name"] == "bash":
                    t.add("bash", took)
                if res.json()["done"]:
                    t.add("grade", took)
                    t.add("rewards", res.json()["reward"])
            client.delete(f"/sessions/{sid}")
            with t.lock:
                t.episodes += 1


def naive_client(store: Any, tasks: list[Any], paths: dict[str, str], episodes: int,
                 t: Timings, offset: int, cache: Path, resolver: Any, fixes: dict[str, Fix],
                 solve_every: int) -> None:
    from swemill.agent.env import EnvConfig, TaskEnv
    from swemill.core.tools import ToolCall

    for e in range(episodes):
        task = tasks[(offset + e) % len(tasks)]
        tag, solve = _episode(offset, e, solve_every)
        env = TaskEnv(EnvConfig(lint=False, cache=cache), store=store, resolver=resolver)
        start = time.perf_counter()
        env.reset(task)
        t.add("reset", time.perf_counter() - start)
        try:
            for action in _actions(paths[task.instance_id], tag,
                                   fixes[task.instance_id] if solve else None):
                call = ToolCall(action["name"], action["arguments"])
                start = time.perf_counter()
                if call.name == "submit":
                    outcome, _ = env.submit()
                    t.add("grade", time.perf_counter() - start)
                    t.add("rewards", 1.0 if outcome.resolved else 0.0)
                    continue
                env.step(call)
                if call.name == "bash":
                    t.add("bash", time.perf_counter() - start)
        finally:
            env.close()
        with t.lock:
            t.episodes += 1


def _vmhwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


_SETTLE_S = 3.0


def _cpu(who: int) -> float:
    use = resource.getrusage(who)
    return use.ru_utime + use.ru_stime


class CpuMeter:
    """CPU seconds of this process and everything it starts, sandboxed commands included: a
    cgroup v1 ``cpuacct`` group of its own where the host has one (sandboxes move commands in
    the memory and pids hierarchies only, so they stay counted here); otherwise rusage, which
    misses what a sandbox's pid namespace reaps (the report then says so)."""

    BASE = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self) -> None:
        self.group: Path | None = self.BASE / f"swemill-bench-{os.getpid()}"
        try:
            self.group.mkdir()
            (self.group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            self.group = None
        self.kind = "cpuacct" if self.group is not None else "rusage (sandboxes not counted)"

    def now(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        return _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN)

    def close(self) -> None:
        if self.group is not None:
            (self.BASE / "cgroup.procs").write_text(str(os.getpid()))
            self.group.rmdir()


_CLK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int, children: bool = False) -> float:
    """CPU seconds process ``pid`` used (all its threads; with ``children``, also what the
    children it reaped used); 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    used = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children
                                                 else 0)
    return used / _CLK


def _grading_servers() -> dict[int, float]:
    """Every live grading server (``--grade``) with the CPU seconds it and its reaped runs
    used so far."""
    out: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--grade" in argv and not argv[0].endswith(b"bwrap"):  # the server, not its bwrap
            out[int(entry.name)] = _proc_cpu(int(entry.name), children=True)
    return out


def _split(server: int, before: tuple[float, dict[int, float]] | None = None
           ) -> tuple[float, dict[int, float]]:
    """The server process's own CPU and its grading servers' (see :func:`_grading_servers`);
    with ``before``, what each used since."""
    own, grading = _proc_cpu(server), _grading_servers()
    if before is None:
        return own, grading
    return own - before[0], {pid: used - before[1].get(pid, 0.0)
                             for pid, used in grading.items()}


def _report(label: str, k: int, t: Timings, wall: float, extra: str = "") -> None:
    print(f"  {label:6} K={k:<3} reset p50 {_pct(t.reset, .5):7.1f} ms p99 "
          f"{_pct(t.reset, .99):7.1f} | bash true p50 {_pct(t.bash, .5):6.1f} ms p99 "
          f"{_pct(t.bash, .99):7.1f} | grading p50 {_pct(t.grade, .5):7.1f} ms | "
          f"{t.episodes / wall * 60:6.1f} episodes/min{extra}", flush=True)


def _build(args: argparse.Namespace, tmp: Path) -> tuple[Path, str]:
    if args.store:
        return Path(args.store), args.run
    from swemill.store import Store
    from swemill.validate.tasks_config import TasksConfig
    from swemill.validate.validator import run_tasks

    root = tmp / "store"
    run_tasks("sample", Store.open(str(root)), "bench", TasksConfig(max_tasks=args.tasks,
                                                                     workers=2, audit=0))
    return root, "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--episodes", type=int, default=2, help="Episodes per client.")
    parser.add_argument("--warm-rounds", type=int, default=4, metavar="N",
                        help="Untimed rounds of K episodes before the timed ones, at most: "
                        "they stop at the first that starts no grading server.")
    parser.add_argument("--solve-every", type=int, default=2, metavar="N",
                        help="Every N-th episode of a client writes the task's golden fix "
                        "before run_tests (its reward is 1); 0: none does (default 2).")
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--store", help="A store root holding a built run (with --run).")
    parser.add_argument("--run", default="bench")
    parser.add_argument("--no-naive", action="store_true")
    parser.add_argument("--cold-grading", action="store_true",
                        help="Also run the server with --cold-grading (another row).")
    parser.add_argument("--cold-tests", action="store_true",
                        help="Also run the server with --cold-tests (the policy's run_tests "
                        "cold in its session's sandbox; warm grading), as another row.")
    parser.add_argument("--per-command", action="store_true",
                        help="Also run the server with --sandbox-per-command (another row).")
    parser.add_argument("--no-spares", action="store_true",
                        help="Also run the server with --spare-sessions 0 (another row).")
    parser.add_argument("--nice0", action="store_true",
                        help="Also run the server with --test-nice 0 (test runs and their "
                             "autogroups not niced), as another row.")
    parser.add_argument("--per-session", action="store_true",
                        help="Also run the server with --grading-servers set to the larger of "
                        "the cores and K (another row).")
    parser.add_argument("--gradings", type=int, default=0, metavar="N",
                        help="Also grade each task's workspace N times warm and N times cold, "
                        "in turn, in-process: CPU seconds per grading (left as the episode "
                        "leaves it, and with the golden fix applied).")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    os.environ.setdefault("SWEMILL_CACHE", str(tmp / "cache"))
    cache = Path(os.environ["SWEMILL_CACHE"])

    from swemill.core.records import Golden, Task
    from swemill.store import Store

    root, run = _build(args, tmp)
    store = Store.open(str(root), check=False)
    tasks = sorted(store.read_records("tasks", run, Task), key=lambda x: x.instance_id)
    goldens = {g.instance_id: g for g in store.read_records("golden", run, Golden)}
    paths = {t.instance_id: next(ln[6:] for ln in goldens[t.instance_id].golden_patch
                                 .splitlines() if ln.startswith("+++ b/")) for t in tasks}
    pairs = [(t.instance_id, paths[t.instance_id]) for t in tasks]
    args.fixes = _fixes(store, tasks, goldens, tmp)
    ks = [int(k) for k in args.clients.split(",")]
    meter = CpuMeter()
    print(f"{len(tasks)} tasks of run {run}, {args.episodes} episodes per client; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start; CPU from {meter.kind}")
    try:
        if args.gradings:
            _gradings(args.gradings, store, tasks, goldens, paths, cache, meter)
        _run(args, ks, root, run, store, tasks, paths, pairs, cache, meter)
    finally:
        meter.close()


def _gradings(n: int, store: Any, tasks: list[Any], goldens: dict[str, Any],
              paths: dict[str, str], cache: Path, meter: CpuMeter) -> None:
    """CPU seconds per grading, warm (the server's grading servers) and cold (a fresh tree
    and sandbox), in turn on the same workspaces: the episode's (it fixes nothing) and one
    with the golden patch applied."""
    import subprocess

    from swemill.agent.env import EnvConfig
    from swemill.core.tools import ToolCall
    from swemill.envs.env_pool import EnvPool

    pool = EnvPool(store, tasks, EnvConfig(lint=False, test_nice=5, cache=cache,
                                           session_runner=False), spares=0)  # grading only
    cpu: dict[str, list[float]] = {}
    load = os.getloadavg()[0]
    try:
        for task in tasks:
            pool.base(task.instance_id)
        time.sleep(_SETTLE_S)  # the first grading servers start in the background
        for _ in range(n):
            for task, fixed in [(t, f) for t in tasks for f in (False, True)]:
                env = pool.fork(task.instance_id)
                env.step(ToolCall("write", {"path": "NOTES.txt", "content": "looked here\n"}))
                if fixed:
                    subprocess.run(["git", "apply", "-"], check=True, cwd=env.sandbox.workspace,
                                   input=goldens[task.instance_id].golden_patch.encode())
                grader = env.grader
                for how in ("warm", "cold"):
                    env.grader = grader if how == "warm" else None
                    start = meter.now()
                    outcome, _ = env.submit()
                    cpu.setdefault(f"{how} {'fixed' if fixed else 'episode'}", []).append(
                        meter.now() - start)
                    assert outcome.resolved == fixed, (how, task.instance_id, outcome.log[-600:])
                env.close()
        assert grader is not None and grader.cold_fallbacks == 0, grader.unusable
    finally:
        pool.close()
    for tree in ("episode", "fixed"):
        warm, cold = (statistics.median(cpu[f"{h} {tree}"]) for h in ("warm", "cold"))
        print(f"  grading, {tree:7} tree: warm {warm:.3f} CPU s, cold {cold:.3f} CPU s "
              f"(x{cold / warm:.2f}), medians of {len(cpu[f'warm {tree}'])} | load "
              f"{load:.1f}-{os.getloadavg()[0]:.1f}", flush=True)


def _run(args: argparse.Namespace, ks: list[int], root: Path, run: str, store: Any,
         tasks: list[Any], paths: dict[str, str], pairs: list[tuple[str, str]], cache: Path,
         meter: CpuMeter) -> None:
    for k in ks:
        served: dict[str, tuple[float, float]] = {}
        rows = [("serve", []), *([("percmd", ["--sandbox-per-command"])]
                                 if args.per_command else []),
                *([("coldrt", ["--cold-tests"])] if args.cold_tests else []),
                *([("cold", ["--cold-grading"])] if args.cold_grading else []),
                *([("nospare", ["--spare-sessions", "0"])] if args.no_spares else []),
                *([("persess", ["--grading-servers", str(max(os.cpu_count() or 1, k))])]
                  if args.per_session else []),
                *([("nice0", ["--test-nice", "0"])] if args.nice0 else [])]
        for label, extra in rows:
            served[label] = _serve(root, run, pairs, k, args, cache, label, extra, meter)
        if "percmd" in served:
            (c1, e1), (c0, e0) = served["serve"], served["percmd"]
            print(f"  serve against percmd K={k}: episodes/min x{e1 / e0:.2f}, "
                  f"CPU/episode x{c0 / c1:.2f} less", flush=True)
        if args.no_naive:
            continue
        from swemill.agent.env import EnvResolver

        # the repository's built environment is looked up once, as the server does (a
        # per-episode sandbox starts from a built image; it does not rebuild or re-detect it)
        resolver = EnvResolver(cache)
        for task in tasks:
            resolver(task)
        n = Timings()
        load = os.getloadavg()[0]
        cpu0 = meter.now()
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=k) as pool:
            for f in [pool.submit(naive_client, store, tasks, paths, args.episodes, n, i, cache,
                                  resolver, args.fixes, args.solve_every) for i in range(k)]:
                f.result()
        wall_naive = time.perf_counter() - start
        cpu = (meter.now() - cpu0) / n.episodes
        epm = n.episodes / wall_naive * 60
        ratios = " ".join(f"{lb}: episodes/min x{e / epm:.2f}, CPU/episode x{cpu / c:.2f}"
                          for lb, (c, e) in served.items())
        _report("naive", k, n, wall_naive, f" | {cpu:.2f} CPU s/episode | {ratios} | load "
                f"{load:.1f}-{os.getloadavg()[0]:.1f}")


def _serve(root: Path, run: str, pairs: list[tuple[str, str]], k: int,
           args: argparse.Namespace, cache: Path, label: str, extra: list[str],
           meter: CpuMeter) -> tuple[float, float]:
    """One K against ``swemill serve``: its CPU seconds per episode (the HTTP clients, threads
    of this process, left out), episodes per minute."""
    load = os.getloadavg()[0]
    cpu_start = meter.now()
    served = ServerProcess(root, run, "--max-sessions", str(k), "--test-timeout", "300", *extra,
                           cache=cache)
    try:
        with httpx.Client(base_url=served.url, timeout=900) as c:  # prepare every base
            for task_id, _ in pairs:
                sid = c.post("/sessions", json={"task_id": task_id}).json()["session_id"]
                c.delete(f"/sessions/{sid}")
        time.sleep(_SETTLE_S)  # the bases' first grading servers start in the background
        # untimed rounds of K episodes until one starts no grading server (at most
        # --warm-rounds): the grading servers the K clients need (~0.5 CPU s each) start here,
        # as they do once in a long-lived server, and the timed round measures its steady state
        for _ in range(args.warm_rounds):
            before = set(_grading_servers())
            with ThreadPoolExecutor(max_workers=k) as pool:
                for f in [pool.submit(http_client, served.url, pairs, 1, Timings(), i,
                                      args.fixes, args.solve_every) for i in range(k)]:
                    f.result()
            if set(_grading_servers()) <= before:
                break
        cpu0, clients0 = meter.now(), _cpu(resource.RUSAGE_SELF)
        split0 = _split(served.proc.pid)
        t = Timings()
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=k) as pool:
            for f in [pool.submit(http_client, served.url, pairs, args.episodes, t, i,
                                  args.fixes, args.solve_every) for i in range(k)]:
                f.result()
        wall = time.perf_counter() - start
        own, grading = _split(served.proc.pid, split0)
        cpu = (meter.now() - cpu0 - (_cpu(resource.RUSAGE_SELF) - clients0)) / max(t.episodes, 1)
        n = max(t.episodes, 1)
        started = sum(1 for pid in grading if pid not in split0[1])
        split = (f" (server process {own / n:.3f}, grading servers {sum(grading.values()) / n:.3f}"
                 f" in {len(grading)}, {started} started while timed; the rest: sandboxes,"
                 f" runners)")
        peak = _vmhwm_mb(served.proc.pid)
    finally:
        served.stop()
    _report(label, k, t, wall, f" | {cpu:.2f} CPU s/episode{split} | start-up"
            f" {cpu0 - cpu_start:.1f}"
            f" CPU s | server peak RSS {peak:.0f} MB | mean reward "
            f"{statistics.fmean(t.rewards):.2f} | load {load:.1f}-{os.getloadavg()[0]:.1f}")
    return cpu, t.episodes / wall * 60


if __name__ == "__main__":
    main()
