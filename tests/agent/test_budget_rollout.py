"""--max-usd under concurrency: 8 workers against a server that bills every call.

The fake server reports ``usage.cost`` for each reply from its token counts (as OpenRouter
does); the model never submits, so only the dollar budget can end the run. The sum of all
settled costs must stay within the limit and the run must end cleanly, leaving the
interrupted shards for a resume and their in-flight records behind.
"""

from __future__ import annotations

import threading
import time

from swemill.agent.rollout import run_rollouts
from swemill.core.records import Trajectory
from swemill.store import Store
from swemill.store.layout import shard_name
from swemill_testkit.fake_server import FakeOpenAIServer, FakeReply, FakeToolCall

from .conftest import SampleTasks

RUN = "budget-run"
N_TASKS = 12
DELAY_S = 0.2
HOLD_S = 4.0
N_HELD = 12


def _many_tasks(sample_tasks: SampleTasks, store: Store) -> None:
    """Twelve tasks (copies of the sample's under new ids), so eight workers are all busy."""
    rows = [t.model_copy(update={"instance_id": f"{t.instance_id}.copy{k}"})
            for k in range(N_TASKS) for t in sample_tasks.tasks][:N_TASKS]
    store.write_records("tasks", RUN, shard_name(0, 1), rows)


def test_eight_workers_never_pass_max_usd(sample_tasks: SampleTasks, fresh_store: Store) -> None:
    _many_tasks(sample_tasks, fresh_store)
    starts: list[float] = []
    held: list[float] = []
    lock = threading.Lock()

    def script(request: dict[str, object]) -> FakeReply:
        # the fake server calls this under its lock; the reply's delay runs outside it.
        # The first calls are held for HOLD_S, so calls from eight busy workers overlap.
        with lock:
            starts.append(time.monotonic())
            hold = len(starts) <= N_HELD
            if hold:
                held.append(starts[-1])
        return FakeReply(tool_calls=[FakeToolCall("bash", {"command": "true"})],
                         delay_s=HOLD_S if hold else DELAY_S)

    # $20 per million tokens in and out: the first call of a task costs about 2 cents
    with FakeOpenAIServer(script, price_in=20.0, price_out=20.0) as srv:
        result = run_rollouts(fresh_store, RUN, sample_tasks.config(
            f"openai:fake@{srv.base_url}", workers=8, max_usd=1.00, price="20,20",
            max_output_tokens=64, max_turns=10_000))
    assert result.stopped and result.shards_stopped >= 1
    assert 0.5 < result.cost_usd <= 1.00
    assert result.budget["overrun_usd"] == 0.0 and result.budget["reserved_usd"] == 0.0
    # every call the server billed is in a record: finished trajectories or in-flight ones
    inflight = [Trajectory.model_validate_json(fresh_store.read_text(
        f"rollouts/run_id={RUN}/inflight/{name}"))
        for name in fresh_store.list_keys(f"rollouts/run_id={RUN}/inflight")]
    written = (fresh_store.read_records("trajectories", RUN, Trajectory)
               if fresh_store.list_keys(f"trajectories/run_id={RUN}") else [])
    billed = sum(t.usage.cost_usd for t in inflight + written)
    assert billed <= 1.00 and abs(billed - result.cost_usd) < 1e-6
    assert sum(t.metadata["turns"] for t in inflight + written if "turns" in t.metadata) \
        <= len(starts)
    assert all(t.usage.cost_usd > 0 for t in inflight)
    manifest = fresh_store.read_manifest(RUN)
    assert manifest.cost_usd <= 1.00 and manifest.counts["rollouts"]["stopped_budget"] >= 1
    # eight calls were in flight at once: held calls that start less than HOLD_S apart
    # overlap, and they come from different workers (a worker's next call waits for its reply)
    busiest = max(sum(1 for s in held if 0 <= s - t < HOLD_S) for t in held)
    assert busiest >= 8, sorted(round(s - held[0], 2) for s in held)
