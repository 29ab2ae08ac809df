from chunks import chunk_list


def test_empty():
    assert chunk_list([], 3) == []


def test_size_one():
    assert chunk_list([1, 2, 3], 1) == [[1], [2], [3]]
