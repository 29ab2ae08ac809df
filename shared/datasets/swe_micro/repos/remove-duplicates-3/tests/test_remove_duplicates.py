from dedupe import remove_duplicates


def test_repeat():
    assert remove_duplicates([1, 2, 1, 3]) == [1, 2, 3]


def test_empty():
    assert remove_duplicates([]) == []


def test_all_same():
    assert remove_duplicates([5, 5, 5]) == [5]


def test_mirror():
    assert remove_duplicates([1, 2, 3, 2, 1]) == [1, 2, 3]
