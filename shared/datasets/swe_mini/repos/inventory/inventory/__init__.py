"""inventory: a tiny stock ledger."""

from inventory.ledger import InsufficientStock, Inventory

__all__ = ["InsufficientStock", "Inventory"]
