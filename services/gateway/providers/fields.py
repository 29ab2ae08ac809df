"""Typed readers for vendor request bodies, shared by the four ``parse`` functions.

Every reader takes the JSON value, a path that names the field the way the caller wrote it
(``messages[3].content[0].text``) and raises ``ProviderError(400)`` naming that path when the value has the
wrong type or range. Parsers use only these readers to touch untrusted input, which is what lets the
property tests promise that no body, however malformed, escapes as anything but a ``ProviderError``.

Also here: the neutral forms of things several vendors share — tool-call arguments (parsed JSON object or
raw string), content-part joining, ids with vendor prefixes, and the synthetic reasoning tokens we hand out
where a vendor expects an opaque blob (Responses ``encrypted_content``, Anthropic thinking ``signature``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from services.gateway.conversation import ProviderError, ToolCall
from shared.ids import unique_hex

# Content-part lists become one string; parts are joined by a newline, which is how the chat templates
# we serve separate consecutive text blocks of one turn.
PART_SEPARATOR = "\n"

# Largest integer we accept for token counts and similar; anything above is a client bug, not a request.
MAX_INT = 2**31 - 1

# Prefix of the opaque reasoning blobs this gateway emits; lets ``decode_reasoning_blob`` recognize its own.
_BLOB_PREFIX = "hrl1."


def bad(path: str, expected: str) -> ProviderError:
    """The one error shape for a malformed field: status 400, message naming the field."""
    return ProviderError(400, f"{path}: expected {expected}", param=path)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def refuses_deep_nesting(parse: Callable[_P, _R]) -> Callable[_P, _R]:
    """Turn a ``RecursionError`` (a body nested about a thousand levels deep, which ``json.loads`` accepts)
    into a 400 instead of a 500; walking the body up front to measure depth would cost every request."""

    @wraps(parse)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return parse(*args, **kwargs)
        except RecursionError:
            raise ProviderError(400, "body: nested too deeply") from None

    return guarded


def require_object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise bad(path, "a JSON object")
    return value


# Deepest nesting accepted inside objects we pass through untouched (tool schemas, call arguments): real
# schemas stay far below it, and the chat template and JSON encoders downstream recurse over these.
MAX_OPAQUE_DEPTH = 64


def opaque_object(value: Any, path: str) -> dict[str, Any]:
    """An object the gateway carries without reading (tool parameters, arguments), depth-checked."""
    obj = require_object(value, path)
    pending: list[tuple[Any, int]] = [(obj, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_OPAQUE_DEPTH:
            raise bad(path, f"an object nested at most {MAX_OPAQUE_DEPTH} levels deep")
        children = node.values() if isinstance(node, dict) else node
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return obj


# What each vendor allows as a tool's name (the vendors answer any other name with a 400). OpenAI (Chat and
# Responses): letters, digits, ``_`` and ``-``, at most 64; Anthropic: the same characters, at most 128; Gemini:
# also ``.`` and ``:``, starting with a letter or ``_``, at most 64.
OPENAI_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
ANTHROPIC_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")
GEMINI_TOOL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}")


def tool_name(value: Any, path: str, pattern: re.Pattern[str]) -> str:
    """A tool's name as its vendor allows it: a string matching ``pattern`` (checked on the declaration, where
    the vendors check it; names in the history's tool calls only have to be strings)."""
    name = require_str(value, path)
    if pattern.fullmatch(name) is None:
        shown = name if len(name) <= 80 else name[:80] + "…"
        raise bad(path, f"a tool name matching ^{pattern.pattern}$, not {shown!r}")
    return name


def tool_schema(body: dict[str, Any], key: str, path: str = "", *, required: bool = False) -> dict[str, Any]:
    """A tool's parameter schema: depth-checked, and its top level well formed as JSON Schema for a function's
    arguments (``type``, where given, ``object`` — any case, Gemini spells it ``OBJECT``; ``properties`` an object of
    objects, ``required`` a list of strings), since chat templates and tool-call parsers read exactly these keys.
    The vendors refuse such schemas with a 400 too (Anthropic's ``input_schema`` is ``required``)."""
    if required and body.get(key) is None:
        raise bad(f"{path}{key}", "a JSON Schema object (the field is required)")
    schema = optional_opaque(body, key, path)
    where = f"{path}{key}"
    kind = schema.get("type")
    if kind is not None and not isinstance(kind, str):
        for i, item in enumerate(require_list(kind, f"{where}.type")):
            require_str(item, f"{where}.type[{i}]")
    if kind is not None and (not isinstance(kind, str) or kind.lower() != "object"):
        raise bad(f"{where}.type", "'object': a tool's arguments are a JSON object")
    properties = schema.get("properties")
    if properties is not None:
        for name, prop in require_object(properties, f"{where}.properties").items():
            require_object(prop, f"{where}.properties.{name}")
    for i, name in enumerate(optional_list(schema, "required", f"{where}.")):
        require_str(name, f"{where}.required[{i}]")
    return schema


def optional_opaque(body: dict[str, Any], key: str, path: str = "") -> dict[str, Any]:
    value = body.get(key)
    return {} if value is None else opaque_object(value, f"{path}{key}")


def optional_object(body: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    value = body.get(key)
    if value is None:
        return None
    return require_object(value, f"{path}{key}")


def require_list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise bad(path, "a JSON array")
    return value


def optional_list(body: dict[str, Any], key: str, path: str = "") -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    return require_list(value, f"{path}{key}")


def require_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise bad(path, "a string")
    return value


def optional_str(body: dict[str, Any], key: str, path: str = "", default: str = "") -> str:
    value = body.get(key)
    if value is None:
        return default
    return require_str(value, f"{path}{key}")


def optional_bool(body: dict[str, Any], key: str, path: str = "", default: bool = False) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad(f"{path}{key}", "true or false")
    return value


def optional_int(
    body: dict[str, Any], key: str, path: str = "", *, minimum: int = 0, maximum: int = MAX_INT
) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    # bool is an int in Python; ``true`` is never a token count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(f"{path}{key}", "an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise bad(f"{path}{key}", "an integer")
        value = int(value)
    if not minimum <= value <= maximum:
        raise bad(f"{path}{key}", f"an integer between {minimum} and {maximum}")
    return value


def optional_float(
    body: dict[str, Any], key: str, path: str = "", *, minimum: float, maximum: float
) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(f"{path}{key}", "a number")
    number = float(value)
    if math.isnan(number) or not minimum <= number <= maximum:
        raise bad(f"{path}{key}", f"a number between {minimum:g} and {maximum:g}")
    return number


def stop_list(value: Any, path: str) -> list[str]:
    """A stop setting: absent, one string, or a list of strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [require_str(item, f"{path}[{i}]") for i, item in enumerate(require_list(value, path))]


def ignored_fields_note(body: dict[str, Any], handled: set[str]) -> list[str]:
    """One note listing the top-level fields the gateway accepted but does not act on."""
    ignored = sorted(key for key in body if key not in handled)
    return [f"ignored fields: {', '.join(ignored)}"] if ignored else []


# --- tool-call arguments -------------------------------------------------------------------------------


def parse_arguments(raw: Any, path: str, notes: list[str]) -> dict[str, Any] | str:
    """Function-call ``arguments`` as sent in history: a JSON string (OpenAI) or an object.

    A string that is not a JSON object stays a raw string (noted): vendors accept such history, so we do too.
    """
    if isinstance(raw, dict):
        return opaque_object(raw, path)
    if raw is None:
        return {}
    text = require_str(raw, path)
    if text.strip() == "":
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        notes.append(f"{path}: arguments are not valid JSON; kept as text")
        return text
    if not isinstance(value, dict):
        notes.append(f"{path}: arguments are JSON but not an object; kept as text")
        return text
    return opaque_object(value, path)


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """Arguments as an object, for vendors whose tool calls carry one (Anthropic ``input``, Gemini ``args``)."""
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        value = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return {"input": call.arguments}
    return value if isinstance(value, dict) else {"input": call.arguments}


def arguments_json(call: ToolCall) -> str:
    """Arguments as the JSON string OpenAI-style tool calls carry."""
    if isinstance(call.arguments, str):
        return json.dumps(arguments_object(call), ensure_ascii=False)
    return json.dumps(call.arguments, ensure_ascii=False)


def custom_input(call: ToolCall) -> str:
    """The raw input of a freeform (``custom``) tool call.

    The model sees a custom tool as a function with one string parameter ``input``
    (``CUSTOM_TOOL_PARAMETERS``), so a parsed ``{"input": "..."}`` is unwrapped; a raw string passes through.
    """
    if isinstance(call.arguments, str):
        return call.arguments
    if len(call.arguments) == 1:
        (only,) = call.arguments.values()
        if isinstance(only, str):
            return only
    return json.dumps(call.arguments, ensure_ascii=False)


def custom_tool_parameters(format_description: str) -> dict[str, Any]:
    """How a freeform tool is offered to the model: one required string parameter ``input``."""
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": format_description}},
        "required": ["input"],
    }


# --- content -------------------------------------------------------------------------------------------


def join_parts(texts: list[str]) -> str:
    return PART_SEPARATOR.join(texts)


def text_content(value: Any, path: str, notes: list[str], text_types: frozenset[str]) -> str:
    """Content given as a string or as a list of typed parts/blocks: the text ones joined, the rest noted.

    ``text_types`` names the part types that carry ``text`` (``text``; ``input_text``/``output_text`` …);
    a ``refusal`` part contributes its ``refusal`` text.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    texts: list[str] = []
    for i, raw in enumerate(require_list(value, path)):
        part = require_object(raw, f"{path}[{i}]")
        kind = require_str(part.get("type"), f"{path}[{i}].type")
        if kind in text_types:
            texts.append(require_str(part.get("text"), f"{path}[{i}].text"))
        elif kind == "refusal":
            texts.append(require_str(part.get("refusal"), f"{path}[{i}].refusal"))
        else:
            notes.append(f"{path}[{i}]: {kind} part dropped")
    return join_parts(texts)


def dump_json(value: Any) -> str:
    """Compact JSON for tool results given as objects (Gemini ``functionResponse.response``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- ids and opaque blobs ------------------------------------------------------------------------------


def with_prefix(prefix: str, raw: str) -> str:
    """A vendor id: ``raw`` unchanged when it already carries ``prefix``, else ``prefix + raw``."""
    return raw if raw.startswith(prefix) else prefix + raw


def random_id(prefix: str) -> str:
    return prefix + unique_hex(24)


def encode_reasoning_blob(reasoning: str) -> str:
    """The opaque reasoning blob (Responses ``encrypted_content``) we hand out: the full reasoning text,
    so a harness that echoes only the blob still gives us back exactly what the model sampled."""
    return _BLOB_PREFIX + base64.urlsafe_b64encode(reasoning.encode()).decode()


def decode_reasoning_blob(blob: str) -> str | None:
    """The reasoning text inside one of our blobs; ``None`` for a foreign (real vendor) blob."""
    if not blob.startswith(_BLOB_PREFIX):
        return None
    try:
        return base64.urlsafe_b64decode(blob[len(_BLOB_PREFIX) :].encode()).decode()
    except (binascii.Error, ValueError):
        return None


def reasoning_signature(reasoning: str) -> str:
    """A deterministic stand-in for Anthropic's thinking ``signature`` (clients echo it; nobody checks it)."""
    return _BLOB_PREFIX + hashlib.sha256(reasoning.encode()).hexdigest()
