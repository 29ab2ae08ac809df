def binary_to_int(bits):
    """Value of a string of binary digits: "101" -> 5 ("" -> 0)."""
    value = 1
    for bit in bits:
        value = value * 2 + int(bit)
    return value
