"""What every mutator shares: numbered mutation sites and one edit per application.

A mutator looks at one node (a function's body block, or a class definition), counts the
places it could edit there, and applies one numbered edit. Sites are numbered in libcst's
visiting order, so the same tree always gives the same numbering; the random generator is
only consulted for the edit itself (which constant, which permutation).
"""

from __future__ import annotations

import random
from typing import ClassVar, Literal

import libcst as cst

from swemill.core.errors import SynthesisError

__all__ = ["Mutator", "SiteTransformer", "TransformerMutator", "pass_line"]

Level = Literal["function", "class"]


class Mutator:
    """One kind of edit. ``level`` says what node ``count``/``apply`` take."""

    kind: ClassVar[str]
    level: ClassVar[Level] = "function"

    def count(self, node: cst.CSTNode) -> int:
        raise NotImplementedError

    def apply(self, node: cst.CSTNode, site: int, rng: random.Random) -> cst.CSTNode:
        raise NotImplementedError


class SiteTransformer(cst.CSTTransformer):
    """Counts sites as it visits; edits only the one whose number is ``target``."""

    def __init__(self, target: int, rng: random.Random) -> None:
        super().__init__()
        self.target = target
        self.rng = rng
        self.seen = 0
        self.done = False

    def hit(self) -> bool:
        """Register one site; True when it is the one to edit."""
        index = self.seen
        self.seen += 1
        if index == self.target:
            self.done = True
            return True
        return False


class TransformerMutator(Mutator):
    """A function-level mutator whose sites are found by a :class:`SiteTransformer`."""

    transformer: ClassVar[type[SiteTransformer]]

    def count(self, node: cst.CSTNode) -> int:
        t = self.transformer(-1, random.Random(0))
        node.visit(t)
        return t.seen

    def apply(self, node: cst.CSTNode, site: int, rng: random.Random) -> cst.CSTNode:
        t = self.transformer(site, rng)
        out = node.visit(t)
        if not t.done:
            raise SynthesisError(f"{self.kind}: no site {site} in this node")
        if not isinstance(out, cst.CSTNode):
            raise SynthesisError(f"{self.kind}: the edit removed the whole node")
        return out


def pass_line() -> cst.SimpleStatementLine:
    """Keeps a block valid when an edit leaves it empty."""
    return cst.SimpleStatementLine(body=[cst.Pass()])
