def digital_root(n):
    """Sum the decimal digits of n >= 0, again and again, until a single digit remains."""
    while n > 10:
        total = 0
        while n > 0:
            total += n % 10
            n //= 10
        n = total
    return n
