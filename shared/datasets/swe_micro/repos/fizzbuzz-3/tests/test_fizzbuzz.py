from games import fizzbuzz


def test_fizz():
    assert fizzbuzz(9) == "Fizz"


def test_fizzbuzz():
    assert fizzbuzz(30) == "FizzBuzz"


def test_number():
    assert fizzbuzz(7) == "7"


def test_three():
    assert fizzbuzz(3) == "Fizz"


def test_fifteen():
    assert fizzbuzz(15) == "FizzBuzz"


def test_one():
    assert fizzbuzz(1) == "1"
