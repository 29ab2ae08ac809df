from merging import merge_sorted


def test_both_empty():
    assert merge_sorted([], []) == []


def test_second_first():
    assert merge_sorted([5], [1, 2, 3]) == [1, 2, 3, 5]


def test_negatives():
    assert merge_sorted([-3, 0], [-1]) == [-3, -1, 0]
