"""The swemill wheel ships the product: no test doubles, no two modules with one name.

The wheel is built for real (hatchling, the project's build backend, from pyproject.toml) and
its file list is read back; this is what ``pip install .`` or ``pip install swemill`` unpacks.
One test does the install itself, into a fresh virtual environment, and looks at what landed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTKIT = ROOT / "testkit" / "src" / "swemill_testkit"


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("swemill-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def _modules(names: list[str]) -> list[PurePosixPath]:
    # The bundled sample repository is data (a project for the demo), not swemill's modules.
    return [PurePosixPath(n) for n in names
            if n.endswith(".py") and n.startswith("swemill/") and "/sample/tree/" not in n]


def test_wheel_ships_no_test_doubles(wheel_names: list[str]) -> None:
    modules = _modules(wheel_names)
    assert PurePosixPath("swemill/cli/main.py") in modules
    # What users run stays: scripted policies and the reporter of the target's tests.
    assert PurePosixPath("swemill/policies/scripted.py") in modules
    assert PurePosixPath("swemill/suite/pytest_plugin.py") in modules
    fakes = sorted(p.name for p in TESTKIT.glob("*.py") if p.name != "__init__.py")
    assert "fake_server.py" in fakes and "store.py" in fakes
    shipped_fakes = [str(m) for m in modules if m.name.startswith("fake_")]
    assert shipped_fakes == []
    assert not [n for n in wheel_names if "testkit" in n or "/testing/" in n]
    assert not [str(m) for m in modules if m.name == "testing.py"]


def test_no_two_modules_share_a_name(wheel_names: list[str]) -> None:
    names = Counter(m.name for m in _modules(wheel_names)
                    if m.name not in ("__init__.py", "__main__.py"))
    assert len(names) > 100
    assert [n for n, k in names.items() if k > 1] == []


@pytest.mark.slow
def test_install_into_a_fresh_venv_holds_no_fakes(tmp_path: Path) -> None:
    """``pip install .`` (uv's pip, an isolated build as pip makes it) into a new venv: the
    package is there, the test doubles and swemill_testkit are not."""
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    venv = tmp_path / "venv"

    def run(*args: str | Path) -> str:
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    run(uv, "venv", "-q", "--python", sys.executable, venv)
    run(uv, "pip", "install", "-q", "--python", venv / "bin" / "python", "--no-deps", ROOT)
    (site,) = venv.glob("lib/python*/site-packages")
    installed = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.py"))
    assert "swemill/cli/main.py" in installed and "swemill/policies/scripted.py" in installed
    assert [p for p in installed if PurePosixPath(p).name.startswith("fake_")
            or "testkit" in p or "/testing/" in p] == []
    found = run(venv / "bin" / "python", "-c",
                "import importlib.util as u; print(u.find_spec('swemill_testkit'))")
    assert found.strip() == "None"
