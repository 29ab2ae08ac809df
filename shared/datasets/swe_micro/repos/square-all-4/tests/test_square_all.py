from squares import square_all


def test_small():
    assert square_all([1, 2, 3]) == [1, 4, 9]


def test_empty():
    assert square_all([]) == []


def test_ten():
    assert square_all([10]) == [100]
