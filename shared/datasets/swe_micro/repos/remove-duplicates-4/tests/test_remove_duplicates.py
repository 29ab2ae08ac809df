from dedupe import remove_duplicates


def test_empty():
    assert remove_duplicates([]) == []


def test_all_same():
    assert remove_duplicates([5, 5, 5]) == [5]
