"""Class-level mutators: remove a base, remove a method, reorder methods.

These change a class as a whole, so their candidates have scope ``module`` (the validator
runs the full suite for them rather than trusting the coverage map).
"""

from __future__ import annotations

import random

import libcst as cst

from swemill.core.errors import SynthesisError
from swemill.synth.mutators.core import Mutator, pass_line

__all__ = ["RemoveClassBase", "RemoveMethod", "ShuffleMethods", "method_names"]


def _positional_bases(node: cst.ClassDef) -> list[int]:
    return [
        i
        for i, arg in enumerate(node.bases)
        if arg.keyword is None and not arg.star
        and not (isinstance(arg.value, cst.Name) and arg.value.value == "object")
    ]


def _methods(node: cst.ClassDef) -> list[int]:
    if not isinstance(node.body, cst.IndentedBlock):
        return []
    return [i for i, s in enumerate(node.body.body) if isinstance(s, cst.FunctionDef)]


def method_names(node: cst.ClassDef) -> list[str]:
    """The names of the methods defined directly in the class body, in order."""
    assert isinstance(node.body, cst.IndentedBlock) or not _methods(node)
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    return [s.name.value for s in body if isinstance(s, cst.FunctionDef)]


class RemoveClassBase(Mutator):
    kind = "remove_class_base"
    level = "class"

    def count(self, node: cst.CSTNode) -> int:
        return len(_positional_bases(node)) if isinstance(node, cst.ClassDef) else 0

    def apply(self, node: cst.CSTNode, site: int, rng: random.Random) -> cst.CSTNode:
        assert isinstance(node, cst.ClassDef)
        sites = _positional_bases(node)
        if site >= len(sites):
            raise SynthesisError(f"{self.kind}: no site {site} in class {node.name.value}")
        bases = [b for i, b in enumerate(node.bases) if i != sites[site]]
        if bases and not node.keywords:
            bases[-1] = bases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if not bases and not node.keywords:
            return node.with_changes(bases=[], lpar=cst.MaybeSentinel.DEFAULT,
                                     rpar=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(bases=bases)


class RemoveMethod(Mutator):
    kind = "remove_method"
    level = "class"

    def count(self, node: cst.CSTNode) -> int:
        return len(_methods(node)) if isinstance(node, cst.ClassDef) else 0

    def removed(self, node: cst.ClassDef, site: int) -> str:
        """The name of the method ``site`` removes (it is the changed symbol)."""
        return method_names(node)[site]

    def apply(self, node: cst.CSTNode, site: int, rng: random.Random) -> cst.CSTNode:
        assert isinstance(node, cst.ClassDef) and isinstance(node.body, cst.IndentedBlock)
        sites = _methods(node)
        if site >= len(sites):
            raise SynthesisError(f"{self.kind}: no site {site} in class {node.name.value}")
        body = [s for i, s in enumerate(node.body.body) if i != sites[site]]
        return node.with_changes(body=node.body.with_changes(body=body or [pass_line()]))


class ShuffleMethods(Mutator):
    kind = "shuffle_methods"
    level = "class"

    def count(self, node: cst.CSTNode) -> int:
        return 1 if isinstance(node, cst.ClassDef) and len(_methods(node)) >= 2 else 0

    def apply(self, node: cst.CSTNode, site: int, rng: random.Random) -> cst.CSTNode:
        assert isinstance(node, cst.ClassDef) and isinstance(node.body, cst.IndentedBlock)
        slots = _methods(node)
        if site != 0 or len(slots) < 2:
            raise SynthesisError(f"{self.kind}: no site {site} in class {node.name.value}")
        order = list(slots)
        for _ in range(8):
            rng.shuffle(order)
            if order != slots:
                break
        if order == slots:
            order.reverse()
        body = list(node.body.body)
        moved = [node.body.body[i] for i in order]
        for slot, stmt in zip(slots, moved, strict=True):
            body[slot] = stmt
        return node.with_changes(body=node.body.with_changes(body=body))
