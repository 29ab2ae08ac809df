from products import product


def test_empty():
    assert product([]) == 1


def test_zero():
    assert product([1, 0, 7]) == 0
