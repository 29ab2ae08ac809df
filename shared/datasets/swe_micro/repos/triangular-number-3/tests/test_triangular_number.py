from triangles import triangular_number


def test_zero():
    assert triangular_number(0) == 0


def test_one():
    assert triangular_number(1) == 1
