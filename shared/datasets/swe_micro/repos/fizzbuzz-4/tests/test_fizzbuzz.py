from games import fizzbuzz


def test_fizz():
    assert fizzbuzz(9) == "Fizz"


def test_buzz():
    assert fizzbuzz(10) == "Buzz"


def test_number():
    assert fizzbuzz(7) == "7"


def test_three():
    assert fizzbuzz(3) == "Fizz"


def test_five():
    assert fizzbuzz(5) == "Buzz"
