from products import product


def test_zero():
    assert product([1, 0, 7]) == 0
