"""Environments: built once per repo@commit with uv, relocated to /workspace, shared by forks.

The central claim is tested directly: two workspaces (and a fork) holding different code, run
through the *same* read-only environment, each import their own code, never a stale copy.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from swemill.core.errors import EnvBuildError
from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox.contract import WORKSPACE

pytestmark = [pytest.mark.slow, pytest.mark.network]

PROBE = "import forkdemo, sys; print(forkdemo.VALUE, forkdemo.__file__, sep='|')"


def make_project(root: Path, value: str = "original", deps: str = "") -> Path:
    files = {
        "pyproject.toml": f"""
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "forkdemo"
            version = "0.1"
            dependencies = [{deps}]
            [tool.setuptools]
            packages = ["forkdemo"]
            """,
        "forkdemo/__init__.py": f"VALUE = {value!r}\n",
        "tests/test_value.py": "from forkdemo import VALUE\n\n"
                               "def test_value():\n    assert VALUE == 'original'\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="session")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("p") / "forkdemo")


@pytest.fixture(scope="session")
def demo_env(shared_cache: Path, demo_project: Path) -> RepoEnv:
    return build_env(resolve_source(str(demo_project), cache=shared_cache), cache=shared_cache)


def site_packages(env: RepoEnv) -> Path:
    return next(env.venv.glob("lib/python*/site-packages"))


def test_env_is_complete_and_points_at_the_fixed_path(demo_env: RepoEnv) -> None:
    for name in ("env.json", "recipe.json", "build.log", "venv/bin/python"):
        assert (demo_env.path / name).exists(), name
    assert demo_env.import_roots == ["."]
    hooks = [p for p in site_packages(demo_env).iterdir()
             if p.name.startswith("__editable__") or p.name.endswith(".pth")]
    text = "".join(p.read_text() for p in hooks if p.is_file())
    assert f"'{WORKSPACE}/forkdemo'" in text
    assert "build-src" not in text and str(demo_env.source_path) not in text
    assert not [p for p in demo_env.path.parent.iterdir() if p.name.startswith(".tmp")]


def test_second_build_reuses_the_cached_env(demo_env: RepoEnv, demo_project: Path,
                                            shared_cache: Path) -> None:
    stamp = (demo_env.path / "env.json").stat().st_mtime_ns
    src = resolve_source(str(demo_project), cache=shared_cache)
    again = build_env(src, cache=shared_cache)
    assert again.path == demo_env.path
    assert (again.path / "env.json").stat().st_mtime_ns == stamp


def copy_workspace(env: RepoEnv, dest: Path, value: str) -> Path:
    import shutil

    shutil.copytree(env.source_path, dest)
    (dest / "forkdemo" / "__init__.py").write_text(f"VALUE = {value!r}\n")
    return dest


def probe(sb: object, env: RepoEnv) -> list[str]:
    res = sb.exec([str(env.python), "-c", PROBE], env=env.run_env(sb.workdir),  # type: ignore[attr-defined]
                  timeout=60)
    assert res.exit_code == 0, res.stderr
    return res.stdout.strip().split("|")


def test_two_workspaces_and_a_fork_import_their_own_code(demo_env: RepoEnv,
                                                         tmp_path: Path) -> None:
    from swemill.sandbox import open_sandbox

    a = copy_workspace(demo_env, tmp_path / "a", "alpha")
    b = copy_workspace(demo_env, tmp_path / "b", "beta")
    with open_sandbox(a, backend="bwrap", binds=demo_env.binds()) as sa, \
            open_sandbox(b, backend="bwrap", binds=demo_env.binds()) as sb:
        assert probe(sa, demo_env) == ["alpha", f"{WORKSPACE}/forkdemo/__init__.py"]
        assert probe(sb, demo_env) == ["beta", f"{WORKSPACE}/forkdemo/__init__.py"]
        with sa.fork() as fork:
            fork.write_file("forkdemo/__init__.py", "VALUE = 'forked'\n")
            assert probe(fork, demo_env)[0] == "forked"
            assert probe(sa, demo_env)[0] == "alpha"  # the fork's write never crossed
        # an edit between runs is seen at once (no bytecode written, none reused)
        sa.write_file("forkdemo/__init__.py", "VALUE = 'gamma'\n")
        assert probe(sa, demo_env)[0] == "gamma"
    assert not list(a.rglob("__pycache__"))


def test_local_backend_imports_the_workspace_through_pythonpath(demo_env: RepoEnv,
                                                                tmp_path: Path) -> None:
    from swemill.sandbox import open_sandbox

    ws = copy_workspace(demo_env, tmp_path / "w", "local-value")
    with pytest.warns(RuntimeWarning, match="NOT isolated"), \
            open_sandbox(ws, backend="local", binds=demo_env.binds()) as sb:
        value, where = probe(sb, demo_env)
    assert value == "local-value"
    assert where == str(ws / "forkdemo" / "__init__.py")


def test_install_failure_is_one_error_with_the_log_tail(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    proj = make_project(tmp_path / "broken", deps='"swemill-no-such-package-xyz==1.0"')
    src = resolve_source(str(proj), cache=cache)
    with pytest.raises(EnvBuildError) as err:
        build_env(src, cache=cache)
    first, *tail = str(err.value).splitlines()
    assert src.repo == "forkdemo"  # named by its pyproject, not its folder
    assert first.startswith(f"install of forkdemo@{src.commit[:12]} failed (exit 1): ")
    assert "swemill-no-such-package-xyz" in first and tail
    assert not (cache / "envs").exists() or not os.listdir(cache / "envs")
    assert list((cache / "logs").glob("*.build.log"))


def test_repo_without_tests_is_refused_before_building(tmp_path: Path) -> None:
    proj = tmp_path / "notests"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg" / "__init__.py").write_text("")
    src = resolve_source(str(proj), cache=tmp_path / "c")
    with pytest.raises(EnvBuildError, match="no tests found in notests"):
        build_env(src, cache=tmp_path / "c")
    assert not (tmp_path / "c" / "envs").exists()


def test_recipe_override_rebuilds_and_is_then_reused(demo_project: Path, tmp_path: Path) -> None:
    from swemill.repo.recipe import Recipe

    cache = tmp_path / "c"
    src = resolve_source(str(demo_project), cache=cache)
    given = Recipe(packages=["six"], evidence=["test: given"])
    env = build_env(src, cache=cache, recipe=given)
    assert list(site_packages(env).glob("six.py"))
    stamp = (env.path / "env.json").stat().st_mtime_ns
    assert build_env(src, cache=cache, recipe=given).path == env.path
    assert (env.path / "env.json").stat().st_mtime_ns == stamp
    detected = build_env(src, cache=cache)  # another recipe: rebuilt in place, atomically
    assert detected.path == env.path and not list(site_packages(detected).glob("six.py"))
    assert not [p for p in (cache / "envs").iterdir() if p.name.startswith((".tmp", ".old"))]


def test_a_suite_whose_conftest_takes_a_py_path_runs_its_baseline(tmp_path: Path) -> None:
    """wrapt 1.16.0 in the zoo: its conftest's ``pytest_pycollect_makemodule(path, parent)``
    made the newest pytest refuse to start, so no baseline; detected, it gets pytest<9."""
    from swemill.suite.baseline import run_baseline

    cache = tmp_path / "cache"
    proj = make_project(tmp_path / "oldhooks")
    (proj / "tests" / "conftest.py").write_text(
        "def pytest_pycollect_makemodule(path, parent):\n"
        "    assert path.basename  # a py.path, as pytest < 9 passes it\n"
        "    return None\n")
    env = build_env(resolve_source(str(proj), cache=cache), cache=cache)
    [dist] = site_packages(env).glob("pytest-*.dist-info")
    assert int(dist.name.split("-")[1].split(".")[0]) < 9
    baseline = run_baseline(env, backend="auto")
    assert baseline.passing() == {"tests/test_value.py::test_value"}


def test_a_suite_in_a_module_named_test_py_has_a_baseline(tmp_path: Path) -> None:
    """decorator 5.1.1 in the zoo: its tests are src/tests/test.py, which pytest's default
    ``python_files`` does not collect ("no tests found")."""
    from swemill.suite.baseline import run_baseline

    cache = tmp_path / "cache"
    proj = make_project(tmp_path / "plainnames")
    (proj / "tests" / "test_value.py").rename(proj / "tests" / "test.py")
    (proj / "tests" / "__init__.py").write_text("")
    env = build_env(resolve_source(str(proj), cache=cache), cache=cache)
    assert run_baseline(env, backend="auto").passing() == {"tests/test.py::test_value"}


def test_an_extra_uv_cannot_resolve_never_swaps_the_development_install(tmp_path: Path) -> None:
    """zipp 3.20.2 in the zoo: its test extra needs big-O, which has no wheel; asked for bare
    ``zipp`` and ``zipp[test]``, uv installed zipp 3.19.0 from the index over the development
    install, and the tests imported that. Pinned to the installed version, the development
    install stays; the extra is then installed requirement by requirement, so only big-O is
    skipped, with its cause (zipp's tests lost jaraco.test with the whole extra). big-O itself
    is now built from its sdist in the sandbox, so a release the index does not have stands in
    for it here."""
    cache = tmp_path / "cache"
    proj = tmp_path / "toolz"  # a name the index has releases of
    files = {
        "pyproject.toml": """
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "toolz"
            version = "99.0.0"
            [project.optional-dependencies]
            test = ["big-O==0.0.1", "six; python_version >= '3'", "idna; python_version < '3'"]
            [tool.setuptools]
            packages = ["toolz"]
            """,
        "toolz/__init__.py": "VALUE = 'workspace'\n",
        "tests/test_value.py": "from toolz import VALUE\n\n"
                               "def test_value():\n    assert VALUE == 'workspace'\n",
    }
    for rel, text in files.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(textwrap.dedent(text))
    env = build_env(resolve_source(str(proj), cache=cache), cache=cache)
    assert [m.parent.name for m in site_packages(env).glob("toolz-*.dist-info/METADATA")] == [
        "toolz-99.0.0.dist-info"]
    assert [s.requirement for s in env.skipped] == ["big-O==0.0.1 (of toolz[test]==99.0.0)"]
    assert "big-o" in env.skipped[0].reason.lower()
    assert list(site_packages(env).glob("six-*.dist-info"))  # the rest of the extra
    assert not list(site_packages(env).glob("idna-*.dist-info"))  # its marker still holds
