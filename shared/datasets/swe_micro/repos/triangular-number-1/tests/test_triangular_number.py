from triangles import triangular_number


def test_zero():
    assert triangular_number(0) == 0
