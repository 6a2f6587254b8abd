"""Dependencies published only as a source distribution, built into wheels in the sandbox.

Building an sdist runs its code (``setup.py``, a backend's hooks), so it is done as the project
itself is installed (:mod:`swemill.repo.install`), never on the host:

1. outside: the sdist of the exact version uv asked for is fetched (from a local
   ``$UV_FIND_LINKS`` folder, else from the index, sha256-checked) and unpacked; fetching and
   unpacking run nothing;
2. outside: a throw-away build venv gets the sdist's build requirements from wheels only;
3. inside: ``uv build --wheel --offline --no-build-isolation`` in the unpacked tree, as the
   sandbox user, with no network and none of the caller's variables, within
   :data:`BUILD_TIMEOUT_S`; the build venv is read-only there (the host runs uv against it,
   and uv runs its interpreter), the unpacked tree the only writable path;
4. outside: the wheel it left (its name and version must be the ones asked for, and nothing
   in it that Python runs at start-up, :func:`starts_code`: the host's uv runs the
   environment's interpreter) goes to a wheelhouse that later installs see through
   ``--find-links``, still with wheels only.

At most :data:`MAX_SDISTS` are built per environment; a build that fails leaves the
dependency uninstalled, with the build's cause line as the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from swemill.core.errors import SwemillError
from swemill.repo.buildlog import last_step, log_result, reason_line, run_logged
from swemill.repo.install import build_requires, dynamic_build_requires, run_inside
from swemill.repo.pypi import fetch, sdist_versions, unpack_sdist
from swemill.repo.sources import ResolvedSource
from swemill.repo.venvseal import START_HOOKS

__all__ = ["BUILD_TIMEOUT_S", "MAX_SDISTS", "SdistBuilds", "no_wheel", "starts_code"]

MAX_SDISTS = 5
BUILD_TIMEOUT_S = 300
_NAME = r"([A-Za-z0-9][A-Za-z0-9._-]*)"
_NO_WHEEL = re.compile(rf"\b{_NAME}==(\S+?) has no usable wheels")
_NONE_HAS = re.compile(rf"\ball versions of {_NAME} have no usable wheels")
# a lower-bounded range uv found no wheel in (its newest sdist is in that range)
_FROM_HAS = re.compile(rf"\b{_NAME}>=?[^\s,<]+ has no usable wheels")


def no_wheel(step: list[str]) -> tuple[str, str | None] | None:
    """``(name, version)`` of the first release uv refused for want of a wheel, or None; the
    version is None where uv refused every version, or every version from a lower bound
    on (tinydb 4.8.0's ``pytest-pycodestyle>=2.3.1``: then the newest sdist is built)."""
    for line in step:
        if m := _NO_WHEEL.search(line):
            return m.group(1), m.group(2)
        if m := _NONE_HAS.search(line) or _FROM_HAS.search(line):
            return m.group(1), None
    return None


@dataclass(slots=True)
class SdistBuilds:
    """The sdists one environment build has built (or failed to build), and their wheels."""

    uv: str
    python: Path
    base_prefix: Path
    root: Path
    log: Path
    src: ResolvedSource
    built: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def wheelhouse(self) -> Path:
        return self.root / "wheels"

    def find_links(self) -> list[str]:
        """uv's options that show it the wheels built so far (a ``--find-links`` given on
        the command line replaces ``$UV_FIND_LINKS``, so those are named again)."""
        if not self.built:
            return []
        return [arg for link in [str(self.wheelhouse), *_env_links()]
                for arg in ("--find-links", link)]

    def build(self, name: str, version: str | None) -> str | None:
        """Build ``name==version`` (None: the newest release with an sdist) into the
        wheelhouse; None when done, else why not."""
        if version is None:
            try:
                version = _newest(canonicalize_name(name))
            except SwemillError as exc:
                return f"{name} has no wheel, and no sdist was found: {exc}"
        key = f"{canonicalize_name(name)}=={version}"
        if key in self.built:
            return f"{key} was built from its sdist, but uv did not take the wheel"
        if key in self.failed:
            return self.failed[key]
        if len(self.built) + len(self.failed) >= MAX_SDISTS:
            return f"{key} has no wheel, and this environment built {MAX_SDISTS} sdists already"
        with open(self.log, "a") as fh:
            fh.write(f"# {key} has no wheel: building its sdist in the sandbox\n")
        start = time.monotonic()
        why = self._build(canonicalize_name(name), version, self.root / key)
        with open(self.log, "a") as fh:
            fh.write(f"# {key}: {'built' if why is None else 'failed'} in "
                     f"{time.monotonic() - start:.1f} s\n")
        if why is None:
            self.built.append(key)
            return None
        self.failed[key] = f"{key} has no wheel and its sdist did not build: {why}"
        return self.failed[key]

    def _build(self, name: str, version: str, where: Path) -> str | None:
        tree, venv = where / "src", where / "venv"
        tree.mkdir(parents=True)
        try:
            _fetch(name, version, where, tree)
        except SwemillError as exc:
            return str(exc)
        if run_logged([self.uv, "venv", "--no-python-downloads", "--python", str(self.python),
                       str(venv)], self.log, self.src, check=False):
            return reason_line(last_step(self.log))
        for reqs in (build_requires(tree), None):
            if reqs is None:  # what the backend asks for beyond them (asked inside)
                reqs, asked = dynamic_build_requires(venv, tree, self.base_prefix, self.uv,
                                                     BUILD_TIMEOUT_S, venv_writable=False)
                log_result(asked, self.log, f"build requirements of {name}'s backend")
            if reqs and run_logged([self.uv, "pip", "install", "--python",
                                    str(venv / "bin" / "python"), "--no-progress",
                                    "--only-binary", ":all:", *reqs], self.log, self.src,
                                   check=False):
                return "its build requirements: " + reason_line(last_step(self.log))
        out = ".swemill-wheel"
        result = run_inside(lambda wd: [self.uv, "build", "--wheel", "--offline",
                                        "--no-build-isolation", "--no-progress", "--python",
                                        str(venv / "bin" / "python"), "--out-dir",
                                        f"{wd}/{out}", wd],
                            uv=self.uv, venv=venv, work=tree, base_prefix=self.base_prefix,
                            timeout=BUILD_TIMEOUT_S, venv_writable=False)
        log_result(result, self.log, f"build of {name} {version}")
        if result.timed_out:
            return f"the build did not finish within {BUILD_TIMEOUT_S} s"
        if not result.ok:
            return reason_line((result.stdout + result.stderr).splitlines())
        return self._take(name, version, tree / out)

    def _take(self, name: str, version: str, out: Path) -> str | None:
        """Move the one wheel the build left to the wheelhouse, if it is the one asked for."""
        wheels = sorted(p for p in out.glob("*.whl") if p.is_file() and not p.is_symlink()) \
            if out.is_dir() and not out.is_symlink() else []
        if len(wheels) != 1:
            return f"the build left {len(wheels)} wheels, not one"
        if starts := starts_code(wheels[0]):
            return f"the wheel it built holds {starts}, which Python runs at start-up; refused"
        try:
            got, ver, _, _ = parse_wheel_filename(wheels[0].name)
            same = got == name and ver == Version(version)
        except (InvalidWheelFilename, InvalidVersion):
            same = False
        if not same:
            return f"the build made {wheels[0].name}, not {name} {version}"
        self.wheelhouse.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wheels[0], self.wheelhouse / wheels[0].name)
        return None


def _fetch(name: str, version: str, where: Path, tree: Path) -> None:
    """Unpack the sdist into ``tree``: a local find-links folder's, else the index's."""
    local = {Version(v): path for v, path in _local_sdists(name)}
    if Version(version) in local:
        unpack_sdist(local[Version(version)], tree)
        return
    filename, data, _ = fetch(name, version)
    archive = where / filename
    archive.write_bytes(data)
    unpack_sdist(archive, tree)


def _newest(name: str) -> str:
    """The newest final release of ``name`` with an sdist (local folders first)."""
    found = [v for v, _ in _local_sdists(name)] or sdist_versions(name)
    final = [v for v in found if not Version(v).is_prerelease] or found
    if not final:
        raise SwemillError(f"no sdist of {name}")
    return str(max(final, key=Version))


def _local_sdists(name: str) -> list[tuple[str, Path]]:
    """``(version, path)`` of ``name``'s sdists in the local ``$UV_FIND_LINKS`` folders."""
    out = []
    for folder in _env_links():
        if "://" in folder or not Path(folder).is_dir():
            continue
        for path in sorted(Path(folder).iterdir()):
            m = re.fullmatch(r"(.+?)-([^-]+)\.(tar\.gz|zip)", path.name)
            if m and canonicalize_name(m.group(1)) == name and _valid(m.group(2)):
                out.append((m.group(2), path))
    return out


def _env_links() -> list[str]:
    return [f for f in re.split(r"[,\s]+", os.environ.get("UV_FIND_LINKS", "")) if f]


def _valid(version: str) -> bool:
    try:
        Version(version)
    except InvalidVersion:
        return False
    return True


def starts_code(wheel: Path) -> str | None:
    """The first member of ``wheel`` that the interpreter would run at start-up wherever the
    wheel is installed (a ``.pth`` file, ``sitecustomize``/``usercustomize``), or None; an
    unreadable wheel names itself."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return wheel.name
    for name in names:
        parts = name.split("/")
        if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in {"purelib", "platlib"}:
            parts = parts[2:]  # installed into site-packages as well
        if (len(parts) == 1 and parts[0].endswith(".pth")) or \
                parts[0].split(".")[0] in START_HOOKS:
            return name
    return None
