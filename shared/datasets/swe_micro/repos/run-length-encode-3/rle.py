def run_length_encode(text):
    """Runs of equal characters as (char, count) pairs: "aab" -> [("a", 2), ("b", 1)]."""
    runs = []
    for ch in text:
        if runs and runs[0][0] == ch:
            runs[-1] = (ch, runs[-1][1] + 1)
        else:
            runs.append((ch, 1))
    return runs
