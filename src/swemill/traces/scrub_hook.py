"""The one place where text entering a trace record is scrubbed of secrets.

Session logs store tool output verbatim, and it often holds keys, tokens and ``.env``
contents. Every text that goes into a :class:`TraceState` or a ``Trajectory`` (message text,
thinking, tool arguments, tool results, a run's submission) passes through
:meth:`Scrubber.text`, which applies :func:`swemill.corpus.redact.scrub` and tallies what it
redacted per kind; the tallies end up in the ingest counts and the run manifest.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from swemill.corpus.redact import scrub

__all__ = ["Scrubber"]


class Scrubber:
    """Scrubs texts and tallies what it removed, per kind of secret."""

    active = True
    """False would mean texts are stored as found (the CLI warns when so)."""

    def __init__(self, keep: Collection[str] = ()) -> None:
        self.counts: dict[str, int] = {}
        self.keep = frozenset(keep)
        """Kinds left in place (``--scrub-keep``); see :data:`swemill.corpus.redact.KEEPABLE`."""

    def text(self, text: str) -> str:
        # The single scrub call site of the traces stage.
        result = scrub(text, self.keep)
        for kind, n in result.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        return result.text

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value (tool arguments); keys stay."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value
