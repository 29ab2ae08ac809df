from int_roots import nth_root_int


def test_zero():
    assert nth_root_int(0, 2) == 0


def test_first_root():
    assert nth_root_int(5, 1) == 5
