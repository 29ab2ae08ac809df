import pytest
from minstats import mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median_odd():
    assert median([5, 1, 3]) == 3


def test_empty_is_an_error():
    with pytest.raises(ValueError):
        mean([])
    with pytest.raises(ValueError):
        median([])
