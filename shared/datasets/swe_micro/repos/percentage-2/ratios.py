def percentage(part, whole):
    """part as a percentage of whole, rounded to one decimal."""
    return round(whole / part * 100, 1)
