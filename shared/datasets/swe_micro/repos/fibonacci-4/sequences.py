def fibonacci(n):
    """The n-th Fibonacci number, counting from fibonacci(0) == 0 and fibonacci(1) == 1."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + 1
    return a
