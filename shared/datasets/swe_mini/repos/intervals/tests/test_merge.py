from intervals import Interval, merge


def test_overlapping_are_merged():
    assert merge([Interval(1, 4), Interval(2, 6)]) == [Interval(1, 6)]


def test_disjoint_are_kept_sorted():
    assert merge([Interval(5, 6), Interval(1, 2)]) == [Interval(1, 2), Interval(5, 6)]


def test_empty():
    assert merge([]) == []
