"""Projects versioned from git build without ``.git`` in the install's copy, the files their
build generates reach the test workspace, and a failed build names its real cause.

Regression: an scm-versioned project (setuptools-scm, hatch-vcs) failed to install because the
build copy has no ``.git``; given a version by hand, it installed, but every test module then
failed to import the ``_version.py`` the build wrote into the throw-away copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NoReturn

import pytest

from swemill.repo.buildlog import reason_line
from swemill.repo.generated import collect_generated, copy_tracked, place_generated
from swemill.repo.scm import derive_version, scm_versioned, version_env
from swemill.repo.sources import git
from swemill.repo.testdeps import Skipped, install_test_deps


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def tagged_repo(root: Path, tag: str, commits_after: int) -> Path:
    write(root, {"a.txt": "a\n"})
    git(["init", "-q", "-b", "main"], root)
    git(["add", "-A"], root)
    git(["commit", "-q", "-m", "first"], root)
    git(["tag", tag], root)
    for i in range(commits_after):
        write(root, {"a.txt": f"{i}\n"})
        git(["commit", "-q", "-am", f"c{i}"], root)
    return root


def test_version_from_git_describe_pkg_info_or_a_fallback(tmp_path: Path) -> None:
    exact = tagged_repo(tmp_path / "exact", "v1.2.3", 0)
    assert derive_version(exact) == ("1.2.3", "git describe")
    past = tagged_repo(tmp_path / "past", "release-2.0", 2)
    version, where = derive_version(past)
    head = git(["rev-parse", "HEAD"], past)
    assert (version, where) == (f"2.0.post2+g{head[:9]}", "git describe")
    write(past, {"PKG-INFO": "Metadata-Version: 2.1\nName: p\nVersion: 2.0.1\n\nbody\n"})
    assert derive_version(past) == ("2.0.1", "PKG-INFO")  # the sdist's own version wins
    untagged = tmp_path / "untagged"
    untagged.mkdir()
    assert derive_version(untagged) == ("0.0.0", "no tag and no PKG-INFO")


def test_which_projects_take_their_version_from_git(tmp_path: Path) -> None:
    assert scm_versioned(tmp_path, ["hatchling", "hatch-vcs"])
    assert scm_versioned(tmp_path, ["setuptools>=64", "setuptools_scm[toml]>=8"])
    assert not scm_versioned(tmp_path, ["setuptools>=61", "wheel"])
    write(tmp_path, {"pyproject.toml": "[tool.pdm.version]\nsource = 'scm'\n"})
    assert scm_versioned(tmp_path, ["pdm-backend"])
    env = version_env("1.0", "my.dist-name")
    assert env["SETUPTOOLS_SCM_PRETEND_VERSION_FOR_MY_DIST_NAME"] == "1.0"
    assert env["SETUPTOOLS_SCM_PRETEND_VERSION"] == env["PDM_BUILD_SCM_VERSION"] == "1.0"


def test_generated_files_are_kept_and_placed_never_through_links(tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"pkg/__init__.py": "", "pkg/own.py": "mine\n",
                                   ".gitignore": "_version.py\nbuild/\n"})
    git(["init", "-q", "-b", "main"], src)
    git(["add", "-A"], src)
    git(["commit", "-q", "-m", "c"], src)
    write(src, {"pkg/_version.py": "version = 'stale, left by a dev install'\n",
                "build/lib/junk.py": ""})
    work = tmp_path / "work"
    tracked = copy_tracked(src, work)
    assert tracked == {".gitignore", "pkg/__init__.py", "pkg/own.py"}
    assert sorted(p.name for p in work.rglob("*") if p.is_file()) == [
        ".gitignore", "__init__.py", "own.py"]  # no stale file reaches the build
    write(work, {"pkg/own.py": "changed by the build\n", "pkg/_version.py": "version = '1'\n",
                 "pkg/_ext.so": "binary", "pkg.egg-info/PKG-INFO": "x",
                 "build/lib/pkg/x.py": "", "pkg/__pycache__/a.pyc": ""})
    secret = write(tmp_path, {"secret.txt": "host secret\n"}) / "secret.txt"
    (work / "pkg" / "leak.txt").symlink_to(secret)
    stash = tmp_path / "stash"
    files = collect_generated(work, tracked, stash)
    assert files == ["pkg/_ext.so", "pkg/_version.py"]
    place_generated(stash, src, files)
    assert (src / "pkg" / "_version.py").read_text() == "version = '1'\n"  # stale one replaced
    assert (src / "pkg" / "_ext.so").read_text() == "binary"
    assert (src / "pkg" / "own.py").read_text() == "mine\n"  # a tracked file is never touched
    assert not (src / "pkg" / "leak.txt").exists() and not (stash / "pkg" / "leak.txt").exists()
    assert git(["status", "--porcelain"], src) == "?? pkg/_ext.so"


@pytest.mark.parametrize(("step", "want"), [
    (["Building attrs @ file:///workspace", "error: Failed to build `attrs`",
      "  cause: The build backend returned an error", "  Traceback (most recent call last):",
      '    File "x.py", line 1', "  ModuleNotFoundError: No module named 'editables'",
      "hint: This error likely indicates that `attrs` depends on `editables`, but doesn't",
      "  [tool.uv.extra-build-dependencies]"],
     "ModuleNotFoundError: No module named 'editables'"),
    (["gcc -c fast.c", "fast.c:3:10: fatal error: Python.h: No such file or directory",
      "error: command '/usr/bin/gcc' failed with exit code 1"],
     "fast.c:3:10: fatal error: Python.h: No such file or directory"),
    (["  × No solution found when resolving dependencies:",
      "  ╰─▶ Because nope-pkg was not found in the package registry and you require nope-pkg"],
     "No solution found when resolving dependencies:: Because nope-pkg was not found in the "
     "package registry and you require nope-pkg"),
    ([], "(the log is empty)"),
])
def test_the_cause_line_of_a_failed_step(step: list[str], want: str) -> None:
    assert reason_line(step) == want


HATCH_VCS_PROJECT = {
    "pyproject.toml": """
        [build-system]
        requires = ["hatchling", "hatch-vcs"]
        build-backend = "hatchling.build"
        [project]
        name = "scmdemo"
        dynamic = ["version"]
        [tool.hatch.version]
        source = "vcs"
        [tool.hatch.build.hooks.vcs]
        version-file = "src/scmdemo/_version.py"
        [dependency-groups]
        test = ["iniconfig"]
        """,
    ".gitignore": "_version.py\n",
    "requirements-test.txt": "swemill-no-such-package-xyz==1.0\n",
    "src/scmdemo/__init__.py": "from scmdemo._version import version\n",
    "tests/test_version.py": """
        import iniconfig
        import scmdemo

        def test_version():
            assert scmdemo.version.startswith("3.1.post1+g")

        def test_group_dependency():
            assert iniconfig.IniConfig
        """,
}


@pytest.mark.slow
@pytest.mark.network
def test_hatch_vcs_project_builds_from_a_git_checkout(tmp_path: Path) -> None:
    """hatchling + hatch-vcs from a git checkout: the version is derived, the backend's own
    build requirement (``editables``) installed, the generated ``_version.py`` imported by
    the tests, the PEP 735 test group installed, a test requirement with no release skipped
    and reported."""
    repo = write(tmp_path / "scmdemo", HATCH_VCS_PROJECT)
    git(["init", "-q", "-b", "main"], repo)
    git(["add", "-A"], repo)
    git(["commit", "-q", "-m", "first"], repo)
    git(["tag", "v3.1"], repo)
    write(repo, {"README.md": "scmdemo\n"})
    git(["add", "-A"], repo)
    git(["commit", "-q", "-m", "second"], repo)
    env = {**os.environ, "SWEMILL_CACHE": str(tmp_path / "cache"), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "swemill", "env", str(repo), "--json"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["counts"] == {"passed": 2}
    [skipped] = out["env_skipped"]  # said, not silent; the rest of the tests still run
    assert skipped["requirement"] == "swemill-no-such-package-xyz==1.0"
    assert "swemill-no-such-package-xyz" in skipped["reason"]
    assert out["generated"] == ["src/scmdemo/_version.py"]
    evidence = "\n".join(out["recipe"]["evidence"])
    assert "version 3.1.post1+g" in evidence and "editables" in evidence
    work = Path(out["source"]["path"])
    assert (work / "src" / "scmdemo" / "_version.py").is_file()
    assert git(["status", "--porcelain"], work) == ""  # untracked and ignored: same commit


def test_test_dependencies_that_cannot_be_installed_are_skipped_with_their_cause() -> None:
    """Driven through a scripted installer: what it refuses is skipped and said, the rest
    installed; the project itself failing is fatal."""
    refuse = {"nowheel-pkg": "no wheels with a matching platform tag", "bad==9": "not found"}
    calls: list[list[str]] = []

    def run(reqs: list[str]) -> tuple[int, str]:
        calls.append(reqs)
        bad = [refuse[r] for r in reqs if r in refuse]
        return (1, bad[0]) if bad else (0, "")

    def fail(why: str) -> NoReturn:
        raise AssertionError(f"required failed: {why}")

    got = install_test_deps(run, ["proj", "pytest"], ["proj[tests]", "nowheel-pkg", "bad==9",
                                                      "hypothesis", "pytest"], fail)
    assert got == [Skipped("nowheel-pkg", refuse["nowheel-pkg"]), Skipped("bad==9", "not found")]
    assert calls[0] == ["proj", "pytest", "proj[tests]", "nowheel-pkg", "bad==9", "hypothesis"]
    assert calls[1] == ["proj", "pytest"] and ["proj", "pytest", "hypothesis"] in calls
    assert install_test_deps(lambda reqs: (0, ""), ["proj"], ["x"], fail) == []
    with pytest.raises(AssertionError, match="required failed: nope"):
        install_test_deps(lambda reqs: (1, "nope"), ["proj"], ["x"], fail)


def test_dependencies_older_commits_declare_and_the_head_dropped(tmp_path: Path) -> None:
    """pr-mirror validates at older commits in the head's environment: what those commits
    declare and the head no longer does is named (unpinned), minus plugins that would change
    how the head's suite runs, requirements excluded by their markers, and the project."""
    from swemill.repo.past_deps import older_requirements

    repo = tmp_path / "r"
    versions = [
        ('["six>=1.10", "oldproj[x]"]', '["freezegun==1.0", "pytest-randomly", '
                                        '"py; python_version < \'3\'"]'),
        ('["attrs"]', '["freezegun"]'),
        ('["attrs>=22"]', '[]'),
    ]
    for i, (deps, tests) in enumerate(versions):
        write(repo, {"pyproject.toml": f"""
            [project]
            name = "oldproj"
            dependencies = {deps}
            [project.optional-dependencies]
            test = {tests}
            """})
        if i == 0:
            git(["init", "-q", "-b", "main"], repo)
            write(repo, {"setup.py": "setup(install_requires=['docopt'])\n"})
        elif i == 1:
            (repo / "setup.py").unlink()
        git(["add", "-A"], repo)
        git(["commit", "-q", "-m", f"v{i}"], repo)
    assert older_requirements(repo, "oldproj") == ["docopt", "freezegun", "six"]
    single = tagged_repo(tmp_path / "single", "v1", 0)
    assert older_requirements(single, None) == []


@pytest.mark.slow
@pytest.mark.network
def test_setup_py_only_scm_project_gets_its_version(tmp_path: Path) -> None:
    """No pyproject.toml: setuptools_scm shows up only as ``setup_requires``, which the
    backend names when asked inside; the version still comes from the git tag."""
    from swemill.repo.envbuild import build_env
    from swemill.repo.sources import resolve_source

    repo = write(tmp_path / "legacyscm", {
        "setup.py": "from setuptools import setup\n"
                    "setup(name='legacyscm', packages=['legacyscm'], use_scm_version=True,\n"
                    "      setup_requires=['setuptools_scm'])\n",
        "legacyscm/__init__.py": "",
        "tests/test_it.py": "def test_it():\n    pass\n",
    })
    git(["init", "-q", "-b", "main"], repo)
    git(["add", "-A"], repo)
    git(["commit", "-q", "-m", "c"], repo)
    git(["tag", "2.0"], repo)
    cache = tmp_path / "cache"
    env = build_env(resolve_source(str(repo), cache=cache), cache=cache)
    assert any("version 2.0 from git describe" in e for e in env.recipe.evidence)
    [meta] = env.venv.glob("lib/python*/site-packages/legacyscm-*.dist-info/METADATA")
    assert "\nVersion: 2.0\n" in meta.read_text()


def test_generated_files_reach_the_task_snapshot_never_through_links(tmp_path: Path) -> None:
    """A task's broken tree (what policies get) holds the build's generated files, as the
    validation workspace did; a link in the repository's tree never leads the copy outside."""
    from swemill.validate.emit import broken_tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("host file\n")
    src = write(tmp_path / "src", {"pkg/__init__.py": ""})
    (src / "escape").symlink_to(outside)
    git(["init", "-q", "-b", "main"], src)
    git(["add", "-A"], src)
    git(["commit", "-q", "-m", "c"], src)
    head = git(["rev-parse", "HEAD"], src)
    write(src, {"pkg/_version.py": "version = '1'\n"})
    tree = broken_tree(src, head, [], tmp_path / "tree",
                       ["pkg/_version.py", "escape/x.py", "escape/new.py", "gone/y.py"])
    assert (tree / "pkg" / "_version.py").read_text() == "version = '1'\n"
    assert sorted(p.name for p in outside.iterdir()) == ["x.py"]
    assert not (tree / "gone").exists()


def test_a_test_group_naming_the_project_keeps_its_extras_never_a_version() -> None:
    from swemill.repo.testdeps import unpin_self

    assert unpin_self(["execnet[testing]", "ExecNet>=9", "hypothesis>=6", "pytest"],
                      "execnet") == ["execnet[testing]", "hypothesis>=6", "pytest"]
    assert unpin_self(["attrs[tests-mypy,tests] ; python_version > '3'"], "attrs") == [
        "attrs[tests,tests-mypy]"]
    assert unpin_self(["x"], None) == ["x"]
    assert unpin_self(["execnet[testing]>=1", "ExecNet>=9", "pytest"], "execnet", "==2.1.1") == [
        "execnet[testing]==2.1.1", "pytest"]  # the installed version, never another
