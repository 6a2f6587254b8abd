"""Timeouts from measured durations, never a fixed limit.

A run of the selected tests gets ``factor`` times their baseline durations plus twice the
measured start-up plus a margin. A test the baseline has no duration for counts as the
slowest one it has (new tests, renamed parametrisations).

Before the baseline there are no durations: a whole-suite run is bounded by the suite's
size instead (:func:`suite_timeout_for`: the test functions in the tree, a fixed allowance
each, between a floor and a ceiling), so a small suite that hangs is reported in minutes.
That bound is wall time, and on a machine asked for more CPU than it has a run takes longer
by as much: it is multiplied by the 1-minute load per CPU when that is above 1 (at most
:data:`BUSY_MAX` times). A heavily parametrised suite (packaging 24.1: 320 test functions,
26,854 tests) needed more than its 380 s at a load of 13 on 2 CPUs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from swemill.core.records import Baseline

__all__ = ["adaptive_timeout", "SuiteTimeout", "busy_factor", "suite_timeout_for",
           "count_tests"]

SUITE_FLOOR_S = 120.0
"""Even a one-test suite gets this long: the first baseline run installs the plugin, imports
the project and records coverage, on a machine that may be busy."""
SUITE_PER_TEST_S = 1.0
"""Per test function found: some twenty times what a typical unit test takes."""
SUITE_CEILING_S = 3600.0
BUSY_MAX = 8.0

_TEST_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+test", re.MULTILINE)
_SKIP_DIRS = {"build", "dist", "node_modules", "site-packages", "__pycache__", "venv"}


def _test_files(root: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS]
        for name in filenames:
            if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")
                                         or name == "tests.py"):
                yield Path(dirpath) / name


def count_tests(root: Path) -> int:
    """Test functions (``def test*``, methods included) in the tree's test files."""
    total = 0
    for path in _test_files(root):
        try:
            total += len(_TEST_DEF.findall(path.read_bytes()))
        except OSError:
            continue
    return total


@dataclass(frozen=True, slots=True)
class SuiteTimeout:
    seconds: float
    tests: int | None = None
    """The test functions it was derived from; None when it was given."""
    busy: float = 1.0
    """The factor for a busy machine it includes (:func:`busy_factor`)."""

    def describe(self) -> str:
        if self.tests is None:
            return f"{self.seconds:.0f} s"
        more = f", x{self.busy:.1f} for a busy machine" if self.busy > 1 else ""
        return f"{self.seconds:.0f} s (the default for {self.tests} test functions{more})"


def busy_factor(load: float | None = None, cpus: int | None = None) -> float:
    """The 1-minute load (``load``, default the machine's) per CPU this process may use,
    between 1 and :data:`BUSY_MAX`."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            return 1.0
    cpus = cpus or len(os.sched_getaffinity(0)) or 1
    return min(BUSY_MAX, max(1.0, load / cpus))


def suite_timeout_for(root: Path, given: float | None = None, *,
                      busy: float | None = None) -> SuiteTimeout:
    """``given`` when set, else a bound derived from the size of the suite under ``root``,
    times ``busy`` (default :func:`busy_factor` of this machine now)."""
    if given is not None:
        return SuiteTimeout(given)
    tests = count_tests(root)
    busy = busy_factor() if busy is None else busy
    seconds = min(SUITE_CEILING_S, max(SUITE_FLOOR_S, 60.0 + SUITE_PER_TEST_S * tests))
    return SuiteTimeout(round(seconds * busy, 1), tests, busy)


def adaptive_timeout(baseline: Baseline, nodeids: Iterable[str] | None = None, *,
                     factor: float = 3.0, margin_s: float = 5.0) -> float:
    """Seconds to allow a run of ``nodeids`` (the whole suite when None)."""
    durations = baseline.durations_s
    fallback = max(durations.values(), default=1.0)
    selected = durations.keys() if nodeids is None else nodeids
    work = sum(durations.get(n, fallback) for n in selected)
    return round(factor * work + 2 * baseline.startup_s + margin_s, 3)
