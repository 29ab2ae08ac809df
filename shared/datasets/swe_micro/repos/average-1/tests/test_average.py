from means import average


def test_whole():
    assert average([2, 4, 6]) == 4


def test_empty():
    assert average([]) == 0.0


def test_single():
    assert average([7]) == 7


def test_negative():
    assert average([-2, 2, 3]) == 1


def test_empty_tuple():
    assert average(()) == 0.0
