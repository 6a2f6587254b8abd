"""Sandboxes: run untrusted code against a workspace. See :mod:`swemill.sandbox.base`."""

from swemill.sandbox.base import WORKSPACE, Bind, ExecResult, Limits, Sandbox

__all__ = ["WORKSPACE", "Bind", "ExecResult", "Limits", "Sandbox"]
