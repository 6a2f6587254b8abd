"""A bug writer's answer -> the new module text, or the named reason it is refused.

The model was shown one function (:mod:`swemill.synth.bug_prompts`) and answers with the
whole new function or a unified diff of it. Either way the answer must parse, keep the
function's signature, leave everything else in the module as it was, and change more than
whitespace, comments or the docstring. A diff is applied by its lines' content, not its line
numbers (a model cannot count lines it was shown without numbers), and only to the function.

Reasons, each a drop in ``candidates/``: ``answer_empty``, ``answer_truncated`` (cut at the
token limit), ``answer_bad_diff`` (a diff that does not parse or apply), ``answer_no_function``
(no definition of the function), ``answer_unparseable``, ``answer_outside_function``,
``answer_signature_changed``, ``answer_no_op``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from swemill.core.errors import SynthesisError
from swemill.synth.bug_prompts import STUB_LINE
from swemill.synth.patches import parse_patch

__all__ = ["AnswerRefused", "FunctionSpan", "function_spans", "read_answer", "stub_of"]

_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_HUNK = re.compile(r"^@@[^@]*@@")
Def = ast.FunctionDef | ast.AsyncFunctionDef


class AnswerRefused(Exception):
    """An answer that is not a usable bug; ``reason`` names the drop."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class FunctionSpan:
    """A module- or class-level function: its lines ``[start, end)`` (decorators included,
    0-based) and where its body begins."""

    file: str
    qualname: str
    start: int
    end: int
    indent: str
    doc_end: int
    """The line after the def's signature and docstring: what ``lm-rewrite`` keeps."""


def function_spans(file: str, source: str) -> list[FunctionSpan]:
    """Every function and method of ``source`` (nested functions belong to their parent)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    out: list[FunctionSpan] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, Def) and node.end_lineno is not None:
                out.append(_span(file, f"{prefix}{node.name}", node, lines))

    visit(tree.body, "")
    return out


def _span(file: str, qualname: str, node: Def, lines: list[str]) -> FunctionSpan:
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    first = node.body[0]
    doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
        and isinstance(first.value.value, str)
    header_end = (first.end_lineno or first.lineno) if doc else first.lineno - 1
    if not doc and first.lineno == node.lineno:  # ``def f(): return 1`` on one line
        header_end = node.lineno
    line = lines[start] if start < len(lines) else ""
    indent = line[: len(line) - len(line.lstrip())]
    return FunctionSpan(file, qualname, start, node.end_lineno or node.lineno, indent,
                        header_end)


def stub_of(source: str, span: FunctionSpan) -> str:
    """The function with its body (all but the docstring) replaced by one stub line."""
    lines = source.splitlines(keepends=True)
    kept = lines[span.start : span.doc_end]
    while kept and (not kept[-1].strip() or kept[-1].lstrip().startswith("#")):
        kept.pop()  # comments before the first statement belong to the body
    head = "".join(kept)
    if not kept or not head.rstrip().endswith((":", '"', "'")):
        raise AnswerRefused("unstubbable", "signature and body share a line")
    inner = span.indent + "    "
    return head + inner + STUB_LINE + "\n"


def read_answer(text: str, *, source: str, span: FunctionSpan, shown: str) -> str:
    """The module ``source`` with ``span``'s function replaced as the answer says, checked;
    ``shown``: the function's text the model saw (the diff applies to it)."""
    if not text.strip():
        raise AnswerRefused("answer_empty")
    kind, body = _payload(text)
    lines = source.splitlines(keepends=True)
    if kind == "diff":
        new_function = _apply_diff(body, shown, source, span)
    else:
        new_function = _whole_function(body, span, lines)
    if not new_function.endswith("\n"):
        new_function += "\n"
    _check("".join(lines[span.start : span.end]), new_function, span)
    return "".join(lines[: span.start]) + new_function + "".join(lines[span.end :])


def _payload(text: str) -> tuple[str, str]:
    """("diff" | "code", the fenced or bare payload)."""
    blocks = _FENCE.findall(text)
    for lang, body in blocks:
        if lang.lower() in ("diff", "patch", "udiff") or _looks_like_diff(body):
            return "diff", body
    if blocks:
        return "code", blocks[0][1]
    if _looks_like_diff(text):
        return "diff", text
    if "```" in text:  # an opening fence that never closes: the answer was cut short
        raise AnswerRefused("answer_unparseable", "an unclosed code block")
    return "code", text


def _looks_like_diff(text: str) -> bool:
    return any(_HUNK.match(ln) for ln in text.splitlines())


def _whole_function(code: str, span: FunctionSpan, lines: list[str]) -> str:
    code = textwrap.dedent(code).strip("\n") + "\n"
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise AnswerRefused("answer_unparseable", f"line {exc.lineno}: {exc.msg}") from exc
    if span.indent and (inner := _only_method(tree, code)) is not None:
        code, tree = inner  # a method answered inside its class: the method alone
    defs = [n for n in tree.body if isinstance(n, Def)]
    if not defs and any(isinstance(n, ast.ClassDef) for n in tree.body):
        raise AnswerRefused("answer_outside_function", "the answer holds a class")
    if not defs:
        raise AnswerRefused("answer_no_function", "the answer defines no function")
    if len(tree.body) > 1:
        raise AnswerRefused("answer_outside_function",
                            f"the answer holds {len(tree.body)} top-level statements")
    node = defs[0]
    if not node.decorator_list:  # decorators left out of the answer are kept, not dropped
        kept = lines[span.start : _def_line(lines, span)]
        code = textwrap.dedent("".join(kept)) + code
    return textwrap.indent(code, span.indent, lambda ln: bool(ln.strip()))


def _only_method(tree: ast.Module, code: str) -> tuple[str, ast.Module] | None:
    """The one method of an answer that is one class holding only it (a docstring and
    ``pass`` aside), as its own code; None for any other answer."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.ClassDef):
        return None
    body = [n for n in tree.body[0].body if not isinstance(n, ast.Pass | ast.Expr)]
    if len(body) != 1 or not isinstance(body[0], Def) or body[0].end_lineno is None:
        return None
    node = body[0]
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    method = textwrap.dedent("".join(code.splitlines(keepends=True)[first - 1 : node.end_lineno]))
    return method, ast.parse(method)


def _def_line(lines: list[str], span: FunctionSpan) -> int:
    for i in range(span.start, span.end):
        if lines[i].lstrip().startswith(("def ", "async def ")):
            return i
    return span.start


def _apply_diff(diff: str, shown: str, source: str, span: FunctionSpan) -> str:
    hunks = _hunks(diff, span)
    fn = shown.splitlines(keepends=True)
    at = 0
    for old, new in hunks:
        where = _find(fn, old, at)
        if where < 0:
            if _find(source.splitlines(keepends=True), old, 0) >= 0:
                raise AnswerRefused("answer_outside_function",
                                    "a hunk changes lines outside the function")
            raise AnswerRefused("answer_bad_diff", "a hunk's lines are not in the function")
        fn[where : where + len(old)] = new
        at = where + len(new)
    return "".join(fn)


def _hunks(diff: str, span: FunctionSpan) -> list[tuple[list[str], list[str]]]:
    """(old lines, new lines) of each hunk; the header's line counts are recomputed from the
    body (models miscount them) before ``unidiff`` reads it."""
    lines = diff.splitlines()
    if not any(ln.startswith("--- ") for ln in lines):
        lines = [f"--- a/{span.file}", f"+++ b/{span.file}", *lines]
    fixed: list[str] = []
    for i, ln in enumerate(lines):
        if _HUNK.match(ln):
            body = []
            for nxt in lines[i + 1 :]:
                if _HUNK.match(nxt) or nxt.startswith(("--- ", "+++ ", "diff ")):
                    break
                body.append(nxt if nxt else " ")
            n_old = sum(1 for b in body if b[:1] in (" ", "-"))
            n_new = sum(1 for b in body if b[:1] in (" ", "+"))
            ln = f"@@ -1,{n_old} +1,{n_new} @@"
        elif not ln and fixed and not fixed[-1].startswith(("--- ", "+++ ")):
            ln = " "  # a blank context line whose leading space was trimmed
        fixed.append(ln)
    try:
        files = parse_patch("\n".join(fixed) + "\n")
    except SynthesisError as exc:
        raise AnswerRefused("answer_bad_diff", str(exc)[:200]) from exc
    if not files or not any(f.hunks for f in files):
        raise AnswerRefused("answer_bad_diff", "no hunk")
    if len(files) > 1 or not span.file.endswith(files[0].path.split("/")[-1]):
        raise AnswerRefused("answer_outside_function", f"the diff touches {files[-1].path}")
    out = []
    for h in files[0].hunks:
        old = [ln[1:] for ln in h.lines if ln[:1] in (" ", "-")]
        new = [ln[1:] for ln in h.lines if ln[:1] in (" ", "+")]
        out.append((old, new))
    return out


def _find(lines: list[str], block: list[str], start: int) -> int:
    """The first index from ``start`` where ``block`` matches (trailing blanks ignored)."""
    want = [ln.rstrip() for ln in block]
    have = [ln.rstrip() for ln in lines]
    for i in range(start, len(have) - len(want) + 1):
        if have[i : i + len(want)] == want:
            return i
    return -1


def _check(old: str, new: str, span: FunctionSpan) -> None:
    """``new`` (the text that takes ``old``'s lines) is one function, the same signature,
    other behaviour. The rest of the module is untouched by construction, so only the
    function's own text is parsed, inside a class where it is indented."""
    try:
        new_body = _parse(new, span)
        compile(ast.Module(body=new_body, type_ignores=[]), span.file, "exec",
                dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise AnswerRefused("answer_unparseable", str(exc)[:200]) from exc
    name = span.qualname.rpartition(".")[2]
    if len(new_body) != 1 or not isinstance(new_body[0], Def) or new_body[0].name != name:
        raise AnswerRefused("answer_outside_function", "the module changed outside the function")
    old_fn, new_fn = _parse(old, span)[0], new_body[0]
    assert isinstance(old_fn, Def)
    if _signature(old_fn) != _signature(new_fn):
        raise AnswerRefused("answer_signature_changed", f"{span.qualname}'s signature changed")
    if _behaviour(old_fn) == _behaviour(new_fn):
        raise AnswerRefused("answer_no_op", "only whitespace, comments or the docstring changed")


def _parse(function: str, span: FunctionSpan) -> list[ast.stmt]:
    """The statements of a function's text: a method's (indented) inside ``class _:``."""
    if not span.indent:
        return ast.parse(function).body
    tree = ast.parse("class _:\n" + function)
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)
    return [*cls.body, *tree.body[1:]]


def _signature(fn: Def) -> str:
    parts = [type(fn).__name__, fn.name, ast.dump(fn.args), ast.dump(fn.returns)
             if fn.returns else "", *(ast.dump(d) for d in fn.decorator_list)]
    parts += [ast.dump(t) for t in getattr(fn, "type_params", [])]
    return "\n".join(parts)


def _behaviour(fn: Def) -> str:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return "\n".join(ast.dump(s) for s in body)
