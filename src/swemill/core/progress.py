"""The one progress callback every stage reports through: ``progress(label, done, total)``.

``label`` says what is being counted now (``"procedural: 3 accepted"``, ``"teacher calls"``),
``done`` how many are finished and ``total`` how many there will be (0: not known yet). The
CLI draws it as a Rich bar; a library caller may pass any function of that shape, or nothing.
A build's stage events are not progress: the build driver reports them as ``BuildEvent``s.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Progress", "no_progress"]


class Progress(Protocol):
    def __call__(self, label: str, done: int, total: int, /) -> None: ...


def no_progress(label: str, done: int, total: int, /) -> None:
    """The progress of a caller that asked for none."""
