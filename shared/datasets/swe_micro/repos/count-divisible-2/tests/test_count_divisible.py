from divisibility import count_divisible


def test_empty():
    assert count_divisible([], 3) == 0
