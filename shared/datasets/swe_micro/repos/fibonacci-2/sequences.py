def fibonacci(n):
    """The n-th Fibonacci number, counting from fibonacci(0) == 0 and fibonacci(1) == 1."""
    a, b = 0, 1
    for _ in range(n - 1):
        a, b = b, a + b
    return a
