"""A repository's install code runs in the sandbox: not as host root, without the caller's
variables, with no network, writing only into the environment being built.

The repository under test records, from its ``setup.py`` (run by the build backend during
``swemill env``), who it ran as, what environment it saw and whether it reached a TCP server
this test listens with on the host's loopback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from swemill.sandbox._hostuser import DEFAULT_UID, sandbox_uid
from swemill.sandbox.bwrap import usable

pytestmark = [pytest.mark.slow, pytest.mark.network,
              pytest.mark.skipif(not usable()[0], reason="needs the bwrap sandbox")]

SENTINEL = "swemill-sentinel-7f3a"

SETUP_PY = '''
import json, os, socket, sys
from pathlib import Path
from setuptools import setup

probe = {{"uid": os.getuid(), "euid": os.geteuid(), "environ": dict(os.environ)}}
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    probe["connected"] = True
except OSError as exc:
    probe["connected"] = False
    probe["connect_error"] = str(exc)
outside = Path({outside!r})
try:
    outside.write_text("escaped")
    probe["wrote_outside"] = True
except OSError:
    probe["wrote_outside"] = False
Path(sys.prefix, f"install-probe-{{os.getpid()}}.json").write_text(json.dumps(probe))
Path("probe_pkg", "_generated.py").write_text("GENERATED = True")
leak = Path("probe_pkg", "leak.txt")
if not os.path.lexists(leak):
    leak.symlink_to({secret!r})
setup(name="probe-pkg", version="0.1", packages=["probe_pkg"])
'''


class Listener:
    """A TCP server on the host's loopback that counts connections."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_install_code_runs_unprivileged_offline_and_without_the_callers_variables(
        tmp_path: Path) -> None:
    listener = Listener()
    try:
        # the listener itself is reachable from the host: a refused connect inside means
        # the sandbox has no way to it, not that nothing listens
        socket.create_connection(("127.0.0.1", listener.port), timeout=3).close()
        repo = tmp_path / "repo"
        (repo / "probe_pkg").mkdir(parents=True)
        (repo / "probe_pkg" / "__init__.py").write_text("VALUE = 1\n")
        (repo / "tests").mkdir()
        (repo / "tests" / "test_probe.py").write_text(
            "from probe_pkg import VALUE\n\ndef test_value():\n    assert VALUE == 1\n")
        outside = tmp_path / "escaped.txt"
        secret = tmp_path / "host-secret.txt"
        secret.write_text(SENTINEL)
        (repo / "setup.py").write_text(textwrap.dedent(SETUP_PY.format(
            port=listener.port, outside=str(outside), secret=str(secret))))
        env = {**os.environ, "SWEMILL_CACHE": str(tmp_path / "cache"), "COLUMNS": "200",
               "AWS_SECRET_ACCESS_KEY": SENTINEL}
        proc = subprocess.run([sys.executable, "-m", "swemill", "env", str(repo), "--json"],
                              env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        baseline_connects = listener.accepted
    finally:
        listener.close()
    # setup.py runs more than once (asked for its build requirements, then installing)
    probes = list((tmp_path / "cache" / "envs").glob("*/venv/install-probe-*.json"))
    assert len(probes) >= 2, "setup.py did not run during the build"
    for probe in (json.loads(p.read_text()) for p in probes):
        assert probe["uid"] != 0 and probe["euid"] != 0
        if sandbox_uid() is not None:
            assert probe["uid"] == DEFAULT_UID
        assert "AWS_SECRET_ACCESS_KEY" not in probe["environ"]
        assert SENTINEL not in json.dumps(probe["environ"])
        assert probe["connected"] is False, probe
        assert probe["wrote_outside"] is False and not outside.exists()
    assert baseline_connects == 1  # only this test's own check reached the listener
    venv = probes[0].parent
    left = [p for p in venv.rglob("*") if p.lstat().st_uid != os.geteuid()]
    assert left == [], f"still owned by the sandbox user: {left[:5]}"
    out = json.loads(proc.stdout)
    assert out["counts"] == {"passed": 1}  # and the env works
    # a file the build generated reaches the working copy; a link it planted does not
    work = Path(out["source"]["path"])
    assert (work / "probe_pkg" / "_generated.py").is_file()
    assert not os.path.lexists(work / "probe_pkg" / "leak.txt")
    assert SENTINEL not in "".join(p.read_text() for p in (venv.parent.parent / "generated")
                                   .rglob("*") if p.is_file())


STARTUP_SETUP_PY = '''
import glob, os, sys
from setuptools import setup

marker = {marker!r}


def plant(path, text, mode=0o644):
    try:
        if os.path.lexists(path):
            os.unlink(path)
        with open(path, "w") as fh:
            fh.write(text)
        os.chmod(path, mode)
    except OSError:
        pass  # setup.py runs more than once; a later run may not replace what is taken back


bin_dir = os.path.dirname(sys.executable)
if os.path.islink(os.path.join(bin_dir, "python")):  # the venv's, as uv venv made it
    real = os.path.realpath(sys.executable)
    for name in ("python", "python3"):  # the host's uv runs bin/python next
        plant(os.path.join(bin_dir, name), f'#!/bin/bash\\necho python $(id -u) >> {{marker}}\\n'
              f'exec -a "$0" {{real}} "$@"\\n', 0o755)
    for site in glob.glob(os.path.join(os.path.dirname(bin_dir), "lib", "*", "site-packages")):
        plant(os.path.join(site, "zz_probe.pth"), "import os\\n")
        plant(os.path.join(site, "sitecustomize.py"), "PROBE = 1\\n")
setup(name="startup-pkg", version="0.1", packages=["startup_pkg"])
'''


def test_what_the_install_leaves_for_start_up_never_runs_on_the_host(tmp_path: Path) -> None:
    """The install swaps the venv's ``bin/python`` for a script that writes ``marker`` (a
    host path the sandbox cannot see) and plants a ``.pth`` and a ``sitecustomize``: the
    host's uv, installing the dependencies next, runs the venv's interpreter, and must not run
    the script (before the seal it did, as root). The interpreter link is put back; the
    start-up files are held while the host's uv runs and are the project's own again after
    (they run in the sandbox only)."""
    marker = tmp_path / "ran-on-host"
    repo = tmp_path / "repo"
    (repo / "startup_pkg").mkdir(parents=True)
    (repo / "startup_pkg" / "__init__.py").write_text("VALUE = 1\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_it.py").write_text(
        "from startup_pkg import VALUE\n\ndef test_value():\n    assert VALUE == 1\n")
    (repo / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=70.1"]\n'
                                         'build-backend = "setuptools.build_meta"\n')
    (repo / "setup.py").write_text(textwrap.dedent(STARTUP_SETUP_PY.format(marker=str(marker))))
    env = {**os.environ, "SWEMILL_CACHE": str(tmp_path / "cache"), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "swemill", "env", str(repo), "--json"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not marker.exists(), marker.read_text()
    venv = next((tmp_path / "cache" / "envs").glob("*/venv"))
    assert (venv / "bin" / "python").is_symlink()
    site = next(venv.glob("lib/python*/site-packages"))
    assert (site / "zz_probe.pth").is_file() and (site / "sitecustomize.py").is_file()
    assert json.loads(proc.stdout)["counts"] == {"passed": 1}
