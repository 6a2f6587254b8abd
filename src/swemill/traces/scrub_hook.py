"""The one place where text entering a trace record is scrubbed of secrets.

Session logs store tool output verbatim, and it often holds keys, tokens and ``.env``
contents. Every text that goes into a :class:`TraceState` or a ``Trajectory`` (message text,
thinking, tool arguments, tool results) passes through :class:`Scrubber` first.

SCRUB CALL SITE: until ``swemill.corpus.scrub`` lands this passes text through unchanged
(``Scrubber.active`` is False and the CLI says so); when it lands, :meth:`Scrubber.text`
is the only line to change.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Scrubber"]


class Scrubber:
    """Scrubs texts and tallies what it removed, per kind of secret."""

    active = False

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def text(self, text: str) -> str:
        # SCRUB CALL SITE: replace with swemill.corpus.scrub.scrub_text once it exists.
        return text

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value (tool arguments)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value
