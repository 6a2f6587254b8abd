from __future__ import annotations

import pytest
from inventory import (
    Warehouse,
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


def test_format_money_thousands():
    assert format_money(1234.5) == "1,234.50 EUR"


def test_format_money_negative_and_currency():
    assert format_money(-3.456, "USD") == "-3.46 USD"


def test_format_money_zero():
    assert format_money(0) == "0.00 EUR"


def test_percent_change_up_and_down():
    assert percent_change(80, 100) == 25.0
    assert percent_change(100, 80) == -20.0


def test_percent_change_from_negative():
    assert percent_change(-50, -25) == 50.0


def test_percent_change_from_zero():
    with pytest.raises(ValueError, match="zero"):
        percent_change(0, 5)


@pytest.mark.parametrize(("value", "expected"), [(-1, 0), (0, 0), (5, 5), (10, 10), (11, 10)])
def test_clamp(value, expected):
    assert clamp(value, 0, 10) == expected


def test_clamp_empty_range():
    with pytest.raises(ValueError, match="empty range"):
        clamp(1, 5, 2)


def test_moving_average_single_window():
    assert moving_average([2.0, 4.0, 6.0], 3) == [4.0]


def test_moving_average_too_short():
    assert moving_average([1.0, 2.0], 3) == []


def test_moving_average_slides():
    assert moving_average([1.0, 2.0, 3.0, 4.0, 5.0], 2) == [1.5, 2.5, 3.5, 4.5]


def test_moving_average_window_of_one():
    assert moving_average([3.0, 1.0, 2.0], 1) == [3.0, 1.0, 2.0]


def test_moving_average_rejects_bad_window():
    with pytest.raises(ValueError, match="positive"):
        moving_average([1.0], 0)


def test_top_items(shop):
    assert [item.sku for item in top_items(shop)] == ["ELE-0001", "GEN-0001", "FOO-0001"]


def test_top_items_n(shop):
    assert [item.sku for item in top_items(shop, n=1)] == ["ELE-0001"]
    assert len(top_items(shop, n=10)) == 4


def test_top_items_tie_breaks_on_sku():
    from inventory import Item

    shop = Warehouse("Ties").add(Item("ZZZ-0001", "Z", 2.0, 1)).add(Item("AAA-0001", "A", 1.0, 2))
    assert [item.sku for item in top_items(shop, n=2)] == ["AAA-0001", "ZZZ-0001"]


def test_top_items_after_expiry(shop):
    assert [item.sku for item in top_items(shop, n=4, day=10)][-1] == "FOO-0001"


def test_category_totals(shop):
    assert category_totals(shop) == {
        "bundle": 9.0,
        "electronics": 60.0,
        "food": 10.8,
        "general": 50.0,
    }


def test_restock_plan(shop):
    assert restock_plan(shop) == {"BUN-0001": 8, "ELE-0001": 7}


def test_restock_plan_custom_target(shop):
    assert restock_plan(shop, target=3) == {"BUN-0001": 1}
    assert restock_plan(shop, target=0) == {}


def test_render_table_pads_and_truncates():
    table = render_table([("a", "bb"), ("abcdefghijkl", "c")], width=4)
    assert table == "a    | bb\nabcd | c"


def test_render_table_empty():
    assert render_table([]) == ""


def test_summary(shop):
    assert summary(shop) == (
        "Corner shop: 4 lines, worth 129.80 EUR\n"
        "sku        | qty        | value\n"
        "BUN-0001   | 2          | 9.00\n"
        "ELE-0001   | 3          | 60.00\n"
        "FOO-0001   | 12         | 10.80\n"
        "GEN-0001   | 40         | 50.00"
    )


def test_summary_of_empty_warehouse():
    assert summary(Warehouse("Nothing")) == (
        "Nothing: 0 lines, worth 0.00 EUR\nsku        | qty        | value"
    )
