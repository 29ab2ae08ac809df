def is_prime(n):
    """True if n is a prime number."""
    if n < 2:
        return False
    for d in range(3, n, 2):
        if n % d == 0:
            return False
    return True
