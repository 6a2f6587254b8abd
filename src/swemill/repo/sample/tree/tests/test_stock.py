from __future__ import annotations

import pytest
from inventory import Electronic, Item, Perishable, Warehouse
from inventory.stock import format_sku, load_items, next_sku, parse_line, parse_sku


def test_parse_sku():
    assert parse_sku("ABC-0042") == ("ABC", 42)


def test_parse_sku_forgives_case_and_spaces():
    assert parse_sku(" abc-0042 ") == ("ABC", 42)


@pytest.mark.parametrize("bad", ["AB-0001", "ABC-001", "ABC0001", ""])
def test_parse_sku_rejects(bad):
    with pytest.raises(ValueError, match="not a SKU"):
        parse_sku(bad)


def test_format_sku_pads_and_uppercases():
    assert format_sku("abc", 7) == "ABC-0007"


def test_format_sku_range():
    assert format_sku("ABC", 9999) == "ABC-9999"
    with pytest.raises(ValueError, match="out of range"):
        format_sku("ABC", 10000)
    with pytest.raises(ValueError, match="out of range"):
        format_sku("ABC", 0)


def test_format_sku_prefix():
    with pytest.raises(ValueError, match="three letters"):
        format_sku("AB1", 1)


def test_format_and_parse_round_trip():
    assert parse_sku(format_sku("XYZ", 123)) == ("XYZ", 123)


def test_next_sku_after_highest():
    assert next_sku(["ABC-0003", "ABC-0010", "ABC-0002"], "ABC") == "ABC-0011"


def test_next_sku_first():
    assert next_sku([], "abc") == "ABC-0001"


def test_next_sku_ignores_other_prefixes():
    assert next_sku(["ABC-0003", "XYZ-0090"], "ABC") == "ABC-0004"


def test_warehouse_add_and_get(shop, pen):
    assert shop.get("GEN-0001") is pen
    assert len(shop) == 4


def test_warehouse_contains(shop):
    assert "FOO-0001" in shop
    assert "FOO-0002" not in shop


def test_warehouse_rejects_duplicate(shop):
    with pytest.raises(KeyError, match="duplicate"):
        shop.add(Item("GEN-0001", "Another pen", 1.0))


def test_warehouse_get_missing_names_the_warehouse(shop):
    with pytest.raises(KeyError, match="Corner shop"):
        shop.get("NOP-0001")


def test_warehouse_iterates_in_sku_order(shop):
    assert [item.sku for item in shop] == ["BUN-0001", "ELE-0001", "FOO-0001", "GEN-0001"]


def test_warehouse_remove(shop):
    assert shop.remove("ELE-0001", 2).quantity == 1


def test_warehouse_remove_too_many(shop):
    with pytest.raises(ValueError):
        shop.remove("ELE-0001", 4)


def test_warehouse_total_value(shop):
    assert shop.total_value() == 129.8


def test_warehouse_total_value_after_expiry(shop):
    assert shop.total_value(10) == 119.0


def test_warehouse_empty_total():
    assert Warehouse("Empty").total_value() == 0.0


def test_warehouse_low_stock(shop):
    assert shop.low_stock() == ["BUN-0001", "ELE-0001"]
    assert shop.low_stock(threshold=13) == ["BUN-0001", "ELE-0001", "FOO-0001"]


def test_warehouse_by_category(shop):
    assert shop.by_category() == {
        "bundle": ["BUN-0001"],
        "electronics": ["ELE-0001"],
        "food": ["FOO-0001"],
        "general": ["GEN-0001"],
    }


def test_warehouse_search_is_case_insensitive(shop):
    assert shop.search("RADIO") == ["ELE-0001"]
    assert shop.search(" KIT ") == ["BUN-0001"]
    assert shop.search("o") == ["ELE-0001", "GEN-0001"]


def test_warehouse_search_no_match(shop):
    assert shop.search("tractor") == []


def test_warehouse_expired(shop):
    assert shop.expired(9) == []
    assert shop.expired(10) == ["FOO-0001"]


def test_parse_line_item():
    item = parse_line("item, GEN-0005, Stapler, 4.5, 6")
    assert type(item) is Item
    assert (item.sku, item.name, item.unit_price, item.quantity) == ("GEN-0005", "Stapler", 4.5, 6)


def test_parse_line_food():
    item = parse_line("FOOD,FOO-0007,Bread,2.1,4,3")
    assert isinstance(item, Perishable)
    assert item.expires_on == 3


def test_parse_line_electronic():
    item = parse_line("electronic,ELE-0007,Charger,12,2,6")
    assert isinstance(item, Electronic)
    assert item.warranty_months == 6


def test_parse_line_missing_extra():
    with pytest.raises(ValueError, match="line 4: missing sixth field"):
        parse_line("food,FOO-0008,Eggs,3,12", lineno=4)


def test_parse_line_bad_number():
    with pytest.raises(ValueError, match="line 2: bad record"):
        parse_line("item,GEN-0006,Glue,cheap,1", lineno=2)


def test_parse_line_unknown_kind():
    with pytest.raises(ValueError, match="unknown kind 'toy'"):
        parse_line("toy,TOY-0001,Ball,1,1")


def test_load_items(tmp_path):
    path = tmp_path / "stock.csv"
    path.write_text(
        "# kind,sku,name,price,qty,extra\n"
        "item,GEN-0001,Pen,1.25,40\n"
        "\n"
        "food,FOO-0001,Milk,0.9,12,10\n"
        "electronic,ELE-0001,Radio,20,3,24\n",
        encoding="utf-8",
    )
    items = load_items(path)
    assert [type(item).__name__ for item in items] == ["Item", "Perishable", "Electronic"]
    assert sum(item.value() for item in items) == pytest.approx(120.8)


def test_load_items_reports_line_number(tmp_path):
    path = tmp_path / "stock.csv"
    path.write_text("item,GEN-0001,Pen,1.25,40\nitem,GEN-0002,Ink\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        load_items(path)


def test_load_items_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_items(tmp_path / "absent.csv")
