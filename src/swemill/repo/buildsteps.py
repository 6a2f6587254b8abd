"""The steps of one environment build that install things: the project itself (build
requirements outside, the backend's code inside; see :mod:`swemill.repo.install`) and then its
dependencies and test dependencies (:mod:`swemill.repo.testdeps`)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from swemill.repo.buildlog import (
    INSTALL_TIMEOUT_S,
    fail,
    last_step,
    log_inside,
    log_result,
    reason_line,
    run_logged,
)
from swemill.repo.install import (
    build_requires,
    dynamic_build_requires,
    install_project,
    installed_version,
    wheel_only_requirements,
)
from swemill.repo.recipe import ALWAYS, Recipe
from swemill.repo.scm import derive_version, scm_versioned, version_env
from swemill.repo.sdists import SdistBuilds, no_wheel
from swemill.repo.sources import ResolvedSource, source_date
from swemill.repo.testdeps import (
    Skipped,
    extra_requirements,
    install_test_deps,
    requirement_units,
    unconstrained,
    unpin_self,
)
from swemill.sandbox.contract import ExecResult

__all__ = ["ProjectBuild", "dist_name", "install_deps", "noted", "wheels_cmd"]


@dataclass(slots=True)
class ProjectBuild:
    """The project's own install: build requirements outside, the backend's code inside."""

    uv: str
    venv: Path
    work: Path
    base_prefix: Path
    log: Path
    src: ResolvedSource

    def install(self, recipe: Recipe) -> Recipe:
        """Install the project in development mode; returns ``recipe`` with what was derived.

        The newest build requirements may no longer build an older source (a poetry-core that
        writes metadata uv refuses, a setuptools or Cython that dropped what it used): a
        failed install is tried once more with the build requirements as they were on the
        source's date (:func:`~swemill.repo.sources.source_date`), the backend asked again."""
        static = build_requires(self.work)
        noted_recipe, result, requires = self._install(recipe, static, None)
        if result.ok or result.timed_out:
            log_inside(result, self.log, self.src, "install")
            return noted_recipe
        log_inside(result, self.log, self.src, "install", check=False)
        first = last_step(self.log)
        summary = f"install of {self.src.repo}@{self.src.commit[:12]} failed " \
                  f"(exit {result.exit_code}"
        date = _backdate(requires, self.src)
        if date is None:
            fail(summary + ")", self.log, step=first)
        recipe, result, _ = self._install(recipe, static, date)
        what = f"install, build requirements of {date}"
        log_inside(result, self.log, self.src, what, check=False)
        if not result.ok:
            fail(f"{summary}; again with the build requirements of {date})", self.log,
                 step=first)
        return noted(recipe, f"built with the build requirements of {date} (the source's "
                             f"date); with the newest: {reason_line(first)}")

    def _install(self, recipe: Recipe, static: list[str], date: str | None
                 ) -> tuple[Recipe, ExecResult, list[str]]:
        """Build requirements (as of ``date``, when given), then the project; the recipe with
        what was derived, the install's result and every build requirement asked for."""
        back = ["--reinstall", "--exclude-newer", date] if date else []
        run_logged([*wheels_cmd(self.uv, self.venv, static), *back], self.log, self.src)
        recipe, env = self._version(recipe, static)
        extra, asked = dynamic_build_requires(self.venv, self.work, self.base_prefix, self.uv,
                                              INSTALL_TIMEOUT_S, env)
        log_result(asked, self.log, "build requirements of the backend")
        extra = [r for r in extra if _req_key(r) not in {_req_key(s) for s in static}]
        if extra:
            run_logged([*wheels_cmd(self.uv, self.venv, extra), *back], self.log, self.src)
            recipe = noted(recipe, f"build backend asks for {extra}")
            if not env:  # setup_requires=["setuptools_scm"] shows only now
                recipe, env = self._version(recipe, extra)
        return recipe, install_project(self.uv, self.venv, self.work, recipe.extras,
                                       self.base_prefix, INSTALL_TIMEOUT_S, env), static + extra

    def _version(self, recipe: Recipe, requires: list[str]) -> tuple[Recipe, dict[str, str]]:
        """For a project versioned from git: the version, in the variables its backend reads."""
        if not scm_versioned(self.work, requires):
            return recipe, {}
        version, where = derive_version(self.src.path)
        return (noted(recipe, f"version {version} from {where} (the version comes from git, "
                               "and the install sees no .git)"),
                version_env(version, dist_name(self.work)))


def _backdate(requires: list[str], src: ResolvedSource) -> str | None:
    """The source's date (RFC 3339) for resolving its build requirements as they were then;
    None when it is unknown or the requirements are all pinned (nothing would change)."""
    if all("==" in r for r in requires):
        return None
    when = source_date(src.path)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else None


def noted(recipe: Recipe, line: str) -> Recipe:
    return recipe.model_copy(update={"evidence": [*recipe.evidence, line]})


def _req_key(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else req


def dist_name(work: Path) -> str | None:
    try:
        name = tomllib.loads((work / "pyproject.toml").read_text()).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    return name if isinstance(name, str) else None


def wheels_cmd(uv: str, venv: Path, reqs: list[str]) -> list[str]:
    """Installs ``reqs`` from wheels only: unpacking a wheel runs none of its code."""
    return [uv, "pip", "install", "--python", str(venv / "bin" / "python"), "--no-progress",
            "--only-binary", ":all:", *reqs]


def install_deps(uv: str, venv: Path, project: str | None, recipe: Recipe, tmp: Path,
                 log: Path, src: ResolvedSource, older: list[str],
                 sdists: SdistBuilds) -> list[Skipped]:
    """The project's dependencies, pytest and coverage (all required), then the recipe's test
    dependencies (each skipped, with its cause, when it cannot be installed). A release uv
    finds no wheel of is built from its sdist in the sandbox (:mod:`swemill.repo.sdists`)."""
    files = wheel_only_requirements(src.path, recipe.requirement_files, tmp)
    options = tmp / "requirements-options.txt"
    # The project is asked for at the version just installed from the working copy: named
    # bare, uv may swap it for a release from the index when its extras cannot be resolved
    # (zipp 3.20.2: its test extra needs big-O, which has no wheel, so uv installed zipp
    # 3.19.0, without that extra, over the development install; the tests imported it).
    version = installed_version(venv, project) if project else None
    pin = f"=={version}" if version else ""
    optional = [f"{project}[{e}]{pin}" for e in recipe.extras] if project else []
    # An extra that cannot be installed whole is tried requirement by requirement.
    parts = {f"{project}[{e}]{pin}": unpin_self(reqs, project, pin) for e, reqs in
             extra_requirements(venv, project, recipe.extras).items()} if project else {}
    optional += unpin_self(requirement_units(files, options) + recipe.packages + older, project,
                           pin)
    # A declared constraint that cannot be met is tried without it before it is skipped.
    parts.update({unit: [loose] for unit in recipe.packages
                  if (loose := unconstrained(unit)) and unit not in parts})
    required = ([f"{project}{pin}"] if project else []) + list(ALWAYS)

    codes: list[int] = []

    def run(reqs: list[str]) -> tuple[int, str]:
        while True:  # each turn builds one more sdist, or returns
            codes.append(run_logged([*wheels_cmd(uv, venv, reqs), *sdists.find_links(), "-r",
                                     str(options)], log, src, cwd=tmp, check=False))
            if codes[-1] == 0:
                return 0, ""
            step = last_step(log)
            wanted = no_wheel(step)
            why = sdists.build(*wanted) if wanted else reason_line(step)
            if why is not None:
                return codes[-1], why

    def required_failed(_why: str) -> NoReturn:
        fail(f"install of {src.repo}@{src.commit[:12]} failed (exit {codes[-1]})", log)

    return install_test_deps(run, required, optional, required_failed, parts)


