def int_to_binary(n):
    """The binary digits of n as a string: 5 -> "101", -5 -> "-101", 0 -> "0"."""
    if n == 0:
        return "0"
    sign = "-" if n < 0 else ""
    n = abs(n)
    digits = ""
    while n > 0:
        digits = digits + str(n % 2)
        n //= 2
    return sign + digits
