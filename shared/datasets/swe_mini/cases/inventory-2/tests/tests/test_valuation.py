import pytest
from inventory import Inventory


def test_value_counts_quantity():
    inv = Inventory()
    inv.add("bolt", 4, 0.5)
    inv.add("nut", 10, 0.1)
    assert inv.total_value() == pytest.approx(3.0)


def test_value_after_removal():
    inv = Inventory()
    inv.add("bolt", 4, 0.5)
    inv.remove("bolt", 1)
    inv.add("bolt", 1, 2.0)
    assert inv.total_value() == pytest.approx(8.0)


def test_empty_inventory_is_worth_nothing():
    assert Inventory().total_value() == 0
