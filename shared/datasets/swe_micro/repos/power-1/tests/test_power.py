from powers import power


def test_zero_base():
    assert power(0, 3) == 0
