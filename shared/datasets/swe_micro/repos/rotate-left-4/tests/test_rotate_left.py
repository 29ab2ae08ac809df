from rotation import rotate_left


def test_empty():
    assert rotate_left([], 2) == []


def test_empty_no_steps():
    assert rotate_left([], 0) == []
