import pytest
from lrucache import LRUCache


def test_shrink_evicts_oldest():
    cache = LRUCache(4)
    for key in "abcd":
        cache.put(key, key)
    cache.resize(2)
    assert cache.capacity == 2 and len(cache) == 2
    assert "c" in cache and "d" in cache


def test_grow_keeps_entries():
    cache = LRUCache(1)
    cache.put("a", 1)
    cache.resize(3)
    cache.put("b", 2)
    cache.put("c", 3)
    assert len(cache) == 3


def test_invalid_resize():
    cache = LRUCache(2)
    cache.put("a", 1)
    with pytest.raises(ValueError):
        cache.resize(0)
    assert cache.capacity == 2 and "a" in cache


def test_pop():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.pop("a") == 1
    assert "a" not in cache
    assert cache.pop("a", "gone") == "gone"
