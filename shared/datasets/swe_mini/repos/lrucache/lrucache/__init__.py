"""lrucache: a least-recently-used cache."""

from lrucache.cache import LRUCache

__all__ = ["LRUCache"]
