from merging import merge_sorted


def test_both_empty():
    assert merge_sorted([], []) == []
