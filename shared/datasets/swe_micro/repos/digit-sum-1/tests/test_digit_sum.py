from digits import digit_sum


def test_positive():
    assert digit_sum(123) == 6


def test_zero():
    assert digit_sum(0) == 0


def test_large():
    assert digit_sum(9081) == 18


def test_single():
    assert digit_sum(7) == 7
