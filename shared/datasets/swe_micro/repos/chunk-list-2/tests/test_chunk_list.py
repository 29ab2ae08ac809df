from chunks import chunk_list


def test_empty():
    assert chunk_list([], 3) == []


def test_size_too_big():
    assert chunk_list([1, 2], 5) == [[1, 2]]
