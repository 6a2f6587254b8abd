"""Test dependencies published only as an sdist are built into wheels in the sandbox.

The project made here declares a ``test`` extra of three packages that exist only as sdists,
in a folder ``UV_FIND_LINKS`` names (pytest, coverage and setuptools come from the index, or
uv's cache): ``sdgood`` (two releases, asked for unpinned), which its tests import;
``sdhostile``, whose ``setup.py`` tries to read a host file, write outside its build tree
(and into the build venv) and reach a TCP server this test listens with, and records what it
managed into the module it ships; and ``sdbroken``, whose ``setup.py``
raises. One ``swemill env`` builds them all.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from swemill.sandbox.bwrap import usable

from .test_envbuild_sandboxed import SENTINEL, Listener

pytestmark = [pytest.mark.slow, pytest.mark.network,
              pytest.mark.skipif(not usable()[0], reason="needs the bwrap sandbox")]

HOSTILE_SETUP = '''
import socket
import sysconfig
from pathlib import Path
from setuptools import setup

probe = {{}}
try:
    probe["secret"] = Path({secret!r}).read_text()
except OSError:
    probe["secret"] = None
try:
    Path({outside!r}).write_text("escaped")
    probe["wrote"] = True
except OSError:
    probe["wrote"] = False
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    probe["net"] = True
except OSError:
    probe["net"] = False
try:  # the build venv: the host runs its interpreter (through uv) after asking the backend
    Path(sysconfig.get_paths()["purelib"], "zz_planted.pth").write_text("import os")
    probe["venv"] = True
except OSError:
    probe["venv"] = False
Path("sdhostile", "__init__.py").write_text(f"PROBE = {{probe!r}}\\n")
setup(name="sdhostile", version="1.0", packages=["sdhostile"])
'''

GOOD_SETUP = """\
from setuptools import setup
setup(name="sdgood", version="{version}", packages=["sdgood"])
"""
BROKEN_SETUP = 'raise RuntimeError("sdbroken refuses to build")\n'

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
[project]
name = "needsdist"
version = "0.1"
[project.optional-dependencies]
test = ["sdgood", "sdhostile==1.0", "sdbroken==1.0"]
[tool.setuptools]
packages = ["needsdist"]
"""

TESTS = """\
import sdgood
import sdhostile


def test_the_sdist_only_dependency_imports():
    assert sdgood.answer() == 42


def test_the_hostile_build_was_contained():
    assert sdhostile.PROBE == {"secret": None, "wrote": False, "net": False, "venv": False}
"""


def make_sdist(folder: Path, name: str, setup_py: str, files: dict[str, str],
               version: str = "1.0") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / f"{name}-{version}.tar.gz", "w:gz") as tf:
        members = {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                   "setup.py": setup_py, **files}
        for rel, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_sdist_only_test_dependencies_are_built_in_the_sandbox(tmp_path: Path) -> None:
    listener = Listener()
    secret, outside = tmp_path / "host-secret.txt", tmp_path / "escaped.txt"
    secret.write_text(SENTINEL)
    sdists = tmp_path / "sdists"
    for version, answer in (("0.9", 41), ("1.0", 42)):  # unpinned: the newest is built
        make_sdist(sdists, "sdgood", GOOD_SETUP.format(version=version),
                   {"sdgood/__init__.py": f"def answer():\n    return {answer}\n"}, version)
    make_sdist(sdists, "sdhostile", HOSTILE_SETUP.format(
        secret=str(secret), outside=str(outside), port=listener.port),
        {"sdhostile/__init__.py": ""})
    make_sdist(sdists, "sdbroken", BROKEN_SETUP, {})
    repo = tmp_path / "needsdist"
    (repo / "needsdist").mkdir(parents=True)
    (repo / "needsdist" / "__init__.py").write_text("")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_it.py").write_text(TESTS)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    env = {**os.environ, "SWEMILL_CACHE": str(tmp_path / "cache"), "COLUMNS": "200",
           "UV_FIND_LINKS": str(sdists)}
    try:
        proc = subprocess.run([sys.executable, "-m", "swemill", "env", str(repo), "--json"],
                              env=env, capture_output=True, text=True, timeout=900)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    # both tests ran and passed: sdgood imports, and sdhostile's build saw no secret,
    # wrote nothing outside and reached no server
    assert out["counts"] == {"passed": 2}, out
    assert not outside.exists() and listener.accepted == 0
    # the broken one is the one dependency not installed, with the build's own error
    [skipped] = out["env_skipped"]
    assert skipped["requirement"].startswith("sdbroken")
    assert "sdbroken==1.0 has no wheel and its sdist did not build" in skipped["reason"]
    assert "RuntimeError: sdbroken refuses to build" in skipped["reason"]
    # nothing the sandbox user wrote is left in the cached environment
    envdir = next((tmp_path / "cache" / "envs").iterdir())
    assert not (envdir / "sdists").exists()
    left = [p for p in (envdir / "venv").rglob("*") if p.lstat().st_uid != os.geteuid()]
    assert left == []
