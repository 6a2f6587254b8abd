"""An extra that cannot be installed whole costs only its requirements that cannot be.

Regression class: zipp 3.20.2 in the zoo. Its ``test`` extra holds big-O, which has no wheel;
the whole extra was skipped, so jaraco.test (imported by test_path.py, its main test module)
was never installed, no test module but the doctests collected, and ``swemill tasks`` ran the
doctests and lint items for every candidate. The extra is now read from the installed
project's ``Requires-Dist`` lines and tried requirement by requirement.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import NoReturn

from swemill.repo.sdists import MAX_SDISTS, SdistBuilds, no_wheel, starts_code
from swemill.repo.sources import ResolvedSource
from swemill.repo.testdeps import (
    Skipped,
    describe_skipped,
    extra_requirements,
    install_test_deps,
)

METADATA = """\
Metadata-Version: 2.1
Name: Demo.Pkg
Version: 1.0
Requires-Dist: attrs>=20
Requires-Dist: pytest!=8.1.*,>=6; extra == "test"
Requires-Dist: big-O; extra == "test"
Requires-Dist: jaraco.test; extra == "test"
Requires-Dist: importlib_resources; python_version < "3.9" and extra == "test"
Requires-Dist: tomli; python_version < "3.11" and extra == "test"
Requires-Dist: pytest-ruff>=0.2.1; sys_platform != "cygwin" and extra == "check"
Requires-Dist: sphinx; extra == "doc"

A description.
"""


def _venv(tmp_path: Path, version: str) -> Path:
    venv = tmp_path / "venv"
    info = venv / "lib/python3.11/site-packages/demo_pkg-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(METADATA)
    (venv / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion_info = {version}\n")
    return venv


def test_an_extras_requirements_are_read_for_the_venvs_python(tmp_path: Path) -> None:
    venv = _venv(tmp_path, "3.10.4")
    assert extra_requirements(venv, "demo-pkg", ["test", "check", "none"]) == {
        "test": ["pytest!=8.1.*,>=6", "big-O", "jaraco.test", "tomli"],
        "check": ["pytest-ruff>=0.2.1"],
        "none": [],
    }
    assert extra_requirements(venv, "other", ["test"]) == {}


def test_a_newer_python_leaves_out_what_its_markers_exclude(tmp_path: Path) -> None:
    venv = _venv(tmp_path, "3.12.1")
    assert extra_requirements(venv, "demo_pkg", ["test"])["test"] == [
        "pytest!=8.1.*,>=6", "big-O", "jaraco.test"]


def _fail(why: str) -> NoReturn:
    raise AssertionError(why)


def test_a_failing_extra_is_installed_part_by_part(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def uv(reqs: list[str]) -> tuple[int, str]:  # an index where big-O has no wheel
        calls.append(reqs)
        bad = {"big-O", "demo[test]==1.0"} & set(reqs)  # the extra holds big-O
        return (1, "big-o has no usable wheels") if bad else (0, "")

    parts = {"demo[test]==1.0": ["pytest", "big-O", "jaraco.test"]}
    skipped = install_test_deps(uv, ["demo==1.0"], ["demo[test]==1.0", "six"], _fail, parts)
    assert skipped == [Skipped("big-O (of demo[test]==1.0)", "big-o has no usable wheels")]
    assert ["demo==1.0", "jaraco.test"] in calls and ["demo==1.0", "six"] in calls
    # without parts, the whole extra goes, as before
    assert install_test_deps(uv, ["demo==1.0"], ["demo[test]==1.0"], _fail) == [
        Skipped("demo[test]==1.0", "big-o has no usable wheels")]


def test_skipped_dependencies_are_named_in_a_few_words() -> None:
    # unearth 0.17.2: its conftest imports wsgiadapter; requests-wsgi-adapter has no wheel
    uv = ("error: No solution found when resolving dependencies: cause: Because all versions "
          "of requests-wsgi-adapter have no usable wheels and you require it, ...")
    skipped = [Skipped("requests-wsgi-adapter", uv), Skipped("pkg==9", "error: no version")]
    assert describe_skipped(skipped) == (
        "requests-wsgi-adapter (no wheel), pkg==9 (could not be installed)")
    assert describe_skipped(skipped * 2, most=3).endswith(" and 1 more")
    assert describe_skipped([]) == ""


def test_a_release_without_wheels_is_named_from_uvs_cause() -> None:
    assert no_wheel(["  cause: Because requests-wsgi-adapter==0.4.1 has no usable wheels and"
                     " only requests-wsgi-adapter<=0.4.1 is available, ..."]) == (
        "requests-wsgi-adapter", "0.4.1")
    assert no_wheel(["  cause: Because all versions of sdgood have no usable wheels and you "
                     "require sdgood, ..."]) == ("sdgood", None)
    # tinydb 4.8.0's test group: every pytest-pycodestyle from 2.3.1 on is an sdist only
    assert no_wheel(["  cause: Because pytest-pycodestyle>=2.3.1 has no usable wheels and you "
                     "require pytest-pycodestyle>=2.3.1, ..."]) == ("pytest-pycodestyle", None)
    assert no_wheel(["  cause: Because pkg==9 was not found in the package registry"]) is None
    assert no_wheel(["  cause: Because pkg<2 has no usable wheels and ..."]) is None


def test_an_environment_builds_a_bounded_number_of_sdists(tmp_path: Path) -> None:
    src = ResolvedSource(spec="x", path=tmp_path, repo="x", commit="0" * 40, kind="local")
    builds = SdistBuilds("uv", tmp_path / "python", tmp_path, tmp_path / "sdists",
                         tmp_path / "log", src)
    builds.built = [f"p{i}==1.0" for i in range(MAX_SDISTS)]
    # past the cap nothing is fetched or run: the answer is the reason, at once
    assert builds.build("one-more", "1.0") == (
        f"one-more==1.0 has no wheel, and this environment built {MAX_SDISTS} sdists already")
    assert not (tmp_path / "sdists").exists() and not (tmp_path / "log").exists()
    assert builds.find_links()[:2] == ["--find-links", str(tmp_path / "sdists" / "wheels")]
    # a release built already that uv still refuses is not built again
    assert "did not take the wheel" in (builds.build("p0", "1.0") or "")


def test_a_failed_sdist_build_is_named_as_such() -> None:
    why = "sdbroken==1.0 has no wheel and its sdist did not build: RuntimeError: no"
    assert describe_skipped([Skipped("sdbroken==1.0", why)]) == (
        "sdbroken==1.0 (no wheel, and its sdist did not build)")


def test_a_built_wheel_that_would_run_code_at_start_up_is_named(tmp_path: Path) -> None:
    def wheel(*names: str) -> Path:
        path = tmp_path / "w.whl"
        with zipfile.ZipFile(path, "w") as zf:
            for name in names:
                zf.writestr(name, "import os\n")
        return path

    ok = ("pkg/__init__.py", "pkg/data.pth", "pkg-1.0.dist-info/RECORD")
    assert starts_code(wheel(*ok)) is None  # a .pth inside a package is never read at start-up
    assert starts_code(wheel(*ok, "evil.pth")) == "evil.pth"
    assert starts_code(wheel(*ok, "pkg-1.0.data/purelib/evil.pth")) == (
        "pkg-1.0.data/purelib/evil.pth")
    assert starts_code(wheel(*ok, "sitecustomize.py")) == "sitecustomize.py"
    assert starts_code(wheel(*ok, "usercustomize/__init__.py")) == "usercustomize/__init__.py"
    (tmp_path / "w.whl").write_text("not a zip")
    assert starts_code(tmp_path / "w.whl") == "w.whl"
