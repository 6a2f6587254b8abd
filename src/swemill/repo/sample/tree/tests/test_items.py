from __future__ import annotations

import pytest
from inventory import Bundle, Electronic, Item
from inventory.items import MAX_NAME_LENGTH


def test_item_keeps_its_fields(pen):
    assert (pen.sku, pen.name) == ("GEN-0001", "Ballpoint pen")
    assert (pen.unit_price, pen.quantity) == (1.25, 40)


def test_item_name_is_stripped_and_truncated():
    item = Item("GEN-0009", "  " + "x" * 60 + "  ", 1.0)
    assert item.name == "x" * MAX_NAME_LENGTH


def test_item_rejects_negative_price():
    with pytest.raises(ValueError, match="unit price"):
        Item("GEN-0009", "Broken", -0.01)


def test_item_rejects_negative_quantity():
    with pytest.raises(ValueError, match="quantity"):
        Item("GEN-0009", "Broken", 1.0, -1)


def test_item_category_is_general(pen):
    assert pen.category == "general"


def test_price_with_tax(pen):
    assert pen.price_with_tax() == 1.5


def test_price_with_tax_rounds_to_cents():
    assert Item("GEN-0009", "Odd", 0.99).price_with_tax() == 1.19


def test_value_is_price_times_quantity(pen):
    assert pen.value() == 50.0


def test_value_of_empty_line_is_zero():
    assert Item("GEN-0009", "Nothing", 5.0).value() == 0.0


def test_is_available_depends_on_quantity(pen):
    assert pen.is_available()
    assert not Item("GEN-0009", "Gone", 1.0, 0).is_available()


def test_restock_adds_and_chains(pen):
    assert pen.restock(5).restock(5) is pen
    assert pen.quantity == 50


def test_restock_rejects_zero(pen):
    with pytest.raises(ValueError, match="positive"):
        pen.restock(0)


def test_restock_rejects_negative(pen):
    with pytest.raises(ValueError):
        pen.restock(-3)
    assert pen.quantity == 40


def test_take_removes(pen):
    assert pen.take(15).quantity == 25


def test_take_everything(pen):
    pen.take(40)
    assert pen.quantity == 0
    assert not pen.is_available()


def test_take_too_many_fails_and_keeps_quantity(pen):
    with pytest.raises(ValueError, match="only 40"):
        pen.take(41)
    assert pen.quantity == 40


def test_take_rejects_non_positive(pen):
    with pytest.raises(ValueError):
        pen.take(0)


def test_describe(pen):
    assert pen.describe() == "GEN-0001 Ballpoint pen x40 @ 1.25"


def test_repr_names_the_class(pen, milk):
    assert repr(pen) == "Item('GEN-0001', 'Ballpoint pen', 1.25, 40)"
    assert repr(milk).startswith("Perishable(")


def test_perishable_is_an_item(milk):
    assert isinstance(milk, Item)
    assert milk.category == "food"


def test_perishable_expiry_boundary(milk):
    assert not milk.is_expired(9)
    assert milk.is_expired(10)
    assert milk.is_expired(11)


def test_perishable_not_available_once_expired(milk):
    assert milk.is_available(0)
    assert not milk.is_available(10)


def test_perishable_value_before_window(milk):
    assert milk.value(0) == 10.8


def test_perishable_value_zero_when_expired(milk):
    assert milk.value(10) == 0.0
    assert milk.value(25) == 0.0


def test_perishable_value_discounted_near_expiry(milk):
    assert milk.value(7) == 5.4
    assert milk.value(9) == 5.4


def test_perishable_value_full_just_outside_window(milk):
    assert milk.value(6) == 10.8


def test_perishable_describe_mentions_expiry(milk):
    assert milk.describe() == "FOO-0001 Milk 1l x12 @ 0.90 (best before day 10)"


def test_electronic_price_includes_eco_fee(radio):
    assert radio.price_with_tax() == 25.8


def test_electronic_value_ignores_eco_fee(radio):
    assert radio.value() == 60.0


def test_electronic_warranty_years(radio):
    assert radio.warranty_years() == 2


def test_electronic_rejects_negative_warranty():
    with pytest.raises(ValueError, match="warranty"):
        Electronic("ELE-0009", "Bad", 1.0, warranty_months=-1)


def test_electronic_describe_plural(radio):
    assert radio.describe().endswith("[2 years warranty]")


def test_electronic_describe_singular():
    lamp = Electronic("ELE-0002", "Lamp", 9.0, 1)
    assert lamp.describe() == "ELE-0002 Lamp x1 @ 9.00 [1 year warranty]"


def test_electronic_describe_fraction():
    cable = Electronic("ELE-0003", "Cable", 2.0, 1, warranty_months=6)
    assert cable.describe().endswith("[0.5 years warranty]")


def test_bundle_price_is_discounted_sum(pen):
    kit = Bundle("BUN-0002", "Pair", [pen, Item("GEN-0003", "Pencil", 0.75)], 1)
    assert kit.unit_price == 1.8
    assert kit.category == "bundle"


def test_bundle_needs_parts():
    with pytest.raises(ValueError, match="at least one part"):
        Bundle("BUN-0009", "Empty", [], 1)


def test_bundle_available_only_with_all_parts(pen, milk):
    kit = Bundle("BUN-0003", "Breakfast", [pen, milk], 1)
    assert kit.is_available(0)
    assert not kit.is_available(10)


def test_bundle_unavailable_without_own_stock(pen):
    assert not Bundle("BUN-0004", "None left", [pen], 0).is_available()


def test_bundle_describe_lists_parts(pen, radio):
    kit = Bundle("BUN-0005", "Gift", [pen, radio], 1)
    assert kit.describe() == "BUN-0005 Gift x1 @ 19.12 = Ballpoint pen, Pocket radio"
