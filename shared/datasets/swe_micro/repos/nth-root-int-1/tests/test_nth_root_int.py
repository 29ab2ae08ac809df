from int_roots import nth_root_int


def test_zero():
    assert nth_root_int(0, 2) == 0


def test_below_cube():
    assert nth_root_int(26, 3) == 2


def test_square_root():
    assert nth_root_int(99, 2) == 9
