import pytest
from inventory import InsufficientStock, Inventory


def test_overdraw_raises():
    inv = Inventory()
    inv.add("bolt", 2, 0.5)
    with pytest.raises(InsufficientStock):
        inv.remove("bolt", 5)


def test_stock_unchanged_after_refusal():
    inv = Inventory()
    inv.add("bolt", 2, 0.5)
    with pytest.raises(InsufficientStock):
        inv.remove("bolt", 3)
    assert inv.quantity("bolt") == 2
    inv.remove("bolt", 2)
    assert inv.quantity("bolt") == 0


def test_unknown_item():
    with pytest.raises(InsufficientStock):
        Inventory().remove("gear", 1)
