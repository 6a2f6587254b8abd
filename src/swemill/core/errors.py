"""The exception tree of swemill, written out once.

Every error a user can meet derives from :class:`SwemillError` and carries a message that
fits on one line; the CLI prints that line and exits non-zero. Catch these only at a per-item
boundary (one candidate, one trajectory, one file) and record the failure with its reason.
"""

from __future__ import annotations

__all__ = [
    "SwemillError",
    "ConfigError",
    "SourceError",
    "SandboxError",
    "SandboxUnavailable",
    "EnvBuildError",
    "TestRunError",
    "GateRefused",
    "SynthesisError",
    "ValidationError",
    "GradingError",
    "PolicyError",
    "TransientPolicyError",
    "BudgetExceeded",
    "StoreError",
    "IngestError",
    "CorpusError",
    "MissingDependency",
    "SessionError",
]


class SwemillError(Exception):
    """Base of every error swemill raises on purpose."""


class ConfigError(SwemillError):
    """A setting or a flag that cannot be used as given."""


class SourceError(SwemillError):
    """A source (path, git URL, pypi:NAME==VER, rows) that cannot be fetched or read."""


class SandboxError(SwemillError):
    """The sandbox could not start, run or clean up a command."""


class SandboxUnavailable(SandboxError):
    """The requested sandbox backend is not usable on this machine (says how to fix it)."""


class EnvBuildError(SwemillError):
    """A repository environment could not be built; the message holds the log's tail."""


class TestRunError(SwemillError):
    """A test run could not be carried out or its report could not be read."""

    __test__ = False  # not a pytest test class


class GateRefused(SwemillError):
    """A source was refused by the gate (contamination or license policy)."""


class SynthesisError(SwemillError):
    """A strategy could not produce candidates from a repository."""


class ValidationError(SwemillError):
    """A candidate could not be validated (not the same as being rejected)."""


class GradingError(SwemillError):
    """A log could not be graded."""


class PolicyError(SwemillError):
    """A policy could not produce an action (bad spec, bad reply, missing key)."""


class TransientPolicyError(PolicyError):
    """A policy error worth retrying: rate limit, 5xx, dropped connection."""


class BudgetExceeded(SwemillError):
    """Spending more would exceed the configured dollar, token or turn budget."""


class StoreError(SwemillError):
    """The store could not be read or written (unreachable root, corrupt part, no such run)."""


class IngestError(SwemillError):
    """A trace file could not be ingested at all."""


class CorpusError(SwemillError):
    """The corpus stage cannot make a dataset (e.g. nothing is left after filtering)."""


class MissingDependency(SwemillError):
    """An optional dependency is needed; the message names the extra to install."""


class SessionError(SwemillError):
    """An environment session cannot take the request (unknown task or session, episode over,
    too many sessions)."""
