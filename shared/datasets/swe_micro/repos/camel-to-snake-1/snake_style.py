def camel_to_snake(name):
    """Convert a camelCase name to snake_case: "maxLineLength" -> "max_line_length"."""
    result = ""
    for ch in name:
        if ch.isupper():
            result += "_" + ch
        else:
            result += ch
    return result
