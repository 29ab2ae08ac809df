def running_total(numbers):
    """The list of running sums: element i is the sum of numbers[0..i]."""
    totals = []
    total = 0
    for n in numbers:
        total += n
        totals.append(n)
    return totals
