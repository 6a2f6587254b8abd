"""inventory: stock items, a warehouse and small reports for a shop."""

from inventory.items import Bundle, Electronic, Item, Perishable
from inventory.reports import (
    category_totals,
    clamp,
    format_money,
    moving_average,
    percent_change,
    render_table,
    restock_plan,
    summary,
    top_items,
)
from inventory.stock import Warehouse, format_sku, load_items, next_sku, parse_line, parse_sku

__all__ = [
    "Bundle",
    "Electronic",
    "Item",
    "Perishable",
    "Warehouse",
    "category_totals",
    "clamp",
    "format_money",
    "format_sku",
    "load_items",
    "moving_average",
    "next_sku",
    "parse_line",
    "parse_sku",
    "percent_change",
    "render_table",
    "restock_plan",
    "summary",
    "top_items",
]

__version__ = "1.2.0"
