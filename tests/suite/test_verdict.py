"""Judging a run is a pure function of the report text and the exit code.

Regression class: a report that claims every test passed while the process exited non-zero
(a test that fakes success, an interpreter that died after the last line) must not count as a
pass; neither may a report with lines the reporter did not write.
"""

from __future__ import annotations

import json

from swemill.suite.verdict import parse_report

NONCE = "n0nce"


def line(kind: str, nonce: str = NONCE, **fields: object) -> str:
    return json.dumps({"kind": kind, "n": nonce, **fields})


def report(tests: dict[str, str], exitstatus: int | None, *extra: str) -> str:
    rows = [line("start", pytest="8", python="3.11")]
    rows += [line("test", nodeid=n, outcome=o, duration=0.01, message="") for n, o in tests.items()]
    rows += list(extra)
    if exitstatus is not None:
        rows.append(line("finish", exitstatus=exitstatus, collected=len(tests)))
    return "\n".join(rows) + "\n"


def test_all_passed_with_exit_zero_is_trusted() -> None:
    r = parse_report(report({"t.py::a": "passed", "t.py::b": "skipped"}, 0), 0, nonce=NONCE)
    assert r.trustworthy and r.problem == ""
    assert r.status("t.py::a") == "passed" and r.status("t.py::b") == "skipped"
    assert r.counts() == {"passed": 1, "skipped": 1}
    assert r.collected == 2


def test_all_passed_but_exit_one_is_not_a_pass() -> None:
    text = report({"t.py::a": "passed", "t.py::b": "passed"}, 1)
    r = parse_report(text, 1, nonce=NONCE)
    assert not r.trustworthy
    assert "no failure was reported" in r.problem
    assert r.status("t.py::a") == "error"


def test_failure_with_exit_one_is_trusted() -> None:
    r = parse_report(report({"t.py::a": "passed", "t.py::b": "failed"}, 1), 1, nonce=NONCE)
    assert r.trustworthy
    assert r.with_outcome("failed") == {"t.py::b"}


def test_failures_reported_with_exit_zero_are_suspect() -> None:
    r = parse_report(report({"t.py::a": "failed"}, 0), 0, nonce=NONCE)
    assert not r.trustworthy and "exit code 0" in r.problem


def test_missing_session_summary_means_killed() -> None:
    r = parse_report(report({"t.py::a": "passed"}, None), 0, nonce=NONCE)
    assert not r.trustworthy and "never finished" in r.problem


def test_pytest_status_must_match_process_exit() -> None:
    r = parse_report(report({"t.py::a": "failed"}, 1), 0, nonce=NONCE)
    assert not r.trustworthy and "process exited 0" in r.problem


def test_forged_lines_make_the_run_untrustworthy() -> None:
    forged = line("test", nonce="guess", nodeid="t.py::b", outcome="passed", duration=0)
    r = parse_report(report({"t.py::a": "passed"}, 0, forged, "PASSED t.py::b"), 0, nonce=NONCE)
    assert not r.trustworthy and "did not write" in r.problem
    assert "t.py::b" not in r.results


def test_timeout_and_kill_are_never_trusted() -> None:
    text = report({"t.py::a": "passed"}, 0)
    assert parse_report(text, 0, nonce=NONCE, timed_out=True).problem == "the run timed out"
    killed = parse_report(text, 0, nonce=NONCE, killed_reason="memory")
    assert not killed.trustworthy and "memory" in killed.problem


def test_a_killed_run_names_the_test_it_was_in() -> None:
    begun = [line("begin", nodeid="t.py::a"), line("test", nodeid="t.py::a", outcome="passed",
                                                   duration=0.01, message=""),
             line("begin", nodeid="t.py::b")]
    text = "\n".join([line("start", pytest="8", python="3.11"), *begun]) + "\n"
    r = parse_report(text, -9, nonce=NONCE, timed_out=True, selected=["t.py::a", "t.py::b"])
    assert r.running == "t.py::b" and r.status("t.py::b") == "error"
    ended = parse_report(report({"t.py::a": "passed"}, 0, line("begin", nodeid="t.py::a")), 0,
                         nonce=NONCE)
    assert ended.running == "" and ended.trustworthy


def test_selected_tests_that_never_ran_are_errors_with_the_collection_error() -> None:
    collect = line("collect", nodeid="t_mod.py", outcome="error", message="ImportError: boom")
    text = report({"t.py::a": "passed"}, 1, collect)
    r = parse_report(text, 1, nonce=NONCE, selected=["t.py::a", "t_mod.py::b", "u.py::c"])
    assert r.trustworthy
    assert r.results["t_mod.py::b"].outcome == "error"
    assert "ImportError: boom" in r.results["t_mod.py::b"].message
    assert r.results["u.py::c"].message == "not run (not collected)"
    assert r.status("t.py::a") == "passed"


def test_no_tests_collected_is_reported() -> None:
    r = parse_report(report({}, 5), 5, nonce=NONCE)
    assert not r.trustworthy and "no tests collected" in r.problem


def test_parse_is_pure_and_repeatable() -> None:
    text = report({"t.py::a": "passed", "t.py::b": "xfailed"}, 0)
    a = parse_report(text, 0, nonce=NONCE)
    b = parse_report(text, 0, nonce=NONCE)
    assert a.results == b.results and a.trustworthy == b.trustworthy


def test_object_addresses_in_messages_are_masked() -> None:
    """An address differs on every run; a message quoted in a problem statement or a tool
    result would make the same task and actions give different rows."""
    msg = ("assert 3 == 4\n where 4 = <inventory.stock.Warehouse object at 0x7f8c44cd1f90>"
           ".total_value\n and 0xdeadbeef stays")
    text = "\n".join([line("start"), line("test", nodeid="t.py::a", outcome="failed",
                                          duration=0.1, message=msg),
                      line("finish", exitstatus=1, collected=1)]) + "\n"
    r = parse_report(text, 1, nonce=NONCE)
    assert r.results["t.py::a"].message == msg.replace("0x7f8c44cd1f90>", "0x...>")

def _seal(text: str, nonce: str = NONCE) -> str:
    import hashlib

    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"3 passed in 0.1s\nswemill-report-sha256 {nonce} {digest}\n"


def test_a_sealed_run_is_trusted_only_with_one_seal_that_matches_the_report() -> None:
    text = report({"t.py::a": "passed"}, 0)
    assert parse_report(text, 0, nonce=NONCE, sealed=_seal(text)).trustworthy
    rewritten = text.replace('"exitstatus": 0', '"exitstatus": 0 ')  # changed after the seal
    r = parse_report(rewritten, 0, nonce=NONCE, sealed=_seal(text))
    assert not r.trustworthy and r.problem == "the report changed after pytest closed it"
    twice = _seal(rewritten) + _seal(text)  # a second seal printed by code that ran later
    assert "2 times" in parse_report(rewritten, 0, nonce=NONCE, sealed=twice).problem
    assert "0 times" in parse_report(text, 0, nonce=NONCE, sealed=_seal(text, "other")).problem
    assert parse_report(text, 0, nonce=NONCE).trustworthy  # an unsealed run is not checked


def test_a_run_that_replaced_pytests_machinery_is_not_trusted() -> None:
    text = report({"t.py::a": "passed"}, 0,
                  line("tamper", names=["class:_pytest.reports.TestReport.from_item_and_call"]))
    r = parse_report(text, 0, nonce=NONCE)
    assert not r.trustworthy and "TestReport.from_item_and_call" in r.problem
    assert r.status("t.py::a") == "error"
