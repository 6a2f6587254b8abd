"""The compiled privilege dropper: how a root swemill drops each sandboxed command cheaply.

As root, bwrap builds the sandbox as root and something inside must then drop the command to
the sandbox user (:mod:`swemill.sandbox._hostuser`). ``setpriv`` does it, but it is a dynamic
binary that parses options and walks capability tables: ~1.2 ms of CPU per command on top of
the command's own exec. ``_dropper.c`` (beside this file) does the same steps (empty bounding
set, no supplementary groups, real/effective/saved ids, no capabilities, ``no_new_privs``) in a
static binary: ~0.5 ms. It is compiled once per source version with the system's C compiler
into swemill's cache and bound read-only into every sandbox at :data:`INSIDE`. Without a
compiler, or where the cache is not private to this user, swemill uses ``setpriv``.

What runs as root inside the sandbox must be exactly this source: the binary is kept only in a
directory no other user can write to, on a path whose every parent is the same, and it is used
only while it is this user's, a regular file, and writable by nobody else.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

__all__ = ["INSIDE", "SOURCE", "dropper"]

SOURCE = Path(__file__).with_name("_dropper.c")
INSIDE = "/opt/swemill/drop"
"""Where sandboxed commands find the dropper."""

_COMPILE_S = 60


def _bin_dir() -> Path:
    root = os.environ.get("SWEMILL_CACHE") or str(Path.home() / ".cache" / "swemill")
    return Path(root) / "bin"


def _private(path: Path) -> bool:
    """Whether nobody but this user (or root) can replace anything on ``path``'s way."""
    me = os.geteuid()
    try:
        real = Path(os.path.realpath(path))
        for p in (real, *real.parents):
            st = os.lstat(p)
            if st.st_uid not in (0, me):
                return False
            if st.st_mode & 0o022 and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
                return False
    except OSError:
        return False
    return True


def _usable(exe: Path) -> bool:
    try:
        st = os.lstat(exe)
    except OSError:
        return False
    return (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
            and _private(exe.parent))


def _compile(source: Path, out: Path) -> bool:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return False
    for static in (["-static"], []):  # a static binary skips the dynamic loader on every exec
        try:
            p = subprocess.run([cc, "-O2", *static, "-o", str(out), str(source)],
                               capture_output=True, timeout=_COMPILE_S,
                               env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                    "LC_ALL": "C"})
        except (OSError, subprocess.TimeoutExpired):
            return False
        if p.returncode == 0:
            return True
    return False


@functools.cache
def dropper() -> Path | None:
    """The compiled dropper on the host (built on first use), or None: use ``setpriv``.

    ``SWEMILL_DROPPER=setpriv`` chooses ``setpriv`` outright."""
    if os.environ.get("SWEMILL_DROPPER", "").strip() == "setpriv" or os.geteuid() != 0:
        return None
    try:
        source = SOURCE.read_bytes()
    except OSError:
        return None
    home = _bin_dir()
    exe = home / f"swemill-drop-{hashlib.sha256(source).hexdigest()[:16]}"
    if _usable(exe):
        return exe
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    if not _private(home):
        return None
    with tempfile.TemporaryDirectory(dir=home) as tmp:  # concurrent builders: the last wins
        out = Path(tmp) / "drop"
        if not _compile(SOURCE, out):
            return None
        os.chmod(out, 0o755)
        os.replace(out, exe)
    return exe if _usable(exe) else None
