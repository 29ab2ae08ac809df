from rle import run_length_encode


def test_empty():
    assert run_length_encode("") == []


def test_single():
    assert run_length_encode("a") == [("a", 1)]


def test_pair_then_one():
    assert run_length_encode("aab") == [("a", 2), ("b", 1)]


def test_one_run():
    assert run_length_encode("aaa") == [("a", 3)]
