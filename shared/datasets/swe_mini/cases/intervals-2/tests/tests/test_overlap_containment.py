import itertools

from intervals import Interval


def test_inner_overlaps_outer():
    assert Interval(2, 3).overlaps(Interval(0, 10))


def test_overlap_is_symmetric():
    samples = [Interval(0, 10), Interval(2, 3), Interval(10, 12), Interval(11, 20), Interval(-5, -1)]
    for a, b in itertools.product(samples, repeat=2):
        assert a.overlaps(b) == b.overlaps(a), (a, b)


def test_intersection():
    assert Interval(0, 5).intersection(Interval(3, 9)) == Interval(3, 5)
    assert Interval(2, 3).intersection(Interval(0, 10)) == Interval(2, 3)
    assert Interval(0, 1).intersection(Interval(1, 2)) == Interval(1, 1)
    assert Interval(0, 1).intersection(Interval(2, 3)) is None
