from powers import power


def test_exponent_one():
    assert power(3, 1) == 3
