from collatz import collatz_steps


def test_one():
    assert collatz_steps(1) == 0
