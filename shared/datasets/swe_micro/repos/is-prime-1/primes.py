def is_prime(n):
    """True if n is a prime number."""
    if n == 0:
        return False
    for d in range(2, n):
        if n % d == 0:
            return False
    return True
