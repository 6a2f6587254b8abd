"""Benchmark decontamination: every identity a tree has is checked against the shipped lists."""

from __future__ import annotations

import json
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from swemill.core.errors import GateRefused, SourceError
from swemill.repo.gate import GatePolicy, benchmark_repos, ensure_allowed, gate_directory
from swemill.repo.gate.decontam import normalize_package, normalize_repo
from swemill.repo.sample import materialize_sample


def _git_repo(root: Path, remote: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    if remote:
        subprocess.run(["git", "-C", str(root), "remote", "add", "origin", remote], check=True)
    return root


def _write(root: Path, name: str, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")
    return root


def test_data_files_name_their_sources() -> None:
    data = resources.files("swemill.repo.gate") / "data"
    counts = {}
    for entry in data.iterdir():
        if entry.name.endswith(".json"):
            spec = json.loads(entry.read_text(encoding="utf-8"))
            assert spec["dataset"] and spec["source"] and spec["url"].startswith("https://")
            counts[spec["dataset"]] = len(spec["repositories"])
    assert counts == {
        "SWE-bench (full, Lite, Verified)": 12,
        "SWE-bench Multimodal": 17,
        "SWE-Gym": 11,
    }
    repos = {bench.repo for bench in benchmark_repos()}
    assert len(repos) == 40
    assert {"psf/requests", "pallets/flask", "getmoto/moto", "chartjs/chart.js"} <= repos


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://github.com/psf/requests", "psf/requests"),
        ("https://github.com/psf/requests.git", "psf/requests"),
        ("git@github.com:psf/requests.git", "psf/requests"),
        ("ssh://git@github.com/PSF/Requests.git", "psf/requests"),
        ("git+https://github.com/pallets/flask.git@3.0.3", "pallets/flask"),
        ("https://www.github.com/pallets/flask/issues/", "pallets/flask"),
        ("github.com/sympy/sympy", "sympy/sympy"),
        ("django/django", "django/django"),
        ("https://gitlab.com/psf/requests", None),
        ("https://requests.readthedocs.io", None),
        ("requests", None),
    ],
)
def test_normalize_repo(value: str, expected: str | None) -> None:
    assert normalize_repo(value) == expected


def test_normalize_package() -> None:
    assert normalize_package("Scikit_Learn") == "scikit-learn"
    assert normalize_package("@React-PDF/renderer") == "@react-pdf/renderer"


@pytest.mark.parametrize(
    "remote", ["https://github.com/psf/requests.git", "git@github.com:psf/requests.git"]
)
def test_contaminated_by_git_remote(tmp_path: Path, remote: str) -> None:
    root = _git_repo(tmp_path / "checkout", remote)
    verdict = gate_directory(root, source=str(root))
    assert verdict.contaminated and not verdict.allowed
    assert verdict.contamination_matches == [
        f"git remote origin {remote} -> psf/requests (SWE-bench (full, Lite, Verified))"
    ]
    assert verdict.reason.startswith("refused:")
    with pytest.raises(GateRefused, match="psf/requests"):
        ensure_allowed(verdict)


def test_renamed_fork_is_caught_by_its_package_name(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "fork", "https://github.com/someone/requests-fork.git")
    _write(root, "pyproject.toml", '[project]\nname = "requests"\nversion = "2.32.3"\n')
    verdict = gate_directory(root, source=str(root))
    assert not verdict.allowed
    assert verdict.contamination_matches == [
        "pyproject.toml [project] name 'requests' -> "
        "psf/requests (SWE-bench (full, Lite, Verified))"
    ]


def test_contaminated_by_metadata_url(tmp_path: Path) -> None:
    root = _write(tmp_path / "m", "pyproject.toml", (
        '[project]\nname = "symbolic-things"\n'
        '[project.urls]\nSource = "https://github.com/sympy/sympy"\n'
    ))
    verdict = gate_directory(root, source="m")
    assert verdict.contaminated
    assert "sympy/sympy" in verdict.contamination_matches[0]


@pytest.mark.parametrize(
    ("name", "text", "repo"),
    [
        ("setup.py", "setup(name='Django', url='https://djangoproject.com/')\n", "django/django"),
        ("setup.cfg", "[metadata]\nname = hydra_core\n", "facebookresearch/hydra"),
        ("PKG-INFO", "Metadata-Version: 2.1\nName: Flask\nVersion: 3.0.3\n", "pallets/flask"),
        ("package.json", '{"name": "eslint", "repository": "eslint/eslint"}', "eslint/eslint"),
        ("setup.py", "setup(name='x', project_urls={'Code': 'https://github.com/getmoto/moto'})\n",
         "getmoto/moto"),
    ],
)
def test_contaminated_by_package_metadata(tmp_path: Path, name: str, text: str, repo: str) -> None:
    verdict = gate_directory(_write(tmp_path / "p", name, text), source="p")
    assert verdict.contaminated
    assert all(repo in line for line in verdict.contamination_matches)


def test_resolved_name_and_source_url_are_identities(tmp_path: Path) -> None:
    root = _write(tmp_path / "plain", "README", "nothing here\n")
    assert gate_directory(root, source="pypi:requests==2.32.3", repo="requests").contaminated
    url = "https://github.com/pytest-dev/pytest.git"
    assert gate_directory(root, source=url, repo="pytest-dev/pytest").contaminated


def test_allow_contaminated_is_recorded(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "c", "https://github.com/pallets/flask")
    verdict = gate_directory(root, source="c", policy=GatePolicy(allow_contaminated=True))
    assert verdict.contaminated and verdict.allowed
    assert "allowed by --allow-contaminated" in verdict.reason


def test_a_parent_repositorys_remote_is_not_the_trees(tmp_path: Path) -> None:
    parent = _git_repo(tmp_path / "outer", "https://github.com/psf/requests.git")
    inner = _write(parent / "examples" / "mine", "pyproject.toml", '[project]\nname = "mine"\n')
    assert not gate_directory(inner, source="mine").contaminated


def test_clean_sample_passes(tmp_path: Path) -> None:
    root = materialize_sample(tmp_path / "sample")
    verdict = gate_directory(root, source="sample", repo="swemill/sample-inventory")
    assert (verdict.contaminated, verdict.allowed) == (False, True)
    assert (verdict.license_spdx, verdict.license_tier) == ("MIT", "redistributable")


def test_similar_names_are_not_matches(tmp_path: Path) -> None:
    root = _write(tmp_path / "s", "pyproject.toml", (
        '[project]\nname = "requests-toolbelt"\n'
        '[project.urls]\nHome = "https://github.com/requests/toolbelt"\n'
    ))
    assert not gate_directory(root, source="s").contaminated


def test_missing_directory_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a directory"):
        gate_directory(tmp_path / "absent", source="absent")


def test_public_api_is_pinned() -> None:
    import swemill.repo.gate as gate
    import swemill.repo.sample as sample

    assert sorted(gate.__all__) == [
        "DEFAULT_COPYLEFT", "GatePolicy", "benchmark_repos", "ensure_allowed", "gate_directory",
        "license_of", "normalize_repo",
    ]
    assert sorted(sample.__all__) == [
        "SAMPLE_REPO", "materialize_sample", "sample_files", "sample_path",
    ]
