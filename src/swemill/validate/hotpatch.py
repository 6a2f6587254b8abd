"""Give a live process the functions of an edited module by swapping their code objects.

Runs inside the sandbox, in a fork of the warm server's head image (see
:mod:`swemill.validate.warm_server`), under the repository's interpreter: standard library
only, any Python from 3.8.

The image imported the project at the head commit and collected every test. A broken tree
whose edit stays inside function bodies differs from head only in the code those functions
run, so a fork of the image that swaps in the edited code behaves like a fresh process that
imported the broken tree -- provided that

- module and class bodies are unchanged (the same statements, defaults, decorators, bases and
  docstrings: everything that ran at import is the same),
- no edited function ran before the fork (at import or while tests were collected: a value it
  computed then, say a ``parametrize`` list, would still be head's),
- an edited function keeps its signature, flags (a generator stays a generator), closure
  variables and docstring, and no generator or coroutine of it is suspended in the image.

:func:`plan` checks all of this by comparing the two compiled modules code object by code
object, line numbers aside, and raises :class:`Unservable` when any of it does not hold; the
caller then runs the broken tree the ordinary way. Functions whose code moved to other lines
only are swapped as well, so tracebacks quote the edited file's lines.
"""

from __future__ import annotations

import types
from collections.abc import Container, Iterable, Mapping
from typing import Any

__all__ = ["Unservable", "plan", "apply", "index_functions"]

_CO_OPTIMIZED = 0x0001  # set on function code only: module and class bodies run unoptimized
_LINES = "co_linetable" if hasattr(types.CodeType, "co_linetable") else "co_lnotab"


_SUSPENDABLE = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)


class Unservable(Exception):
    """The edit cannot be applied to a live image; run the broken tree from scratch.
    ``reason`` is short and countable, the message names what it is about."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def _const_key(value: object) -> object:
    if isinstance(value, types.CodeType):
        return ("code", value.co_name)  # nested code is compared on its own
    if isinstance(value, tuple):
        return ("tuple", tuple(_const_key(v) for v in value))
    if isinstance(value, frozenset):
        return ("frozenset", tuple(sorted(repr(_const_key(v)) for v in value)))
    return (type(value).__name__, repr(value))  # 0.0 and -0.0, 1 and True differ here


def _key(code: types.CodeType) -> tuple[object, ...]:
    """Everything that decides what ``code`` does, except line numbers and nested code."""
    return (code.co_name, code.co_code, tuple(_const_key(c) for c in code.co_consts),
            code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
            code.co_flags, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
            getattr(code, "co_exceptiontable", b""))


def _deep_key(code: types.CodeType, memo: dict[int, tuple[object, ...]]) -> tuple[object, ...]:
    """:func:`_key` of ``code`` and of all the code nested in it (each computed once)."""
    key = memo.get(id(code))
    if key is None:
        key = memo[id(code)] = (_key(code), tuple(_deep_key(c, memo) for c in _children(code)))
    return key


def _children(code: types.CodeType) -> list[types.CodeType]:
    return [c for c in code.co_consts if isinstance(c, types.CodeType)]


def _lines(code: types.CodeType) -> tuple[int, bytes]:
    return code.co_firstlineno, bytes(getattr(code, _LINES))


def _signature(code: types.CodeType) -> tuple[object, ...]:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    first = _const_key(code.co_consts[0]) if code.co_consts else None
    return (code.co_flags, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
            code.co_varnames[:n], code.co_freevars, first)


def plan(old: types.CodeType, new: types.CodeType,
         ran: Container[int]) -> list[tuple[types.CodeType, types.CodeType]]:
    """``(live code, replacement)`` pairs that turn module code ``old`` into ``new``.

    ``ran`` holds the ids of every code object that executed before the fork. Raises
    :class:`Unservable` for any edit not confined to the bodies of functions that never ran.
    """
    swaps: list[tuple[types.CodeType, types.CodeType]] = []
    memo: dict[int, tuple[object, ...]] = {}  # both trees stay alive while it is used

    def moved(o: types.CodeType, n: types.CodeType) -> None:
        if _lines(o) != _lines(n):
            swaps.append((o, n))
        for oc, nc in zip(_children(o), _children(n)):  # noqa: B905 - equal lengths; 3.8
            moved(oc, nc)

    def walk(o: types.CodeType, n: types.CodeType, where: str) -> None:
        if o.co_name != n.co_name:
            raise Unservable("definitions reordered", f"{where}: {o.co_name} / {n.co_name}")
        if _deep_key(o, memo) == _deep_key(n, memo):
            moved(o, n)
            return
        name = f"{where}.{o.co_name}" if where else o.co_name
        if o.co_flags & _CO_OPTIMIZED:  # a function whose body (or a nested one) changed
            if id(o) in ran:
                raise Unservable("ran before the fork (at import or collection)", name)
            if _signature(o) != _signature(n):
                raise Unservable("signature, flags, closure or docstring changed", name)
            swaps.append((o, n))
            return
        if _key(o) != _key(n):
            raise Unservable("module- or class-level edit", name)
        old_kids, new_kids = _children(o), _children(n)
        if len(old_kids) != len(new_kids):
            raise Unservable("definitions added or removed", name)
        for oc, nc in zip(old_kids, new_kids):  # noqa: B905 - checked above; 3.8
            walk(oc, nc, "" if o.co_name == "<module>" else name)

    walk(old, new, "")
    return swaps


def index_functions(objects: Iterable[object], files: Container[str]
                    ) -> tuple[dict[int, list[types.FunctionType]], set[int]]:
    """``id(code) -> functions running it`` and the ids of code that a suspended generator
    or coroutine is in, for code from ``files``; taken once in the image, before the fork."""
    functions: dict[int, list[types.FunctionType]] = {}
    suspended: set[int] = set()
    for obj in objects:
        if isinstance(obj, types.FunctionType):
            code = obj.__code__
            if code.co_filename in files:
                functions.setdefault(id(code), []).append(obj)
        elif isinstance(obj, _SUSPENDABLE):
            code = getattr(obj, "gi_code", None) or getattr(obj, "cr_code", None) \
                or getattr(obj, "ag_code", None)
            if code is not None and code.co_filename in files:
                suspended.add(id(code))
    return functions, suspended


def apply(swaps: list[tuple[types.CodeType, types.CodeType]],
          functions: Mapping[int, list[Any]], suspended: Container[int]) -> int:
    """Swap the code of every live function in ``swaps``; the number swapped."""
    for old, _ in swaps:
        if id(old) in suspended:
            raise Unservable("suspended generator or coroutine", old.co_name)
    count = 0
    for old, new in swaps:
        for fn in functions.get(id(old), ()):
            fn.__code__ = new
            count += 1
    return count
