"""The canonical tools carried out in a sandbox: each returns an :class:`Observation`.

File tools go through the sandbox's own path resolution, which refuses anything outside the
workspace (also through symbolic links); ``bash`` and ``search`` run inside the sandbox, so a
policy never reads the host through them either.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from swemill.core.errors import SandboxError
from swemill.core.tools import normalize_path

if TYPE_CHECKING:
    from swemill.sandbox.contract import ExecResult, Sandbox

__all__ = ["Observation", "clip", "number_lines", "checked_path", "bash", "read", "write",
           "edit", "search"]

_MAX_LISTED = 500


@dataclass(slots=True)
class Observation:
    """What a tool call returned: text for the model, whether it failed, whether it ends."""

    content: str
    is_error: bool = False
    done: bool = False


def clip(text: str, limit: int) -> str:
    """Keep the head and the tail of a long output, saying how much was left out."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def number_lines(text: str, start: int = 1, end: int | None = None) -> str:
    """``cat -n`` style (``     7\\tline``); splits at ``\\n`` only, so the text round-trips."""
    lines = text.split("\n")
    trailing = lines and lines[-1] == ""
    body = lines[:-1] if trailing else lines
    last = len(body) if end is None else min(end, len(body))
    out = [f"{n:6d}\t{body[n - 1]}" for n in range(start, last + 1)]
    ends_file = last == len(body)
    return "\n".join(out) + ("\n" if out and (trailing or not ends_file) else "")


def checked_path(path: str, workdir: str) -> str:
    """``path`` relative to the workspace, or SandboxError when it names a place outside."""
    rel = normalize_path(path, workdir)
    if rel.startswith("/") or rel == ".." or rel.startswith("../"):
        raise SandboxError(f"path {path!r} is outside the workspace ({workdir})")
    return rel


def _exec_text(res: ExecResult, limit: int) -> str:
    out = res.stdout + (("\n" if res.stdout and not res.stdout.endswith("\n") else "")
                        + res.stderr if res.stderr else "")
    note = f"[exit code {res.exit_code}]"
    if res.timed_out:
        note = "[timed out; the command was killed]"
    elif res.killed_reason:
        note = f"[killed: {res.killed_reason}]"
    return clip(out, limit) + ("\n" if out and not out.endswith("\n") else "") + note


def bash(sb: Sandbox, command: str, *, env: dict[str, str], timeout: float,
         limit: int) -> Observation:
    res = sb.exec(command, timeout=timeout, env=env)
    return Observation(_exec_text(res, limit), is_error=not res.ok)


def read(sb: Sandbox, path: str, start_line: int | None = None, end_line: int | None = None,
         *, limit: int) -> Observation:
    rel = checked_path(path, sb.workdir)
    data = sb.read_file(rel)
    if b"\x00" in data[:8192]:
        return Observation(f"{rel} is a binary file ({len(data)} bytes)", is_error=True)
    text = data.decode("utf-8", errors="replace")
    return Observation(clip(number_lines(text, start_line or 1, end_line), limit))


def write(sb: Sandbox, path: str, content: str) -> Observation:
    rel = checked_path(path, sb.workdir)
    sb.write_file(rel, content)
    return Observation(f"wrote {len(content.encode())} bytes to {rel}")


def edit(sb: Sandbox, path: str, old_str: str, new_str: str,
         replace_all: bool = False) -> Observation:
    rel = checked_path(path, sb.workdir)
    text = sb.read_file(rel).decode("utf-8", errors="strict")
    count = text.count(old_str)
    if count == 0:
        return Observation(f"old_str not found in {rel}; nothing changed", is_error=True)
    if count > 1 and not replace_all:
        return Observation(f"old_str occurs {count} times in {rel}; add context to make it "
                           "unique or set replace_all", is_error=True)
    new = text.replace(old_str, new_str) if replace_all else text.replace(old_str, new_str, 1)
    sb.write_file(rel, new)
    return Observation(f"edited {rel} ({count if replace_all else 1} replacement(s))")


def search(sb: Sandbox, pattern: str, path: str | None = None, glob: str | None = None,
           *, env: dict[str, str], timeout: float, limit: int) -> Observation:
    where = checked_path(path or ".", sb.workdir)
    name = glob.rsplit("/", 1)[-1] if glob else None  # find/grep match globs on base names
    q = shlex.quote
    if pattern == "":
        cmd = f"find {q(where)} -path '*/.git' -prune -o -type f"
        cmd += f" -name {q(name)} -print" if name else " -print"
        cmd += " | sed 's|^\\./||' | sort"
    else:
        cmd = "grep -rnIE --exclude-dir=.git" + (f" --include={q(name)}" if name else "")
        cmd += f" -e {q(pattern)} -- {q(where)}"
    res = sb.exec(cmd, timeout=timeout, env=env)
    if res.exit_code == 1 and pattern:
        return Observation("no matches")
    if not res.ok:
        return Observation(_exec_text(res, limit), is_error=True)
    lines = res.stdout.splitlines()
    more = f"\n[{len(lines) - _MAX_LISTED} more lines left out]" if len(lines) > _MAX_LISTED else ""
    return Observation(clip("\n".join(lines[:_MAX_LISTED]) + more, limit) or "no files")
