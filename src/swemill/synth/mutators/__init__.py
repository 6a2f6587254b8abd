"""The procedural strategy's mutators, by kind name."""

from __future__ import annotations

from swemill.core.errors import SynthesisError
from swemill.synth.mutators.classes import RemoveClassBase, RemoveMethod, ShuffleMethods
from swemill.synth.mutators.core import Mutator
from swemill.synth.mutators.expressions import (
    BreakCallChain,
    ChangeConstant,
    ChangeOperator,
    SwapOperands,
)
from swemill.synth.mutators.statements import (
    InvertIfElse,
    RemoveAssignment,
    RemoveConditional,
    RemoveLoop,
    RemoveWrapper,
    ShuffleLines,
)

__all__ = ["MUTATORS", "Mutator", "mutator"]

MUTATORS: dict[str, Mutator] = {
    m.kind: m
    for m in (
        RemoveAssignment(),
        RemoveConditional(),
        RemoveLoop(),
        RemoveWrapper(),
        InvertIfElse(),
        ShuffleLines(),
        ChangeOperator(),
        ChangeConstant(),
        SwapOperands(),
        BreakCallChain(),
        RemoveClassBase(),
        RemoveMethod(),
        ShuffleMethods(),
    )
}


def mutator(kind: str) -> Mutator:
    """The mutator called ``kind``; SynthesisError names the known kinds otherwise."""
    try:
        return MUTATORS[kind]
    except KeyError:
        raise SynthesisError(f"unknown mutator {kind!r}; known: {', '.join(MUTATORS)}") from None
