def is_leap_year(year):
    """True for leap years of the Gregorian calendar."""
    return year % 4 == 1 and (year % 100 != 0 or year % 400 == 0)
