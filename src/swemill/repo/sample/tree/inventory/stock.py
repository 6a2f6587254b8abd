"""A warehouse of items, SKU handling and loading stock lists from CSV files."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from inventory.items import Electronic, Item, Perishable

SKU_PATTERN = re.compile(r"^([A-Z]{3})-(\d{4})$")
LOW_STOCK_THRESHOLD = 5
MAX_SKU_NUMBER = 9999


def parse_sku(sku: str) -> tuple[str, int]:
    """Split ``"ABC-0042"`` into ``("ABC", 42)``; lower case and spaces are forgiven."""
    match = SKU_PATTERN.match(sku.strip().upper())
    if match is None:
        raise ValueError(f"not a SKU: {sku!r}")
    return match.group(1), int(match.group(2))


def format_sku(prefix: str, number: int) -> str:
    if not 0 < number <= MAX_SKU_NUMBER:
        raise ValueError(f"SKU number out of range: {number}")
    if len(prefix) != 3 or not prefix.isalpha():
        raise ValueError(f"SKU prefix must be three letters: {prefix!r}")
    return f"{prefix.upper()}-{number:04d}"


def next_sku(existing: Iterable[str], prefix: str) -> str:
    """The first free SKU after the highest one already used with ``prefix``."""
    wanted = prefix.upper()
    highest = 0
    for sku in existing:
        found, number = parse_sku(sku)
        if found == wanted and number > highest:
            highest = number
    return format_sku(wanted, highest + 1)


class Warehouse:
    """Items keyed by SKU. Iterating yields them in SKU order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._items: dict[str, Item] = {}

    def add(self, item: Item) -> Warehouse:
        if item.sku in self._items:
            raise KeyError(f"duplicate SKU {item.sku!r} in {self.name}")
        self._items[item.sku] = item
        return self

    def get(self, sku: str) -> Item:
        try:
            return self._items[sku]
        except KeyError:
            raise KeyError(f"no item {sku!r} in {self.name}") from None

    def remove(self, sku: str, amount: int) -> Item:
        return self.get(sku).take(amount)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, sku: object) -> bool:
        return sku in self._items

    def __iter__(self) -> Iterator[Item]:
        for sku in sorted(self._items):
            yield self._items[sku]

    def total_value(self, day: int = 0) -> float:
        total = 0.0
        for item in self:
            total += item.value(day)
        return round(total, 2)

    def low_stock(self, threshold: int = LOW_STOCK_THRESHOLD) -> list[str]:
        return [item.sku for item in self if item.quantity < threshold]

    def by_category(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for item in self:
            groups.setdefault(item.category, []).append(item.sku)
        return groups

    def search(self, text: str) -> list[str]:
        needle = text.strip().lower()
        return [item.sku for item in self if needle in item.name.lower()]

    def expired(self, day: int) -> list[str]:
        return [item.sku for item in self if isinstance(item, Perishable) and item.is_expired(day)]


def parse_line(line: str, lineno: int = 1) -> Item:
    """One CSV record: ``kind,sku,name,price,quantity[,extra]``."""
    fields = [field.strip() for field in line.split(",")]
    kind = fields[0].lower()
    try:
        sku = fields[1]
        name = fields[2]
        price = float(fields[3])
        quantity = int(fields[4])
    except (IndexError, ValueError) as exc:
        raise ValueError(f"line {lineno}: bad record {line!r}: {exc}") from exc
    if kind == "item":
        return Item(sku, name, price, quantity)
    if kind == "food":
        return Perishable(sku, name, price, quantity, expires_on=_extra(fields, lineno))
    if kind == "electronic":
        return Electronic(sku, name, price, quantity, warranty_months=_extra(fields, lineno))
    raise ValueError(f"line {lineno}: unknown kind {kind!r}")


def _extra(fields: list[str], lineno: int) -> int:
    if len(fields) < 6:
        raise ValueError(f"line {lineno}: missing sixth field")
    return int(fields[5])


def load_items(path: str | Path) -> list[Item]:
    """Read a stock list; blank lines and ``#`` comments are skipped."""
    items = []
    with open(path, encoding="utf-8") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            items.append(parse_line(line, lineno))
    return items
