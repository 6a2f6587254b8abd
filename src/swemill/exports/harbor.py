"""Tasks as Harbor task directories: ``task.toml``, ``instruction.md``,
``environment/Dockerfile`` (+ the broken tree), ``tests/test.sh``, ``solution/solve.sh``.

- ``instruction.md`` is what a swemill rollout policy is shown (the statement and the
  FAIL_TO_PASS names, :func:`~swemill.agent.harness.task_messages`).
- ``environment/`` builds the agent's container from the task's environment recipe: the
  interpreter version the environment was built with, the project installed as the recipe
  says (editable, extras, requirement files, packages), and the task's broken-tree snapshot
  unpacked at ``/app``.
- ``tests/test.sh`` restores the test files as validated (``tests/files/``: the files the
  test ids name and every ``conftest.py``), runs exactly FAIL_TO_PASS + PASS_TO_PASS with the
  task's plain-pytest command from the working directory, and writes ``reward.txt``: 1 when
  pytest exits 0 and reports every id PASSED, else 0. It writes to ``/logs/verifier`` (Harbor's
  place) unless ``SWEMILL_REWARD_DIR`` names another, so it also runs by hand.
- ``solution/solve.sh`` applies the golden patch: **the export contains the fix**; it is
  written only when the user asks for this export.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import tomli_w

from swemill.agent.harness import task_messages
from swemill.core.errors import StoreError, ValidationError
from swemill.core.records import Golden, Task
from swemill.repo.cache import cache_root
from swemill.repo.recipe import Recipe
from swemill.store import Store

__all__ = ["HarborExport", "write_harbor_task", "export_harbor", "FIX_WARNING"]

FIX_WARNING = ("this export contains each task's fix (solution/solve.sh applies the golden "
               "patch): keep it away from the agents you evaluate or train")
WORKDIR = "/app"
_PATCH_END = "SWEMILL_GOLDEN_PATCH_END"


@dataclass(slots=True)
class HarborExport:
    tasks: int
    root: Path
    recipes_found: int
    """Tasks whose environment recipe was in the cache (the others get a generic install)."""


def _env_dir(task: Task, cache: Path | None) -> Path | None:
    """The cached environment the task was validated in: ``metadata.env_key`` when the base
    commit had its own, else the head's (``envs/<slug>@<commit12>``)."""
    key = str(task.metadata.get("env_key") or "")
    if not key:
        slug, _, commit = task.env_recipe.removeprefix("envs/").partition("@")
        key = f"{slug}@{commit[:12]}"
    path = cache_root(cache) / "envs" / key
    return path if (path / "recipe.json").is_file() else None


def dockerfile(task: Task, recipe: Recipe | None, python_version: str | None) -> str:
    """The agent's container: interpreter, git, the broken tree at /app, the recipe's install."""
    major_minor = ".".join((python_version or "3.11").split(".")[:2])
    q = shlex.quote
    lines = [f"# swemill task {task.instance_id}: {task.repo}@{task.base_commit[:12]}",
             "# generated from the environment recipe" + (
                 f" ({'; '.join(recipe.evidence)})" if recipe and recipe.evidence else
                 " (not in the cache at export time: a generic install)"),
             f"FROM python:{major_minor}-slim",
             "RUN apt-get update && apt-get install -y --no-install-recommends git patch \\",
             "    && rm -rf /var/lib/apt/lists/*",
             f"WORKDIR {WORKDIR}",
             f"ADD workspace.tar.gz {WORKDIR}/"]
    r = recipe or Recipe(extras=[])
    target = "." + (f"[{','.join(r.extras)}]" if r.extras else "")
    args = ["-e", q(target)] if r.editable else [q(target)]
    args += [f"-r {q(f)}" for f in r.requirement_files]
    args += [q(p) for p in r.all_packages()]
    lines.append("RUN python -m pip install --no-cache-dir " + " ".join(args))
    return "\n".join(lines) + "\n"


def _test_files(task: Task, snapshot: bytes) -> dict[str, bytes]:
    """The files the test ids name, and every conftest.py, from the broken-tree snapshot."""
    wanted = {t.split("::", 1)[0] for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]}
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(snapshot), mode="r:gz") as tar:
        for member in tar.getmembers():
            name = PurePosixPath(member.name)
            if member.isfile() and (member.name in wanted or name.name == "conftest.py"):
                fh = tar.extractfile(member)
                if fh is not None:
                    out[member.name] = fh.read()
    missing = wanted - set(out)
    if missing:
        raise ValidationError(f"task {task.instance_id}: test files not in its snapshot: "
                              f"{sorted(missing)[:3]}")
    return out


def test_script(task: Task) -> str:
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    q = shlex.quote
    body = "\n".join(f"  {q(t)}" for t in ids)
    return f"""#!/usr/bin/env bash
# swemill verifier of {task.instance_id}: restores the test files as validated, runs exactly
# its {len(task.FAIL_TO_PASS)} FAIL_TO_PASS and {len(task.PASS_TO_PASS)} PASS_TO_PASS tests with
# plain pytest from the working directory (the repository root), and writes reward.txt:
# 1 when pytest exits 0 and reports every one of them PASSED, else 0.
set -u
here="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
out="${{SWEMILL_REWARD_DIR:-/logs/verifier}}"
mkdir -p "$out"
cp -R "$here/files/." .
ids=(
{body}
)
{task.test_cmd} -- "${{ids[@]}}" > "$out/pytest.log" 2>&1
status=$?
reward=1
if [ "$status" -ne 0 ]; then
  reward=0
fi
: > "$out/not_passed.txt"
for id in "${{ids[@]}}"; do
  if ! grep -qxF "PASSED $id" "$out/pytest.log"; then
    reward=0
    printf '%s\\n' "$id" >> "$out/not_passed.txt"
  fi
done
echo "$reward" > "$out/reward.txt"
missed=$(wc -l < "$out/not_passed.txt")
echo "reward $reward (pytest exit $status; $missed of ${{#ids[@]}} tests not passed)"
"""


def solve_script(task: Task, golden: Golden) -> str:
    patch = golden.golden_patch if golden.golden_patch.endswith("\n") else \
        golden.golden_patch + "\n"
    if _PATCH_END in patch:
        raise ValidationError(f"task {task.instance_id}: the golden patch contains the "
                              f"here-document delimiter {_PATCH_END}")
    return f"""#!/usr/bin/env bash
# WARNING: the fix of swemill task {task.instance_id} (its golden patch). Never show it to
# an agent being evaluated or trained; Harbor runs it only for its oracle agent.
set -euo pipefail
if command -v git >/dev/null 2>&1; then
  git apply --whitespace=nowarn - <<'{_PATCH_END}'
{patch}{_PATCH_END}
else
  patch -p1 --forward <<'{_PATCH_END}'
{patch}{_PATCH_END}
fi
"""


def task_toml(task: Task) -> str:
    doc = {
        "version": "1.0",
        "metadata": {"author_name": "swemill", "category": "software-engineering",
                     "tags": ["swemill", "python", task.strategy],
                     "swemill": {"instance_id": task.instance_id, "repo": task.repo,
                                 "base_commit": task.base_commit, "strategy": task.strategy,
                                 "license_tier": task.license_tier,
                                 "n_fail_to_pass": len(task.FAIL_TO_PASS),
                                 "n_pass_to_pass": len(task.PASS_TO_PASS)}},
        "verifier": {"timeout_sec": 900.0},
        "agent": {"timeout_sec": 1800.0},
        "environment": {"build_timeout_sec": 1200.0, "cpus": 1, "memory_mb": 4096,
                        "storage_mb": 10240},
    }
    return tomli_w.dumps(doc)


def _write(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    path.chmod(mode)


def write_harbor_task(root: Path, task: Task, golden: Golden, snapshot: bytes,
                      cache: Path | None = None) -> bool:
    """One task's directory under ``root``; True when its recipe came from the cache."""
    where = _env_dir(task, cache)
    recipe = python = None
    if where is not None:
        recipe = Recipe.model_validate_json((where / "recipe.json").read_text())
        python = str(json.loads((where / "env.json").read_text()).get("python_version") or "")
    out = root / task.instance_id
    _write(out / "task.toml", task_toml(task))
    _write(out / "instruction.md", task_messages(task, WORKDIR)[1].text.strip() + "\n")
    _write(out / "environment" / "Dockerfile", dockerfile(task, recipe, python or None))
    _write(out / "environment" / "workspace.tar.gz", snapshot)
    _write(out / "tests" / "test.sh", test_script(task), 0o755)
    for rel, data in _test_files(task, snapshot).items():
        _write(out / "tests" / "files" / rel, data)
    _write(out / "solution" / "solve.sh", solve_script(task, golden), 0o755)
    return where is not None


def export_harbor(store: Store, run_id: str, root: Path,
                  cache: Path | None = None) -> HarborExport:
    """Every task of ``run_id`` as a Harbor task directory under ``root``."""
    tasks = sorted(store.read_records("tasks", run_id, Task), key=lambda t: t.instance_id)
    if not tasks:
        raise StoreError(f"run {run_id} in {store.url} has no tasks")
    goldens = {g.instance_id: g for g in store.read_records("golden", run_id, Golden)}
    found = 0
    for task in tasks:
        golden = goldens.get(task.instance_id)
        if golden is None:
            raise ValidationError(f"no golden row for task {task.instance_id}")
        found += write_harbor_task(root, task, golden, store.get_bytes(task.snapshot), cache)
    return HarborExport(tasks=len(tasks), root=root, recipes_found=found)
