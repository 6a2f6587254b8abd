"""Shared fixtures: a small shop with one line of each kind."""

from __future__ import annotations

import pytest
from inventory import Bundle, Electronic, Item, Perishable, Warehouse


@pytest.fixture
def pen() -> Item:
    return Item("GEN-0001", "Ballpoint pen", 1.25, 40)


@pytest.fixture
def milk() -> Perishable:
    return Perishable("FOO-0001", "Milk 1l", 0.9, 12, expires_on=10)


@pytest.fixture
def radio() -> Electronic:
    return Electronic("ELE-0001", "Pocket radio", 20.0, 3, warranty_months=24)


@pytest.fixture
def shop(pen: Item, milk: Perishable, radio: Electronic) -> Warehouse:
    kit = Bundle("BUN-0001", "Desk kit", [pen, Item("GEN-0002", "Notebook", 3.75, 8)], 2)
    return Warehouse("Corner shop").add(pen).add(milk).add(radio).add(kit)
