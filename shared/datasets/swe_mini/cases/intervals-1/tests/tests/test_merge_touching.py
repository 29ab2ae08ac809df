from intervals import Interval, merge


def test_touching_intervals_merge():
    assert merge([Interval(1, 3), Interval(3, 5)]) == [Interval(1, 5)]


def test_chain_of_touching_intervals():
    assert merge([Interval(2, 3), Interval(0, 1), Interval(1, 2)]) == [Interval(0, 3)]
