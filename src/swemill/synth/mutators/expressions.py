"""Expression-level mutators: operators, constants, operand order, call chains."""

from __future__ import annotations

import ast
from typing import Any, TypeVar

import libcst as cst

from swemill.synth.mutators.core import SiteTransformer, TransformerMutator

_N = TypeVar("_N", cst.BinaryOperation, cst.BooleanOperation, cst.ComparisonTarget,
             cst.AugAssign)

__all__ = ["BreakCallChain", "ChangeConstant", "ChangeOperator", "SwapOperands"]

# Each operator becomes a near neighbour: the likely slip, not a random replacement.
_BINARY: dict[type[cst.BaseBinaryOp], type[cst.BaseBinaryOp]] = {
    cst.Add: cst.Subtract,
    cst.Subtract: cst.Add,
    cst.Multiply: cst.FloorDivide,
    cst.Divide: cst.Multiply,
    cst.FloorDivide: cst.Divide,
    cst.Modulo: cst.FloorDivide,
    cst.Power: cst.Multiply,
    cst.LeftShift: cst.RightShift,
    cst.RightShift: cst.LeftShift,
    cst.BitAnd: cst.BitOr,
    cst.BitOr: cst.BitAnd,
    cst.BitXor: cst.BitOr,
}
_COMPARE: dict[type[cst.BaseCompOp], type[cst.BaseCompOp]] = {
    cst.LessThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.LessThan,
    cst.GreaterThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.GreaterThan,
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
}
_BOOLEAN: dict[type[cst.BaseBooleanOp], type[cst.BaseBooleanOp]] = {
    cst.And: cst.Or,
    cst.Or: cst.And,
}
_AUG: dict[type[cst.BaseAugOp], type[cst.BaseAugOp]] = {
    cst.AddAssign: cst.SubtractAssign,
    cst.SubtractAssign: cst.AddAssign,
    cst.MultiplyAssign: cst.FloorDivideAssign,
    cst.DivideAssign: cst.MultiplyAssign,
    cst.FloorDivideAssign: cst.DivideAssign,
    cst.BitOrAssign: cst.BitAndAssign,
    cst.BitAndAssign: cst.BitOrAssign,
}
# Operand order does not matter for these, so swapping them would be an equivalent mutant.
_SYMMETRIC = (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)
_COMMUTATIVE = (cst.Multiply, cst.BitAnd, cst.BitOr, cst.BitXor)


def _same_ws(old: cst.CSTNode, new_type: type[cst.CSTNode]) -> cst.CSTNode:
    """The replacement operator, keeping the spacing the original was written with."""
    kwargs = {
        k: getattr(old, k)
        for k in ("whitespace_before", "whitespace_after")
        if hasattr(old, k)
    }
    return new_type(**kwargs)


class _ChangeOperator(SiteTransformer):
    def _swap(self, node: _N, table: dict[Any, Any]) -> _N:
        """``node`` with its operator swapped per ``table``, at the chosen site only."""
        new = table.get(type(node.operator))
        if new is None or not self.hit():
            return node
        return node.with_changes(operator=_same_ws(node.operator, new))

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        return self._swap(updated_node, _BINARY)

    def leave_BooleanOperation(
        self, original_node: cst.BooleanOperation, updated_node: cst.BooleanOperation
    ) -> cst.BaseExpression:
        return self._swap(updated_node, _BOOLEAN)

    def leave_ComparisonTarget(
        self, original_node: cst.ComparisonTarget, updated_node: cst.ComparisonTarget
    ) -> cst.ComparisonTarget:
        return self._swap(updated_node, _COMPARE)

    def leave_AugAssign(
        self, original_node: cst.AugAssign, updated_node: cst.AugAssign
    ) -> cst.AugAssign:
        return self._swap(updated_node, _AUG)


class ChangeOperator(TransformerMutator):
    kind = "change_operator"
    transformer = _ChangeOperator


def _new_number(value: int | float, rng_pick: float) -> int | float:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value - 1 if value > 1 and rng_pick < 0.5 else value + 1
    return value * 2 if value not in (0.0,) and rng_pick < 0.5 else value + 1.0


def _new_string(value: str, rng_pick: float) -> str:
    """An edge case of the same string: empty, one character short, or one space."""
    if not value:
        return " "
    if len(value) == 1 or rng_pick < 0.5:
        return value[:-1]
    return ""


class _ChangeConstant(SiteTransformer):
    def visit_Expr(self, node: cst.Expr) -> bool:
        # A bare string statement is a docstring or a comment in disguise: no behaviour.
        return not isinstance(node.value, cst.SimpleString | cst.ConcatenatedString)

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False  # string annotations have no run-time behaviour either

    def leave_Integer(self, original_node: cst.Integer, updated_node: cst.Integer) -> cst.Integer:
        if not self.hit():
            return updated_node
        value = _new_number(int(updated_node.value.replace("_", ""), 0), self.rng.random())
        return updated_node.with_changes(value=str(value))

    def leave_Float(self, original_node: cst.Float, updated_node: cst.Float) -> cst.Float:
        if not self.hit():
            return updated_node
        value = _new_number(float(updated_node.value.replace("_", "")), self.rng.random())
        return updated_node.with_changes(value=repr(value))

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        if updated_node.prefix.lower() not in ("", "u") or not self.hit():
            return updated_node
        value = ast.literal_eval(updated_node.value)
        return updated_node.with_changes(value=repr(_new_string(value, self.rng.random())))

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        if updated_node.value not in ("True", "False") or not self.hit():
            return updated_node
        return updated_node.with_changes(value="False" if updated_node.value == "True" else "True")


class ChangeConstant(TransformerMutator):
    kind = "change_constant"
    transformer = _ChangeConstant


_COMPOUND = (
    cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda,
    cst.UnaryOperation, cst.NamedExpr, cst.Await,
)


def _parenthesised(expr: cst.BaseExpression) -> cst.BaseExpression:
    """Moving an operand across an operator must not let precedence regroup it."""
    if isinstance(expr, _COMPOUND) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


class _SwapOperands(SiteTransformer):
    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        n = updated_node
        if isinstance(n.operator, _COMMUTATIVE) or _code(n.left) == _code(n.right):
            return n
        if not self.hit():
            return n
        return n.with_changes(left=_parenthesised(n.right), right=_parenthesised(n.left))

    def leave_Comparison(
        self, original_node: cst.Comparison, updated_node: cst.Comparison
    ) -> cst.BaseExpression:
        n = updated_node
        if len(n.comparisons) != 1 or isinstance(n.comparisons[0].operator, _SYMMETRIC):
            return n
        right = n.comparisons[0].comparator
        if _code(n.left) == _code(right) or not self.hit():
            return n
        target = n.comparisons[0].with_changes(comparator=_parenthesised(n.left))
        return n.with_changes(left=_parenthesised(right), comparisons=[target])


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


class SwapOperands(TransformerMutator):
    kind = "swap_operands"
    transformer = _SwapOperands


class _BreakCallChain(SiteTransformer):
    """``a.b().c`` -> ``a.c``: one call dropped from a chain of method calls."""

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        inner = updated_node.value
        if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)):
            return updated_node
        if not self.hit():
            return updated_node
        return updated_node.with_changes(value=inner.func.value)


class BreakCallChain(TransformerMutator):
    kind = "break_call_chain"
    transformer = _BreakCallChain
