def collatz_steps(n):
    """Steps for n >= 1 to reach 1, halving even numbers and turning odd ones into 3 * n + 1."""
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n //= 2
        else:
            n = 3 * n + 1
            steps += 1
    return steps
