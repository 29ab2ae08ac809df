from evens import sum_of_evens


def test_empty():
    assert sum_of_evens([]) == 0
