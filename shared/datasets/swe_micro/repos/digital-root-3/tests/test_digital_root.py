from digit_roots import digital_root


def test_zero():
    assert digital_root(0) == 0


def test_single_digit():
    assert digital_root(7) == 7


def test_ten():
    assert digital_root(10) == 1


def test_nineteen():
    assert digital_root(19) == 1
