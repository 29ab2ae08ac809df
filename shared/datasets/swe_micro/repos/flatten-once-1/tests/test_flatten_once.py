from nesting import flatten_once


def test_empty():
    assert flatten_once([]) == []
