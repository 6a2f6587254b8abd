"""``swemill gate`` as a user runs it: a real process, real exit codes, one line on refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from identify.vendor.licenses import LICENSES

from swemill.repo.sample import sample_path


def _gate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "swemill", "gate", *args],
        capture_output=True, text=True, timeout=300,
    )


def _requests_clone(root: Path) -> Path:
    """A clone-like copy of requests whose remote points at a renamed fork."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin",
                    "https://github.com/someone/requests-fork.git"], check=True)
    (root / "pyproject.toml").write_text('[project]\nname = "requests"\n', encoding="utf-8")
    (root / "LICENSE").write_text(dict(LICENSES)["Apache-2.0"], encoding="utf-8")
    return root


def test_json_shape_for_the_sample_tree() -> None:
    proc = _gate(str(sample_path()), "--json")
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert set(verdict) == {
        "source", "repo", "license_spdx", "license_tier", "license_evidence",
        "contaminated", "contamination_matches", "allowed", "reason",
    }
    assert verdict["license_spdx"] == "MIT"
    assert verdict["license_tier"] == "redistributable"
    assert (verdict["contaminated"], verdict["allowed"]) == (False, True)


def test_human_output_keeps_brackets() -> None:
    proc = _gate(str(sample_path()))
    assert proc.returncode == 0
    assert "pyproject.toml [project] license: MIT" in proc.stderr


def test_local_clone_of_requests_is_refused(tmp_path: Path) -> None:
    proc = _gate(str(_requests_clone(tmp_path / "requests")))
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert first.startswith("refused:") and "psf/requests" in first


def test_allow_contaminated_records_it(tmp_path: Path) -> None:
    proc = _gate(str(_requests_clone(tmp_path / "requests")), "--allow-contaminated", "--json")
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["contaminated"] and verdict["allowed"]
    assert verdict["license_spdx"] == "Apache-2.0"
    assert "--allow-contaminated" in verdict["reason"]


def test_copyleft_policy_refuse(tmp_path: Path) -> None:
    root = tmp_path / "gpl"
    root.mkdir()
    (root / "COPYING").write_text(dict(LICENSES)["GPL-3.0"], encoding="utf-8")
    assert _gate(str(root)).returncode == 0
    proc = _gate(str(root), "--copyleft-policy", "refuse", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["license_tier"] == "trainable-only"


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    proc = _gate(str(tmp_path / "does-not-exist"))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "no such directory" in proc.stderr
    bad = _gate(str(sample_path()), "--copyleft-policy", "maybe")
    assert bad.returncode == 2 and "--copyleft-policy" in bad.stderr


@pytest.mark.network
@pytest.mark.parametrize(
    ("spec", "repo"),
    [("pypi:requests==2.32.3", "psf/requests"), ("pypi:flask==3.0.3", "pallets/flask")],
)
def test_pypi_benchmark_packages_are_refused(spec: str, repo: str) -> None:
    proc = _gate(spec)
    assert proc.returncode == 1, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("refused:") and repo in first
