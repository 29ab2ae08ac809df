from divisibility import count_divisible


def test_evens():
    assert count_divisible([1, 2, 3, 4, 5, 6], 2) == 3


def test_empty():
    assert count_divisible([], 3) == 0
