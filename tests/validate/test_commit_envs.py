"""Per-commit environments: a pr-mirror candidate at an older commit that needs a dependency
version the head no longer allows validates in an environment built for that commit.

The repository, made here, depends on ``shimdep``: its first two commits on ``shimdep==1.0``
(which has ``old_api``), its head on ``shimdep>=2`` (which has only ``new_api``). The second
commit is a fix with a test, pr-mirror's candidate. In the head's environment (shimdep 2.0)
its tests cannot import ``old_api`` at the baseline, and the candidate is dropped, as every
such candidate was before. With per-commit environments the commit gets one of its own
(shimdep 1.0), keyed by what it declares, and the candidate becomes a task whose row names
that environment, and a rollout's resolver finds it again. Both
``shimdep`` wheels are made here and found through ``UV_FIND_LINKS`` (pytest, coverage and
setuptools come from the package index, or uv's cache).
"""

from __future__ import annotations

import base64
import hashlib
import json
import textwrap
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swemill.agent.env import EnvResolver
from swemill.cli.main import app
from swemill.core.records import CandidateRecord, Task
from swemill.repo.commitenv import CommitEnvs
from swemill.repo.envbuild import build_env
from swemill.repo.past_deps import declaration_digest
from swemill.repo.sources import resolve_source
from swemill.store import Store
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks

from .conftest import run_git

pytestmark = [pytest.mark.slow, pytest.mark.network]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
[project]
name = "shimuser"
version = "{version}"
dependencies = [{deps}]
[tool.setuptools]
packages = ["shimuser"]
"""

CORE_OLD = """\
from shimdep import old_api


def clamp(x, lo, hi):
    return old_api(max(lo, min(x, hi{bug})))
"""

CORE_HEAD = """\
from shimdep import new_api


def clamp(x, lo, hi):
    return new_api(max(lo, min(x, hi)))
"""

TESTS = """\
from shimuser.core import clamp


def test_inside():
    assert clamp(5, 0, 10) == 5

{more}"""

MORE = """\
def test_above():
    assert clamp(50, 0, 10) == 10
"""


def make_wheel(dest: Path, name: str, version: str, code: str) -> None:
    """A pure-Python wheel of one module, written by hand (no build tool, no network)."""
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": code,
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: swemill-test\n"
                              "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for rel, text in files.items():
        sha = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{rel},sha256={sha.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for rel, text in files.items():
            zf.writestr(rel, text)


def commit(root: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", message)
    return run_git(root, "rev-parse", "HEAD").strip()


def make_history(root: Path) -> tuple[str, str]:
    """(the fix commit at shimdep 1.0, the head at shimdep 2)."""
    root.mkdir(parents=True)
    run_git(root, "init", "-q", "-b", "main")
    old_deps = '"shimdep==1.0"'
    commit(root, {"pyproject.toml": PYPROJECT.format(version="0.1", deps=old_deps),
                  "shimuser/__init__.py": "", "shimuser/core.py": CORE_OLD.format(bug=" + 1"),
                  "tests/test_core.py": TESTS.format(more="")}, "clamp")
    fix = commit(root, {"pyproject.toml": PYPROJECT.format(version="0.2", deps=old_deps),
                        "shimuser/core.py": CORE_OLD.format(bug=""),
                        "tests/test_core.py": TESTS.format(more=MORE)},
                 "clamp: no longer off by one")
    head = commit(root, {"pyproject.toml": PYPROJECT.format(version="0.3",
                                                            deps='"shimdep>=2"'),
                         "shimuser/core.py": CORE_HEAD}, "move to shimdep 2")
    return fix, head


@pytest.fixture
def shim_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "shimdep", "1.0", "def old_api(x):\n    return x\n")
    make_wheel(wheels, "shimdep", "2.0", "def new_api(x):\n    return x\n")
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    fix, head = make_history(tmp_path / "shimuser")
    return tmp_path / "shimuser", fix, head


def test_declaration_digest_names_what_a_commit_declares(shim_repo: tuple[Path, str, str]
                                                         ) -> None:
    root, fix, head = shim_repo
    first = run_git(root, "rev-parse", "HEAD~2").strip()
    # the version field changed between the first two commits, the dependencies did not
    assert declaration_digest(root, first) == declaration_digest(root, fix)
    assert declaration_digest(root, fix) != declaration_digest(root, head)
    assert declaration_digest(root, "0" * 40) is None


def test_an_older_commit_needing_another_dependency_validates_in_its_own_env(
        shim_repo: tuple[Path, str, str], tmp_path: Path) -> None:
    root, fix, head = shim_repo
    config = {"strategies": ["pr-mirror"], "max_tasks": 1, "workers": 1, "near_misses": 0}

    # before: the head's environment (shimdep 2) runs the fix commit: its baseline fails
    # (asked for through the CLI, whose --commit-envs reaches the run)
    before = Store(str(tmp_path / "before"))
    cli = CliRunner().invoke(app, [
        "tasks", "generate", str(root), "--out", str(tmp_path / "before"), "--run-id", "r0",
        "--strategies", "pr-mirror", "--max-tasks", "1", "--workers", "1",
        "--near-misses", "0", "--commit-envs", "0", "--json"])
    assert cli.exit_code == 1, cli.output  # no task written
    assert json.loads(cli.stdout)["commit_envs"] == {}
    rows = {r.base_commit: r for r in before.read_records("candidates", "r0", CandidateRecord)}
    # (its test module does not import there: a collection error of the baseline, so no
    # test passes at the baseline and none can fail to pass)
    assert rows[fix].verdict == "dropped", rows[fix]
    assert rows[fix].reason in ("baseline_failed", "no_fail_to_pass"), rows[fix]

    store = Store(str(tmp_path / "after"))
    result = run_tasks(str(root), store, "r1", TasksConfig(**config))
    assert result.tasks == 1, (result.drops, result.commit_envs)
    [task] = store.read_records("tasks", "r1", Task)
    key = task.metadata["env_key"]
    assert task.base_commit == fix and "@deps-" in key
    assert task.env_recipe.endswith(key.rpartition("@")[2])
    assert task.FAIL_TO_PASS == ["tests/test_core.py::test_above"]
    assert result.audited == 1 and not result.audit_rejected  # a cold run in that env agrees
    assert list(result.commit_envs) == [key]
    [row] = [r for r in store.read_records("candidates", "r1", CandidateRecord)
             if r.base_commit == fix]
    assert row.verdict == "written" and row.reason == "accepted" and row.env_key == key

    # the head's own candidate (if any) ran in the head's env; the commit's env is cached
    src = resolve_source(str(root))
    head_env = build_env(src)
    assert head_env.key != key and src.commit == head
    envs = CommitEnvs(head_env, src)
    again = envs.for_commit(fix)
    assert again.key == key and envs.for_commit(head) is head_env
    shim = next(again.venv.glob("lib/python*/site-packages/shimdep-1.0.dist-info"), None)
    assert shim is not None, "the commit's environment holds shimdep 1.0"
    assert EnvResolver()(task).key == key  # a rollout of the task runs in it too
