def strip_punctuation(word):
    """word without the punctuation marks . , ; : ! ? ' " at its start and end; inner ones are kept."""
    marks = ".,;:!?'\""
    start = 0
    end = len(word)
    while start < end and word[start] in marks:
        start += 1
    while end > start and word[end] in marks:
        end -= 1
    return word[start:end]
