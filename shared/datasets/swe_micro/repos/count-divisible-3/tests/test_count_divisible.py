from divisibility import count_divisible


def test_evens():
    assert count_divisible([1, 2, 3, 4, 5, 6], 2) == 3


def test_empty():
    assert count_divisible([], 3) == 0


def test_negatives():
    assert count_divisible([-4, -3, 4], 2) == 2


def test_one_of_two():
    assert count_divisible([7, 11], 7) == 1
    assert count_divisible([5, 10, 15], 5) == 3


def test_by_one():
    assert count_divisible([1, 2], 1) == 2


def test_negative_divisor():
    assert count_divisible([3, 6, 7], -3) == 2
