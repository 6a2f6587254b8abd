"""Mappings from other agents' tools into the canonical algebra.

Choices, so imported traces stay honest:

- Claude Code: ``Bash``/``Read``/``Write``/``Edit``/``Grep``/``Glob`` map one to one;
  ``MultiEdit`` becomes one ``edit`` per entry, all keeping the original call id (Claude Code
  returns one result for the whole call); an ``Edit`` with an empty ``old_string`` creates
  the file, so it maps to ``write``; ``LS`` maps to ``bash("ls -a PATH")``. Flags the algebra
  has no slot for (``Grep``'s ``-i``, ``type``, ``output_mode``; ``Bash``'s ``description``,
  ``timeout``) are dropped. Everything else (``TodoWrite``, ``Task``, ``WebFetch``,
  ``NotebookEdit``, MCP tools, ...) is kept as ``other:<Name>`` with its arguments verbatim.
- Paths from a session are made relative to that session's working directory, so the same
  file reads the same in a trace and in our ``/workspace``.
- Bash-only agents (mini-swe-agent): every action stays ``bash``; ``cat f`` is not turned
  into ``read`` because what ran, and the observation it produced, was a shell command.
  :meth:`ToolCall.canonical` still makes whitespace variants of one command equal.
- SWE-agent: ``submit`` -> ``submit``; ``str_replace_editor view|create|str_replace`` ->
  ``read``/``write``/``edit``; its other built-in commands (``open``, ``goto``, ``edit``
  line ranges, ...) -> ``other:<command>``; anything else is a shell command -> ``bash``.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from swemill.core.tools import OTHER_PREFIX, WORKSPACE_ROOT, ToolCall, normalize_path

__all__ = [
    "from_claude_code",
    "from_codex",
    "from_bash_agent",
    "from_swe_agent_action",
    "from_swe_agent_tool_call",
    "other_call",
]


def other_call(name: str, args: Any, call_id: str = "") -> ToolCall:
    """A passthrough for a tool the algebra cannot express; arguments kept verbatim."""
    payload = args if isinstance(args, dict) else {"input": args}
    return ToolCall(f"{OTHER_PREFIX}{name}", payload, call_id)


def _path(value: Any, cwd: str | None) -> str:
    return normalize_path(str(value), cwd or WORKSPACE_ROOT)


def _cc_read(inp: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    args: dict[str, Any] = {"path": _path(inp.get("file_path", ""), cwd)}
    offset, limit = inp.get("offset"), inp.get("limit")
    start = offset if isinstance(offset, int) and offset >= 1 else 1
    if isinstance(offset, int) and offset > 1:
        args["start_line"] = offset
    if isinstance(limit, int) and limit >= 1:
        args["end_line"] = start + limit - 1
    return args


def _cc_edit(file_path: Any, edit: dict[str, Any], cwd: str | None, call_id: str) -> ToolCall:
    path = _path(file_path, cwd)
    old, new = edit.get("old_string", ""), edit.get("new_string", "")
    if old == "":
        return ToolCall("write", {"path": path, "content": new}, call_id)
    args: dict[str, Any] = {"path": path, "old_str": old, "new_str": new}
    if edit.get("replace_all"):
        args["replace_all"] = True
    return ToolCall("edit", args, call_id)


def _cc_search(name: str, inp: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    if name == "Glob":
        args: dict[str, Any] = {"pattern": "", "glob": inp.get("pattern", "")}
    else:
        args = {"pattern": inp.get("pattern", "")}
        if inp.get("glob"):
            args["glob"] = inp["glob"]
    if inp.get("path"):
        args["path"] = _path(inp["path"], cwd)
    return args


def from_claude_code(
    name: str, inp: Any, call_id: str = "", cwd: str | None = None
) -> list[ToolCall]:
    """One Claude Code ``tool_use`` -> canonical calls (several for ``MultiEdit``)."""
    if not isinstance(inp, dict):
        return [other_call(name, inp, call_id)]
    if name == "Bash" and isinstance(inp.get("command"), str):
        return [ToolCall("bash", {"command": inp["command"]}, call_id)]
    if name == "Read" and inp.get("file_path"):
        return [ToolCall("read", _cc_read(inp, cwd), call_id)]
    if name == "Write" and inp.get("file_path"):
        args = {"path": _path(inp["file_path"], cwd), "content": inp.get("content", "")}
        return [ToolCall("write", args, call_id)]
    if name == "Edit" and inp.get("file_path"):
        return [_cc_edit(inp["file_path"], inp, cwd, call_id)]
    if name == "MultiEdit" and inp.get("file_path") and isinstance(inp.get("edits"), list):
        edits = [e for e in inp["edits"] if isinstance(e, dict)]
        return [_cc_edit(inp["file_path"], e, cwd, call_id) for e in edits]
    if name in ("Grep", "Glob"):
        return [ToolCall("search", _cc_search(name, inp, cwd), call_id)]
    if name == "LS" and inp.get("path"):
        command = f"ls -a {shlex.quote(_path(inp['path'], cwd))}"
        return [ToolCall("bash", {"command": command}, call_id)]
    return [other_call(name, inp, call_id)]


def _shell_command(command: Any) -> str | None:
    """Codex's argv (``["bash", "-lc", "ls"]``) or string -> one bash command line."""
    if isinstance(command, str):
        return command
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        return None
    if len(command) == 3 and command[0] in ("bash", "sh", "zsh") and command[1] in ("-c", "-lc"):
        return command[2]
    return shlex.join(command)


def _patch_calls(patch: str, cwd: str | None, call_id: str) -> list[ToolCall] | None:
    """Codex's ``apply_patch`` envelope -> write (added files), edit (one per hunk of an
    updated file) and bash (deleted or moved files); None when the text is not that format."""
    lines = patch.strip("\n").splitlines()
    if not lines or lines[0].strip() != "*** Begin Patch":
        return None
    calls: list[ToolCall] = []
    i = 1
    while i < len(lines) and lines[i].strip() != "*** End Patch":
        head = lines[i]
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("*** ") or (
                i < len(lines) and lines[i].startswith("*** End of File")):
            body.append(lines[i])
            i += 1
        if head.startswith("*** Add File: "):
            text = "\n".join(b[1:] for b in body if b.startswith("+"))
            calls.append(ToolCall("write", {"path": _path(head[14:], cwd),
                                            "content": text + "\n"}, call_id))
        elif head.startswith("*** Delete File: "):
            path = _path(head[17:], cwd)
            calls.append(ToolCall("bash", {"command": f"rm {shlex.quote(path)}"}, call_id))
        elif head.startswith("*** Update File: "):
            path = _path(head[17:], cwd)
            if i < len(lines) and lines[i].startswith("*** Move to: "):
                dest = _path(lines[i][13:], cwd)
                move = f"mv {shlex.quote(path)} {shlex.quote(dest)}"
                i += 1
                while i < len(lines) and not lines[i].startswith("*** ") or (
                        i < len(lines) and lines[i].startswith("*** End of File")):
                    body.append(lines[i])
                    i += 1
            else:
                dest, move = path, ""
            hunks: list[list[str]] = [[]]
            for b in body:
                if b.startswith("@@"):
                    hunks.append([])
                elif not b.startswith("*** End of File"):
                    hunks[-1].append(b)
            for hunk in (h for h in hunks if h):
                old = "\n".join(b[1:] for b in hunk if b[:1] in (" ", "-", ""))
                new = "\n".join(b[1:] for b in hunk if b[:1] in (" ", "+", ""))
                if not old:
                    return None  # an insertion with no context: no edit can express it
                calls.append(ToolCall("edit", {"path": path, "old_str": old, "new_str": new},
                                      call_id))
            if move:
                calls.append(ToolCall("bash", {"command": move}, call_id))
        else:
            return None
    return calls or None


def from_codex(name: str, args: Any, call_id: str = "", cwd: str | None = None) -> list[ToolCall]:
    """One OpenAI Codex CLI tool call -> canonical calls: ``shell`` / ``exec_command`` /
    ``local_shell`` -> bash, ``apply_patch`` -> write/edit (one per hunk), the rest passed
    through."""
    shells = ("shell", "container.exec", "local_shell", "exec_command")
    if name in shells and isinstance(args, dict):
        command = _shell_command(args.get("command", args.get("cmd")))
        if command is not None:
            return [ToolCall("bash", {"command": command}, call_id)]
    if name == "apply_patch":
        patch = args.get("input", args.get("patch")) if isinstance(args, dict) else args
        if isinstance(patch, str) and (calls := _patch_calls(patch, cwd, call_id)):
            return calls
    return [other_call(name, args, call_id)]


def from_bash_agent(command: str, call_id: str = "") -> ToolCall:
    """An action of a bash-only agent: always ``bash`` (see the module note on ``cat``)."""
    return ToolCall("bash", {"command": command}, call_id)


_SWE_AGENT_COMMANDS = frozenset(
    {"open", "goto", "scroll_up", "scroll_down", "create", "edit", "search_dir",
     "search_file", "find_file", "filemap", "insert", "append", "undo_edit"}
)  # fmt: skip


def _editor_call(argv: list[str], call_id: str, root: str) -> ToolCall | None:
    """``str_replace_editor <command> PATH --flag value ...`` -> read/write/edit, if it maps."""
    if len(argv) < 3:
        return None
    command, path, flags = argv[1], normalize_path(argv[2], root), argv[3:]
    opts: dict[str, list[str]] = {}
    for i, tok in enumerate(flags):
        if tok.startswith("--"):
            opts[tok[2:]] = [t for t in flags[i + 1 : i + 3] if not t.startswith("--")]
    return _editor_from_opts(command, path, opts, call_id)


def _editor_from_opts(
    command: str, path: str, opts: dict[str, Any], call_id: str
) -> ToolCall | None:
    def first(key: str) -> Any:
        v = opts.get(key)
        return v[0] if isinstance(v, list) and v else v

    if command == "view":
        args: dict[str, Any] = {"path": path}
        rng = opts.get("view_range") or []
        if len(rng) == 2 and str(rng[0]).isdigit():
            args["start_line"] = int(rng[0])
            if str(rng[1]).isdigit():
                args["end_line"] = int(rng[1])
        return ToolCall("read", args, call_id)
    if command == "create" and first("file_text") is not None:
        return ToolCall("write", {"path": path, "content": first("file_text")}, call_id)
    if command == "str_replace" and first("old_str"):
        args = {"path": path, "old_str": first("old_str"), "new_str": first("new_str") or ""}
        return ToolCall("edit", args, call_id)
    return None


def from_swe_agent_action(action: str, call_id: str = "", root: str = WORKSPACE_ROOT) -> ToolCall:
    """A SWE-agent action string (``thought``-less ``action`` field of a step)."""
    text = action.strip()
    head = text.split(None, 1)[0] if text else ""
    if head == "submit":
        return ToolCall("submit", {}, call_id)
    if head == "str_replace_editor":
        try:
            mapped = _editor_call(shlex.split(text), call_id, root)
        except ValueError:
            mapped = None
        return mapped or other_call(head, {"command": text}, call_id)
    if head in _SWE_AGENT_COMMANDS:
        return other_call(head, {"command": text}, call_id)
    return from_bash_agent(text, call_id)


def from_swe_agent_tool_call(
    name: str, arguments: Any, call_id: str = "", root: str = WORKSPACE_ROOT
) -> ToolCall:
    """A SWE-agent function call (tool-calling mode): ``{"name", "arguments": "<json>"}``."""
    args = arguments
    if isinstance(arguments, str):
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError:
            return other_call(name, {"arguments": arguments}, call_id)
    if not isinstance(args, dict):
        return other_call(name, args, call_id)
    if name == "bash" and isinstance(args.get("command"), str):
        return from_bash_agent(args["command"], call_id)
    if name == "submit":
        return ToolCall("submit", {}, call_id)
    if name == "str_replace_editor" and args.get("path"):
        opts = {k: v for k, v in args.items() if k not in ("command", "path")}
        path = normalize_path(str(args["path"]), root)
        mapped = _editor_from_opts(str(args.get("command", "")), path, opts, call_id)
        if mapped is not None:
            return mapped
    return other_call(name, args, call_id)
