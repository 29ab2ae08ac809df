def camel_to_snake(name):
    """Convert a camelCase name to snake_case: "maxLineLength" -> "max_line_length"."""
    result = ""
    for ch in name[1:]:
        if ch.isupper():
            result += "_" + ch.lower()
        else:
            result += ch
    return result
