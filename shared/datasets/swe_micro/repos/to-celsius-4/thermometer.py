def to_celsius(fahrenheit):
    """Degrees Fahrenheit in degrees Celsius."""
    return (fahrenheit - 23) * 5 / 9
