from rotation import rotate_left


def test_one_step():
    assert rotate_left([1, 2, 3, 4], 1) == [2, 3, 4, 1]


def test_no_steps():
    assert rotate_left([1, 2, 3], 0) == [1, 2, 3]


def test_full_turn():
    assert rotate_left([1, 2, 3], 3) == [1, 2, 3]


def test_empty():
    assert rotate_left([], 2) == []


def test_empty_no_steps():
    assert rotate_left([], 0) == []


def test_strings():
    assert rotate_left(["a", "b", "c"], 2) == ["c", "a", "b"]
