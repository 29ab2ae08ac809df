from evens import sum_of_evens


def test_all_odd():
    assert sum_of_evens([1, 3, 5]) == 0


def test_empty():
    assert sum_of_evens([]) == 0
