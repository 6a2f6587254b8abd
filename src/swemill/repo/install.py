"""The install steps of an environment build, and where each one runs.

Repository code (``setup.py``, a build backend and its hooks) only ever runs inside the
sandbox; outside, uv only downloads and unpacks wheels, which runs no package code:

1. outside: the project's build requirements (``[build-system] requires``, read as text), from
   wheels only (``--only-binary :all:``), into the venv being built;
1b. inside (:func:`dynamic_build_requires`): the backend's own answer to "what else do you
   need to build in development mode" (PEP 517/660 ``get_requires_for_build_editable``; hatchling
   says ``editables``, for one), installed outside as in 1;
2. inside (:func:`install_project`): ``uv pip install --offline --no-build-isolation
   --no-deps -e /workspace`` over a private copy of the working copy, as the sandbox user,
   with no network, none of the caller's variables, the venv the only writable host path;
3. outside: the project's dependencies (uv reads them from the metadata step 2 installed),
   the recipe's packages and requirement files, again from wheels only.

A dependency release published only as a source distribution is built into a wheel inside
the sandbox too (:mod:`swemill.repo.sdists`: fetched and its build requirements installed
outside, built inside with :func:`run_inside`, its wheel installed outside); a requirement
file's editable or local-path lines are dropped (the project
itself is step 2). Bytecode is compiled inside too (compiling reads whatever a symlink the
build left points at). After each inside step everything the sandbox user wrote is taken back,
so the venv it later sees read-only is not its own, and resealed (:mod:`swemill.repo.venvseal`):
the host's uv runs the venv's interpreter afterwards, and must run nothing the sandbox wrote.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from swemill.core.errors import EnvBuildError, SwemillError
from swemill.repo import venvseal
from swemill.sandbox import Bind, Limits, open_sandbox
from swemill.sandbox._hostuser import lend, take_back
from swemill.sandbox.contract import ExecResult

__all__ = ["build_requires", "dynamic_build_requires", "install_project", "project_requirement",
           "run_inside", "wheel_only_requirements"]

_DEFAULT_BUILD = ["setuptools>=40.8.0", "wheel"]  # what pip and uv assume without a pyproject
_MAX_INCLUDES = 20
_MAX_DYNAMIC = 50
_LOCAL = re.compile(r"^(-e|--editable)\b|^(\.|/|~|file:)")
_INCLUDE = re.compile(r"^(-r|--requirement)[\s=]+(\S+)")
_CONSTRAINT = re.compile(r"^(-c|--constraint)[\s=]+(\S+)")


def build_requires(work: Path) -> list[str]:
    """The build requirements a project declares (or the setuptools default)."""
    try:
        data = tomllib.loads((work / "pyproject.toml").read_text())
    except (FileNotFoundError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return list(_DEFAULT_BUILD)
    reqs = data.get("build-system", {}).get("requires")
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        return list(_DEFAULT_BUILD)
    return list(reqs)


def install_project(uv: str, venv: Path, work: Path, extras: list[str], base_prefix: Path,
                    timeout: float, env: dict[str, str] | None = None) -> ExecResult:
    """Install the project at ``work`` in development mode into ``venv``, inside a sandbox."""
    def argv(workdir: str) -> list[str]:
        target = workdir + (f"[{','.join(extras)}]" if extras else "")
        return [uv, "pip", "install", "--offline", "--no-build-isolation", "--no-deps",
                "--no-progress", "--python", str(venv / "bin" / "python"), "-e", target]

    return run_inside(argv, uv=uv, venv=venv, work=work, base_prefix=base_prefix,
                      timeout=timeout, env=env)


# Run by the venv's interpreter inside the sandbox: asks the backend (the PEP 517 default when
# none is named) what it needs beyond [build-system] requires to build in development mode.
_ASK_BACKEND = r"""
import json, sys, tomllib, importlib
try:
    bs = tomllib.load(open("pyproject.toml", "rb")).get("build-system", {})
except FileNotFoundError:
    bs = {}
sys.path[:0] = bs.get("backend-path", [])
name, _, attr = bs.get("build-backend", "setuptools.build_meta:__legacy__").partition(":")
backend = importlib.import_module(name)
for part in filter(None, attr.split(".")):
    backend = getattr(backend, part)
hook = getattr(backend, "get_requires_for_build_editable", None) or \
    getattr(backend, "get_requires_for_build_wheel", None)
print("\n@@swemill-requires@@" + json.dumps(list(hook({}) if hook else [])))
"""
_MARK = "@@swemill-requires@@"


def dynamic_build_requires(venv: Path, work: Path, base_prefix: Path, uv: str, timeout: float,
                           env: dict[str, str] | None = None, *, venv_writable: bool = True
                           ) -> tuple[list[str], ExecResult]:
    """The backend's extra build requirements for a development-mode install (asked inside)."""
    result = run_inside(lambda _: [str(venv / "bin" / "python"), "-c", _ASK_BACKEND], uv=uv,
                        venv=venv, work=work, base_prefix=base_prefix, timeout=timeout, env=env,
                        venv_writable=venv_writable)
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(_MARK):
            try:
                reqs = json.loads(line[len(_MARK):])
            except ValueError:
                break
            if isinstance(reqs, list):
                return [r for r in reqs if isinstance(r, str)][:_MAX_DYNAMIC], result
            break
    return [], result


def run_inside(argv: Callable[[str], list[str]], *, uv: str, venv: Path, work: Path,
               base_prefix: Path, timeout: float,
               env: dict[str, str] | None = None, venv_writable: bool = True,
               hold_startup: bool = True) -> ExecResult:
    """Run ``argv(workdir)`` in a sandbox over ``work`` with ``venv`` lent writable to it
    (read-only with ``venv_writable=False``). ``env`` adds variables swemill derived (never
    the caller's). A lent venv is taken back resealed (:mod:`swemill.repo.venvseal`: its
    interpreter links and ``pyvenv.cfg`` as they were, and with ``hold_startup`` its start-up
    files held out of it until :func:`~swemill.repo.venvseal.release`), so that the host's uv
    running its interpreter runs nothing the sandbox wrote."""
    binds = [Bind(host=venv, inside=str(venv), writable=venv_writable),
             Bind(host=Path(uv), inside=uv)]
    if not str(base_prefix).startswith("/usr/"):
        binds.append(Bind(host=base_prefix, inside=str(base_prefix)))
    env = {**(env or {}),
           "UV_CACHE_DIR": "/tmp/uv-cache", "UV_LINK_MODE": "copy", "UV_OFFLINE": "1",
           "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    limits = Limits(timeout_s=timeout, memory_mb=8192, pids=4096, net=False)
    sealed = venvseal.seal(venv) if venv_writable else None
    if venv_writable:
        lend(venv)
    try:
        with open_sandbox(work, binds=binds, env=env, limits=limits) as sb:
            return sb.exec(argv(sb.workdir))
    except SwemillError as exc:
        raise EnvBuildError(f"cannot sandbox the project's install: {exc}") from exc
    finally:
        if sealed is not None:
            take_back(venv)
            venvseal.restore(venv, sealed, hold=hold_startup)


def project_requirement(venv: Path, workdirs: list[str], extras: list[str]) -> str | None:
    """``name[extras]`` of the project installed from one of ``workdirs`` (where the sandbox
    showed it): asking uv for it brings its dependencies."""
    site = next(venv.glob("lib/python*/site-packages"))
    for direct in site.glob("*.dist-info/direct_url.json"):
        try:
            url = json.loads(direct.read_text()).get("url", "")
        except (ValueError, OSError):
            continue
        if url.rstrip("/") in {f"file://{w}" for w in workdirs}:
            name = _metadata_name(direct.parent / "METADATA")
            if name:
                return name + (f"[{','.join(extras)}]" if extras else "")
    return None


def _metadata_name(path: Path, key: str = "Name") -> str | None:
    try:
        with path.open(errors="replace") as fh:
            for line in fh:
                if line.startswith(f"{key}:"):
                    return line.split(":", 1)[1].strip() or None
                if not line.strip():
                    break
    except OSError:
        return None
    return None


def installed_version(venv: Path, name: str) -> str | None:
    """The version of the distribution ``name`` installed in ``venv`` (None: not there)."""
    norm = re.sub(r"[-_.]+", "-", name).lower()
    site = next(venv.glob("lib/python*/site-packages"))
    for meta in site.glob("*.dist-info/METADATA"):
        found = _metadata_name(meta)
        if found and re.sub(r"[-_.]+", "-", found).lower() == norm:
            return _metadata_name(meta, "Version")
    return None


def wheel_only_requirements(src: Path, files: list[str], out: Path) -> list[Path]:
    """Copies of the requirement files ``files`` (relative to ``src``, the untouched working
    copy) with included files inlined and editable or local-path lines dropped."""
    written = []
    for i, rel in enumerate(files):
        lines = _flatten(src, src / rel, set())
        dest = out / f"requirements-{i}.txt"
        dest.write_text("".join(f"{ln}\n" for ln in lines))
        written.append(dest)
    return written


def _flatten(root: Path, path: Path, seen: set[Path]) -> list[str]:
    real = path.resolve()
    if real in seen or len(seen) >= _MAX_INCLUDES or not real.is_relative_to(root.resolve()):
        return []
    seen.add(real)
    try:
        text = real.read_text(errors="replace")
    except OSError:
        return []
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or _LOCAL.match(line):
            continue
        if m := _INCLUDE.match(line):
            out += _flatten(root, real.parent / m.group(2), seen)
        elif m := _CONSTRAINT.match(line):
            target = (real.parent / m.group(2)).resolve()
            if target.is_relative_to(root.resolve()) and target.is_file():
                out.append(f"-c {target}")
        else:
            out.append(line)
    return out
