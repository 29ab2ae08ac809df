from lrucache import LRUCache


def test_get_refreshes_entry():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "a" in cache and "b" not in cache


def test_many_reads():
    cache = LRUCache(3)
    for key in "abc":
        cache.put(key, key)
    cache.get("a")
    cache.get("b")
    cache.put("d", "d")
    assert sorted(k for k in "abcd" if k in cache) == ["a", "b", "d"]


def test_miss_changes_nothing():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("zzz")
    cache.put("c", 3)
    assert "a" not in cache and "b" in cache
