from digits import digit_sum


def test_zero():
    assert digit_sum(0) == 0
