"""A scripted bug writer for the fake model server: it reads a bug-writing prompt and answers.

The prompt (``swemill.synth.bug_prompts``) names the module and the function and shows the
function after ``FUNCTION_HEADER``. :func:`subtle_edit` makes a small change of behaviour a
model might make (a comparison flipped, an off-by-one, ``and`` for ``or``); for
``lm-rewrite``, whose prompt shows only a stub, the original is read from the repository on
disk (the fake "re-implements" it) and edited the same way. :func:`bug_writer_script` turns a
plan of answer kinds into a script for :class:`~swemill_testkit.fake_server.FakeOpenAIServer`::

    with FakeOpenAIServer(bug_writer_script(root, ["edit", "diff", "noop"])) as srv: ...

The same model writes the problem statements when a run has no other issue writer, so the
script answers issue-writing prompts (:func:`is_issue_request`) too, from their own plan of
:data:`ISSUE_KINDS` (a statement in prose from the failing test ids, one that quotes a diff,
an empty one, one cut at the token limit).
"""

from __future__ import annotations

import difflib
import re
import textwrap
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from swemill.synth.bug_answer import function_spans
from swemill.synth.bug_prompts import FUNCTION_HEADER, STUB_LINE
from swemill_testkit.fake_server import FakeReply

__all__ = ["ANSWER_KINDS", "ISSUE_KINDS", "BugPrompt", "bug_writer_script", "is_issue_request",
           "issue_answer", "originals", "read_prompt", "subtle_edit"]

_SHOWN = re.compile(re.escape(FUNCTION_HEADER) + r" `([^`]+)`\n```python\n(.*?)^```",
                    re.DOTALL | re.MULTILINE)
_MODULE = re.compile(r"^Module: (\S+)$", re.MULTILINE)
_EDITS = [(r" is not None", " is None"), (r" is None", " is not None"),
          (r" < ", " <= "), (r" <= ", " < "), (r" > ", " >= "), (r" >= ", " > "),
          (r" == ", " != "), (r" != ", " == "), (r" and ", " or "), (r" or ", " and "),
          (r" \+ 1\b", " + 2"), (r" - 1\b", " - 2"), (r"\bnot ", "")]

ANSWER_KINDS = ("edit", "diff", "bad_diff", "outside", "noop", "signature", "unparseable",
                "truncated", "empty", "same_behaviour")
"""What :func:`answer` can be told to give: a whole edited function, the same edit as a diff,
a diff whose lines are not in the function, an edit plus a new import, the function
unchanged, a renamed parameter, broken syntax, an answer cut at the token limit, nothing, a
reformatted but equivalent function."""


class BugPrompt:
    """What one bug-writing request asked: module, function, shown text, original text."""

    def __init__(self, file: str, qualname: str, shown: str, original: str) -> None:
        self.file, self.qualname, self.shown, self.original = file, qualname, shown, original

    @property
    def rewrite(self) -> bool:
        return STUB_LINE in self.shown


Originals = dict[tuple[str, str], str]


def originals(root: Path) -> Originals:
    """``(file, qualname) -> function text`` of every Python file under ``root``. Read once,
    before the server starts: CPython 3.11's parser is not safe to run in two threads at
    once, and the code under test parses in its own."""
    out: Originals = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        for span in function_spans(rel, source):
            out.setdefault((rel, span.qualname), "".join(lines[span.start : span.end]))
    return out


def read_prompt(body: dict[str, Any], known: Originals) -> BugPrompt:
    """The prompt of a chat-completions request body; ``known``: :func:`originals`."""
    text = _user_text(body)
    shown, module = _SHOWN.search(text), _MODULE.search(text)
    assert shown is not None and module is not None, text[:500]
    file, qualname = module.group(1), shown.group(1)
    return BugPrompt(file, qualname, shown.group(2), known[(file, qualname)])


def subtle_edit(function: str) -> str | None:
    """``function`` with one small change of behaviour in its body, or None if none fits."""
    lines = function.splitlines(keepends=True)
    body = _code_start(lines)
    for pattern, new in _EDITS:
        for i in range(body, len(lines)):
            code = lines[i].split("#", 1)[0]
            if '"' in code or "'" in code:
                continue  # leave string literals alone
            if re.search(pattern, code):
                lines[i] = re.sub(pattern, new, lines[i], count=1)
                return "".join(lines)
    return None


def _code_start(lines: list[str]) -> int:
    """The index of the first line after the signature and a docstring (text only: no
    parser in the server's threads)."""
    i = next(k for k, ln in enumerate(lines) if ln.lstrip().startswith(("def ", "async def ")))
    while not lines[i].split("#", 1)[0].rstrip().endswith(":"):
        i += 1
    i += 1
    if i < len(lines) and lines[i].lstrip()[:3] in ('"' * 3, "'" * 3):
        quote, rest = lines[i].lstrip()[:3], lines[i].lstrip()[3:]
        while quote not in rest:
            i += 1
            rest = lines[i]
        i += 1
    return i


def _diff(before: str, after: str, file: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True), f"a/{file}",
                                        f"b/{file}"))


def answer(prompt: BugPrompt, kind: str) -> FakeReply:
    """The reply of one ``kind`` (see :data:`ANSWER_KINDS`) to ``prompt``."""
    base = prompt.original
    edited = subtle_edit(base) or base.replace("return ", "return None and ", 1)
    fenced = f"```python\n{edited}```\n"
    if kind == "edit":
        return FakeReply(text=f"Here is the function:\n{fenced}")
    if kind == "diff":
        if prompt.rewrite:  # a diff against what was shown: the stub
            return FakeReply(text=f"```diff\n{_diff(prompt.shown, edited, prompt.file)}```")
        return FakeReply(text=f"```diff\n{_diff(base, edited, prompt.file)}```")
    if kind == "bad_diff":
        return FakeReply(text="```diff\n@@ -1,2 +1,2 @@\n-    no_such_line = 1\n"
                              "+    no_such_line = 2\n```")
    if kind == "outside":
        return FakeReply(text=f"```python\nimport functools\n\n\n{textwrap.dedent(edited)}```")
    if kind == "noop":
        return FakeReply(text=f"```python\n{base}```")
    if kind == "signature":
        renamed = re.sub(r"\(self, (\w+)|\((\w+)", lambda m: m.group(0) + "_x", edited,
                         count=1)
        return FakeReply(text=f"```python\n{renamed}```")
    if kind == "unparseable":
        return FakeReply(text=f"```python\n{edited.rstrip()}\n        return (\n```")
    if kind == "truncated":
        return FakeReply(text=f"```python\n{edited[: len(edited) // 2]}",
                         finish_reason="length")
    if kind == "empty":
        return FakeReply(text="")
    if kind == "same_behaviour":
        return FakeReply(text=f"```python\n{_reformatted(base)}```")
    raise ValueError(f"unknown answer kind {kind!r}")


def _reformatted(function: str) -> str:
    """The same behaviour, written differently: a comment and a ``pass`` added."""
    lines = function.splitlines(keepends=True)
    at = _code_start(lines)
    line = lines[at] if at < len(lines) else lines[-1]
    indent = line[: len(line) - len(line.lstrip())]
    return "".join(lines[:at] + [f"{indent}# same as before\n", f"{indent}pass\n"] + lines[at:])


ISSUE_KINDS = ("clean", "leaky", "empty", "truncated")
_TEST_ID = re.compile(r"^- (\S+::\S+)$", re.MULTILINE)


def _user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")


def is_issue_request(body: dict[str, Any]) -> bool:
    """A request for a problem statement (the failing tests' evidence), not for a bug."""
    text = _user_text(body)
    return "Failing tests:" in text and FUNCTION_HEADER not in text


def issue_answer(body: dict[str, Any], kind: str) -> FakeReply:
    """The reply of one ``kind`` (see :data:`ISSUE_KINDS`) to an issue-writing request."""
    ids = _TEST_ID.findall(_user_text(body))
    if kind == "clean":
        return FakeReply(text=f"Since the latest change {len(ids)} test(s) fail that passed "
                              f"before: {', '.join(ids)}. The results they check come out "
                              "wrong; the rest of the library behaves as it did.")
    if kind == "leaky":
        return FakeReply(text="The fix:\ndiff --git a/x.py b/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    if kind == "empty":
        return FakeReply(text="")
    if kind == "truncated":
        return FakeReply(text="Since the latest change some", finish_reason="length")
    raise ValueError(f"unknown issue answer kind {kind!r}")


def bug_writer_script(root: Path, plan: Sequence[str] | Callable[[int, BugPrompt], str],
                      issues: Sequence[str] = ("clean",),
                      **reply: Any) -> Callable[[dict[str, Any]], FakeReply]:
    """A server script answering the k-th bug-writing request with ``plan[k]`` (the last kind
    repeats) or ``plan(k, prompt)``, and the k-th issue-writing request with ``issues[k]``
    (the last repeats); ``reply`` sets FakeReply fields (``cost``, ``delay_s``)."""
    lock = threading.Lock()
    seen: list[int] = []
    asked: list[int] = []
    known = originals(root)

    def script(request: dict[str, Any]) -> FakeReply:
        if is_issue_request(request["body"]):
            with lock:
                asked.append(len(asked))
                n = len(asked) - 1
            out = issue_answer(request["body"], issues[min(n, len(issues) - 1)])
        else:
            with lock:
                k = len(seen)
                seen.append(k)
            prompt = read_prompt(request["body"], known)
            kind = plan(k, prompt) if callable(plan) else plan[min(k, len(plan) - 1)]
            out = answer(prompt, kind)
        for key, value in reply.items():
            setattr(out, key, value)
        return out

    return script


def main(argv: list[str] | None = None) -> None:
    """``python -m swemill_testkit.fake_bugwriter --root DIR [--kinds edit,diff] [--port N]``:
    a bug-writing model on loopback for the repository at DIR (a source's working copy)."""
    import argparse
    import time

    from swemill_testkit.fake_server import FakeOpenAIServer

    parser = argparse.ArgumentParser(description="Scripted bug writer (OpenAI-compatible)")
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--kinds", default="edit,diff", help=f"cycled; of {ANSWER_KINDS}")
    parser.add_argument("--issue-kinds", default="clean",
                        help=f"statements, the last repeats; of {ISSUE_KINDS}")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--price", default="3,15", help="IN,OUT $ per million tokens billed")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    p_in, p_out = (float(x) for x in args.price.split(","))
    issues = [k.strip() for k in args.issue_kinds.split(",") if k.strip()]
    srv = FakeOpenAIServer(bug_writer_script(args.root, lambda k, _p: kinds[k % len(kinds)],
                                             issues),
                           port=args.port, price_in=p_in, price_out=p_out).start()
    print(f"fake bug writer at {srv.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.close()


if __name__ == "__main__":
    main()
