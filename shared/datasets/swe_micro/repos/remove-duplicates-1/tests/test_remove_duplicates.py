from dedupe import remove_duplicates


def test_empty():
    assert remove_duplicates([]) == []


def test_no_repeats():
    assert remove_duplicates([3, 1, 2]) == [3, 1, 2]
