"""Every git command swemill runs, in one environment that nothing on the machine can change.

A user's ``~/.gitconfig`` (or the system's) can hold an ``alias``, a ``core.hooksPath`` whose
hooks run on every commit, a ``diff.external`` program, ``commit.gpgsign=true`` (every commit
fails without a key), ``color.ui=always`` (escape codes in output swemill parses) or another
identity (other commit hashes). A hook or a shell may also leave ``GIT_DIR`` or
``GIT_INDEX_FILE`` set. None of that may change what swemill builds, so every call here:

* reads no global or system config (``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_CONFIG_NOSYSTEM``)
  and drops every inherited ``GIT_*`` variable;
* commits as one fixed identity at one fixed date (the same tree gives the same hash
  everywhere); a caller that records its own history (the bundled sample) passes its own;
* never pages, prompts or opens an editor, runs no hook, signs nothing, converts no line
  ending, colours nothing, quotes no path, and speaks the C locale;
* trusts the repository whoever owns it (``safe.directory=*``: swemill runs git as root over
  trees a sandbox user wrote, and in copies other users made).

The rest of the environment (``PATH``, ``HOME``, proxies, an SSH agent, ``GIT_SSH_COMMAND``)
is kept: cloning a private repository needs it, and it changes nothing in what git writes.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from swemill.core.errors import SwemillError

__all__ = ["GIT_CONFIG", "GIT_ENV", "git_env", "run_git", "git"]

GIT_ENV: dict[str, str] = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "swemill",
    "GIT_AUTHOR_EMAIL": "swemill@localhost",
    "GIT_COMMITTER_NAME": "swemill",
    "GIT_COMMITTER_EMAIL": "swemill@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "true",
    "LC_ALL": "C",
}
"""What every git call sees on top of the caller's environment (minus its ``GIT_*``)."""

GIT_CONFIG: tuple[str, ...] = (
    "safe.directory=*",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.autocrlf=false",
    "core.quotepath=off",
    "core.fsmonitor=false",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
    "color.ui=never",
    "init.defaultBranch=main",
)
"""``-c`` settings on every call: they win over the repository's own ``.git/config`` too."""


_AUTH = frozenset({"GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS"})
"""Inherited ``GIT_*`` variables that only say how to log in to a remote (they are kept)."""


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a git call: this process's, without ``GIT_*``, plus :data:`GIT_ENV`
    and ``extra`` (a caller's own identity or dates)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _AUTH}
    env.update(GIT_ENV)
    env.update(extra or {})
    return env


def run_git(args: Sequence[str], cwd: Path | str | None = None, *,
            input: str | bytes | None = None, binary: bool = False,
            timeout: float | None = None, env: Mapping[str, str] | None = None
            ) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """``git ARGS`` in ``cwd``, never raising on a non-zero exit (the caller says what that
    means in its own error). Text is UTF-8, and bytes that are not survive the round trip
    (``surrogateescape``); ``binary`` returns bytes (``git archive``, ``git show``)."""
    cmd = ["git", *(a for kv in GIT_CONFIG for a in ("-c", kv)), *args]
    text = {} if binary else {"encoding": "utf-8", "errors": "surrogateescape"}
    return subprocess.run(cmd, cwd=cwd, env=git_env(env), input=input, capture_output=True,
                          timeout=timeout, check=False, **text)  # type: ignore[call-overload]


def git(args: Sequence[str], cwd: Path | str | None = None, *,
        error: type[SwemillError] = SwemillError, timeout: float | None = 600,
        input: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """``git ARGS``'s stripped output; a failure or a timeout is one ``error`` line naming the
    subcommand and git's last line of complaint."""
    try:
        proc = run_git(args, cwd, input=input, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise error(f"git {args[0]} did not finish within {timeout:.0f} s") from exc
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise error(f"git {args[0]} failed: {tail}")
    return str(proc.stdout).strip()
