"""The environment server under load, side by side with a fresh sandbox per episode.

Builds a few validated tasks of the bundled sample (``run_tasks``, once, in a temporary store
and cache; or ``--store ROOT --run RUN_ID`` reuses a built run), starts ``swemill serve`` on
loopback, and for each K runs K concurrent HTTP clients, each playing scripted episodes (read
a file, edit one, three ``bash true`` steps, ``run_tests``, ``submit``) over the tasks in turn.
Reports reset latency p50/p99 (``POST /sessions``), ``bash true`` step latency p50/p99,
grading latency p50 (the ``submit`` step), episodes per minute, and the server's peak RSS
(VmHWM; test processes are its children and not counted). Then the same episodes, K at a
time, through a fresh per-episode sandbox (no fork, no server: ``TaskEnv.reset`` unpacks the
snapshot and opens a new sandbox each time; in-process, so it pays no HTTP), as the naive
comparison.

    .venv/bin/python benchmarks/bench_serve.py [--clients 1,8,32] [--episodes 2] [--tasks 3]
"""

from __future__ import annotations

import argparse
import os
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


def _actions(path: str) -> list[dict[str, Any]]:
    return [{"name": "read", "arguments": {"path": path}},
            {"name": "write", "arguments": {"path": "NOTES.txt", "content": "looked here\n"}},
            *[{"name": "bash", "arguments": {"command": "true"}}] * 3,
            {"name": "run_tests", "arguments": {}},
            {"name": "submit", "arguments": {}}]


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def http_client(url: str, tasks: list[tuple[str, str]], episodes: int, t: Timings,
                offset: int) -> None:
    with httpx.Client(base_url=url, timeout=900) as client:
        for e in range(episodes):
            task_id, path = tasks[(offset + e) % len(tasks)]
            start = time.perf_counter()
            opened = client.post("/sessions", json={"task_id": task_id})
            while opened.status_code == 429:
                time.sleep(float(opened.headers.get("Retry-After", "1")))
                start = time.perf_counter()
                opened = client.post("/sessions", json={"task_id": task_id})
            opened.raise_for_status()
            t.add("reset", time.perf_counter() - start)
            sid = opened.json()["session_id"]
            for action in _actions(path):
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
                 t: Timings, offset: int, cache: Path) -> None:
    from swemill.agent.env import EnvConfig, TaskEnv
    from swemill.core.tools import ToolCall

    for e in range(episodes):
        task = tasks[(offset + e) % len(tasks)]
        env = TaskEnv(EnvConfig(lint=False, cache=cache), store=store)
        start = time.perf_counter()
        env.reset(task)
        t.add("reset", time.perf_counter() - start)
        try:
            for action in _actions(paths[task.instance_id]):
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
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--store", help="A store root holding a built run (with --run).")
    parser.add_argument("--run", default="bench")
    parser.add_argument("--no-naive", action="store_true")
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
    ks = [int(k) for k in args.clients.split(",")]
    print(f"{len(tasks)} tasks of the sample, {args.episodes} episodes per client; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start")
    for k in ks:
        served = ServerProcess(root, run, "--max-sessions", str(k), "--test-timeout", "300",
                               cache=cache)
        try:
            with httpx.Client(base_url=served.url, timeout=900) as c:  # prepare every base
                for task_id, _ in pairs:
                    sid = c.post("/sessions", json={"task_id": task_id}).json()["session_id"]
                    c.delete(f"/sessions/{sid}")
            t = Timings()
            start = time.perf_counter()
            with ThreadPoolExecutor(max_workers=k) as pool:
                for f in [pool.submit(http_client, served.url, pairs, args.episodes, t, i)
                          for i in range(k)]:
                    f.result()
            wall = time.perf_counter() - start
            _report("serve", k, t, wall, f" | server peak RSS {_vmhwm_mb(served.proc.pid):.0f} MB"
                    f" | mean reward {statistics.fmean(t.rewards):.2f}")
        finally:
            served.stop()
        if args.no_naive:
            continue
        n = Timings()
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=k) as pool:
            for f in [pool.submit(naive_client, store, tasks, paths, args.episodes, n, i, cache)
                      for i in range(k)]:
                f.result()
        wall_naive = time.perf_counter() - start
        _report("naive", k, n, wall_naive, f" | serve/naive episodes/min x{wall_naive / wall:.2f}")


if __name__ == "__main__":
    main()
