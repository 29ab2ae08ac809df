from games import fizzbuzz


def test_fizzbuzz():
    assert fizzbuzz(30) == "FizzBuzz"


def test_five():
    assert fizzbuzz(5) == "Buzz"


def test_fifteen():
    assert fizzbuzz(15) == "FizzBuzz"
