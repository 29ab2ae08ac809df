from rle import run_length_encode


def test_empty():
    assert run_length_encode("") == []


def test_single():
    assert run_length_encode("a") == [("a", 1)]


def test_alternating():
    assert run_length_encode("abab") == [("a", 1), ("b", 1), ("a", 1), ("b", 1)]
