"""Run pytest inside a sandbox and judge the result (see :mod:`swemill.suite.verdict`).

Running and judging are apart: :func:`run_tests` executes and collects the raw report and
exit code, then calls the pure :func:`~swemill.suite.verdict.parse_report`.

A grading run (``isolated=True``) trusts nothing the workspace could have added to the test
process: plugin autoloading is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), so an entry point
declared by a ``*.dist-info`` in the workspace is never loaded, and the plugins the baseline
ran with (the ``pytest11`` entry points of the environment's read-only site-packages, less the
ones the runner always disables) are named with ``-p``; no bytecode is written
(``PYTHONDONTWRITEBYTECODE``) and the reporter turns off pytest's reading of its
rewritten-test cache; and the run is sealed (``SWEMILL_GUARD``, see
:mod:`swemill.suite.verdict`). Its output has one line per failure (``--tb=line``): only the
seal is read from it, and each test's message is the reporter's (the exception line, the same
in every traceback style), while formatting short tracebacks (reading each frame's source and
finding its statement) was a third of a grading run's CPU on the sample; such a run also sets
``SWEMILL_BRIEF``, so the reporter spares pytest cutting each failure's traceback, which it
would lay out and never print (:mod:`swemill.suite.pytest_plugin`). The grading tree
itself holds no bytecode cache (:mod:`swemill.agent.carry`). ``PYTHONPYCACHEPREFIX`` is not
used: it would make every module, the standard library's included, compile from source
(+1.3 s per run on the sample); a warm grading server serves the pristine tree's compiled
code from its own memory instead (:mod:`swemill.validate.inside.pristine_codes`).
"""

from __future__ import annotations

import functools
import json
import shlex
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

from swemill.core.errors import TestRunError
from swemill.repo.cache import write_text_atomic
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox.contract import ExecResult, Sandbox
from swemill.suite.said import first_error
from swemill.suite.verdict import TestRunReport, parse_report

__all__ = ["run_tests", "pytest_argv", "ensure_plugin", "env_plugins", "PLUGIN_MODULE",
           "Execute"]

Execute = Callable[[Sequence[str], Mapping[str, str], float], ExecResult]
"""Runs a test command (argv, environment, timeout) in the sandbox's workspace: by default
``sb.exec``; a grading server runs the same command in a fork of itself."""

PLUGIN_MODULE = "_swemill_report"
_PLUGIN_SRC = Path(__file__).with_name("pytest_plugin.py")
_MAX_FILE_ARGS = 500
_DISABLED = ("randomly", "random_order", "enabler", "checkdocs", "pytest-mypy-plugins")
"""Plugins every run turns off (``-p no:NAME``): ``randomly`` and ``random_order`` change the
order tests run in; ``enabler`` (pytest-enabler) is a second ``addopts``, which every run
replaces (it adds ``--cov``, whose tracer left the coverage map empty, and ``--ruff`` /
``--mypy`` lint items: zipp 3.20.2 and inflect 7.4.0 in the zoo ran their whole suite for
every candidate); ``checkdocs`` adds an item that builds the project's metadata with pip from
the index (9 s and a failure in a sandbox without network, on every run);
``pytest-mypy-plugins`` collects YAML cases that each run mypy in a subprocess, never the
project's code (attrs 24.2.0: 86 cases, about 2 s each, in every baseline run and, as tests
that start processes, in every candidate's run)."""


def ensure_plugin(env: RepoEnv) -> None:
    """Put the current reporter into the env's site-packages (host side; read-only inside)."""
    site = next(env.venv.glob("lib/python*/site-packages"))
    target = site / f"{PLUGIN_MODULE}.py"
    code = _PLUGIN_SRC.read_text()
    if not target.exists() or target.read_text() != code:
        write_text_atomic(target, code)


def env_plugins(env: RepoEnv) -> list[str]:
    """Entry-point names of the ``pytest11`` plugins installed in the env (what autoloading
    gives the baseline), less those every run disables; sorted."""
    names = {ep.name for site in env.site_packages
             for dist in distributions(path=[str(site)])
             for ep in dist.entry_points if ep.group == "pytest11"}
    return sorted(names - set(_DISABLED))


def pytest_argv(env: RepoEnv, workdir: str, paths: Sequence[str] = (),
                plugins: Sequence[str] = (), tb: str = "short") -> list[str]:
    """The pytest command line: the repo's filtered addopts, random order and caches off;
    ``plugins`` are loaded by name (for runs with autoloading off); ``tb``: pytest's
    traceback style in the run's output."""
    return [
        str(env.python), "-m", "pytest", "-p", PLUGIN_MODULE,
        *(arg for name in plugins for arg in ("-p", name)),
        *(arg for name in _DISABLED for arg in ("-p", f"no:{name}")), "-p", "no:cacheprovider",
        "-o", "addopts=", *env.recipe.pytest_args,
        f"--rootdir={workdir}", "--continue-on-collection-errors",
        "-q", f"--tb={tb}", "--color=no", *paths,
    ]


def _file_args(nodeids: Sequence[str], workspace: Path, env: RepoEnv) -> list[str]:
    """The test files of ``nodeids``, in the order a whole-suite run collects them
    (:func:`_collection_key`): pytest runs file arguments in the order given, and a suite
    whose tests depend on order would otherwise run a selection in an order no baseline or
    validation run saw (pyrsistent 0.20.0: its ``vector_test.py`` run before
    ``checked_*_test.py``, as a grading's FAIL_TO_PASS-first list put it, leaves 48 of them
    in RecursionError, and no fix earned reward)."""
    # A file that no longer exists would make pytest refuse the whole run (usage error);
    # its tests simply never report and are judged errors.
    files = [f for f in dict.fromkeys(n.split("::")[0] for n in nodeids)
             if (workspace / f).exists()]
    # Too many to pass: collect everything and let the reporter deselect.
    if len(files) > _MAX_FILE_ARGS:
        return []
    files_first = _pytest_major(env) < 8
    return sorted(files, key=lambda f: _collection_key(f, files_first))


def _collection_key(rel: str, files_first: bool) -> tuple[tuple[int, str], ...]:
    """Where pytest's walk of the tree reaches ``rel``: each directory's entries by name; from
    pytest 8 files and subdirectories among one another, before it a directory's files first,
    then its subdirectories."""
    parts = rel.split("/")
    last = len(parts) - 1
    return tuple(((i != last) if files_first else 0, part) for i, part in enumerate(parts))


def _pytest_major(env: RepoEnv) -> int:
    """The major version of the env's pytest (its installed metadata; 8 if unknown)."""
    return _major_in(env.venv)


@functools.lru_cache(maxsize=64)
def _major_in(venv: Path) -> int:
    sites = [str(site) for site in venv.glob("lib/python*/site-packages")]
    for dist in distributions(name="pytest", path=sites):
        major = dist.version.split(".")[0]
        if major.isdigit():
            return int(major)
    return 8


def run_tests(sb: Sandbox, env: RepoEnv, nodeids: Sequence[str] | None = None, *,
              timeout: float, coverage: bool = False, isolated: bool = False,
              execute: Execute | None = None, brief: bool = False,
              stutter: str | None = None) -> TestRunReport:
    """Run the whole suite (``nodeids`` None) or exactly ``nodeids``, and judge the run.

    An empty ``nodeids`` list runs nothing and returns an empty, trustworthy report.
    ``isolated``: a grading run (see the module docstring). ``execute``: what runs the
    command (default: ``sb.exec`` in the workspace). ``brief`` (always so when
    ``isolated``): one output line per failure (``--tb=line``), for runs whose output nobody
    reads; the report is the same. ``stutter``: ``"STOP_MS:PERIOD_MS"``, the run's processes
    stopped that long every period (the reporter's ``SWEMILL_STUTTER``: a busy machine).
    """
    if nodeids is not None and not nodeids:
        return TestRunReport(results={}, exit_code=0, trustworthy=True)
    ensure_plugin(env)
    token = uuid.uuid4().hex
    rel = f".swemill-run-{token[:12]}"
    inside = f"{sb.workdir}/{rel}"
    env_vars = {**env.run_env(sb.workdir), "HOME": "/tmp", "LANG": "C.UTF-8",
                "SWEMILL_REPORT": f"{inside}/report.jsonl", "SWEMILL_NONCE": token}
    paths: list[str] = []
    if nodeids is not None:
        sb.write_file(f"{rel}/select.txt", "\n".join(nodeids) + "\n")
        env_vars["SWEMILL_SELECT"] = f"{inside}/select.txt"
        paths = _file_args(nodeids, sb.workspace, env)
    else:
        sb.write_file(f"{rel}/.keep", "")
    if coverage:
        env_vars["SWEMILL_COVERAGE"] = f"{inside}/coverage.json"
    if stutter:
        env_vars["SWEMILL_STUTTER"] = stutter
    plugins: list[str] = []
    if isolated:
        plugins = env_plugins(env)
        env_vars.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1",
                        SWEMILL_GUARD="1")
    tb = "line" if isolated or brief else "short"
    if tb == "line":
        env_vars["SWEMILL_BRIEF"] = "1"  # the reporter skips cutting tracebacks never printed
    argv = pytest_argv(env, sb.workdir, paths, plugins, tb=tb)
    try:
        res = (execute(argv, env_vars, timeout) if execute is not None else
               sb.exec(argv, timeout=timeout, env=env_vars, cwd=sb.workdir))
        text = _read(sb, f"{rel}/report.jsonl")
        cov_text = _read(sb, f"{rel}/coverage.json") if coverage else ""
    finally:
        shutil.rmtree(sb.workspace / rel, ignore_errors=True)
    report = parse_report(text, res.exit_code, nonce=token, selected=nodeids,
                          timed_out=res.timed_out, killed_reason=res.killed_reason,
                          wall_s=res.wall_s, sealed=res.stdout if isolated else None)
    if coverage and report.trustworthy:
        data = _coverage(cov_text, token)
        report.coverage = data["files"]
        report.shared_lines = dict(data.get("shared", {}))
        report.spawned = list(data.get("spawned", []))
    if not text and not res.timed_out and res.killed_reason is None:
        tail = (res.stderr or res.stdout).strip().splitlines()[-5:]
        report.problem = f"pytest did not start (exit {res.exit_code}): " + " | ".join(tail)
        report.trustworthy = False
    # what a run that never finished last said on stderr (faulthandler's "Fatal Python
    # error: ...", an uncaught exception): "killed or os._exit" alone hides the cause
    elif report.problem.startswith("pytest never finished") and \
            (said := first_error(res.stderr or "")):
        report.problem += f"; its last words: {said}"
    return report


def _read(sb: Sandbox, rel: str) -> str:
    path = sb.workspace / rel  # the workspace is a host directory for every backend
    return path.read_text(errors="replace") if path.is_file() else ""


def _coverage(text: str, nonce: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise TestRunError("the coverage run left no readable coverage data") from None
    if data.get("n") != nonce:
        raise TestRunError("the coverage data was not written by this run")
    return data  # type: ignore[no-any-return]


def command_line(env: RepoEnv) -> str:
    """The suite's command as a person types it at the repository's root, in an environment
    with the project and its test dependencies installed; test ids go after it.

    It has every flag swemill's own runs use, the repository's (filtered) ``addopts`` given
    explicitly, so a checkout whose configuration lacks them (an older commit, say) runs the
    same tests; not swemill's reporter, which only swemill installs; and ``-rA``, so the
    log names each test's outcome. A task's ``test_cmd`` and the SWE-bench export's."""
    argv = pytest_argv(env, ".")
    at = argv.index(PLUGIN_MODULE)
    del argv[at - 1: at + 1]
    argv[0] = "python"
    return shlex.join([*argv, "-rA"])
