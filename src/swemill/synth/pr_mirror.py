"""The ``pr-mirror`` strategy: past fixes from the repository's own git history.

For a commit C that changes the project's non-test source and comes with test changes (or
whose changed functions the coverage map shows are tested), the task's base is C's tree and
the broken state is C's tree with its non-test changes reverted, test changes kept. The bug
patch is therefore ``git diff C C^ -- <non-test files>``; the golden patch is its reverse.
Build and CI configuration stay as in C so the environment built for C still fits.

Only local git is used (no network). A shallow clone or a single-commit history has nothing
to mirror: the strategy yields nothing and records why in ``report.reason``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from swemill.core.errors import SynthesisError
from swemill.core.records import Candidate, ChangedSymbol
from swemill.synth.patches import parse_patch
from swemill.synth.strategy import RepoView, SynthReport, candidate_id, git, is_test_path
from swemill.synth.symbols import changed_lines, symbols_at, test_ids_at

__all__ = ["PrMirrorStrategy"]

# Reverting these would change how the environment is built, not the behaviour under test.
_BUILD_FILES = {
    "pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "noxfile.py", "MANIFEST.in",
    "Makefile", "requirements.txt", "poetry.lock", "uv.lock", "Pipfile", "Pipfile.lock",
}


def _is_build_file(path: str) -> bool:
    p = PurePosixPath(path)
    if p.parts[0].startswith(".") or p.name in _BUILD_FILES:
        return True
    return p.name.startswith("requirements") and p.suffix in (".txt", ".in")


@dataclass(slots=True)
class _Commit:
    sha: str
    parent: str
    tests: list[str]
    source: list[str]
    revert: list[str]
    """Every non-test, non-build file the commit changed: what the bug patch undoes."""


class PrMirrorStrategy:
    """Mirror past source+test commits as bugs; see the module docstring."""

    name = "pr-mirror"

    def __init__(
        self, max_commits: int = 300, max_source_files: int = 6, max_patch_lines: int = 400
    ) -> None:
        self.max_commits = max_commits
        self.max_source_files = max_source_files
        self.max_patch_lines = max_patch_lines
        self.report = SynthReport(self.name)

    def candidates(self, repo: RepoView) -> Iterator[Candidate]:
        self.report = SynthReport(self.name)
        head = self._history_head(repo)
        if head is None:
            return
        for commit in self._commits(repo, head):
            if repo.max_candidates is not None and self.report.yielded >= repo.max_candidates:
                return
            cand = self._candidate(repo, commit)
            if cand is not None:
                self.report.yielded += 1
                yield cand
        if not self.report.yielded:
            self.report.nothing("no commit changes source together with its tests")

    def barren(self, repo: RepoView) -> str | None:
        """Why this strategy can yield nothing on ``repo``, known before making any candidate
        (None: it may yield); the validator gives such a strategy's share to the others."""
        report, self.report = self.report, SynthReport(self.name)
        try:
            return None if self._history_head(repo) is not None else self.report.reason
        finally:
            self.report = report

    def _history_head(self, repo: RepoView) -> str | None:
        """The commit to walk back from, or None (with the reason recorded) if there is none."""
        try:
            top = git(repo.root, "rev-parse", "--show-toplevel").strip()
        except SynthesisError:
            top = ""
        if not top or Path(top).resolve() != repo.root.resolve():
            # A folder inside someone else's repository has no history of its own either.
            self.report.nothing("not a git repository: no history to mirror")
            return None
        if git(repo.root, "rev-parse", "--is-shallow-repository").strip() == "true":
            self.report.nothing("shallow clone: history is cut off (clone without --depth)")
            return None
        head = git(repo.root, "rev-parse", "--verify", "-q", f"{repo.commit}^{{commit}}",
                   check=False).strip()
        head = head or git(repo.root, "rev-parse", "HEAD").strip()
        if int(git(repo.root, "rev-list", "--count", head).strip() or 0) < 2:
            self.report.nothing("single-commit history: no past change to mirror")
            return None
        return head

    def _commits(self, repo: RepoView, head: str) -> Iterator[_Commit]:
        out = git(repo.root, "rev-list", "--no-merges", "--parents",
                  f"--max-count={self.max_commits}", head)
        for line in out.splitlines():
            shas = line.split()
            if len(shas) < 2:
                continue  # the root commit has no parent to revert to
            sha, parent = shas[0], shas[1]
            names = git(repo.root, "diff", "--no-renames", "--name-only", "-z", parent, sha)
            paths = [p for p in names.split("\0") if p]
            tests = [p for p in paths if is_test_path(p)]
            revert = [p for p in paths if not is_test_path(p) and not _is_build_file(p)]
            source = [p for p in revert if p.endswith(".py")]
            yield _Commit(sha, parent, tests, source, revert)

    def _candidate(self, repo: RepoView, c: _Commit) -> Candidate | None:
        if not c.source:
            self.report.skip("no_source_change")
            return None
        if len(c.source) > self.max_source_files:
            self.report.skip("too_many_files", c.sha, keep=True)
            return None
        bug = self._diff(repo, c.sha, c.parent, c.revert)
        if "Binary files" in bug or "GIT binary patch" in bug or not _utf8(bug):
            self.report.skip("binary_change", c.sha, keep=True)
            return None
        if bug.count("\n") > self.max_patch_lines:
            self.report.skip("patch_too_large", c.sha, keep=True)
            return None
        golden = self._diff(repo, c.parent, c.sha, c.revert)
        changed, hint = self._symbols(repo, c, golden)
        if not hint:
            self.report.skip("not_exercised_by_tests", c.sha, keep=True)
            return None
        return Candidate(
            candidate_id=candidate_id(self.name, c.sha, bug),
            repo=repo.repo,
            strategy="pr-mirror",
            bug_patch=bug,
            golden_patch=golden,
            changed=changed,
            scope="multi" if len(c.source) > 1 else "module",
            fail_to_pass_hint=hint,
            metadata={"base_commit": c.sha, "parent_commit": c.parent},
        )

    @staticmethod
    def _diff(repo: RepoView, old: str, new: str, paths: list[str]) -> str:
        # ":(literal)" so a file named with glob characters is only ever itself.
        specs = [f":(literal){p}" for p in paths]
        return git(repo.root, "diff", "--no-color", "--no-ext-diff", "--no-renames",
                   "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/", old, new, "--", *specs)

    def _symbols(
        self, repo: RepoView, c: _Commit, golden: str
    ) -> tuple[list[ChangedSymbol], list[str]]:
        """The changed functions at C, and the tests that should catch their revert."""
        changed: list[ChangedSymbol] = []
        for fp in parse_patch(golden):
            if fp.path not in c.source:
                continue
            text = _show(repo, c.sha, fp.path) if fp.new_path else ""
            quals = symbols_at(text, changed_lines(fp)) if text else ["<module>"]
            changed += [ChangedSymbol(file=fp.path, qualname=q) for q in quals]
        if c.tests:
            return changed, self._test_hints(repo, c)
        cov = repo.baseline.coverage if repo.baseline else {}
        tested = {t for s in changed for t in cov.get(f"{s.file}::{s.qualname}", [])}
        return changed, sorted(tested)

    def _test_hints(self, repo: RepoView, c: _Commit) -> list[str]:
        tdiff = self._diff(repo, c.parent, c.sha, c.tests)
        hints: list[str] = []
        for fp in parse_patch(tdiff):
            if fp.new_path is None or not fp.path.endswith(".py"):
                continue
            text = _show(repo, c.sha, fp.path)
            lines = None if fp.old_path is None else changed_lines(fp)
            hints += test_ids_at(fp.path, text, lines)
        # No test function pinned (say, only test data changed): pytest takes a file as an id.
        return sorted(set(hints)) or sorted(c.tests)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _show(repo: RepoView, sha: str, path: str) -> str:
    return git(repo.root, "show", f"{sha}:{path}", check=False)
