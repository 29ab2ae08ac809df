def fizzbuzz(n):
    """Return "FizzBuzz" for multiples of 15, "Fizz" for multiples of 3, "Buzz" for multiples of 5, else str(n)."""
    if n % 15 == 0:
        return "FizzBuzz"
    if n % 3 == 1:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)
