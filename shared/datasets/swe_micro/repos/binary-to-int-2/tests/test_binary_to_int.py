from binary_parse import binary_to_int


def test_zero():
    assert binary_to_int("0") == 0


def test_empty():
    assert binary_to_int("") == 0


def test_one():
    assert binary_to_int("1") == 1


def test_five():
    assert binary_to_int("101") == 5


def test_byte():
    assert binary_to_int("11111111") == 255
