"""Candidate bugs from a repository: the strategies and what they share.

Each strategy lives in its own module and implements :class:`~swemill.synth.strategy.Strategy`.
Names here resolve lazily so that importing :mod:`swemill.synth` does not load libcst or
pyarrow until a strategy is actually used.
"""

from __future__ import annotations

import importlib
from typing import Any

from swemill.core.errors import ConfigError

__all__ = [
    "STRATEGIES",
    "CombineStrategy",
    "PolicyProblemWriter",
    "PrMirrorStrategy",
    "ProceduralStrategy",
    "RepoView",
    "RowsSource",
    "RowsStrategy",
    "Strategy",
    "SynthReport",
    "ValidatedBug",
    "load_rows",
    "make_strategy",
    "write_problem_statement",
]

STRATEGIES: dict[str, str] = {
    "procedural": "swemill.synth.procedural:ProceduralStrategy",
    "pr-mirror": "swemill.synth.pr_mirror:PrMirrorStrategy",
    "combine": "swemill.synth.combine:CombineStrategy",
    "rows": "swemill.synth.dataset_rows:RowsStrategy",
    "lm-modify": "swemill.synth.lm_bugs:LmModifyStrategy",
    "lm-rewrite": "swemill.synth.lm_bugs:LmRewriteStrategy",
}

_LAZY = {
    "RepoView": "swemill.synth.strategy",
    "Strategy": "swemill.synth.strategy",
    "SynthReport": "swemill.synth.strategy",
    "ProceduralStrategy": "swemill.synth.procedural",
    "PrMirrorStrategy": "swemill.synth.pr_mirror",
    "CombineStrategy": "swemill.synth.combine",
    "ValidatedBug": "swemill.synth.combine",
    "RowsStrategy": "swemill.synth.dataset_rows",
    "RowsSource": "swemill.synth.dataset_rows",
    "load_rows": "swemill.synth.dataset_rows",
    "write_problem_statement": "swemill.synth.problem",
    "PolicyProblemWriter": "swemill.synth.problem",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'swemill.synth' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def make_strategy(name: str, **options: Any) -> Any:
    """Build the strategy called ``name`` (``combine`` needs ``bugs=``, ``rows`` ``source=``,
    ``lm-modify`` and ``lm-rewrite`` a ``writer=``, a :class:`~swemill.synth.lm_bugs.BugWriter`)."""
    target = STRATEGIES.get(name)
    if target is None:
        raise ConfigError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    module, _, cls = target.partition(":")
    try:
        return getattr(importlib.import_module(module), cls)(**options)
    except TypeError as exc:
        raise ConfigError(f"strategy {name!r}: {exc}") from exc
