"""The ``procedural`` strategy: small libcst edits to functions the tests execute.

Targets are the functions (and classes) of the project's non-test modules. With a coverage
map, only those that some passing baseline test executes are aimed at, so most candidates can
make a test fail. The order is fixed by the seed and interleaved round-robin over targets and,
within a target, over mutator kinds, so a capped run still covers many functions and kinds.
Mutants that do not compile, that equal the original modulo formatting (same ``ast.dump``),
or that repeat an earlier mutant of the same file are skipped and counted. Each candidate
carries up to two other mutants of its target as near misses (``metadata["near_miss"]``),
which the validator runs against an accepted task's lists.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import libcst as cst

from swemill.core.errors import SynthesisError
from swemill.core.records import Candidate, ChangedSymbol
from swemill.synth.mutators import MUTATORS, mutator
from swemill.synth.mutators.classes import RemoveMethod
from swemill.synth.patches import file_diff
from swemill.synth.sourcefile import SourceFile
from swemill.synth.strategy import (
    RepoView,
    SynthReport,
    candidate_id,
    python_sources,
    tests_by_symbol,
)

__all__ = ["ProceduralStrategy", "Target", "find_targets"]


@dataclass(slots=True)
class Target:
    """A function or class to mutate, with the tests that execute it (may be empty)."""

    file: str
    qualname: str
    node: cst.FunctionDef | cst.ClassDef
    stmt: int = 0
    """Index of the module-level statement that holds the target."""
    occurrence: int = 0
    """Counts repeated definitions of one name (property setters, conditional defs)."""
    tests: list[str] = field(default_factory=list)

    @property
    def level(self) -> str:
        return "class" if isinstance(self.node, cst.ClassDef) else "function"


class _TargetFinder(cst.CSTVisitor):
    """Module- and class-level definitions; a function's nested defs belong to its body."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file
        self.stmt = 0
        self.stack: list[str] = []
        self.found: list[Target] = []
        self.seen: dict[str, int] = {}

    def _add(self, qualname: str, node: cst.FunctionDef | cst.ClassDef) -> None:
        key = f"{type(node).__name__}:{qualname}"
        occurrence = self.seen.get(key, 0)
        self.seen[key] = occurrence + 1
        self.found.append(Target(self.file, qualname, node, self.stmt, occurrence))

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.stack.append(node.name.value)
        self._add(".".join(self.stack), node)
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._add(".".join([*self.stack, node.name.value]), node)
        return False


def find_targets(file: str, module: cst.Module) -> list[Target]:
    """Every function, method and class of ``module``, in source order."""
    finder = _TargetFinder(file)
    for index, stmt in enumerate(module.body):
        finder.stmt = index
        stmt.visit(finder)
    return finder.found


def _class_tests(qual: str, symbols: dict[str, list[str]]) -> list[str]:
    prefix = qual + "."
    tests = {t for q, ts in symbols.items() if q == qual or q.startswith(prefix) for t in ts}
    return sorted(tests)


class ProceduralStrategy:
    """libcst mutators aimed at tested functions; see the module docstring."""

    name = "procedural"

    def __init__(self, kinds: Iterable[str] | None = None, max_per_target: int = 8) -> None:
        self.kinds = [mutator(k).kind for k in (kinds or MUTATORS)]
        self.max_per_target = max_per_target
        self.report = SynthReport(self.name)

    def candidates(self, repo: RepoView) -> Iterator[Candidate]:
        self.report = SynthReport(self.name)
        parsed, targets = self._aim(repo)
        if not targets:
            self.report.nothing(
                "no python source" if not parsed else "no function that a passing test executes"
            )
            return
        streams = deque(self._mutants(repo, parsed[t.file], t) for t in targets)
        limit = repo.max_candidates
        while streams and (limit is None or self.report.yielded < limit):
            stream = streams.popleft()
            cand = next(stream, None)
            if cand is not None:
                self.report.yielded += 1
                yield cand
                streams.append(stream)

    def _parse(self, repo: RepoView, rel: str) -> SourceFile | None:
        try:
            return SourceFile.parse(repo.root, rel)
        except SynthesisError as exc:
            self.report.skip("unparseable_source", rel, str(exc)[:300], keep=True)
            return None

    def _aim(self, repo: RepoView) -> tuple[dict[str, SourceFile], list[Target]]:
        tested = tests_by_symbol(repo)
        parsed: dict[str, SourceFile] = {}
        targets: list[Target] = []
        for rel in python_sources(repo.root):
            if tested is not None and rel not in tested:
                continue  # nothing in this file is executed by a passing test
            sf = self._parse(repo, rel)
            if sf is None:
                continue
            parsed[rel] = sf
            for t in find_targets(rel, sf.module):
                if tested is not None:
                    symbols = tested[rel]
                    t.tests = (
                        _class_tests(t.qualname, symbols)
                        if t.level == "class"
                        else symbols.get(t.qualname, [])
                    )
                    if not t.tests:
                        self.report.skip("untested_target")
                        continue
                targets.append(t)
        rng = random.Random(f"procedural:{repo.seed}")
        rng.shuffle(targets)
        # Tested functions before classes: body edits validate on a few selected tests.
        targets.sort(key=lambda t: t.level == "class")
        return parsed, targets

    def _sites(self, target: Target, rng: random.Random) -> Iterator[tuple[str, int]]:
        """(kind, site) pairs, one kind after another, each kind's sites in seeded order."""
        kinds = [k for k in self.kinds if MUTATORS[k].level == target.level]
        rng.shuffle(kinds)
        queues = []
        for kind in kinds:
            node = target.node if target.level == "class" else target.node.body
            sites = list(range(MUTATORS[kind].count(node)))
            rng.shuffle(sites)
            if sites:
                queues.append(deque((kind, s) for s in sites))
        while queues:
            q = queues.pop(0)
            yield q.popleft()
            if q:
                queues.append(q)

    NEAR_MISSES = 2
    """Other mutants of the same target each candidate carries (``metadata["near_miss"]``):
    the validator runs them against an accepted task's lists (do its tests catch them?)."""

    def _mutants(self, repo: RepoView, sf: SourceFile, target: Target) -> Iterator[Candidate]:
        made: list[tuple[str, int, str]] = []
        stream = self._texts(repo, sf, target)
        for i in range(self.max_per_target):
            while len(made) < i + 1 + self.NEAR_MISSES:  # this one and its near misses
                nxt = next(stream, None)
                if nxt is None:
                    break
                made.append(nxt)
            if i >= len(made):
                return
            kind, site, text = made[i]
            cand = self._candidate(repo, sf, target, kind, site, text)
            others = [t for _, _, t in made[i + 1:] + made[:i][::-1] if t != text]
            cand.metadata["near_miss"] = [file_diff(sf.file, sf.source, t)
                                          for t in others[: self.NEAR_MISSES]]
            yield cand

    def _texts(self, repo: RepoView, sf: SourceFile, target: Target
               ) -> Iterator[tuple[str, int, str]]:
        """(kind, site, mutated file text) of each acceptable mutant of ``target``."""
        seed = f"{repo.seed}:{target.file}:{target.qualname}:{target.occurrence}"
        for kind, site in self._sites(target, random.Random(seed)):
            m = MUTATORS[kind]
            rng = random.Random(f"{seed}:{kind}:{site}")
            node = target.node
            if isinstance(node, cst.ClassDef):
                new: cst.CSTNode = m.apply(node, site, rng)
            else:
                new = node.with_changes(body=m.apply(node.body, site, rng))
            text, region = sf.mutate(target.stmt, node, new)
            reason = sf.reject(target.stmt, region)
            if reason:
                self.report.skip(reason)
                continue
            yield kind, site, text

    def _candidate(
        self, repo: RepoView, sf: SourceFile, target: Target, kind: str, site: int, new_code: str
    ) -> Candidate:
        qualname = target.qualname
        if kind == "remove_method":
            assert isinstance(target.node, cst.ClassDef)
            method = RemoveMethod().removed(target.node, site)
            qualname = f"{qualname}.{method}"
        bug = file_diff(sf.file, sf.source, new_code)
        return Candidate(
            candidate_id=candidate_id(self.name, sf.file, qualname, kind, bug),
            repo=repo.repo,
            strategy="procedural",
            bug_patch=bug,
            golden_patch=file_diff(sf.file, new_code, sf.source),
            changed=[ChangedSymbol(file=sf.file, qualname=qualname)],
            scope="body" if target.level == "function" else "module",
            fail_to_pass_hint=list(target.tests),
            metadata={"base_commit": repo.commit, "mutator": kind, "site": site},
        )
