from evens import sum_of_evens


def test_mixed():
    assert sum_of_evens([1, 2, 3, 4]) == 6


def test_all_odd():
    assert sum_of_evens([1, 3, 5]) == 0


def test_empty():
    assert sum_of_evens([]) == 0


def test_zeros():
    assert sum_of_evens([0, 0, 7]) == 0


def test_larger():
    assert sum_of_evens([10, 11, 12]) == 22
