def repeat_string(text, times, separator=""):
    """text repeated times times, with separator between the copies; "" when times is 0 or less."""
    if times <= 0:
        return ""
    return (text + separator) * times
