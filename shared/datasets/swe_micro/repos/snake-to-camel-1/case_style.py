def snake_to_camel(name):
    """Convert a snake_case name to camelCase: "max_line_length" -> "maxLineLength"."""
    parts = name.split("_")
    result = parts[0]
    for part in parts[1:]:
        result += part.upper()
    return result
