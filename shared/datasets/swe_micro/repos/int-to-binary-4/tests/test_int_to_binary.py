from binary_format import int_to_binary


def test_zero():
    assert int_to_binary(0) == "0"


def test_one():
    assert int_to_binary(1) == "1"


def test_two():
    assert int_to_binary(2) == "10"


def test_five():
    assert int_to_binary(5) == "101"


def test_six():
    assert int_to_binary(6) == "110"
    assert int_to_binary(8) == "1000"


def test_byte():
    assert int_to_binary(255) == "11111111"


def test_thirteen():
    assert int_to_binary(13) == "1101"
