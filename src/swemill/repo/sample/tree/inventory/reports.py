"""Money formatting, simple statistics and text reports over a warehouse."""

from __future__ import annotations

from inventory.items import Item
from inventory.stock import Warehouse

CURRENCY = "EUR"
COLUMN_WIDTH = 10
DEFAULT_TARGET = 10


def format_money(amount: float, currency: str = CURRENCY) -> str:
    """``1234.5`` -> ``"1,234.50 EUR"``; negative amounts keep their sign in front."""
    sign = "-" if amount < 0 else ""
    return f"{sign}{abs(amount):,.2f} {currency}"


def percent_change(old: float, new: float) -> float:
    if old == 0:
        raise ValueError("percent change from zero is undefined")
    return round((new - old) / abs(old) * 100, 1)


def clamp(value: float, low: float, high: float) -> float:
    if low > high:
        raise ValueError(f"empty range [{low}, {high}]")
    return max(low, min(value, high))


def moving_average(values: list[float], window: int) -> list[float]:
    """Averages over each full window of ``window`` consecutive values."""
    if window <= 0:
        raise ValueError(f"window must be positive: {window}")
    averages = []
    total = 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        if index >= window - 1:
            averages.append(round(total / window, 2))
    return averages


def top_items(warehouse: Warehouse, n: int = 3, day: int = 0) -> list[Item]:
    """The ``n`` most valuable lines; ties go to the smaller SKU."""
    ranked = sorted(warehouse, key=lambda item: (-item.value(day), item.sku))
    return ranked[:n]


def category_totals(warehouse: Warehouse, day: int = 0) -> dict[str, float]:
    totals: dict[str, float] = {}
    for item in warehouse:
        totals[item.category] = round(totals.get(item.category, 0.0) + item.value(day), 2)
    return totals


def restock_plan(warehouse: Warehouse, target: int = DEFAULT_TARGET) -> dict[str, int]:
    """How many of each line to order so that every line reaches ``target``."""
    plan = {}
    for item in warehouse:
        missing = target - item.quantity
        if missing > 0:
            plan[item.sku] = missing
    return plan


def render_table(rows: list[tuple[str, ...]], width: int = COLUMN_WIDTH) -> str:
    lines = []
    for row in rows:
        cells = [cell[:width].ljust(width) for cell in row]
        lines.append(" | ".join(cells).rstrip())
    return "\n".join(lines)


def summary(warehouse: Warehouse, day: int = 0) -> str:
    worth = format_money(warehouse.total_value(day))
    header = f"{warehouse.name}: {len(warehouse)} lines, worth {worth}"
    rows: list[tuple[str, ...]] = [("sku", "qty", "value")]
    for item in warehouse:
        rows.append((item.sku, str(item.quantity), f"{item.value(day):.2f}"))
    return header + "\n" + render_table(rows)
