from binary_format import int_to_binary


def test_zero():
    assert int_to_binary(0) == "0"
