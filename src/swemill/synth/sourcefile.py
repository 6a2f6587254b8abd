"""A parsed source file that re-emits only the top-level statement a mutant changes.

Regenerating and re-parsing a whole module for every mutant is what makes naive mutation
slow (measured on toolz: ~0.5 s per mutant on a 1,000-line module, nearly all of it
``deep_replace`` and code generation of the untouched rest). libcst emits a module as its
header, then each top-level statement, then its footer, so the text of statement *i* sits at
a fixed offset: a mutant is that slice re-emitted, and it is checked (compiled, compared by
``ast.dump``) on that slice alone. Files whose text does not split that way exactly (no
trailing newline, say) fall back to the whole module.
"""

from __future__ import annotations

import ast
import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from swemill.core.errors import SynthesisError

__all__ = ["SourceFile"]


@dataclass(slots=True)
class SourceFile:
    file: str
    source: str
    module: cst.Module
    codes: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    sliced: bool = False
    """True when ``source`` is exactly header + statement codes + footer."""
    _dumps: dict[int, str] = field(default_factory=dict)
    _seen: set[tuple[int, str]] = field(default_factory=set)

    @classmethod
    def parse(cls, root: Path, rel: str) -> SourceFile:
        try:
            source = (root / rel).read_bytes().decode("utf-8")
            module = cst.parse_module(source)
            ast.parse(source)  # what libcst accepts, CPython may still refuse
        except (OSError, UnicodeDecodeError, cst.ParserSyntaxError, SyntaxError, ValueError) as exc:
            raise SynthesisError(f"unparseable_source: {rel}: {str(exc)[:200]}") from exc
        sf = cls(rel, source, module)
        sf._split()
        return sf

    def _split(self) -> None:
        m = self.module
        head = "".join(m.code_for_node(h) for h in m.header)
        self.codes = [m.code_for_node(s) for s in m.body]
        foot = "".join(m.code_for_node(f) for f in m.footer)
        pos = len(head)
        for code in self.codes:
            self.starts.append(pos)
            pos += len(code)
        self.sliced = m.has_trailing_newline and head + "".join(self.codes) + foot == self.source

    def old_code(self, index: int) -> str:
        return self.codes[index] if self.sliced else self.source

    def mutate(self, index: int, old: cst.CSTNode, new: cst.CSTNode) -> tuple[str, str]:
        """(new file text, new text of the region to check) with ``old`` replaced by ``new``."""
        stmt = self.module.body[index]
        new_stmt = new if stmt is old else stmt.deep_replace(old, new)
        if not self.sliced:
            new_module = self.module.deep_replace(old, new)
            assert isinstance(new_module, cst.Module)
            return new_module.code, new_module.code
        code = self.module.code_for_node(new_stmt)
        start = self.starts[index]
        text = self.source[:start] + code + self.source[start + len(self.codes[index]) :]
        return text, code

    def reject(self, index: int, region: str) -> str | None:
        """Why the mutated region is not worth validating, or None (then it is remembered)."""
        old = self.old_code(index)
        if region == old:
            return "no_op"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes etc. are the project's own
                tree = ast.parse(region)
                compile(tree, self.file, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return "does_not_compile"
        dump = ast.dump(tree)
        if dump == self._dump(index, old):
            return "equivalent"
        key = (index if self.sliced else -1, hashlib.sha256(dump.encode()).hexdigest())
        if key in self._seen:
            return "duplicate"
        self._seen.add(key)
        return None

    def _dump(self, index: int, old: str) -> str:
        key = index if self.sliced else -1
        if key not in self._dumps:
            try:
                self._dumps[key] = ast.dump(ast.parse(old))
            except (SyntaxError, ValueError):
                self._dumps[key] = ""  # a region that only parses in context: never "equal"
        return self._dumps[key]
