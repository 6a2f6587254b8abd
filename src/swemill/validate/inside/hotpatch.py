"""Give a live process the functions of an edited module by swapping their code objects.

Runs inside the sandbox, in a fork of the warm server's head image (see
:mod:`swemill.validate.inside.image`), under the repository's interpreter: standard library
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
  variables and docstring, and no generator or coroutine of it is suspended in the image;
- no object of the project keeps the edited function's code object itself (in a set, a
  dict or a list): the swap would change that code's identity, which such a registry is
  about (jinja2 hides the frames of the code in its ``internal_code`` set from template
  tracebacks; a swapped function's frames showed up, and a test failed only in the image).

:func:`plan` checks all of this by comparing the two compiled modules code object by code
object, line numbers aside, and raises :class:`Unservable` when any of it does not hold; the
caller then runs the broken tree the ordinary way. Functions whose code moved to other lines
only are swapped as well, so tracebacks quote the edited file's lines.

:func:`plan_edit` gives the same answer for an edit inside one def or class without compiling
the whole edited module (on a 4,800-line module that compilation was most of a broken run's
cost in the image): it compiles that statement alone, as it was and as it is, and moves the
code below it to its new lines.
"""

from __future__ import annotations
import __future__

import ast
import types
from collections.abc import Container, Iterable, Mapping
from typing import TYPE_CHECKING, Any

__all__ = ["Unservable", "plan", "plan_edit", "apply", "index_functions", "edited_lines",
           "enclosing"]

if TYPE_CHECKING:  # annotations only: this runs on Python 3.8 too
    Swaps = list[tuple[types.CodeType, types.CodeType]]
    Held = tuple[int, int, Any]

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


def edited_lines(old: list[str], new: list[str]) -> tuple[int, int, int]:
    """``(first, end, shift)``: lines ``[first, end)`` of ``old`` became ``new``'s
    ``[first, end + shift)``; the lines above and below are the same in both."""
    n = min(len(old), len(new))
    first = 0
    while first < n and old[first] == new[first]:
        first += 1
    tail = 0
    while tail < n - first and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return first, len(old) - tail, len(new) - len(old)


def _span(st: Any) -> tuple[int, int]:
    """A statement's first (its first decorator's) and last line, counted from 0."""
    return min([d.lineno for d in getattr(st, "decorator_list", [])] + [st.lineno]) - 1, \
        st.end_lineno - 1


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def enclosing(tree: ast.Module, first: int, end: int) -> list[Held] | None:
    """The def or class statements, outermost first, that hold head's edited lines
    ``[first, end)`` (see :func:`edited_lines`; ``tree`` is head's): one at module level, then,
    through class bodies, the method or class inside it. Each comes as ``(first line, last
    line, statement)``, its lines reaching down over the blank and comment lines after it, to
    the next statement. None when no one def or class at module level holds the edit."""
    def holder(body: list[Any], bottom: int) -> Held | None:
        hold = []
        for i, st in enumerate(body):
            lo, hi = _span(st)
            hi = _span(body[i + 1])[0] - 1 if i + 1 < len(body) else max(hi, bottom)
            if lo <= first and end <= hi + 1 and (lo < first or end > first):
                hold.append((lo, hi, st))
        return hold[0] if len(hold) == 1 else None

    last = max([_span(st)[1] for st in tree.body] + [first, end])
    found = holder(tree.body, last)
    chain: list[Held] = []
    while found is not None and isinstance(found[2], _DEFS):
        chain.append(found)
        st = found[2]
        if not isinstance(st, ast.ClassDef):
            break
        found = holder(st.body, found[1])  # a method's edit: down to the method
        if found is not None and _span(found[2])[0] <= st.lineno - 1:
            break  # a one-line class body
    return chain or None


def _find(code: types.CodeType, path: list[tuple[str, int]]) -> types.CodeType | None:
    """The code nested in ``code`` along ``path`` (name and first line at each level)."""
    for name, line in path:
        kids = [c for c in _children(code) if c.co_name == name and c.co_firstlineno == line]
        if len(kids) != 1:
            return None
        code = kids[0]
    return code


def _graft(code: types.CodeType, path: list[tuple[str, int]],
           live: types.CodeType) -> types.CodeType:
    """``code`` with the code at ``path`` replaced by ``live``."""
    if not path:
        return live
    name, line = path[0]
    return code.replace(co_consts=tuple(
        _graft(c, path[1:], live)
        if isinstance(c, types.CodeType) and c.co_name == name and c.co_firstlineno == line
        else c for c in code.co_consts))


def _shifted(code: types.CodeType, shift: int,
             memo: dict[int, types.CodeType]) -> types.CodeType:
    """``code`` and all the code in it, ``shift`` lines further down (line tables are
    relative to the first line)."""
    new = memo.get(id(code))
    if new is None:
        consts = tuple(_shifted(c, shift, memo) if isinstance(c, types.CodeType) else c
                       for c in code.co_consts)
        new = memo[id(code)] = code.replace(co_firstlineno=code.co_firstlineno + shift,
                                            co_consts=consts)
    return new


def _below(code: types.CodeType, line: int, out: list[types.CodeType]) -> None:
    """Every code object in ``code`` that starts below ``line`` (counted from 1)."""
    for c in _children(code):
        if c.co_firstlineno > line:
            out.append(c)
        _below(c, line, out)


_IMPORTED: dict[tuple[int, str, str], frozenset[str]] = {}


def _imported(code: types.CodeType, text: str, filename: str) -> frozenset[str]:
    """The module-level names of ``text`` that an import binds: the compiler loads a method
    of an imported module as an attribute, so the stand-in module must import them too.
    Worked out once per module code and text."""
    key = (id(code), filename, text)
    names = _IMPORTED.get(key)
    if names is None:
        import symtable

        top = symtable.symtable(text, filename, "exec")
        names = _IMPORTED[key] = frozenset(s.get_name() for s in top.get_symbols()
                                           if s.is_imported())
    return names


def _future_flags(code: types.CodeType) -> int:
    flags = 0
    for name in __future__.all_feature_names:
        flag = getattr(__future__, name).compiler_flag
        if code.co_flags & flag:
            flags |= flag
    return flags


def plan_edit(old: types.CodeType, tree: ast.Module, head: str, new: str, filename: str,
              ran: Container[int]) -> Swaps | None:
    """:func:`plan` for module code ``old``, compiled from the text ``head`` (``tree`` is its
    parse), edited into ``new``, compiling only the def or class that holds the edit.

    Outside that statement the two texts are the same, only shifted, so the rest of the
    module compiles to head's code at new line numbers. The statement is compiled twice, as
    it was and as it is, at its own lines and inside stand-ins for its enclosing classes (the
    same names: the same qualified names, name mangling and ``__class__`` cell); its head
    compilation must equal the live code, or this says None. None too when the edit is not
    inside one def or class, when the statement does not compile, and when the edit is not
    servable: the caller then compiles the whole module and calls :func:`plan`, which says
    why. Both texts have ``\n`` line ends.
    """
    old_lines, new_lines = head.split("\n"), new.split("\n")
    first, end, shift = edited_lines(old_lines, new_lines)
    if first == end and not shift:
        return []
    chain = enclosing(tree, first, end)
    if chain is None:
        return None
    lo, hi, st = chain[-1]
    classes = [c for _, _, c in chain[:-1]]
    top = lo - len(classes)  # the classes' stand-ins on the lines right above the statement
    if top < 1:
        return None
    imported = sorted(_imported(old, head, filename))
    above = [f"import {', '.join(imported)}" if imported else ""] + [""] * (top - 1) + [
        f"{old_lines[c.lineno - 1][:c.col_offset]}class {c.name}:" for c in classes]
    flags = _future_flags(old)
    try:
        was = compile("\n".join(above + old_lines[lo:hi + 1]) + "\n", filename, "exec",
                      flags, dont_inherit=True)
        now = compile("\n".join(above + new_lines[lo:hi + shift + 1]) + "\n", filename, "exec",
                      flags, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    path = [(c.name, _span(c)[0] + 1) for c in [*classes, st]]
    stand_in = [(c.name, top + i + 1) for i, c in enumerate(classes)] + [path[-1]]
    live, twin = _find(old, path), _find(was, stand_in)
    if live is None or twin is None or live != twin or live.co_filename != twin.co_filename \
            or getattr(live, "co_qualname", None) != getattr(twin, "co_qualname", None):
        return None
    try:
        swaps = plan(_graft(was, stand_in, live), now, ran)
    except Unservable:
        return None  # the whole module's plan says why (3.13's class attributes, say)
    if shift:
        moved: list[types.CodeType] = []
        _below(old, hi + 1, moved)
        if any(not code.co_flags & _CO_OPTIMIZED and "__firstlineno__" in code.co_names
               for code in moved):
            return None  # 3.13 and on: a class body below keeps its first line as a constant
        memo: dict[int, types.CodeType] = {}
        swaps += [(c, _shifted(c, shift, memo)) for c in moved]
    return swaps


_SUSPENDED = "suspended generator or coroutine"
_KEPT = "code object kept by the project (in a set, dict or list)"


def index_functions(objects: Iterable[object], files: Container[str],
                    ours: Container[int] = ()
                    ) -> tuple[dict[int, list[types.FunctionType]], dict[int, str]]:
    """``id(code) -> functions running it``, and ``id(code) -> why it cannot be swapped`` for
    code that a suspended generator or coroutine is in or that a set, dict or list keeps
    (but the containers whose ids are in ``ours``), for code from ``files``; taken once in
    the image, before the fork."""
    functions: dict[int, list[types.FunctionType]] = {}
    pinned: dict[int, str] = {}
    for obj in objects:
        if isinstance(obj, types.FunctionType):
            code = obj.__code__
            if code.co_filename in files:
                functions.setdefault(id(code), []).append(obj)
        elif isinstance(obj, _SUSPENDABLE):
            held = getattr(obj, "gi_code", None) or getattr(obj, "cr_code", None) \
                or getattr(obj, "ag_code", None)
            if held is not None and held.co_filename in files:
                pinned[id(held)] = _SUSPENDED
        elif isinstance(obj, _KEEPERS) and id(obj) not in ours:
            # a dict of code objects only is not tracked by gc: look one level inside too
            for item in _contents(obj):
                for code in (item, *(_contents(item) if isinstance(item, _KEEPERS) else ())):
                    if isinstance(code, types.CodeType) and code.co_filename in files:
                        pinned.setdefault(id(code), _KEPT)
    return functions, pinned


_KEEPERS = (set, frozenset, list, dict)


def _contents(obj: Any) -> list[object]:
    try:
        return [*obj.keys(), *obj.values()] if isinstance(obj, dict) else list(obj)
    except (RuntimeError, TypeError):  # changed size while read, or an odd subclass
        return []


def apply(swaps: list[tuple[types.CodeType, types.CodeType]],
          functions: Mapping[int, list[Any]], pinned: Mapping[int, str]) -> int:
    """Swap the code of every live function in ``swaps``; the number swapped. ``pinned``:
    :func:`index_functions`' code that cannot be swapped, and why."""
    for old, _ in swaps:
        if id(old) in pinned:
            raise Unservable(pinned[id(old)], old.co_name)
    count = 0
    for old, new in swaps:
        for fn in functions.get(id(old), ()):
            fn.__code__ = new
            count += 1
    return count
