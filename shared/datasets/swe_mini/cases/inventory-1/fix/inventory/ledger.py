"""Stock levels and prices of items."""

from __future__ import annotations


class InsufficientStock(Exception):
    """More units were requested than are in stock."""


class Inventory:
    def __init__(self) -> None:
        self._quantities: dict[str, int] = {}
        self._prices: dict[str, float] = {}

    def add(self, item: str, quantity: int, unit_price: float) -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self._quantities[item] = self._quantities.get(item, 0) + quantity
        self._prices[item] = unit_price

    def remove(self, item: str, quantity: int) -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        in_stock = self._quantities.get(item, 0)
        if quantity > in_stock:
            raise InsufficientStock(f"{quantity} x {item} requested, {in_stock} in stock")
        self._quantities[item] = in_stock - quantity

    def quantity(self, item: str) -> int:
        return self._quantities.get(item, 0)

    def total_value(self) -> float:
        return sum(self._prices[item] for item in self._quantities)
