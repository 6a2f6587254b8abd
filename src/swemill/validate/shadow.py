"""Shadow checks: the head image's verdicts watched in use.

The head image serves a run by forking a process that collected the suite at head and
swapping edited function bodies in; :mod:`swemill.validate.inside.hotpatch` proves each swap
exact, and tests compare it with fresh runs, but a repository can still do something the
proof does not foresee. So, in every run of ``swemill tasks``, the first run the image serves
and then one in :attr:`Shadow.every` are run again the ordinary way (a fresh pytest session
in a fork of the warm server, which imports the project from disk and collects anew: no head
image, no swapped code) and the two compared: the exit code and the outcome of every
requested test. (A fresh interpreter per check would cost three times as much, and the part
the image adds is what the check is about.) The tree image (a tree the head image cannot
serve, collected once) is counted apart: its first selected run is checked, then one in
:attr:`Shadow.every`; its whole-suite runs take the head image's whole-suite path, which the
head image's checks watch. A disagreement turns the image off for the rest
of the run (every worker), the ordinary result stands, and it is counted
(``shadow_mismatches`` in the manifest) and printed. An ordinary run that timed out says
nothing either way (``inconclusive``). A flaky test can disagree with itself too: the image
is then off needlessly, which costs speed, never a verdict.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from swemill.validate.warm import WarmResult

__all__ = ["Shadow", "ShadowStats"]


@dataclass(slots=True)
class ShadowStats:
    checks: int = 0
    mismatches: int = 0
    inconclusive: int = 0
    details: list[str] = field(default_factory=list)
    """What disagreed, one line per mismatch (the first few)."""

    def to_dict(self) -> dict[str, object]:
        return {"checks": self.checks, "mismatches": self.mismatches,
                "inconclusive": self.inconclusive, "details": list(self.details)}


class Shadow:
    """Shared by the workers of one validation run (thread-safe)."""

    DETAILS = 5

    def __init__(self, every: int = 50) -> None:
        self.every = every
        """One image-served run in this many is checked (the first always); 0: none."""
        self.image_off = False
        """Set by a mismatch: no worker serves from its image any more."""
        self.stats = ShadowStats()
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()

    def due(self, served: WarmResult, image: str = "head") -> bool:
        """Should this run, served by the ``image`` ("head" or "tree"), be checked? Counts
        it either way."""
        if self.every <= 0 or served.timed_out:  # a run at its deadline proves nothing
            return False
        with self._lock:
            n = self._served.get(image, 0)
            self._served[image] = n + 1
        return n % self.every == 0

    def compare(self, nodeids: Sequence[str], served: WarmResult, plain: WarmResult) -> bool:
        """Record one check; False (and the image off) when the two runs disagree."""
        with self._lock:
            if plain.timed_out:
                self.stats.inconclusive += 1
                return True
            self.stats.checks += 1
            diff = [f"{n}: image {served.outcomes.get(n)}, ordinary {plain.outcomes.get(n)}"
                    for n in nodeids if served.outcomes.get(n) != plain.outcomes.get(n)
                    and not _renamed(n, served, plain)]
            if served.exit_code != plain.exit_code:
                diff.append(f"exit code: image {served.exit_code}, ordinary {plain.exit_code}")
            if not diff:
                return True
            self.stats.mismatches += 1
            self.image_off = True
            if len(self.stats.details) < self.DETAILS:
                more = f" (+{len(diff) - 1} more)" if len(diff) > 1 else ""
                self.stats.details.append(diff[0] + more)
            return False


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def _renamed(nodeid: str, served: WarmResult, plain: WarmResult) -> bool:
    """True when ``nodeid`` is in one run only because its parameters are made at collection
    (marshmallow 3.22.0 parametrizes a test by ``datetime.now()``: the image collected it at
    its start, the ordinary run at its own): the same test function has, on each side, as
    many ids the other side lacks, in the same outcomes."""
    if "[" not in nodeid or (nodeid in served.outcomes) == (nodeid in plain.outcomes):
        return False
    base = _base(nodeid)

    def alone(a: WarmResult, b: WarmResult) -> list[str]:
        return sorted(str(o) for n, o in a.outcomes.items()
                      if "[" in n and _base(n) == base and n not in b.outcomes)

    return alone(served, plain) == alone(plain, served)
