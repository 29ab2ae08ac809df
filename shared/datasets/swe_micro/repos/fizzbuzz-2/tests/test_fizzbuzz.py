from games import fizzbuzz


def test_fizzbuzz():
    assert fizzbuzz(30) == "FizzBuzz"
