"""A short, made-up development history for the sample repository.

Each :class:`Change` is one commit: edits that turn the previous tree into the next. The
shipped tree is the last state; earlier states are derived by undoing the edits newest
first, so the history always ends exactly at the shipped tree. Most commits fix a source
function together with the test that shows the fix, which is the material the pr-mirror
strategy looks for; one touches only the README, which it must skip.
"""

from __future__ import annotations

from dataclasses import dataclass

from swemill.core.errors import SourceError

__all__ = ["Change", "Edit", "HISTORY", "BASE_MESSAGE", "undo"]

BASE_MESSAGE = "inventory: items, warehouse and reports"


@dataclass(frozen=True, slots=True)
class Edit:
    """In ``path``, the commit replaced ``old`` by ``new`` (``new`` occurs once afterwards)."""

    path: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class Change:
    message: str
    edits: tuple[Edit, ...]


def _test_block(*names: str) -> str:
    """Marker for a run of whole test functions; resolved against the file in :func:`undo`."""
    return "\0tests:" + ",".join(names)


HISTORY: tuple[Change, ...] = (
    Change(
        "Refuse restocking by zero or a negative amount",
        (
            Edit(
                "inventory/items.py",
                "    def restock(self, amount: int) -> Item:\n        self.quantity += amount\n",
                "    def restock(self, amount: int) -> Item:\n"
                "        if amount <= 0:\n"
                '            raise ValueError(f"restock amount must be positive: {amount}")\n'
                "        self.quantity += amount\n",
            ),
            Edit("tests/test_items.py", "", _test_block("test_restock_rejects_zero",
                                                         "test_restock_rejects_negative")),
        ),
    ),
    Change(
        "Perishables lose half their value in the last days before expiry",
        (
            Edit(
                "inventory/items.py",
                "",
                "DISCOUNT_WINDOW = 3\nNEAR_EXPIRY_DISCOUNT = 0.5\n",
            ),
            Edit(
                "inventory/items.py",
                "            return 0.0\n        return super().value(day)\n",
                "            return 0.0\n"
                "        full = super().value(day)\n"
                "        if self.expires_on - day <= DISCOUNT_WINDOW:\n"
                "            return round(full * (1 - NEAR_EXPIRY_DISCOUNT), 2)\n"
                "        return full\n",
            ),
            Edit("tests/test_items.py", "", _test_block(
                "test_perishable_value_discounted_near_expiry",
                "test_perishable_value_full_just_outside_window",
            )),
        ),
    ),
    Change(
        "README: how to run the tests",
        (
            Edit(
                "README.md",
                "",
                "No dependencies. Run the tests with `python -m pytest` from this directory.\n",
            ),
        ),
    ),
    Change(
        "next_sku: only SKUs with the requested prefix count",
        (
            Edit(
                "inventory/stock.py",
                "        if number > highest:\n",
                "        if found == wanted and number > highest:\n",
            ),
            Edit("tests/test_stock.py", "", _test_block("test_next_sku_ignores_other_prefixes")),
        ),
    ),
    Change(
        "moving_average: drop the value that leaves the window",
        (
            Edit(
                "inventory/reports.py",
                "        total += value\n",
                "        total += value\n"
                "        if index >= window:\n"
                "            total -= values[index - window]\n",
            ),
            Edit("tests/test_reports.py", "", _test_block(
                "test_moving_average_slides", "test_moving_average_window_of_one"
            )),
        ),
    ),
    Change(
        "parse_sku: accept lower case and surrounding spaces",
        (
            Edit(
                "inventory/stock.py",
                '    """Split ``"ABC-0042"`` into ``("ABC", 42)``."""\n'
                "    match = SKU_PATTERN.match(sku)\n",
                '    """Split ``"ABC-0042"`` into ``("ABC", 42)``; lower case and spaces are'
                ' forgiven."""\n'
                "    match = SKU_PATTERN.match(sku.strip().upper())\n",
            ),
            Edit("tests/test_stock.py", "", _test_block("test_parse_sku_forgives_case_and_spaces")),
        ),
    ),
)


def _function_span(text: str, name: str) -> str:
    """The source of top-level ``def name`` plus the blank lines after it."""
    start = text.find(f"\ndef {name}(")
    if start < 0:
        raise SourceError(f"sample history: no test {name} to undo")
    start += 1
    end = text.find("\ndef ", start + 1)
    end = len(text) if end < 0 else end + 1
    # A decorator line belongs to the next function, not to this one.
    while text.rfind("\n@", start, end - 1) > 0:
        end = text.rfind("\n@", start, end - 1) + 1
    return text[start:end]


def undo(files: dict[str, str], change: Change) -> dict[str, str]:
    """The tree before ``change``, given the tree after it."""
    before = dict(files)
    for edit in reversed(change.edits):
        text = before[edit.path]
        new = edit.new
        if new.startswith("\0tests:"):
            for name in new.removeprefix("\0tests:").split(","):
                text = text.replace(_function_span(text, name), "", 1)
            before[edit.path] = text
            continue
        if text.count(new) != 1:
            raise SourceError(f"sample history: edit of {edit.path} does not match the tree")
        before[edit.path] = text.replace(new, edit.old, 1)
    return before
