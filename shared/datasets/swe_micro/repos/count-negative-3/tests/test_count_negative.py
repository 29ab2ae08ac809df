from negatives import count_negative


def test_empty():
    assert count_negative([]) == 0


def test_none():
    assert count_negative([1, 2]) == 0
