import pytest
from inventory import Inventory


def test_add_accumulates():
    inv = Inventory()
    inv.add("bolt", 3, 0.5)
    inv.add("bolt", 2, 0.5)
    assert inv.quantity("bolt") == 5


def test_remove_reduces():
    inv = Inventory()
    inv.add("nut", 10, 0.1)
    inv.remove("nut", 4)
    assert inv.quantity("nut") == 6


def test_unknown_item_has_zero():
    assert Inventory().quantity("gear") == 0


def test_non_positive_quantities_rejected():
    inv = Inventory()
    with pytest.raises(ValueError):
        inv.add("bolt", 0, 1.0)
    with pytest.raises(ValueError):
        inv.remove("bolt", -1)
