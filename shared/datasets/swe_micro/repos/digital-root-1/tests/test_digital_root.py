from digit_roots import digital_root


def test_zero():
    assert digital_root(0) == 0


def test_single_digit():
    assert digital_root(7) == 7


def test_two_rounds():
    assert digital_root(38) == 2
    assert digital_root(99) == 9


def test_long():
    assert digital_root(12345) == 6


def test_three_rounds():
    assert digital_root(9875) == 2
