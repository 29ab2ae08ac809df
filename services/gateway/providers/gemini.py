"""Gemini ``generateContent`` / ``streamGenerateContent`` (``POST /v1beta/models/{model}:…``): google-genai,
Gemini-style harnesses.

The model name and whether to stream come from the URL (the gateway passes them as ``model`` / ``stream``;
it also sets ``Conversation.sse`` from ``alt=sse``). ``systemInstruction`` → system message; ``contents`` with
parts ``text`` (``thought: true`` parts are reasoning), ``functionCall`` (args object) and
``functionResponse`` (response object, serialized as compact JSON for the tool message);
``tools[].functionDeclarations`` → tools (``googleSearch`` and other built-ins dropped and noted);
``toolConfig.functionCallingConfig`` → tool choice; ``generationConfig`` → sampling settings. Gemini pairs
results with calls by name (ids are optional), so a response without an id gets the id of the oldest open
call of that name. Field names are accepted in camelCase and snake_case, as the REST API does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from services.gateway.conversation import (
    Completion,
    Conversation,
    Finish,
    Message,
    ProviderApi,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    ToolSpec,
)
from services.gateway.providers import fields as f
from services.gateway.providers.sse import SSE_CONTENT_TYPE, settled_events, sse_event, to_json

API: ProviderApi = "gemini"
TOOL_CALL_ID_PREFIX = "call_"
JSON_CONTENT_TYPE = "application/json"

_HANDLED = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "model"}
_HANDLED_CONFIG = {"maxOutputTokens", "temperature", "topP", "stopSequences", "candidateCount"}
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def new_tool_call_id() -> str:
    return f.random_id(TOOL_CALL_ID_PREFIX)


def stream_content_type(conversation: Conversation) -> str:
    return SSE_CONTENT_TYPE if conversation.sse else JSON_CONTENT_TYPE


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _get(obj: dict[str, Any], camel: str) -> Any:
    """A field by its camelCase name or its snake_case spelling."""
    value = obj.get(camel)
    return obj.get(_snake(camel)) if value is None else value


def _camel_keys(obj: dict[str, Any], path: str = "") -> dict[str, Any]:
    """The object with snake_case keys renamed to camelCase, so the typed readers see one spelling. A field given
    in both spellings is refused (as the API does), never read from one and checked on the other."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        head, *rest = key.split("_")
        camel = head + "".join(word[:1].upper() + word[1:] for word in rest)
        if out.get(camel) is None:
            out[camel] = value
        elif value is not None:
            raise ProviderError(
                400, f"Invalid JSON payload received. Duplicate field {path}{camel}.", param=f"{path}{camel}"
            )
    return out


# ``generationConfig`` fields sent at the top level: the API answers "Unknown name" (400); ignored, a budget
# there would leave the generation unbounded.
_MISPLACED_CONFIG = frozenset(
    {"maxOutputTokens", "temperature", "topP", "topK", "stopSequences", "candidateCount", "seed"}
)


# --- parse ---------------------------------------------------------------------------------------------


@f.refuses_deep_nesting
def parse(body: Any, *, model: str | None = None, stream: bool | None = None) -> Conversation:
    body = _camel_keys(f.require_object(body, "body"))
    notes: list[str] = []
    for name in _MISPLACED_CONFIG.intersection(body):
        raise ProviderError(
            400,
            f'Invalid JSON payload received. Unknown name "{name}": Cannot find field. (It belongs in '
            "generationConfig.)",
            param=name,
        )
    messages: list[Message] = []
    system = body.get("systemInstruction")
    if system is not None:
        if isinstance(system, str):
            text = system
        else:
            system = f.require_object(system, "systemInstruction")
            text = _parts_text(_get(system, "parts"), "systemInstruction.parts", notes)
        if text:
            messages.append(Message(role="system", content=text))
    contents = f.require_list(body.get("contents"), "contents")
    if not contents:
        raise f.bad("contents", "a non-empty array")
    open_calls: list[ToolCall] = []
    for i, raw in enumerate(contents):
        messages.extend(_parse_content(raw, f"contents[{i}]", open_calls, notes))
    tools: list[ToolSpec] = []
    for i, raw in enumerate(f.optional_list(body, "tools")):
        tools.extend(_parse_tool(raw, f"tools[{i}]", notes))
    config = _camel_keys(f.optional_object(body, "generationConfig", "") or {}, "generationConfig.")
    candidates = f.optional_int(config, "candidateCount", "generationConfig.", minimum=1)
    if candidates not in (None, 1):
        raise ProviderError(
            400, "generationConfig.candidateCount: only 1 is supported", param="candidateCount"
        )
    notes += [f"generationConfig.{note}" for note in f.ignored_fields_note(config, _HANDLED_CONFIG)]
    return Conversation(
        provider_api=API,
        messages=messages,
        tools=tools,
        model=model if model is not None else f.optional_str(body, "model").removeprefix("models/"),
        stream=bool(stream),
        max_tokens=f.optional_int(config, "maxOutputTokens", "generationConfig.", minimum=1),
        temperature=f.optional_float(config, "temperature", "generationConfig.", minimum=0.0, maximum=2.0),
        top_p=f.optional_float(config, "topP", "generationConfig.", minimum=0.0, maximum=1.0),
        stop=f.stop_list(config.get("stopSequences"), "generationConfig.stopSequences"),
        tool_choice=_parse_tool_choice(body.get("toolConfig")),
        notes=notes + f.ignored_fields_note(body, _HANDLED),
    )


def _parts_text(value: Any, path: str, notes: list[str]) -> str:
    texts = []
    for i, raw in enumerate(f.require_list(value, path)):
        part = f.require_object(raw, f"{path}[{i}]")
        if "text" in part:
            texts.append(f.require_str(part["text"], f"{path}[{i}].text"))
        else:
            notes.append(f"{path}[{i}]: non-text part dropped")
    return f.join_parts(texts)


def _parse_content(raw: Any, path: str, open_calls: list[ToolCall], notes: list[str]) -> list[Message]:
    content = f.require_object(raw, path)
    role = f.optional_str(content, "role", f"{path}.", default="user")
    parts = f.require_list(content.get("parts"), f"{path}.parts")
    if role == "model":
        open_calls.clear()
        message = Message(role="assistant")
        texts: list[str] = []
        thoughts: list[str] = []
        for i, raw_part in enumerate(parts):
            part_path = f"{path}.parts[{i}]"
            part = f.require_object(raw_part, part_path)
            function_call = _get(part, "functionCall")
            if function_call is not None:
                call_object = f.require_object(function_call, f"{part_path}.functionCall")
                name = f.require_str(call_object.get("name"), f"{part_path}.functionCall.name")
                call_id = f.optional_str(call_object, "id", f"{part_path}.functionCall.")
                call = ToolCall(
                    id=call_id or f"{name}_{len(message.tool_calls)}",
                    name=name,
                    arguments=f.optional_opaque(call_object, "args", f"{part_path}.functionCall."),
                )
                message.tool_calls.append(call)
                open_calls.append(call)
            elif "text" in part:
                text = f.require_str(part["text"], f"{part_path}.text")
                (thoughts if part.get("thought") is True else texts).append(text)
            else:
                notes.append(f"{part_path}: non-text part dropped")
        message.content = "".join(texts)
        message.reasoning = "".join(thoughts) if thoughts else None
        return [message]
    if role not in ("user", "function"):
        raise f.bad(f"{path}.role", "user or model")
    out: list[Message] = []
    texts = []
    for i, raw_part in enumerate(parts):
        part_path = f"{path}.parts[{i}]"
        part = f.require_object(raw_part, part_path)
        function_response = _get(part, "functionResponse")
        if function_response is not None:
            response = f.require_object(function_response, f"{part_path}.functionResponse")
            name = f.require_str(response.get("name"), f"{part_path}.functionResponse.name")
            call_id = f.optional_str(response, "id", f"{part_path}.functionResponse.")
            payload = f.optional_opaque(response, "response", f"{part_path}.functionResponse.")
            out.append(
                Message(
                    role="tool",
                    content=_response_text(payload),
                    tool_call_id=call_id or _claim_call_id(open_calls, name),
                    name=name,
                )
            )
        elif "text" in part:
            texts.append(f.require_str(part["text"], f"{part_path}.text"))
        else:
            notes.append(f"{part_path}: non-text part dropped")
    if texts or not out:
        out.append(Message(role="user", content="".join(texts)))
    return out


def _response_text(payload: dict[str, Any]) -> str:
    # google-genai wraps plain results as {"output": ...} (errors as {"error": ...}); unwrap a lone string.
    if len(payload) == 1:
        (only,) = payload.values()
        if isinstance(only, str):
            return only
    return f.dump_json(payload)


def _claim_call_id(open_calls: list[ToolCall], name: str) -> str:
    for i, call in enumerate(open_calls):
        if call.name == name:
            return open_calls.pop(i).id
    return name


def _parse_tool(raw: Any, path: str, notes: list[str]) -> list[ToolSpec]:
    tool = f.require_object(raw, path)
    specs = []
    for key in tool:
        if key not in ("functionDeclarations", "function_declarations"):
            notes.append(f"{path}: {key} tool dropped")
    for i, raw_decl in enumerate(
        f.require_list(_get(tool, "functionDeclarations") or [], f"{path}.functionDeclarations")
    ):
        decl_path = f"{path}.functionDeclarations[{i}]"
        decl = f.require_object(raw_decl, decl_path)
        schema_key = (
            "parametersJsonSchema" if _get(decl, "parametersJsonSchema") is not None else "parameters"
        )
        decl = _camel_keys(decl)
        specs.append(
            ToolSpec(
                name=f.tool_name(decl.get("name"), f"{decl_path}.name", f.GEMINI_TOOL_NAME),
                description=f.optional_str(decl, "description", f"{decl_path}."),
                parameters=_lower_types(f.tool_schema(decl, schema_key, f"{decl_path}.")),
            )
        )
    return specs


def _lower_types(schema: Any) -> Any:
    """Gemini's OpenAPI subset spells types in upper case (``OBJECT``); chat templates expect JSON Schema."""
    if isinstance(schema, dict):
        return {
            key: value.lower() if key == "type" and isinstance(value, str) else _lower_types(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_lower_types(item) for item in schema]
    return schema


def _parse_tool_choice(value: Any) -> str | dict[str, Any] | None:
    if value is None:
        return None
    config = f.require_object(value, "toolConfig")
    calling = _get(config, "functionCallingConfig")
    if calling is None:
        return None
    calling = f.require_object(calling, "toolConfig.functionCallingConfig")
    mode = f.optional_str(calling, "mode", "toolConfig.functionCallingConfig.", default="AUTO").upper()
    allowed = f.require_list(_get(calling, "allowedFunctionNames") or [], "toolConfig.allowedFunctionNames")
    if mode in ("AUTO", "MODE_UNSPECIFIED", "VALIDATED"):
        return "auto"
    if mode == "NONE":
        return "none"
    if mode == "ANY":
        if len(allowed) == 1:
            return {"name": f.require_str(allowed[0], "toolConfig.allowedFunctionNames[0]")}
        return "required"
    raise f.bad("toolConfig.functionCallingConfig.mode", "AUTO, ANY, NONE or VALIDATED")


# --- render --------------------------------------------------------------------------------------------


def _finish_reason(completion: Completion) -> str:
    return "MAX_TOKENS" if completion.finish_reason == "length" and not completion.tool_calls else "STOP"


def _usage(completion: Completion) -> dict[str, int]:
    return {
        "promptTokenCount": completion.prompt_tokens,
        "candidatesTokenCount": completion.completion_tokens,
        "totalTokenCount": completion.prompt_tokens + completion.completion_tokens,
    }


def _function_call_part(call: ToolCall) -> dict[str, Any]:
    return {
        "functionCall": {
            "id": f.with_prefix(TOOL_CALL_ID_PREFIX, call.id),
            "name": call.name,
            "args": f.arguments_object(call),
        }
    }


def _chunk(
    response_id: str, model: str, parts: list[dict[str, Any]], completion: Completion | None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": response_id}
    if completion is not None:
        candidate["finishReason"] = _finish_reason(completion)
        body["usageMetadata"] = _usage(completion)
    return body


def render(completion: Completion, conversation: Conversation) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if completion.reasoning:
        parts.append({"text": completion.reasoning, "thought": True})
    if completion.text or not completion.tool_calls:
        parts.append({"text": completion.text})
    parts.extend(_function_call_part(call) for call in completion.tool_calls)
    return _chunk(completion.id, conversation.model or completion.model, parts, completion)


async def render_stream(
    events: AsyncIterator[StreamEvent], conversation: Conversation
) -> AsyncIterator[bytes]:
    """One ``GenerateContentResponse`` per event; the last carries ``finishReason`` and ``usageMetadata``.
    Framed as SSE ``data:`` lines (``alt=sse``) or as the elements of one JSON array."""
    response_id = f.random_id("")
    first = True

    def framed(body: dict[str, Any]) -> bytes:
        nonlocal first
        if conversation.sse:
            return sse_event(None, body)
        lead = "[" if first else ",\r\n"
        first = False
        return (lead + to_json(body)).encode()

    async for event in settled_events(events):
        if isinstance(event, TextDelta):
            yield framed(_chunk(response_id, conversation.model, [{"text": event.text}], None))
        elif isinstance(event, ReasoningDelta):
            yield framed(
                _chunk(response_id, conversation.model, [{"text": event.text, "thought": True}], None)
            )
        elif isinstance(event, ToolCallEvent):
            yield framed(_chunk(response_id, conversation.model, [_function_call_part(event.call)], None))
        elif isinstance(event, Finish):
            yield framed(_chunk(response_id, conversation.model, [{"text": ""}], event.completion))
        else:
            yield framed(render_error(event))
    if not conversation.sse:
        yield b"[]" if first else b"]"


# --- errors, counts, models ----------------------------------------------------------------------------


def render_error(error: ProviderError) -> dict[str, Any]:
    """``{"error": {"code", "message", "status"}}``."""
    status = _STATUS_NAMES.get(error.status, "INTERNAL" if error.status >= 500 else "INVALID_ARGUMENT")
    return {"error": {"code": error.status, "message": error.message, "status": status}}


def context_length_error(limit: int, requested: int) -> ProviderError:
    return ProviderError(
        400,
        f"The input token count ({requested}) exceeds the maximum number of tokens allowed ({limit}).",
    )


def count_tokens_body(total_tokens: int) -> dict[str, Any]:
    """``POST /v1beta/models/{model}:countTokens``."""
    return {"totalTokens": total_tokens}


def models_list(names: list[str]) -> dict[str, Any]:
    """``GET /v1beta/models``."""
    return {
        "models": [
            {
                "name": f"models/{name}",
                "displayName": name,
                "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
            }
            for name in names
        ]
    }
