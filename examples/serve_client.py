"""A minimal client of ``swemill serve``: one episode per task, with a fixed list of actions.

Start a server on a built run, then run this against it::

    swemill build --out ./swemill-out                       # the bundled sample's tasks
    swemill serve --tasks <RUN_ID> --out ./swemill-out --port 8765 &
    python examples/serve_client.py --url http://127.0.0.1:8765

Swap ``ACTIONS`` for your model: send it ``observation["messages"]`` and
``observation["tools"]`` after the reset, turn each tool call it makes into a step, and feed
each step's ``observation["content"]`` back as the tool's result. The reward arrives with
``done``: 1.0 when the grader resolves the task, 0.0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import httpx

ACTIONS = [
    {"name": "bash", "arguments": {"command": "git status --short; ls"}},
    {"name": "search", "arguments": {"pattern": "def ", "glob": "*.py"}},
    {"name": "bash", "arguments": {"command": "true"}},
    {"name": "run_tests", "arguments": {}},
    {"name": "submit", "arguments": {}},
]


def episode(client: httpx.Client, task_id: str) -> float:
    while True:
        opened = client.post("/sessions", json={"task_id": task_id})
        if opened.status_code != 429:  # all sessions busy: wait as the server asks
            break
        time.sleep(float(opened.headers.get("Retry-After", "1")))
    opened.raise_for_status()
    session = opened.json()["session_id"]
    print(f"== {task_id}\n{opened.json()['observation']['content'][:300]}")
    try:
        for i, action in enumerate(ACTIONS):
            step = client.post(f"/sessions/{session}/step",
                               json={"action": {**action, "id": f"call_{i}"}})
            step.raise_for_status()
            result = step.json()
            first = result["observation"]["content"].splitlines()[:1]
            print(f"  {action['name']:9} -> {first[0][:70] if first else ''}")
            if result["done"]:
                info = result["info"]
                print(f"  reward {result['reward']} (resolved {info['resolved']}, "
                      f"F2P fraction {info['f2p_fraction']}, graded in {info['grading_s']} s)")
                return float(result["reward"])
    finally:
        client.delete(f"/sessions/{session}")
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8765")
    parser.add_argument("--token", default=os.environ.get("SWEMILL_SERVE_TOKEN"))
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    with httpx.Client(base_url=args.url, headers=headers, timeout=600) as client:
        tasks = client.get("/tasks")
        tasks.raise_for_status()
        rewards = [episode(client, t["instance_id"]) for t in tasks.json()["tasks"]]
    print(f"{len(rewards)} episodes, mean reward {sum(rewards) / max(1, len(rewards)):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
