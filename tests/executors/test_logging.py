"""Log lines: plain records on workers (what ran, how it ended), Rich on the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

WORKER = """
from swemill.core.logs import worker_logging
from swemill.executors.process_pool import LocalExecutor

def half(x):
    if x < 0:
        raise ValueError("negative")
    return x / 2

worker_logging()
print([r.ok for r in LocalExecutor(workers=0).map(half, [4, -1], retries=0)])
"""

CLI = """
import logging
from rich.console import Console
from swemill.core.logs import cli_logging

cli_logging(Console(stderr=True, width=200))
logging.getLogger("swemill.demo").info("shown at INFO")
logging.getLogger("swemill.demo").debug("hidden at INFO")
"""


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60, check=True)


def test_worker_lines_say_what_ran_and_how_it_ended() -> None:
    proc = _run(WORKER)
    assert proc.stdout.strip() == "[True, False]"
    lines = proc.stderr.splitlines()
    assert all(" INFO pid=" in ln and " swemill.executors." in ln for ln in lines), lines
    assert any("item 0 (attempt 1): __main__:half" in ln for ln in lines)
    assert any("item 0 (attempt 1) done in" in ln for ln in lines)
    assert any("item 1 (attempt 1) failed after" in ln and "ValueError: negative" in ln
               for ln in lines)
    assert any("local: 2 item(s) of __main__:half" in ln and "1 failed" in ln for ln in lines)


def test_worker_level_and_cli_handler_follow_swemill_log() -> None:
    assert _run(WORKER, SWEMILL_LOG="WARNING").stderr == ""
    cli = _run(CLI, SWEMILL_LOG="INFO").stderr
    assert "shown at INFO" in cli and "hidden" not in cli and "pid=" not in cli
    assert _run(CLI).stderr == ""  # the CLI shows warnings and errors only by default
