"""Judging a test run: a pure function of the saved report and the process's exit code.

The report is the JSON-lines file :mod:`swemill.suite.pytest_plugin` writes. A run is
*trustworthy* only when the report and the exit code tell the same story: pytest's own summary
line is present, its exit status is the process's, and failures are reported exactly when the
exit code says there were some. A log that claims every test passed while the process exited
non-zero is not a pass; neither is a run that was killed, timed out or wrote foreign lines.

A grading run is also *sealed* (``sealed`` is its stdout): the reporter reports any of pytest's
report and run machinery that was replaced during the run (``tamper`` lines), and prints the
report file's SHA-256 once the file is closed; the file must still have that digest, so a
report rewritten after pytest finished (from an ``atexit`` hook) is not trusted.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from swemill.core.records import TestResult, TestStatus
from swemill.suite.said import exit_meaning, signal_name

__all__ = ["TestRunReport", "parse_report"]

_BAD = ("failed", "error")
_SEAL = "swemill-report-sha256"
"""The digest line's tag; the reporter (:mod:`swemill.suite.pytest_plugin`) writes it."""
# CPython's default repr, ``<Warehouse object at 0x7f8c44cd1f90>``: the address differs on
# every run and means nothing, and a message is quoted in problem statements and tool results,
# so it is masked to keep those a function of the code and its tests.
_ADDRESS = re.compile(r"( at 0x)[0-9a-fA-F]{4,16}>")


def _message(row: dict[str, object]) -> str:
    return _ADDRESS.sub(r"\1...>", str(row.get("message", "")))


@dataclass(slots=True)
class TestRunReport:
    """The judged result of one pytest run."""

    __test__ = False

    results: dict[str, TestResult]
    exit_code: int
    trustworthy: bool
    problem: str = ""
    """Why the run cannot be trusted (empty when it can)."""
    timed_out: bool = False
    collected: int | None = None
    collect_errors: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    coverage: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """Coverage run only: file -> node id -> covered lines."""
    shared_lines: dict[str, list[int]] = field(default_factory=dict)
    """Coverage run only: file -> lines run outside any one test (imports, collection,
    fixtures of a wider scope)."""
    spawned: list[str] = field(default_factory=list)
    """Coverage run only: tests that started a process or set their own tracer."""
    running: str = ""
    """The test that had begun and not ended when the run stopped (a run killed at its
    timeout: the test it was in); empty when every test that began ended."""
    stutter_stops: int | None = None
    """Stuttered run only: how many times the run's processes were stopped (None: not
    stuttered, or the reporter never said)."""

    def status(self, nodeid: str) -> TestStatus:
        """A test's outcome, or ``error`` when the run is untrustworthy or never ran it."""
        if not self.trustworthy or nodeid not in self.results:
            return "error"
        return self.results[nodeid].outcome

    def with_outcome(self, *outcomes: TestStatus) -> set[str]:
        return {n for n, r in self.results.items() if r.outcome in outcomes}

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results.values():
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return out


def _lines(text: str, nonce: str | None) -> tuple[list[dict[str, object]], int]:
    rows: list[dict[str, object]] = []
    foreign = 0
    for raw in text.splitlines():
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError:
            foreign += 1
            continue
        if not isinstance(row, dict) or (nonce is not None and row.get("n") != nonce):
            foreign += 1
            continue
        rows.append(row)
    return rows, foreign


def parse_report(report_text: str, exit_code: int, *, nonce: str | None = None,
                 selected: Iterable[str] | None = None, timed_out: bool = False,
                 killed_reason: str | None = None, wall_s: float = 0.0,
                 sealed: str | None = None) -> TestRunReport:
    """Judge a run from its report text and exit code (no I/O; recomputable offline).
    ``sealed``: the stdout of a sealed (grading) run, checked against the report."""
    rows, foreign = _lines(report_text, nonce)
    results: dict[str, TestResult] = {}
    collect_errors: dict[str, str] = {}
    finish: dict[str, object] | None = None
    tampered: list[str] = []
    begun = ""
    for row in rows:
        kind = row.get("kind")
        if kind == "begin":
            begun = str(row.get("nodeid", ""))
        elif kind == "test":
            nodeid = str(row["nodeid"])
            results[nodeid] = TestResult(nodeid=nodeid, outcome=row["outcome"],  # type: ignore[arg-type]
                                         duration_s=float(row.get("duration", 0.0)),  # type: ignore[arg-type]
                                         message=_message(row))
        elif kind == "collect":
            collect_errors[str(row["nodeid"])] = _message(row)
        elif kind == "finish":
            finish = row
        elif kind == "tamper":
            tampered += [str(n) for n in row.get("names") or ["?"]]  # type: ignore[attr-defined]
    running = begun if begun and begun not in results else ""
    if selected is not None:
        _fill_missing(results, selected, collect_errors)
    problem = _problem(results, collect_errors, finish, exit_code, foreign, timed_out,
                       killed_reason)
    if not problem and tampered:
        problem = "the test process changed how its tests are reported: " + ", ".join(tampered[:5])
    if not problem and sealed is not None:
        problem = _seal_problem(report_text, sealed, nonce or "")
    collected = int(finish["collected"]) if finish and "collected" in finish else None  # type: ignore[call-overload]
    stops = finish.get("stutter_stops") if finish else None
    return TestRunReport(results=results, exit_code=exit_code, trustworthy=not problem,
                         problem=problem, timed_out=timed_out, collected=collected,
                         collect_errors=collect_errors, wall_s=wall_s,
                         stutter_stops=stops if isinstance(stops, int) else None,
                         running=running)


def _seal_problem(report_text: str, stdout: str, nonce: str) -> str:
    seals = re.findall(rf"^{_SEAL} {re.escape(nonce)} ([0-9a-f]{{64}})$", stdout, re.M)
    if len(seals) != 1:
        return f"the report's seal was printed {len(seals)} times, not once"
    if hashlib.sha256(report_text.encode()).hexdigest() != seals[0]:
        return "the report changed after pytest closed it"
    return ""


def _fill_missing(results: dict[str, TestResult], selected: Iterable[str],
                  collect_errors: dict[str, str]) -> None:
    """A selected test that never reported is an error, with the collection error if any."""
    for nodeid in selected:
        if nodeid in results:
            continue
        why = next((f"collection failed: {msg}" for where, msg in collect_errors.items()
                    if nodeid == where or nodeid.startswith(where + "::")
                    or nodeid.split("::")[0] == where), "not run (not collected)")
        results[nodeid] = TestResult(nodeid=nodeid, outcome="error", message=why[:600])


def _problem(results: dict[str, TestResult], collect_errors: dict[str, str],
             finish: dict[str, object] | None, exit_code: int, foreign: int, timed_out: bool,
             killed_reason: str | None) -> str:
    bad = any(r.outcome in _BAD for r in results.values()) or bool(collect_errors)
    if timed_out:
        return "the run timed out"
    if killed_reason:
        return f"the run was killed ({killed_reason})"
    if foreign:
        return f"the report holds {foreign} line(s) swemill's reporter did not write"
    if finish is None:
        sig = signal_name(exit_code)
        return (f"pytest never finished its session (exit {exit_code}): "
                + (f"killed by {sig}" if sig else "killed or os._exit"))
    if finish.get("exitstatus") != exit_code:
        return f"pytest reported exit {finish.get('exitstatus')} but the process exited {exit_code}"
    if exit_code == 0 and bad:
        return "exit code 0 but failures were reported"
    if exit_code == 1 and not bad:
        return "exit code 1 but no failure was reported"
    if exit_code not in (0, 1):
        return exit_meaning(exit_code)
    return ""
