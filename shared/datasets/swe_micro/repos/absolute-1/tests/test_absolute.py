from magnitude import absolute


def test_zero():
    assert absolute(0) == 0
