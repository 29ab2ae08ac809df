"""The cache: an ordered dict whose first entry is the least recently used."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

_MISSING = object()


class LRUCache:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._entries: OrderedDict[Any, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._entries.get(key, _MISSING)
        if value is _MISSING:
            return default
        return value

    def put(self, key: Any, value: Any) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
