import pytest
from intervals import Interval


def test_length():
    assert Interval(2, 5).length == 3


def test_contains_endpoints():
    interval = Interval(0, 1)
    assert interval.contains(0) and interval.contains(1) and not interval.contains(1.5)


def test_reversed_is_rejected():
    with pytest.raises(ValueError):
        Interval(3, 1)


def test_partial_overlap():
    assert Interval(0, 5).overlaps(Interval(3, 8))
    assert not Interval(0, 1).overlaps(Interval(2, 3))
