"""Accepted candidates -> policy-visible Task rows + snapshots, and oracle-only Golden rows.

The broken tree is rebuilt from the source's git objects (``git archive`` of the base commit,
then the base patch and the bug patch), scrubbed so nothing in it reveals the fix, packed
deterministically and stored at :func:`~swemill.store.layout.snapshot_key`. Task rows carry
no patch and no changed-symbol list; the bug patch reveals the fix as surely as the golden
patch does, so both live only in ``golden/``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from swemill.core.errors import ValidationError
from swemill.core.git import run_git
from swemill.core.records import Golden, LicenseTier, Task
from swemill.sandbox.leftovers import scratch_dir
from swemill.store import Store
from swemill.store.layout import snapshot_key
from swemill.synth.leaks import LeakCheck, unchanged_text
from swemill.synth.patches import parse_patch, reverse_patch
from swemill.synth.problem import FailingTest, Statement, write_problem_statement
from swemill.validate.check import Checked
from swemill.validate.difficulty import proxies_of
from swemill.validate.guard import GoldenGuard
from swemill.validate.scrub import scrub_tree
from swemill.validate.snapshot import digest, pack_tree

__all__ = ["Writer", "instance_id_of", "broken_tree", "emit_task", "statement_for"]

_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")



class Writer(Protocol):
    """Writes a statement (the template's or a model's, :mod:`swemill.synth.problem`)."""

    def __call__(self, failures: Sequence[FailingTest], repo: str, where: str = ""
                 ) -> Statement: ...


def instance_id_of(repo: str, candidate_id: str) -> str:
    """SWE-smith-like ids: ``owner__name.<strategy>-<hash>``."""
    return f"{_SLUG.sub('__', repo.strip('/'))}.{candidate_id}"


def broken_tree(source: Path, commit: str, patches: list[str], dest: Path,
                generated: Sequence[str] = ()) -> Path:
    """Materialise ``commit`` + ``patches`` at ``dest`` (no ``.git``), from git objects, plus
    the files the environment's build generated (``RepoEnv.generated``, placed untracked in
    the working copy ``source``) where the tree has none: the tests import them."""
    dest.mkdir(parents=True)
    archive = run_git(["archive", "--format=tar", commit], source, binary=True)
    if archive.returncode != 0:
        raise ValidationError(f"cannot read commit {commit[:12]} of {source}: "
                              f"{archive.stderr.decode(errors='replace').strip()[:200]}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    for patch in patches:
        if patch.strip():
            proc = run_git(["apply", "--whitespace=nowarn", "-"], dest, input=patch)
            if proc.returncode != 0:
                raise ValidationError(f"a validated patch no longer applies to {commit[:12]}: "
                                      f"{proc.stderr.strip()[:200]}")
    for rel in generated:
        made, target = source / rel, dest / rel
        if _inside(made, source) and _inside(target.parent, dest) and made.is_file() \
                and target.parent.is_dir() and not os.path.lexists(target):
            shutil.copyfile(made, target)
    return dest


def _inside(path: Path, root: Path) -> bool:
    """``path`` (links resolved) is in ``root``: a link in a repository's tree never leads a
    copy to or from elsewhere on the host."""
    return path.resolve().is_relative_to(root.resolve()) and not path.is_symlink()


def emit_task(store: Store, checked: Checked, *, run_id: str, source: Path, spec: str,
              repo: str, env_recipe: str, test_cmd: str,
              license_tier: LicenseTier, writer: Writer,
              generated: Sequence[str] = ()) -> tuple[Task, Golden]:
    """Snapshot the scrubbed broken tree and build the two rows of one accepted candidate.
    ``env_recipe`` names the environment it was validated in (``envs/<repo>@<commit>`` for
    the head's, ``envs/<repo>@deps-<hash>`` for its base commit's own); ``checked.env_key``
    goes into the row's metadata as ``env_key``."""
    cand, verdict = checked.candidate, checked.verdict
    iid = instance_id_of(cand.repo or repo, cand.candidate_id)
    tmp = scratch_dir("snap")
    try:
        tree = broken_tree(source, checked.base_commit, [checked.base_patch, cand.bug_patch],
                           tmp / "tree", generated)
        kept = _unchanged(tree, cand.bug_patch)
        scrub_tree(tree)
        data = pack_tree(tree)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    key = snapshot_key(run_id, iid)
    store.put_bytes(key, data)
    failures = [FailingTest(t, checked.messages.get(t, "")) for t in verdict.fail_to_pass]
    golden = Golden(instance_id=iid, bug_patch=cand.bug_patch,
                    golden_patch=cand.golden_patch or reverse_patch(cand.bug_patch))
    where = cand.changed[0].qualname if cand.changed else ""
    check = LeakCheck.of(golden.bug_patch, golden.golden_patch,
                         [kept, *(f"{f.nodeid}\n{f.message}" for f in failures)])
    written = statement_for(failures, cand.repo or repo, where, writer, check,
                            GoldenGuard.of(golden), cand.problem_statement)
    proxies = proxies_of(cand.bug_patch, cand.strategy, verdict.fail_to_pass, checked.messages,
                         LeakCheck.of(golden.bug_patch, golden.golden_patch,
                                      [kept, *verdict.fail_to_pass]))
    task = Task(
        instance_id=iid, repo=cand.repo or repo, base_commit=checked.base_commit,
        problem_statement=written.text, FAIL_TO_PASS=verdict.fail_to_pass,
        PASS_TO_PASS=verdict.pass_to_pass, test_cmd=test_cmd, strategy=cand.strategy,
        license_tier=license_tier, env_recipe=env_recipe, snapshot=key,
        metadata={"source": spec, "snapshot_sha256": digest(data), "scope": cand.scope,
                  "statement": "fallback" if written.fallback else "written",
                  "statement_by": written.by,
                  **({"statement_fallback": written.fallback} if written.fallback else {}),
                  "difficulty": proxies,
                  **({"env_key": checked.env_key} if checked.env_key else {}),
                  "selected_tests": checked.selected, "parents": list(cand.parents),
                  **({"provenance": cand.metadata["provenance"]}
                     if "provenance" in cand.metadata else {})},
        flake_rate=verdict.flake_rate, n_fail_to_pass=len(verdict.fail_to_pass),
        n_pass_to_pass=len(verdict.pass_to_pass),
        near_miss_tried=checked.near_miss[0] if checked.near_miss else 0,
        near_miss_caught=(checked.near_miss[1] == checked.near_miss[0]
                          if checked.near_miss else None),
    )
    return task, golden


def _unchanged(tree: Path, bug_patch: str) -> str:
    """The broken tree's edited files without their changed lines: names the policy reads."""
    texts = []
    for fp in parse_patch(bug_patch):
        path = tree / fp.path
        if _inside(path, tree) and path.is_file():
            texts.append(unchanged_text(path.read_text(errors="replace"), bug_patch))
    return "\n".join(texts)


def statement_for(failures: Sequence[FailingTest], repo: str, where: str, writer: Writer,
                  check: LeakCheck, guard: GoldenGuard, given: str | None = None) -> Statement:
    """The statement: the writer's (or the candidate's own), or the template's where that
    leaked (:class:`~swemill.synth.leaks.LeakCheck`, or golden code a failure message
    quoted: ``fallback="leak"``) or where the writer's model could not write it (its own
    reason, :data:`~swemill.synth.problem.FALLBACK_REASONS`). The template itself falls back
    to the failing test names alone when its evidence leaks."""
    first = Statement(given, by="candidate") if given else writer(failures, repo, where)
    if check.ok(first.text) and not guard.leaks(first.text):
        return first
    reason = first.fallback or "leak"
    for facts in (failures, [FailingTest(f.nodeid) for f in failures]):
        text = write_problem_statement(facts, repo, where=where)
        if check.ok(text) and not guard.leaks(text):
            return Statement(text, fallback=reason)
    return Statement(write_problem_statement([], repo), fallback=reason)
