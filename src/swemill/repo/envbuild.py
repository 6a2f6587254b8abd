"""Build (or reuse) the test environment of one repository at one commit.

The environment is a uv venv at ``<cache>/envs/<slug>@<commit12>/venv`` with the project
installed in development mode *at the fixed path* :data:`~swemill.sandbox.base.WORKSPACE`:
the install is made from a throw-away copy of the working copy, and every path to that copy
in the venv's import hooks (``*.pth``, editable finders, ``direct_url.json``) is rewritten to
``/workspace``. Inside an isolating sandbox every workspace and every fork of it appears at
``/workspace``, so one read-only venv serves them all and always imports the workspace's own
code. The ``local`` backend has no mounts; there :meth:`RepoEnv.run_env` puts the workspace's
import roots first on ``PYTHONPATH`` instead.

The repository's own install code runs only inside the sandbox; what runs where is in
:mod:`swemill.repo.install`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from swemill.core.errors import EnvBuildError
from swemill.repo.cache import atomic_dir, cache_root, entry_lock, slugify, write_text_atomic
from swemill.repo.generated import collect_generated, copy_tracked, place_generated
from swemill.repo.history import older_requirements
from swemill.repo.install import (
    build_requires,
    dynamic_build_requires,
    install_project,
    project_requirement,
    run_inside,
    wheel_only_requirements,
)
from swemill.repo.pyselect import pick_python
from swemill.repo.recipe import ALWAYS, Recipe, has_tests, resolve_recipe
from swemill.repo.relocate import relocate_editable
from swemill.repo.scm import derive_version, scm_versioned, version_env
from swemill.repo.sources import ResolvedSource
from swemill.repo.testdeps import Skipped, install_test_deps, requirement_units
from swemill.repo.uvbin import find_uv
from swemill.sandbox.base import WORKSPACE, Bind, ExecResult

__all__ = ["RepoEnv", "build_env", "env_key", "load_env"]

_INSTALL_TIMEOUT_S = 1800
_LOG_TAIL = 15


@dataclass(slots=True, frozen=True)
class RepoEnv:
    """A built environment: where it is, what it holds, how to run in it."""

    key: str
    path: Path
    repo: str
    commit: str
    source_path: Path
    recipe: Recipe
    python_version: str
    base_prefix: Path
    import_roots: list[str] = field(default_factory=list)
    """Workspace-relative directories the project imports from (``.`` or ``src``)."""
    generated: list[str] = field(default_factory=list)
    """Files the install wrote into its tree, placed into the working copy (``generated``)."""
    skipped: list[Skipped] = field(default_factory=list)
    """Test dependencies that could not be installed (the tests run without them)."""

    @property
    def venv(self) -> Path:
        return self.path / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def baseline_path(self) -> Path:
        return self.path / "baseline.json"

    def binds(self) -> list[Bind]:
        """Read-only binds a sandbox needs: the venv and its base interpreter, at host paths."""
        out = [Bind(host=self.venv, inside=str(self.venv))]
        if self.base_prefix.resolve() != Path(sys.base_prefix).resolve():
            out.append(Bind(host=self.base_prefix, inside=str(self.base_prefix)))
        return out

    def run_env(self, workdir: str) -> dict[str, str]:
        """Environment variables for commands run in this env, the workspace seen at ``workdir``.

        Bytecode is never written: a stale ``.pyc`` with the same size and mtime as a mutated
        source file would hide the mutation, and pyc files must not leak into workspaces.
        """
        env = {
            "PATH": f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "VIRTUAL_ENV": str(self.venv),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONNOUSERSITE": "1",
        }
        if workdir != WORKSPACE:
            roots = self.import_roots or ["."]
            env["PYTHONPATH"] = ":".join(os.path.normpath(f"{workdir}/{r}") for r in roots)
        return env


def env_key(src: ResolvedSource) -> str:
    return f"{slugify(src.repo)}@{src.commit[:12]}"


def load_env(path: Path, src_path: Path) -> RepoEnv | None:
    """The complete environment at ``path``, or None (``env.json`` is written last)."""
    try:
        meta = json.loads((path / "env.json").read_text())
        recipe = Recipe.model_validate_json((path / "recipe.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not (path / "venv" / "bin" / "python").exists():
        return None
    return RepoEnv(key=meta["key"], path=path, repo=meta["repo"], commit=meta["commit"],
                   source_path=src_path, recipe=recipe, python_version=meta["python_version"],
                   base_prefix=Path(meta["base_prefix"]), import_roots=meta["import_roots"],
                   generated=list(meta.get("generated", [])),
                   skipped=[Skipped(**s) for s in meta.get("skipped", [])])


def build_env(src: ResolvedSource, *, cache: Path | None = None, recipe: Recipe | None = None,
              rebuild: bool = False) -> RepoEnv:
    """Return the environment of ``src``, building it unless a matching one is cached.

    A given ``recipe`` (or one the repository commits) overrides detection
    (:func:`~swemill.repo.recipe.resolve_recipe`); a cached env built from another recipe is
    rebuilt.
    """
    if not has_tests(src.path):
        raise EnvBuildError(f"no tests found in {src.repo} ({src.path}): nothing to run")
    recipe = resolve_recipe(src.path, recipe)
    root = cache_root(cache)
    key = env_key(src)
    final = root / "envs" / key
    with entry_lock(root, f"env-{key}"):
        env = load_env(final, src.path)
        if env is None or rebuild or _requested(final) != _recipe_hash(recipe):
            with atomic_dir(final, replace=True) as tmp:
                _build_into(tmp, final, src, recipe)
            env = load_env(final, src.path)
        if env is None:  # pragma: no cover - a rename that succeeded always leaves env.json
            raise EnvBuildError(f"environment {key} vanished after it was built")
        place_generated(final / "generated", src.path, env.generated)
    return env


def _build_into(tmp: Path, final: Path, src: ResolvedSource, recipe: Recipe) -> None:
    uv = find_uv()
    if uv is None:
        raise EnvBuildError("uv is not installed; run: python3 -m pip install uv")
    log = tmp / "build.log"
    requested = recipe
    interp, version, base_prefix, why = pick_python(recipe, uv)
    if why:
        recipe = recipe.model_copy(update={"evidence": [*recipe.evidence, why]})
    _run([uv, "venv", "--relocatable", "--no-python-downloads", "--python", interp,
          str(tmp / "venv")], log, src)
    work = tmp / "build-src"  # the install's own copy: the cached working copy stays clean
    tracked = copy_tracked(src.path, work)
    venv = tmp / "venv"
    project, generated = None, []
    if recipe.editable and _is_project(work):
        build = _Build(uv, venv, work, base_prefix, log, src)
        recipe = build.install(recipe)
        project = project_requirement(venv, [WORKSPACE, str(work)], [])
        generated = collect_generated(work, tracked, tmp / "generated")
    older = older_requirements(src.path, _dist_name(src.path)) if recipe.older_commits else []
    if older:
        recipe = _noted(recipe, f"older commits declare what the head does not: {older}")
    skipped = _install_deps(uv, venv, project, recipe, tmp, log, src, older)
    roots = relocate_editable(venv, work, WORKSPACE) if project else []
    if not roots:
        roots = _fallback_pth(venv, work)
    _compile(uv, venv, final / "venv", work, base_prefix, log, src)
    shutil.rmtree(work)
    write_text_atomic(tmp / "recipe.json", recipe.model_dump_json(indent=2) + "\n")
    meta = {"key": final.name, "repo": src.repo, "commit": src.commit, "spec": src.spec,
            "requested_recipe": _recipe_hash(requested),
            "python_version": version, "base_prefix": str(base_prefix), "import_roots": roots,
            "generated": generated, "skipped": [s.to_json() for s in skipped]}
    write_text_atomic(tmp / "env.json", json.dumps(meta, indent=2) + "\n")


@dataclass(slots=True)
class _Build:
    """The project's own install: build requirements outside, the backend's code inside."""

    uv: str
    venv: Path
    work: Path
    base_prefix: Path
    log: Path
    src: ResolvedSource

    def install(self, recipe: Recipe) -> Recipe:
        """Install the project in development mode; returns ``recipe`` with what was derived."""
        static = build_requires(self.work)
        _run(_wheels_cmd(self.uv, self.venv, static), self.log, self.src)
        recipe, env = self._version(recipe, static)
        extra, asked = dynamic_build_requires(self.venv, self.work, self.base_prefix, self.uv,
                                              _INSTALL_TIMEOUT_S, env)
        _log_result(asked, self.log, "build requirements of the backend")
        extra = [r for r in extra if _req_key(r) not in {_req_key(s) for s in static}]
        if extra:
            _run(_wheels_cmd(self.uv, self.venv, extra), self.log, self.src)
            recipe = _noted(recipe, f"build backend asks for {extra}")
            if not env:  # setup_requires=["setuptools_scm"] shows only now
                recipe, env = self._version(recipe, extra)
        _log_inside(install_project(self.uv, self.venv, self.work, recipe.extras,
                                    self.base_prefix, _INSTALL_TIMEOUT_S, env),
                    self.log, self.src, "install")
        return recipe

    def _version(self, recipe: Recipe, requires: list[str]) -> tuple[Recipe, dict[str, str]]:
        """For a project versioned from git: the version, in the variables its backend reads."""
        if not scm_versioned(self.work, requires):
            return recipe, {}
        version, where = derive_version(self.src.path)
        return (_noted(recipe, f"version {version} from {where} (the version comes from git, "
                               "and the install sees no .git)"),
                version_env(version, _dist_name(self.work)))


def _noted(recipe: Recipe, line: str) -> Recipe:
    return recipe.model_copy(update={"evidence": [*recipe.evidence, line]})


def _req_key(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else req


def _dist_name(work: Path) -> str | None:
    try:
        name = tomllib.loads((work / "pyproject.toml").read_text()).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    return name if isinstance(name, str) else None


def _recipe_hash(recipe: Recipe) -> str:
    """Names the recipe asked for (detected or given), before the build annotates it."""
    return hashlib.sha256(recipe.model_dump_json().encode()).hexdigest()


def _requested(path: Path) -> str | None:
    try:
        return str(json.loads((path / "env.json").read_text()).get("requested_recipe"))
    except (FileNotFoundError, ValueError):
        return None


def _wheels_cmd(uv: str, venv: Path, reqs: list[str]) -> list[str]:
    """Installs ``reqs`` from wheels only: unpacking a wheel runs none of its code."""
    return [uv, "pip", "install", "--python", str(venv / "bin" / "python"), "--no-progress",
            "--only-binary", ":all:", *reqs]


def _install_deps(uv: str, venv: Path, project: str | None, recipe: Recipe, tmp: Path,
                  log: Path, src: ResolvedSource, older: list[str]) -> list[Skipped]:
    """The project's dependencies, pytest and coverage (all required), then the recipe's test
    dependencies (each skipped, with its cause, when it cannot be installed)."""
    files = wheel_only_requirements(src.path, recipe.requirement_files, tmp)
    options = tmp / "requirements-options.txt"
    optional = [f"{project}[{e}]" for e in recipe.extras] if project else []
    optional += requirement_units(files, options) + recipe.packages + older
    required = ([project] if project else []) + list(ALWAYS)

    codes: list[int] = []

    def run(reqs: list[str]) -> tuple[int, str]:
        codes.append(_run([*_wheels_cmd(uv, venv, reqs), "-r", str(options)], log, src,
                          cwd=tmp, check=False))
        return codes[-1], "" if codes[-1] == 0 else reason_line(_last_step(log))

    def fail(_why: str) -> NoReturn:
        _fail(f"install of {src.repo}@{src.commit[:12]} failed (exit {codes[-1]})", log)

    return install_test_deps(run, required, optional, fail)


def _log_result(result: ExecResult, log: Path, what: str) -> None:
    with open(log, "a") as fh:
        fh.write(f"$ (in the sandbox) {what}\n{result.stdout}{result.stderr}")
        if not result.ok:
            fh.write(f"({what}: exit {result.exit_code}; going on without)\n")


def _log_inside(result: ExecResult, log: Path, src: ResolvedSource, what: str) -> None:
    with open(log, "a") as fh:
        fh.write(f"$ (in the sandbox) {what}\n{result.stdout}{result.stderr}")
    if result.timed_out:
        _fail(f"{what} of {src.repo} did not finish within {_INSTALL_TIMEOUT_S} s", log)
    if not result.ok:
        why = f"killed: {result.killed_reason}" if result.killed_reason else \
            f"exit {result.exit_code}"
        _fail(f"{what} of {src.repo}@{src.commit[:12]} failed ({why})", log)


def _is_project(path: Path) -> bool:
    return any((path / f).is_file() for f in ("pyproject.toml", "setup.py", "setup.cfg"))


def _fallback_pth(venv: Path, work: Path) -> list[str]:
    """No installable project: make the workspace root (or ``src``) importable by a .pth."""
    root = "src" if (work / "src").is_dir() and not (work / "tests" / "__init__.py").exists() \
        else "."
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "_swemill_workspace.pth").write_text(os.path.normpath(f"{WORKSPACE}/{root}") + "\n")
    return [root]


def _compile(uv: str, venv: Path, final_venv: Path, work: Path, base_prefix: Path, log: Path,
             src: ResolvedSource) -> None:
    """Precompile the venv with the paths it will have after the rename (start-up matters).
    In the sandbox: the venv's interpreter runs its ``.pth`` files, and compiling reads what
    any symlink the build left points at."""
    site = next(venv.glob("lib/python*/site-packages"))
    final_site = final_venv / site.relative_to(venv)
    result = run_inside(lambda _: [str(venv / "bin" / "python"), "-m", "compileall", "-q",
                                   "-j", "0", "-s", str(site), "-p", str(final_site), str(site)],
                        uv=uv, venv=venv, work=work, base_prefix=base_prefix,
                        timeout=_INSTALL_TIMEOUT_S)
    with open(log, "a") as fh:
        fh.write(f"$ (in the sandbox) compileall: exit {result.exit_code}\n")


def _run(cmd: list[str], log: Path, src: ResolvedSource, *, cwd: Path | None = None,
         check: bool = True) -> int:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "PYTHONDONTWRITEBYTECODE": "1",
           "VIRTUAL_ENV": ""}
    env.pop("VIRTUAL_ENV")
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                  timeout=_INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _fail(f"install of {src.repo} did not finish within {_INSTALL_TIMEOUT_S} s", log)
    if check and proc.returncode != 0:
        _fail(f"install of {src.repo}@{src.commit[:12]} failed (exit {proc.returncode})", log)
    return proc.returncode


def _fail(summary: str, log: Path) -> NoReturn:
    """Raise with the log's tail, keeping a copy of the log outside the doomed temp dir."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    tail = lines[-_LOG_TAIL:]
    raise EnvBuildError(f"{summary}: {reason_line(_last_step(log))}\n" + "\n".join(tail)
                        + f"\n(full log: {_keep_log(log)})")


def _last_step(log: Path) -> list[str]:
    """The output of the log's last command."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    last = max((i for i, ln in enumerate(lines) if ln.startswith("$ ")), default=-1)
    return lines[last + 1:]


_COMPILER = re.compile(r"\b(fatal error|error):\s", re.I)
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|NotFound)"
                        r"(?::\s.*)?$")
_HINT = re.compile(r"^(hint|help|note|warning)\b", re.I)


def reason_line(step: list[str]) -> str:
    """The line of a failed step's output that says why, not the package manager's advice:
    a compiler's first error, else the last exception a traceback raised, else the first
    error line (with the cause it announces)."""
    clean = [ln.strip(" ×╰─▶│|").strip() for ln in step]
    clean = [ln for ln in clean if ln and not _HINT.match(ln)]
    for ln in clean:
        if _COMPILER.search(ln) and re.match(r"^\S+\.(c|cc|cpp|h|pyx|f90|rs):\d+", ln):
            return ln
    exceptions = [ln for ln in clean if _EXCEPTION.match(ln)]
    if exceptions:
        return exceptions[-1]
    for i, ln in enumerate(clean):
        if re.search(r"\berror\b|No solution|not found|failed", ln, re.I):
            nxt = clean[i + 1] if i + 1 < len(clean) else ""
            return f"{ln}: {nxt}" if nxt and (ln.endswith(":") or nxt.startswith("cause:")) \
                else ln
    return clean[-1] if clean else "(the log is empty)"


def _keep_log(log: Path) -> Path:
    kept = log.parent.parent.parent / "logs" / f"{log.parent.name.lstrip('.')}.build.log"
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, kept)
    return kept
