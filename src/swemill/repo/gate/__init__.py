"""The gate: a source's license tier and whether it is a benchmark's repository.

Nothing is built from a source before it passes here. :func:`gate_directory` returns a
:class:`~swemill.core.records.GateVerdict`; :func:`ensure_allowed` turns a refusal into
:class:`~swemill.core.errors.GateRefused` for callers that must stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from swemill.core.errors import GateRefused, SourceError
from swemill.core.records import GateVerdict
from swemill.repo.gate.decontam import benchmark_repos, matches, normalize_package, normalize_repo
from swemill.repo.gate.license import license_of
from swemill.repo.gate.spdx import DEFAULT_COPYLEFT

__all__ = [
    "GatePolicy",
    "gate_directory",
    "ensure_allowed",
    "license_of",
    "benchmark_repos",
    "normalize_repo",
    "DEFAULT_COPYLEFT",
]

CopyleftPolicy = Literal["trainable-only", "refuse"]


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """What the gate lets through."""

    allow_contaminated: bool = False
    """Let a benchmark's repository through anyway (the verdict still says it is one)."""
    copyleft_policy: CopyleftPolicy = "trainable-only"
    """``trainable-only``: copyleft sources pass with that tier; ``refuse``: they are refused."""
    refuse_unknown: bool = False
    """Refuse sources whose license could not be established (they pass as ``unknown`` else)."""
    copyleft: frozenset[str] = DEFAULT_COPYLEFT
    """License families treated as copyleft (``GPL`` covers GPL-2.0-only, GPL-3.0-or-later...)."""


def _decide(verdict: GateVerdict, policy: GatePolicy) -> tuple[bool, str]:
    if verdict.contaminated:
        what = f"{verdict.repo} is an evaluation repository: {verdict.contamination_matches[0]}"
        if not policy.allow_contaminated:
            return False, f"refused: {what}"
        return True, f"allowed by --allow-contaminated although {what}"
    if verdict.license_tier == "trainable-only" and policy.copyleft_policy == "refuse":
        return False, f"refused: copyleft license {verdict.license_spdx} (--copyleft-policy refuse)"
    if verdict.license_tier == "unknown" and policy.refuse_unknown:
        return False, "refused: no license found (--refuse-unknown)"
    return True, f"allowed: license {verdict.license_spdx or 'unknown'}: {verdict.license_tier}"


def gate_directory(
    path: Path, *, source: str, repo: str | None = None, policy: GatePolicy | None = None
) -> GateVerdict:
    """License tier and contamination verdict for the tree at ``path``.

    ``source`` is what the user named (recorded, and matched when it is a URL); ``repo`` is
    the name the source was resolved under (``owner/name`` or a package name).
    """
    policy = policy or GatePolicy()
    root = Path(path)
    if not root.is_dir():
        raise SourceError(f"cannot gate {path}: not a directory")
    spdx, tier, evidence = license_of(root, copyleft=policy.copyleft)
    extra = [("source", source)]
    if repo:
        extra.append(("resolved as", repo))
    found = matches(root, extra)
    if repo and "/" not in repo:  # a bare name is a package name (pypi:NAME==VER)

        for bench in benchmark_repos():
            if normalize_package(repo) in bench.packages:
                found.append(f"resolved as package {repo!r} -> {bench.label()}")
    verdict = GateVerdict(
        source=source,
        repo=repo or root.resolve().name,
        license_spdx=spdx,
        license_tier=tier,
        license_evidence=evidence,
        contaminated=bool(found),
        contamination_matches=list(dict.fromkeys(found)),
    )
    allowed, reason = _decide(verdict, policy)
    return verdict.model_copy(update={"allowed": allowed, "reason": reason})


def ensure_allowed(verdict: GateVerdict) -> GateVerdict:
    """Return ``verdict`` if it lets the source through, else raise :class:`GateRefused`."""
    if not verdict.allowed:
        raise GateRefused(f"{verdict.source}: {verdict.reason}")
    return verdict
