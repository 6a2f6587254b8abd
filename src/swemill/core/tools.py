"""The canonical tool algebra: one set of tools every policy, trace and environment speaks.

Seven tools: ``bash(command)``, ``read(path, start_line?, end_line?)``, ``write(path,
content)``, ``edit(path, old_str, new_str, replace_all?)``, ``search(pattern, path?, glob?)``,
``run_tests(tests?)`` and ``submit()``. Each has a JSON schema generated from a strict pydantic
model, so the schema a model sees and the validator that records its format errors agree.

Actions from other agents that the algebra cannot express (a todo list, a web fetch, a
sub-agent) keep their original name behind the ``other:`` prefix and their arguments as given;
they are never valid calls for our environment but are kept so imported traces lose nothing.

:meth:`ToolCall.canonical` gives the form in which two actions that mean the same thing are
equal: paths relative to the workspace root, bash whitespace collapsed outside quotes,
defaults dropped, argument keys sorted, the provider's call id cleared.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import posixpath
import shlex
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError
from pydantic.json_schema import SkipJsonSchema

__all__ = [
    "ToolCall",
    "TOOL_NAMES",
    "OTHER_PREFIX",
    "WORKSPACE_ROOT",
    "tool_schemas",
    "anthropic_tools",
    "validate_call",
    "normalize_path",
    "normalize_command",
]

TOOL_NAMES = ("bash", "read", "write", "edit", "search", "run_tests", "submit")
OTHER_PREFIX = "other:"
WORKSPACE_ROOT = "/workspace"
"""Where the task's repository is mounted in a sandbox (the same value as the sandbox's)."""


class _Args(BaseModel):
    # strict: a model that sends "5" for a line number made a format error worth recording.
    model_config = ConfigDict(extra="forbid", strict=True)


_Line = Annotated[int, Field(ge=1)]


class BashArgs(_Args):
    """Run a shell command in the workspace and return its output and exit code."""

    command: str = Field(min_length=1, description="The command line, run by bash.")


class ReadArgs(_Args):
    """Read a text file, optionally only a range of its lines (1-based, inclusive)."""

    path: str = Field(min_length=1, description="File path, relative to the workspace root.")
    start_line: _Line | SkipJsonSchema[None] = Field(None, description="First line to read.")
    end_line: _Line | SkipJsonSchema[None] = Field(None, description="Last line to read.")


class WriteArgs(_Args):
    """Create a file or replace its whole content."""

    path: str = Field(min_length=1, description="File path, relative to the workspace root.")
    content: str = Field(description="The complete new content of the file.")


class EditArgs(_Args):
    """Replace an exact string in a file; it must occur once unless replace_all is true."""

    path: str = Field(min_length=1, description="File path, relative to the workspace root.")
    old_str: str = Field(min_length=1, description="The exact text to replace.")
    new_str: str = Field(description="The replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence.")


class SearchArgs(_Args):
    """Search file contents for a regular expression; an empty pattern lists the files."""

    pattern: str = Field(description="Regular expression; empty to list matching files.")
    path: str | SkipJsonSchema[None] = Field(None, description="Directory or file to search.")
    glob: str | SkipJsonSchema[None] = Field(None, description="Only files matching this glob.")


class RunTestsArgs(_Args):
    """Run the task's tests (all of them, or only the given test ids) and report results."""

    tests: list[str] | SkipJsonSchema[None] = Field(None, description="Test ids; omit for all.")


class SubmitArgs(_Args):
    """Finish: the workspace as it is now is the answer and gets graded."""


ARG_MODELS: dict[str, type[_Args]] = {
    "bash": BashArgs,
    "read": ReadArgs,
    "write": WriteArgs,
    "edit": EditArgs,
    "search": SearchArgs,
    "run_tests": RunTestsArgs,
    "submit": SubmitArgs,
}


def _strip_titles(node: Any, in_properties: bool = False) -> Any:
    """Drop pydantic's ``title`` keys (noise for a model), but never a property named title."""
    if isinstance(node, dict):
        return {
            k: _strip_titles(v, in_properties=(k == "properties" and not in_properties))
            for k, v in node.items()
            if in_properties or not (k == "title" or (k == "default" and v is None))
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _parameters(name: str) -> dict[str, Any]:
    """A fresh copy each call (callers may change it) of a schema made once: pydantic's schema
    generation is ~2 ms of CPU per tool, on every environment reset."""
    return copy.deepcopy(_parameters_once(name))


@functools.cache
def _parameters_once(name: str) -> dict[str, Any]:
    schema = _strip_titles(ARG_MODELS[name].model_json_schema())
    schema.pop("description", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def tool_schemas(names: tuple[str, ...] = TOOL_NAMES) -> list[dict[str, Any]]:
    """The tools in OpenAI function-tool shape: ``{"type": "function", "function": {...}}``."""
    return [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": (ARG_MODELS[n].__doc__ or "").strip(),
                "parameters": _parameters(n),
            },
        }
        for n in names
    ]


def anthropic_tools(schemas: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The same tools in Anthropic's shape: ``{"name", "description", "input_schema"}``."""
    return [
        {
            "name": s["function"]["name"],
            "description": s["function"]["description"],
            "input_schema": s["function"]["parameters"],
        }
        for s in (schemas if schemas is not None else tool_schemas())
    ]


class ToolCall(BaseModel):
    """One action: a tool name from the algebra (or ``other:<name>``) and its arguments."""

    model_config = ConfigDict(extra="forbid")

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str = ""
    """Provider's call id, used to pair a call with its result; not part of the action."""

    def __init__(
        self, name: str, args: dict[str, Any] | None = None, id: str = "", **data: Any
    ) -> None:
        # Positional construction (``ToolCall("read", {...})``) reads like the algebra.
        super().__init__(name=name, args={} if args is None else args, id=id, **data)

    @property
    def is_other(self) -> bool:
        """True for a passthrough of another agent's tool that the algebra cannot express."""
        return self.name.startswith(OTHER_PREFIX)

    def canonical(self, root: str = WORKSPACE_ROOT) -> ToolCall:
        """The normal form: equal for two calls that mean the same action (id cleared)."""
        return ToolCall(self.name, _canonical_args(self.name, self.args, root))

    def canonical_key(self, root: str = WORKSPACE_ROOT) -> str:
        """A stable hex digest of the canonical form, for grouping and counting actions."""
        c = self.canonical(root)
        blob = json.dumps([c.name, c.args], sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def validate_call(call: ToolCall) -> list[str]:
    """Everything wrong with a call as a request to our environment; empty when valid."""
    model = ARG_MODELS.get(call.name)
    if model is None:
        return [f"unknown tool {call.name!r}; expected one of {', '.join(TOOL_NAMES)}"]
    try:
        parsed = model.model_validate(call.args)
    except PydanticValidationError as exc:
        # One message per argument: a union's per-branch errors only repeat the same fault.
        errors: dict[str, str] = {}
        for e in exc.errors():
            errors.setdefault(str(e["loc"][0]) if e["loc"] else "args", e["msg"])
        return [f"{call.name}.{field}: {msg}" for field, msg in errors.items()]
    bad_range = (
        isinstance(parsed, ReadArgs)
        and parsed.start_line is not None
        and parsed.end_line is not None
        and parsed.end_line < parsed.start_line
    )
    return ["read.end_line: must not be before start_line"] if bad_range else []


def normalize_path(path: str, root: str = WORKSPACE_ROOT) -> str:
    """``/workspace/x/../y`` -> ``y``; ``./a`` -> ``a``; the root itself -> ``.``.

    A path outside ``root`` stays absolute (normalised), so a caller can refuse it.
    """
    p = path.strip()
    if not p:
        return "."
    norm = posixpath.normpath(p)
    if not posixpath.isabs(norm):
        return norm
    base = posixpath.normpath(root) if root else "/"
    if norm == base:
        return "."
    prefix = base.rstrip("/") + "/"
    return norm[len(prefix):] if norm.startswith(prefix) else norm


def normalize_command(command: str) -> str:
    """Collapse runs of blanks outside quotes; quoting and line breaks are kept as written.

    Falls back to a plain strip where collapsing could change meaning: unbalanced quotes
    (shlex cannot split it) and here-documents (their bodies are literal text).
    """
    text = command.strip()
    if "<<" in text:
        return text
    try:
        shlex.split(text)
    except ValueError:
        return text
    return _collapse_unquoted_blanks(text)


def _collapse_unquoted_blanks(text: str) -> str:
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in " \t\n":
            j = i
            while j < len(text) and text[j] in " \t\n":
                j += 1
            # Blanks around a line break carry no meaning outside quotes; the break does.
            ch = "\n" if "\n" in text[i:j] else " "
            i = j - 1
        out.append(ch)
        i += 1
    return "".join(out)


def _canonical_args(name: str, args: dict[str, Any], root: str) -> dict[str, Any]:
    out = dict(args)
    if name not in ARG_MODELS:
        return _sorted(out)
    if isinstance(out.get("path"), str):
        out["path"] = normalize_path(out["path"], root)
    if name == "bash" and isinstance(out.get("command"), str):
        out["command"] = normalize_command(out["command"])
    elif name == "read":
        if out.get("start_line") == 1:
            out.pop("start_line")
    elif name == "edit":
        if out.get("replace_all") is False:
            out.pop("replace_all")
    elif name == "search":
        if out.get("path") == ".":
            out.pop("path")
    elif name == "run_tests" and isinstance(out.get("tests"), list):
        tests = sorted({str(t).strip() for t in out["tests"]} - {""})
        out["tests"] = tests or None
    return _sorted({k: v for k, v in out.items() if v is not None})


def _sorted(args: dict[str, Any]) -> dict[str, Any]:
    return {k: args[k] for k in sorted(args)}
