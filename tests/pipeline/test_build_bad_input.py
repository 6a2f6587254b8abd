"""Bad input to ``swemill build``: one clear line and exit 2, and a manifest that says failed."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from identify.vendor.licenses import LICENSES

from swemill.core.errors import ConfigError, StoreError
from swemill.core.records import CandidateRecord, RunManifest
from swemill.pipeline import latest_unfinished, run_build
from swemill.store import Store


def test_unwritable_root_is_one_line(cli, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for root in ("/proc/swemill-out", str(blocker / "out")):
        line = cli.error_line(cli.run("build", "--out", root))
        assert "cannot write" in line and root.split("/")[-1] in line


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_unreachable_s3_root_fails_fast(cli) -> None:
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}",
           "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_DEFAULT_REGION": "us-east-1"}
    t0 = time.monotonic()
    line = cli.error_line(cli.run("build", "--out", "s3://nowhere/prefix", env=env, timeout=120))
    assert "s3://nowhere/prefix" in line and "cannot write" in line
    assert time.monotonic() - t0 < 60


def test_no_out_is_refused(cli) -> None:
    assert "--out ROOT is required" in cli.error_line(cli.run("build"))


def test_unknown_run_id_is_one_clear_line(cli, tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    line = cli.error_line(cli.run("build", "--out", root, "--resume", "--run-id", "nope"))
    assert "no run nope" in line


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"resume": True, "run_id": "nope"}, "no run nope in"),
    ({"resume": True}, "no unfinished build to resume under"),
    ({"parent": "ghost"}, "no parent run ghost in"),
    ({"run_id": "../x"}, "invalid run id"),
])
def test_run_ids_that_do_not_exist(tmp_path: Path, kwargs: dict, needle: str) -> None:
    root = tmp_path / "root"
    with pytest.raises(StoreError, match=needle) as info:
        run_build(None, str(root), **kwargs)
    assert "\n" not in str(info.value)
    # None of these left a run behind that could pass for a dataset.
    assert not (root / "manifests").exists()


def test_an_existing_run_id_is_not_overwritten(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path))
    store.write_manifest(RunManifest(run_id="taken", command="build", status="complete"))
    with pytest.raises(StoreError, match="run taken already exists.*--resume"):
        run_build(None, str(tmp_path), run_id="taken")
    assert store.read_manifest("taken").status == "complete"


def test_resume_of_another_commands_run_is_refused(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path))
    store.write_manifest(RunManifest(run_id="r1", command="corpus"))
    with pytest.raises(ConfigError, match="made by 'swemill corpus'"):
        run_build(None, str(tmp_path), resume=True, run_id="r1")
    assert latest_unfinished_or_none(store) is None


def latest_unfinished_or_none(store: Store) -> str | None:
    try:
        return latest_unfinished(store)
    except StoreError:
        return None


def test_resume_keeps_the_recorded_settings(cli, tmp_path: Path) -> None:
    line = cli.error_line(cli.run("build", "--out", str(tmp_path), "--resume", "--seed", "3"))
    assert "drop --seed" in line


@pytest.mark.parametrize(("args", "needle"), [
    (("--policy", "gpt4"), "unknown policy spec 'gpt4'"),
    (("--samples", "0"), "Invalid value"),
    (("--emit", "video"), "unknown --emit"),
])
def test_bad_flags(cli, tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    proc = cli.run("build", "--out", str(tmp_path / "r"), *args)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def _manifest(root: Path) -> dict:
    (path,) = (root / "manifests").glob("run_id=*.json")
    return json.loads(path.read_text())


def test_refused_source_stops_at_the_gate(cli, tmp_path: Path) -> None:
    clone = tmp_path / "requests"
    clone.mkdir()
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "remote", "add", "origin",
                    "https://github.com/someone/requests-fork.git"], check=True)
    (clone / "pyproject.toml").write_text('[project]\nname = "requests"\n')
    (clone / "LICENSE").write_text(dict(LICENSES)["Apache-2.0"])
    root = tmp_path / "root"
    line = cli.error_line(cli.run("build", str(clone), "--out", str(root)))
    assert "refused" in line and "requests" in line
    m = _manifest(root)
    assert m["status"] == "failed" and m["finished_at"]
    assert m["metadata"]["build"]["stages"] == {"gate": "failed"}
    assert m["metadata"]["build"]["error_stage"] == "gate"
    assert m["counts"]["gate"] == {"in": 1, "out": 0, "dropped_refused": 1}
    assert (root / "gate").is_dir() and not (root / "tasks").exists()
    assert not (root / "corpus").exists()


def test_missing_source_is_one_line_and_a_failed_run(cli, tmp_path: Path) -> None:
    root = tmp_path / "root"
    line = cli.error_line(cli.run("build", str(tmp_path / "absent"), "--out", str(root)))
    assert "absent" in line
    assert _manifest(root)["status"] == "failed"


def _hanging_project(root: Path) -> Path:
    files = {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\n'
                          'build-backend = "setuptools.build_meta"\n'
                          '[project]\nname = "hangdemo"\nversion = "0.1"\nlicense = "MIT"\n'
                          '[tool.setuptools]\npackages = ["hangdemo"]\n',
        "LICENSE": dict(LICENSES)["MIT"],
        "hangdemo/__init__.py": "def f():\n    return 1\n",
        "tests/test_it.py": "import time\n\ndef test_hang():\n    time.sleep(600)\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.slow
@pytest.mark.network  # the project's build backend comes from the package index
def test_a_hanging_suite_is_reported_within_suite_timeout(cli, tmp_path: Path) -> None:
    # build used to wait 900 s, then advise a --suite-timeout it did not take
    proj, root, cache = _hanging_project(tmp_path / "p"), tmp_path / "root", tmp_path / "c"
    t0 = time.monotonic()
    line = cli.error_line(cli.run("build", str(proj), "--out", str(root), "--suite-timeout", "5",
                                  cache=cache, timeout=400))
    assert "did not finish within 5 s" in line and "--suite-timeout" in line
    assert time.monotonic() - t0 < 300
    m = _manifest(root)
    assert m["status"] == "failed" and m["metadata"]["build"]["error_stage"] == "env"
    # the advice works: a resume may change it (a runtime setting)
    line = cli.error_line(cli.run("build", "--out", str(root), "--resume", "--suite-timeout", "6",
                                  cache=cache, timeout=400))
    assert "did not finish within 6 s" in line


@pytest.mark.slow
@pytest.mark.network  # the project's build backend comes from the package index
def test_a_suite_that_checks_nothing_fails_at_tasks_and_says_why(cli, tmp_path: Path) -> None:
    # the rollouts stage used to fail with "run ... has no tasks", and nothing said why
    proj = _hanging_project(tmp_path / "p")
    (proj / "hangdemo" / "__init__.py").write_text("def f(a, b):\n    return a + b\n")
    (proj / "tests" / "test_it.py").write_text(
        "from hangdemo import f\n\n\ndef test_runs():\n    f(1, 2)\n\n\n"
        "def test_other():\n    assert True\n")
    root = tmp_path / "root"
    line = cli.error_line(cli.run("build", str(proj), "--out", str(root), "--strategies",
                                  "procedural", "--max-tasks", "1", "--workers", "1",
                                  cache=tmp_path / "c", timeout=400))
    assert re.search(r"no task from (\d+) candidate\(s\) of hangdemo: \1 of \1 candidates "
                     r"were dropped as no_fail_to_pass: no test noticed the bug", line), line
    m = _manifest(root)
    assert m["status"] == "failed" and m["metadata"]["build"]["error_stage"] == "tasks"
    rows = Store(str(root)).read_records("candidates", m["run_id"], CandidateRecord)
    assert rows and {(r.verdict, r.reason, r.symbol) for r in rows} == {
        ("dropped", "no_fail_to_pass", "f")}


@pytest.mark.slow
def test_sigterm_mid_build_marks_the_run_failed_and_leaves_nothing(cli, tmp_path: Path) -> None:
    import os
    import signal
    import sys

    from swemill.sandbox.cgroups import leftover_groups

    root = tmp_path / "root"
    env = dict(os.environ, TMPDIR=str(tmp_path), COLUMNS="200")
    proc = subprocess.Popen([sys.executable, "-m", "swemill", "build", "--out", str(root),
                             *cli.BUILD_ARGS], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 300
    stages: dict = {}
    while time.monotonic() < end and proc.poll() is None:
        manifests = list((root / "manifests").glob("run_id=*.json"))
        if manifests:
            with contextlib.suppress(ValueError):  # caught mid-rename
                stages = json.loads(manifests[0].read_text())["metadata"]["build"]["stages"]
        # validation has started: the stage runs and its workers' sandboxes exist (a fixed
        # pause after "running" let the stage finish first on an idle machine)
        if stages.get("tasks") == "running" and list(tmp_path.glob(f"swm-{proc.pid}-*")):
            break
        time.sleep(0.05)
    assert stages.get("tasks") == "running", proc.communicate(timeout=300)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 128 + signal.SIGTERM
    m = _manifest(root)
    assert m["status"] == "failed" and m["metadata"]["build"]["stages"]["tasks"] == "failed"
    assert "SIGTERM" in m["metadata"]["build"]["error"]
    assert leftover_groups(proc.pid) == []
    assert not list(tmp_path.glob(f"swemill-{proc.pid}-*"))
    assert not list(tmp_path.glob(f"swm-{proc.pid}-*"))
