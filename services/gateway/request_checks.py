"""The gateway's request boundary checks: what a body must pass before the core spends anything on it.

Called by ``app.py`` in this order, each failure a ``ProviderError`` the handler renders in the caller's shape
(4xx, nothing recorded, nothing sent upstream):

1. ``read_json``: size (413 from ``Content-Length`` before reading, or as soon as the stream passes the limit),
   then nesting depth on the raw bytes (``nesting_depth``: strings skipped by one regex, brackets counted with
   numpy; ``json.loads`` itself would recurse a thousand levels and fail with a ``RecursionError``), then the
   parse, then lone UTF-16 surrogates (``\\ud800`` escapes that decode to no character: the tokenizer, the
   template and every JSON encoder downstream fail on them).
2. after the adapter's parse, ``check_conversation``: every tool result answers a tool call made earlier in
   the conversation (the vendors refuse orphans too), and ``max_tokens`` is a budget some model could have: at
   most the larger of the served context and ``MAX_COMPLETION_TOKENS`` (the largest output any vendor's model
   allows). A budget over the context but under that is capped to what the context leaves, not refused:
   harnesses ask for their defaults (Claude Code 32000) whatever the model, and a context of 8192 must still
   serve them. (Below 1, a wrong type, or a spelling the API does not take are the adapters' 400s.)
3. ``prompt_token_floor``: a lower bound of the prompt's length in tokens from the character count of everything
   in the request that reaches the model — message text, reasoning, tool-call names and arguments, tool results,
   the tools' names, descriptions and schemas — and the longest token of the vocabulary, so a prompt far over
   the context is refused at once instead of after rendering and tokenizing megabytes (a 10 MB prompt took
   24 s). The limit quoted is the engine's (``GatewayState.context_limit``). What does not reach the model
   (dropped image parts, ignored fields) reaches only the recorder's raw body, which ``read_json`` caps at
   ``settings.max_request_bytes``. Counting costs one pass over the messages plus the tools' compact JSON, which
   the splice's tools digest reuses (``normalize.conversation_tools_key``): no request is encoded twice.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
from aiohttp import web

from services.gateway.conversation import Conversation, ProviderError, ToolSpec
from services.gateway.normalize import conversation_tools_key

# Largest completion budget a request may ask for over the served context: the largest output any vendor's model
# allows (128k). Larger ones are absurd; the vendors answer them with a 400 too.
MAX_COMPLETION_TOKENS = 1 << 17

# The budget's field in each API, for the error's ``param``.
MAX_TOKENS_PARAM = {
    "openai_chat": "max_tokens",
    "openai_responses": "max_output_tokens",
    "anthropic_messages": "max_tokens",
    "gemini": "generationConfig.maxOutputTokens",
}

# Deepest JSON nesting a request body may have. Real harness bodies reach ~20 (tool schemas inside tools inside
# the body); ``fields.MAX_OPAQUE_DEPTH`` bounds what is inside a schema.
MAX_BODY_DEPTH = 100

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENERS = np.frombuffer(b"[{", np.uint8)
# Where a surrogate may hide: a \uD800-\uDFFF escape, or its UTF-8 encoding (which json.loads lets through with
# "surrogatepass"). Only then is the parsed body checked for a lone one (a pair is a valid character).
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\xed[\xa0-\xbf]")


def nesting_depth(raw: bytes, at_most: int | None = None) -> int:
    """How deep ``raw`` (JSON text) nests arrays and objects, without parsing it. With ``at_most``, a body with
    no more opening brackets than that (in strings or not) is answered from the count alone."""
    if at_most is not None and (openers := raw.count(b"[") + raw.count(b"{")) <= at_most:
        return openers
    skeleton = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not skeleton:
        return 0
    brackets = np.frombuffer(skeleton, np.uint8)
    steps = np.where(np.isin(brackets, _OPENERS), 1, -1)
    return int(np.cumsum(steps).max())


def _may_hold_surrogates(raw: bytes) -> bool:
    # bytes.find runs at memchr speed; the regex only where a candidate is there at all.
    if b"\\ud" not in raw and b"\\uD" not in raw and b"\xed" not in raw:
        return False
    return _MAYBE_SURROGATE.search(raw) is not None


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


RAW_BODY = web.RequestKey("gateway_raw_body", bytes)
"""The body exactly as received (the gateway records it as it came, without re-encoding the parsed JSON)."""


async def read_json(request: web.Request, limit: int) -> Any:
    """The request body as JSON, or a ``ProviderError``: 413 over ``limit`` bytes, 400 for nesting deeper than
    ``MAX_BODY_DEPTH``, malformed JSON or text that is not valid Unicode. The bytes stay in
    ``request[RAW_BODY]``."""
    if request.content_length is not None and request.content_length > limit:
        raise ProviderError(413, f"request body is {request.content_length} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(1 << 20):
        size += len(chunk)
        if size > limit:
            raise ProviderError(413, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    raw = request[RAW_BODY] = b"".join(chunks)
    depth = nesting_depth(raw, at_most=MAX_BODY_DEPTH)
    if depth > MAX_BODY_DEPTH:
        raise ProviderError(
            400, f"request body nests {depth} levels deep; at most {MAX_BODY_DEPTH} are accepted"
        )
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProviderError(400, f"request body is not valid JSON: {exc}") from None
    except RecursionError:  # unreachable below MAX_BODY_DEPTH; kept so no body can become a 500
        raise ProviderError(400, "request body is nested too deeply") from None
    if _may_hold_surrogates(raw) and _has_lone_surrogate(body):
        raise ProviderError(
            400, "request body holds a lone UTF-16 surrogate (\\ud800-\\udfff): not valid Unicode"
        )
    return body


def check_conversation(conversation: Conversation, context_limit: int) -> None:
    """Refuse what no vendor would accept and no model can be asked: tool results without their call, and an
    impossibly large completion budget (one over the context is capped to it when sampling)."""
    called: set[str] = set()
    for i, message in enumerate(conversation.messages):
        called.update(call.id for call in message.tool_calls)
        if message.role == "tool" and message.tool_call_id not in called:
            raise ProviderError(
                400,
                f"message {i} is a tool result for call {message.tool_call_id!r}, which no earlier assistant "
                "message made",
                param="messages",
            )
    ceiling = max(MAX_COMPLETION_TOKENS, context_limit)
    if conversation.max_tokens is not None and conversation.max_tokens > ceiling:
        param = MAX_TOKENS_PARAM.get(conversation.provider_api, "max_tokens")
        raise ProviderError(
            400,
            f"{param} is too large: {conversation.max_tokens}; at most {ceiling} (and the served "
            f"context is {context_limit} tokens)",
            param=param,
        )


def _arguments_chars(arguments: dict[str, Any] | str) -> int:
    """Characters a tool call's arguments take in the prompt, at least: the keys and string values of the top level
    as they are (the common case, no encoding), anything else as its JSON."""
    if isinstance(arguments, str):
        return len(arguments)
    chars = 0
    for key, value in arguments.items():
        chars += len(key) + (
            len(value) if isinstance(value, str) else len(json.dumps(value, ensure_ascii=False))
        )
    return chars


def prompt_chars(conversation: Conversation, enough: int | None = None) -> int:
    """Characters of everything in the request that the template renders for the model (a lower bound of the
    rendering's length for templates that render tool schemas as JSON, as every template we serve does). With
    ``enough``, a count that reaches it is returned before the tools' schemas are encoded (the costly part)."""
    chars = 0
    for m in conversation.messages:
        chars += len(m.content) + len(m.reasoning or "") + len(m.name or "")
        for call in m.tool_calls:
            chars += len(call.name) + _arguments_chars(call.arguments)
    if not conversation.tools:
        return chars
    if enough is not None:
        plain = sum(len(t.name) + len(t.description) for t in conversation.tools)
        if chars + plain >= enough:
            return chars + plain
    chars += len(conversation_tools_key(conversation))  # names, descriptions and schemas as compact JSON
    # a custom tool's format text is in the key but not in the rendering (``chat_format.tool_to_template``)
    return chars - sum(_custom_format_chars(t) for t in conversation.tools if t.kind == "custom")


def _custom_format_chars(tool: ToolSpec) -> int:
    try:
        return len(json.dumps(tool.parameters["properties"]["input"]["description"], ensure_ascii=False))
    except (KeyError, TypeError):
        return 0


def prompt_token_floor(conversation: Conversation, longest_token_chars: int, limit: int | None = None) -> int:
    """At least this many tokens: no token covers more characters than the vocabulary's longest entry. With
    ``limit``, counting may stop once the floor is known to reach it."""
    per_token = max(1, longest_token_chars)
    enough = None if limit is None else limit * per_token
    return -(-prompt_chars(conversation, enough) // per_token)
