from games import fizzbuzz


def test_fizz():
    assert fizzbuzz(9) == "Fizz"


def test_buzz():
    assert fizzbuzz(10) == "Buzz"


def test_fizzbuzz():
    assert fizzbuzz(30) == "FizzBuzz"


def test_three():
    assert fizzbuzz(3) == "Fizz"


def test_five():
    assert fizzbuzz(5) == "Buzz"


def test_fifteen():
    assert fizzbuzz(15) == "FizzBuzz"
