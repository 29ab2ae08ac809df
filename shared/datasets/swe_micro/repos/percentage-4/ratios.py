def percentage(part, whole):
    """part as a percentage of whole, rounded to one decimal."""
    return round(part / whole, 1) * 100
