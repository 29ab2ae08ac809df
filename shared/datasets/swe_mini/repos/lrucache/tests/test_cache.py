import pytest
from lrucache import LRUCache


def test_put_and_get():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert cache.get("zzz", "none") == "none"


def test_capacity_is_respected():
    cache = LRUCache(2)
    for key in "abc":
        cache.put(key, key.upper())
    assert len(cache) == 2 and "a" not in cache


def test_put_refreshes():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 3)
    cache.put("c", 4)
    assert "b" not in cache and cache.get("a") == 3


def test_invalid_capacity():
    with pytest.raises(ValueError):
        LRUCache(0)
