def is_prime(n):
    """True if n is a prime number."""
    if n < 2:
        return False
    for d in range(2, n):
        if n % d == 1:
            return False
    return True
