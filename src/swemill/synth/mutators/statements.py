"""Statement-level mutators: remove a statement, unwrap a block, invert, shuffle.

All of them work on the statements of an indented block, so a site is one statement (or one
block for shuffling) and the edit rewrites that block's list of statements.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from swemill.synth.mutators.core import SiteTransformer, TransformerMutator, pass_line

__all__ = [
    "InvertIfElse",
    "RemoveAssignment",
    "RemoveConditional",
    "RemoveLoop",
    "RemoveWrapper",
    "ShuffleLines",
]

_ASSIGN = (cst.Assign, cst.AugAssign, cst.AnnAssign)


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    return isinstance(small, cst.Expr) and isinstance(
        small.value, cst.SimpleString | cst.ConcatenatedString
    )


def _block_or(stmts: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
    return list(stmts) if stmts else [pass_line()]


class _StatementEdit(SiteTransformer):
    """A site is one statement of a block that ``eligible`` accepts; ``replace`` rewrites it."""

    def eligible(self, stmt: cst.BaseStatement) -> bool:
        raise NotImplementedError

    def replace(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        raise NotImplementedError

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body = list(updated_node.body)
        for i, stmt in enumerate(body):
            if self.eligible(stmt) and self.hit():
                new = body[:i] + self.replace(stmt) + body[i + 1 :]
                # An emptied block gets ``pass`` so the module still compiles.
                return updated_node.with_changes(body=_block_or(new))
        return updated_node


class _RemoveAssignment(_StatementEdit):
    def eligible(self, stmt: cst.BaseStatement) -> bool:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return False
        small = stmt.body[0]
        if isinstance(small, cst.AnnAssign):
            return small.value is not None
        return isinstance(small, _ASSIGN)

    def replace(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        return []


class RemoveAssignment(TransformerMutator):
    kind = "remove_assignment"
    transformer = _RemoveAssignment


class _RemoveConditional(_StatementEdit):
    def eligible(self, stmt: cst.BaseStatement) -> bool:
        return isinstance(stmt, cst.If)

    def replace(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        return []


class RemoveConditional(TransformerMutator):
    kind = "remove_conditional"
    transformer = _RemoveConditional


class _RemoveLoop(_StatementEdit):
    def eligible(self, stmt: cst.BaseStatement) -> bool:
        return isinstance(stmt, cst.For | cst.While)

    def replace(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        return []


class RemoveLoop(TransformerMutator):
    kind = "remove_loop"
    transformer = _RemoveLoop


def _inner_statements(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    assert isinstance(block, cst.SimpleStatementSuite)
    return [cst.SimpleStatementLine(body=list(block.body))]


class _RemoveWrapper(_StatementEdit):
    """``with``/``try`` -> the statements they wrapped (handlers and ``finally`` dropped)."""

    def eligible(self, stmt: cst.BaseStatement) -> bool:
        return isinstance(stmt, cst.With | cst.Try | cst.TryStar)

    def replace(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        assert isinstance(stmt, cst.With | cst.Try | cst.TryStar)
        inner = _inner_statements(stmt.body)
        first = inner[0] if inner else None
        # Comments above the wrapper stay above what it wrapped.
        if isinstance(first, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            inner[0] = first.with_changes(leading_lines=[*stmt.leading_lines, *first.leading_lines])
        return inner


class RemoveWrapper(TransformerMutator):
    kind = "remove_wrapper"
    transformer = _RemoveWrapper


class _InvertIfElse(_StatementEdit):
    """``if c: A else: B`` -> ``if c: B else: A`` (only a plain ``else``, not ``elif``)."""

    def eligible(self, stmt: cst.BaseStatement) -> bool:
        return isinstance(stmt, cst.If) and isinstance(stmt.orelse, cst.Else)

    def replace(self, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
        assert isinstance(stmt, cst.If) and isinstance(stmt.orelse, cst.Else)
        swapped = stmt.with_changes(
            body=stmt.orelse.body, orelse=stmt.orelse.with_changes(body=stmt.body)
        )
        return [swapped]


class InvertIfElse(TransformerMutator):
    kind = "invert_if_else"
    transformer = _InvertIfElse


class _ShuffleLines(SiteTransformer):
    """A site is a block with at least two movable statements (a docstring stays first)."""

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body = list(updated_node.body)
        head = body[:1] if body and _is_docstring(body[0]) else []
        movable = body[len(head) :]
        if len(movable) < 2 or not self.hit():
            return updated_node
        order = list(range(len(movable)))
        for _ in range(8):  # a handful of draws: a two-statement block has one other order
            self.rng.shuffle(order)
            if order != sorted(order):
                break
        if order == sorted(order):
            order.reverse()
        return updated_node.with_changes(body=head + [movable[i] for i in order])


class ShuffleLines(TransformerMutator):
    kind = "shuffle_lines"
    transformer = _ShuffleLines
