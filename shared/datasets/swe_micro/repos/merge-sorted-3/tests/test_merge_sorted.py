from merging import merge_sorted


def test_both_empty():
    assert merge_sorted([], []) == []


def test_one_empty():
    assert merge_sorted([1, 2], []) == [1, 2]
    assert merge_sorted([], [3]) == [3]


def test_duplicates():
    assert merge_sorted([1, 1], [1]) == [1, 1, 1]
