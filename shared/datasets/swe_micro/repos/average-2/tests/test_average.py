from means import average


def test_whole():
    assert average([2, 4, 6]) == 4


def test_fraction():
    assert average([1, 2]) == 1.5


def test_single():
    assert average([7]) == 7


def test_negative():
    assert average([-2, 2, 3]) == 1


def test_halves():
    assert average([1, 2, 3, 4]) == 2.5
