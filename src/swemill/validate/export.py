"""Export tasks for external consumers in SWE-bench's JSONL shape.

There ``patch`` is the *bug* patch (base -> broken), as SWE-smith publishes its instances, and
``FAIL_TO_PASS`` / ``PASS_TO_PASS`` are JSON-encoded lists, as in SWE-bench's own files.
``test_cmd`` is how to run an instance's tests at its base commit with plain pytest (no swemill
code): run at the repository's root, with the test ids after it, in an environment with the
project and its test dependencies installed; it carries every flag the tests need, the
repository's own ``addopts`` included, so an older commit's configuration cannot drop one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from swemill.core.errors import ValidationError
from swemill.core.records import Golden, Task

__all__ = ["swebench_rows"]


def swebench_rows(tasks: Iterable[Task], goldens: Iterable[Golden]) -> Iterator[dict[str, object]]:
    by_id = {g.instance_id: g for g in goldens}
    for task in tasks:
        golden = by_id.get(task.instance_id)
        if golden is None:
            raise ValidationError(f"no golden row for task {task.instance_id}")
        yield {
            "instance_id": task.instance_id,
            "repo": task.repo,
            "base_commit": task.base_commit,
            "patch": golden.bug_patch,
            "test_patch": "",
            "problem_statement": task.problem_statement,
            "hints_text": "",
            "created_at": task.created_at,
            "version": "",
            "environment_setup_commit": task.base_commit,
            "FAIL_TO_PASS": json.dumps(task.FAIL_TO_PASS),
            "PASS_TO_PASS": json.dumps(task.PASS_TO_PASS),
            "test_cmd": task.test_cmd,
            "strategy": task.strategy,
            "license_tier": task.license_tier,
        }
