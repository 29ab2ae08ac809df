from evens import sum_of_evens


def test_empty():
    assert sum_of_evens([]) == 0


def test_negative_only():
    assert sum_of_evens([-4, -6]) == -10
