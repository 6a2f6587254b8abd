"""Build (or reuse) the test environment of one repository at one commit.

The environment is a uv venv at ``<cache>/envs/<slug>@<commit12>/venv`` with the project
installed in development mode *at the fixed path* :data:`~swemill.sandbox.contract.WORKSPACE`:
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
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from swemill.core.errors import EnvBuildError
from swemill.repo import venvseal
from swemill.repo.buildlog import INSTALL_TIMEOUT_S, run_logged
from swemill.repo.buildsteps import ProjectBuild, dist_name, install_deps, noted
from swemill.repo.cache import atomic_dir, cache_root, entry_lock, slugify, write_text_atomic
from swemill.repo.generated import collect_generated, copy_tracked, place_generated
from swemill.repo.install import (
    project_requirement,
    run_inside,
)
from swemill.repo.past_deps import older_requirements
from swemill.repo.pyselect import pick_python
from swemill.repo.recipe import Recipe, has_tests, resolve_recipe
from swemill.repo.relocate import relocate_editable
from swemill.repo.sdists import SdistBuilds
from swemill.repo.sources import ResolvedSource
from swemill.repo.testdeps import Skipped
from swemill.repo.uvbin import find_uv
from swemill.sandbox.contract import WORKSPACE, Bind

__all__ = ["RepoEnv", "build_env", "env_key", "load_env"]



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
    def site_packages(self) -> list[Path]:
        """The venv's ``site-packages`` folder(s)."""
        return sorted(self.venv.glob("lib/python*/site-packages"))

    @property
    def baseline_path(self) -> Path:
        return self.path / "baseline.json"

    def lay_generated(self, tree: Path) -> None:
        """Lay what the install wrote into its tree (compiled extensions, ``_version.py``) over
        ``tree``, an unpacked task snapshot, which holds the repository's own files only."""
        place_generated(self.path / "generated", tree, self.generated)

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
              rebuild: bool = False, key: str | None = None) -> RepoEnv:
    """Return the environment of ``src``, building it unless a matching one is cached.

    A given ``recipe`` (or one the repository commits) overrides detection
    (:func:`~swemill.repo.recipe.resolve_recipe`); a cached env built from another recipe is
    rebuilt. ``key`` names the cache entry (default :func:`env_key`, the repository at its
    commit; an older commit's environment is named by what it declares, see
    :mod:`swemill.repo.commitenv`).
    """
    if not has_tests(src.path):
        raise EnvBuildError(f"no tests found in {src.repo} ({src.path}): nothing to run")
    recipe = resolve_recipe(src.path, recipe)
    root = cache_root(cache)
    key = key or env_key(src)
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
    run_logged([uv, "venv", "--relocatable", "--no-python-downloads", "--python", interp,
                str(tmp / "venv")], log, src)
    work = tmp / "build-src"  # the install's own copy: the cached working copy stays clean
    tracked = copy_tracked(src.path, work)
    venv = tmp / "venv"
    project, generated = None, []
    if recipe.editable and _is_project(work):
        build = ProjectBuild(uv, venv, work, base_prefix, log, src)
        recipe = build.install(recipe)
        project = project_requirement(venv, [WORKSPACE, str(work)], [])
        generated = collect_generated(work, tracked, tmp / "generated")
    older = older_requirements(src.path, dist_name(src.path)) if recipe.older_commits else []
    if older:
        recipe = noted(recipe, f"older commits declare what the head does not: {older}")
    sdists = SdistBuilds(uv, venv / "bin" / "python", base_prefix, tmp / "sdists", log, src)
    skipped = install_deps(uv, venv, project, recipe, tmp, log, src, older, sdists)
    if sdists.built:
        recipe = noted(recipe, f"built from sdists in the sandbox: {', '.join(sdists.built)}")
    venvseal.release(venv)  # the host's uv is done with the venv: its start-up files back
    roots = relocate_editable(venv, work, WORKSPACE) if project else []
    if not roots:
        roots = _fallback_pth(venv, work)
    _compile(uv, venv, final / "venv", work, base_prefix, log, src)
    shutil.rmtree(work)
    shutil.rmtree(tmp / "sdists", ignore_errors=True)
    write_text_atomic(tmp / "recipe.json", recipe.model_dump_json(indent=2) + "\n")
    meta = {"key": final.name, "repo": src.repo, "commit": src.commit, "spec": src.spec,
            "requested_recipe": _recipe_hash(requested),
            "python_version": version, "base_prefix": str(base_prefix), "import_roots": roots,
            "generated": generated, "skipped": [s.to_json() for s in skipped]}
    write_text_atomic(tmp / "env.json", json.dumps(meta, indent=2) + "\n")


def _recipe_hash(recipe: Recipe) -> str:
    """Names the recipe asked for (detected or given), before the build annotates it."""
    return hashlib.sha256(recipe.model_dump_json().encode()).hexdigest()


def _requested(path: Path) -> str | None:
    try:
        return str(json.loads((path / "env.json").read_text()).get("requested_recipe"))
    except (FileNotFoundError, ValueError):
        return None


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
                        timeout=INSTALL_TIMEOUT_S, hold_startup=False)
    with open(log, "a") as fh:
        fh.write(f"$ (in the sandbox) compileall: exit {result.exit_code}\n")


