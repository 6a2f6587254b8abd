"""What the bug writer is asked, as data: one prompt per model-written strategy, versioned.

A prompt's ``version`` goes into every candidate it made (``metadata["provenance"]``), so a
change of wording is a new version and tasks made under the old one stay recognisable. The
model sees one function and the module around it (for ``lm-rewrite``, with the function's
body taken out), never a test. The function is shown in the block that follows
``FUNCTION_HEADER``; answers are read by :mod:`swemill.synth.bug_answer`.
"""

from __future__ import annotations

from dataclasses import dataclass

from swemill.core.records import Message, TextBlock

__all__ = ["BugPrompt", "FUNCTION_HEADER", "PROMPTS", "STUB_LINE", "messages_for"]

FUNCTION_HEADER = "The function to change:"
"""The line right before the fenced function in every prompt (scripted models find it)."""

STUB_LINE = "...  # body removed: write it"
"""What ``lm-rewrite`` puts where the function's body was."""


@dataclass(frozen=True, slots=True)
class BugPrompt:
    """One strategy's prompt: a system text and a user template (``str.format`` fields
    ``repo``, ``file``, ``qualname``, ``context``, ``function``)."""

    strategy: str
    version: str
    system: str
    user: str

    @property
    def tag(self) -> str:
        return f"{self.strategy}@{self.version}"


_ANSWER_FORM = (
    "Answer with the complete new function in one ```python fenced block, or with a unified "
    "diff of that function in one ```diff fenced block, and nothing else: no explanation, no "
    "other function, no import, no test."
)

_MODIFY = BugPrompt(
    strategy="lm-modify",
    version="1",
    system=(
        "You help build a training set of realistic software bugs. You are shown one function "
        "of a Python project and the module it lives in. Change the function's behaviour in a "
        "subtle, plausible way, the kind of mistake a careful developer could make and a "
        "reviewer could miss: an off-by-one, a wrong comparison or default, a missed edge "
        "case, a condition inverted in one branch, an early return, a wrong variable of the "
        "same type. Keep the signature (name, parameters, defaults, decorators, return "
        "annotation) exactly as it is. The code must still run: no syntax error, no name "
        "that does not exist, no exception raised on purpose. Do not add comments that point "
        "at the change, do not change the docstring. " + _ANSWER_FORM
    ),
    user=(
        "Project: {repo}\nModule: {file}\n\nThe module around the function:\n```python\n"
        "{context}```\n\n" + FUNCTION_HEADER + " `{qualname}`\n```python\n{function}```\n"
    ),
)

_REWRITE = BugPrompt(
    strategy="lm-rewrite",
    version="1",
    system=(
        "You implement Python functions. You are shown a module of a project in which one "
        "function's body has been removed; only its signature and docstring remain. Write the "
        "body from the signature, the docstring and how the rest of the module uses it. Keep "
        "the signature (name, parameters, defaults, decorators, return annotation) exactly as "
        "it is. " + _ANSWER_FORM
    ),
    user=(
        "Project: {repo}\nModule: {file}\n\nThe module, with the function's body removed:\n"
        "```python\n{context}```\n\n" + FUNCTION_HEADER + " `{qualname}`\n```python\n"
        "{function}```\n"
    ),
)

PROMPTS: dict[str, BugPrompt] = {p.strategy: p for p in (_MODIFY, _REWRITE)}


def messages_for(prompt: BugPrompt, *, repo: str, file: str, qualname: str, context: str,
                 function: str) -> list[Message]:
    """The system and user messages of one bug-writing call."""
    user = prompt.user.format(repo=repo, file=file, qualname=qualname,
                              context=_ended(context), function=_ended(function))
    return [Message(role="system", content=[TextBlock(text=prompt.system)]),
            Message(role="user", content=[TextBlock(text=user)])]


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
