"""Parsed modules for pytest's failure reports, keyed by exact source text (the
``report_cache`` flag switches it off).

To show the statement a traceback line belongs to, pytest parses the *whole* file of every
traceback entry, once per failing test (and walks the tree), so on a several-thousand-line
test module a failing test costs a few tenths of a second of parsing alone. Here a child
parses each distinct source text once; a text that a second child also needed (the unchanged
test modules) is parsed once more in the server, and every later fork inherits the tree.
Keyed by content, a stale tree is impossible, and the reports are exactly the ones pytest
would write. This replaces pytest's ``getstatementrange_ast`` (a private function) when,
and only when, it has the shape this module knows; on pytest < 9, which also walks the whole
tree for every traceback entry, :func:`.stmt_lines.startend` takes the place of that walk
where it answers as pytest does (:mod:`.stmt_lines`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import Any

from . import hotpatch, stmt_lines


class ReportCache:
    """Parse trees for failure reports; one per server, inherited by its forks."""

    MAX_TREES = 32

    def __init__(self) -> None:
        self.root = ""
        self.trees: dict[str, Any] = {}
        self.hot: list[str] = []
        """Digests this child parsed that an earlier child had parsed too (for the parent)."""
        self.noted: list[str] = []
        """Digests of every text this child parsed (the head image adopts the known ones)."""
        self._linenos: Any = None
        self._memo = False
        self.heads: dict[str, Any] = {}
        """Head texts' trees, for :meth:`stand_in` (the head image's edited files only)."""

    def _path(self, digest: str) -> str:
        return os.path.join(self.root, f"ast-{digest}.py")

    def _parse(self, content: str) -> Any:
        import ast
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(content, "source", "exec")
        if self._linenos is not None:
            with contextlib.suppress(Exception):
                self._linenos(tree)  # pytest memoizes the statement line numbers on the tree
        return tree

    def _note(self, content: str) -> None:
        """Leave the text where the parent can find it; say so if an earlier child did."""
        data = content.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(data).hexdigest()
        self.noted.append(digest)
        path = self._path(digest)
        if os.path.exists(path):
            self.hot.append(digest)
            return
        with contextlib.suppress(OSError):
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)

    def adopt(self, digests: list[str]) -> None:
        """In the parent: parse the texts two children needed, for every later child."""
        for digest in digests:
            if len(self.trees) >= self.MAX_TREES:
                return
            with contextlib.suppress(Exception):
                with open(self._path(str(digest)), "rb") as fh:
                    data = fh.read()
                if hashlib.sha256(data).hexdigest() != digest:
                    continue
                content = data.decode("utf-8", "surrogatepass")
                if content not in self.trees:
                    self.trees[content] = self._parse(content)

    def stand_in(self, head: str, new: str) -> Any | None:
        """A tree for the reports on ``new``, an edit of the head text ``head`` that stays
        inside one function or class, without parsing all of ``new``.

        pytest needs a report's tree only for the line numbers of its statements (memoized on
        the tree). Those of ``new`` are head's, shifted below the edited statement, with the
        edited statement's own from a parse of that statement alone: a Python module is a
        sequence of statements that parse independently. The edited lines, with the blank and
        comment lines after them, must parse as exactly one statement of the same kind; None
        when anything is out of the ordinary (the child then parses ``new`` whole, as before).
        """
        if not self._memo or head == new:
            return None
        try:
            values = self._edited_linenos(head, new)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if values is None:
            return None
        import ast

        node = ast.Module(body=[], type_ignores=[])
        node._pytest_statement_linenos = values  # type: ignore[attr-defined]
        return node

    def head_tree(self, head: str) -> Any:
        """The parse of a head text (parsed once)."""
        tree = self.heads.get(head) or self.trees.get(head)
        if tree is None:
            tree = self.heads[head] = self._parse(head)
        return tree

    def _edited_linenos(self, head: str, new: str) -> list[int] | None:
        import ast

        old_lines, new_lines = head.split("\n"), new.split("\n")
        first, end, shift = hotpatch.edited_lines(old_lines, new_lines)
        head_tree = self.head_tree(head)
        chain = hotpatch.enclosing(head_tree, first, end)
        if chain is None:
            return None
        lo, hi, st = chain[-1]
        text = "\n".join(new_lines[lo:hi + shift + 1])
        indented = st.col_offset > 0  # a method: parse it as the body of an "if"
        tree = ast.parse(f"if 1:\n{text}" if indented else text, "source", "exec")
        body, base = tree.body, lo
        if indented:
            if len(body) != 1 or not isinstance(body[0], ast.If):
                return None
            body, base = body[0].body, lo - 1
        if len(body) != 1 or type(body[0]) is not type(st):
            return None  # the rest of the text parsed is blank lines and comments
        old = self._linenos(head_tree)
        mine = [v + base for v in self._linenos(body[0])]
        return sorted([v for v in old if v < lo] + mine + [v + shift for v in old if v > hi])

    def detect(self) -> bool:
        """Learn how this pytest finds statement lines (nothing of pytest's is changed); True
        when it walks the tree for every entry and :func:`.stmt_lines.startend` answers as
        it does (:meth:`install` then puts that in its place)."""
        try:
            from _pytest._code import source
        except ImportError:
            return False
        self._linenos = getattr(source, "_statement_linenos", None)
        walks = getattr(source, "get_statement_startend2", None)
        if self._linenos is None and walks is not None and stmt_lines.agrees(walks):
            self._linenos, self._memo = stmt_lines.statement_linenos, True
            return True
        if self._linenos is not None:  # pytest reads the statement lines a tree carries?
            import ast

            with contextlib.suppress(Exception):
                probe, mark = ast.Module(body=[], type_ignores=[]), [7]
                probe._pytest_statement_linenos = mark  # type: ignore[attr-defined]
                self._memo = self._linenos(probe) is mark
        return False

    def install(self, root: str) -> None:
        self.root = root
        try:
            from _pytest._code import code, source
        except ImportError:
            return
        original = getattr(source, "getstatementrange_ast", None)
        if original is None or getattr(code, "getstatementrange_ast", None) is not original:
            return
        if self.detect():  # pytest < 9: the statement lines of a tree worked out once
            source.get_statement_startend2 = stmt_lines.startend
        cache = self

        def getstatementrange_ast(lineno, src, assertion=False, astnode=None):  # noqa: ANN001, ANN202, FBT002
            if astnode is None:
                content = str(src)
                astnode = cache.trees.get(content)
                if astnode is None:
                    astnode = cache._parse(content)  # a SyntaxError propagates, as in pytest
                    cache.trees[content] = astnode
                    cache._note(content)
            return original(lineno, src, assertion, astnode)

        source.getstatementrange_ast = getstatementrange_ast
        code.getstatementrange_ast = getstatementrange_ast
