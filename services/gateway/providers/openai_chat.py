"""OpenAI Chat Completions (``POST /v1/chat/completions``): Qwen Code, Pi's ``openai-completions`` mode.

What real clients send and how it is normalized: ``developer`` role → system; content as a string or a list
of parts (text joined, other parts noted); assistant ``tool_calls`` with ``arguments`` JSON strings → parsed
objects (Qwen and Pi echo them re-serialized compact, so only the parsed form compares equal);
``reasoning_content`` (or ``reasoning``) echoed on assistant turns; tool results whose content is a part list;
``max_tokens`` or ``max_completion_tokens``; ``stream_options.include_usage``.
"""

from __future__ import annotations

import time
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
from services.gateway.providers.openai_errors import context_length_error, models_list, render_error
from services.gateway.providers.sse import DONE, SSE_CONTENT_TYPE, settled_events, sse_event

__all__ = [
    "API",
    "context_length_error",
    "models_list",
    "new_tool_call_id",
    "parse",
    "render",
    "render_error",
    "render_stream",
    "stream_content_type",
]

API: ProviderApi = "openai_chat"
COMPLETION_ID_PREFIX = "chatcmpl-"
TOOL_CALL_ID_PREFIX = "call_"

_TEXT_PARTS = frozenset({"text"})
_HANDLED = {
    "model", "messages", "tools", "functions", "tool_choice", "function_call", "stream", "stream_options",
    "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "n",
}  # fmt: skip


def new_tool_call_id() -> str:
    return f.random_id(TOOL_CALL_ID_PREFIX)


def stream_content_type(conversation: Conversation) -> str:
    return SSE_CONTENT_TYPE


# --- parse ---------------------------------------------------------------------------------------------


@f.refuses_deep_nesting
def parse(body: Any, *, model: str | None = None, stream: bool | None = None) -> Conversation:
    body = f.require_object(body, "body")
    notes: list[str] = []
    raw_messages = f.require_list(body.get("messages"), "messages")
    if not raw_messages:
        raise f.bad("messages", "a non-empty array")
    messages = [_parse_message(raw, f"messages[{i}]", notes) for i, raw in enumerate(raw_messages)]
    tools = [
        tool
        for i, raw in enumerate(f.optional_list(body, "tools"))
        if (tool := _parse_tool(raw, f"tools[{i}]", notes))
    ]
    for i, raw in enumerate(f.optional_list(body, "functions")):  # the pre-tools spelling
        tools.append(_function_spec(f.require_object(raw, f"functions[{i}]"), f"functions[{i}]."))
    n = f.optional_int(body, "n", minimum=1)
    if n not in (None, 1):
        raise ProviderError(400, "n: only n=1 is supported", param="n")
    stream_options = f.optional_object(body, "stream_options", "") or {}
    # Both spellings are read and must agree: one budget sampled with while another goes unchecked is refused.
    max_completion_tokens = f.optional_int(body, "max_completion_tokens", minimum=1)
    legacy_max_tokens = f.optional_int(body, "max_tokens", minimum=1)
    if None not in (max_completion_tokens, legacy_max_tokens) and max_completion_tokens != legacy_max_tokens:
        raise ProviderError(
            400,
            f"max_tokens ({legacy_max_tokens}) and max_completion_tokens ({max_completion_tokens}) disagree; "
            "send max_completion_tokens alone",
            param="max_tokens",
        )
    max_tokens = legacy_max_tokens if max_completion_tokens is None else max_completion_tokens
    return Conversation(
        provider_api=API,
        messages=messages,
        tools=tools,
        model=model if model is not None else f.optional_str(body, "model"),
        stream=stream if stream is not None else f.optional_bool(body, "stream"),
        max_tokens=max_tokens,
        temperature=f.optional_float(body, "temperature", minimum=0.0, maximum=2.0),
        top_p=f.optional_float(body, "top_p", minimum=0.0, maximum=1.0),
        stop=f.stop_list(body.get("stop"), "stop"),
        tool_choice=_parse_tool_choice(body.get("tool_choice", body.get("function_call")), notes),
        include_usage=f.optional_bool(stream_options, "include_usage", "stream_options."),
        notes=notes + f.ignored_fields_note(body, _HANDLED),
    )


def _parse_message(raw: Any, path: str, notes: list[str]) -> Message:
    item = f.require_object(raw, path)
    role = f.require_str(item.get("role"), f"{path}.role")
    content = _content(item.get("content"), f"{path}.content", notes)
    name = f.optional_str(item, "name", f"{path}.") or None
    if role in ("system", "developer"):
        if role == "developer":
            notes.append(f"{path}: developer role read as system")
        return Message(role="system", content=content, name=name)
    if role == "user":
        return Message(role="user", content=content, name=name)
    if role == "assistant":
        reasoning = item.get("reasoning_content", item.get("reasoning"))
        calls = [
            _parse_tool_call(call, f"{path}.tool_calls[{i}]", notes)
            for i, call in enumerate(f.optional_list(item, "tool_calls", f"{path}."))
        ]
        legacy = f.optional_object(item, "function_call", f"{path}.")
        if legacy is not None:
            notes.append(f"{path}: legacy function_call read as a tool call")
            calls.append(_tool_call_from_function(legacy, "", f"{path}.function_call", notes))
        return Message(
            role="assistant",
            content=content,
            tool_calls=calls,
            name=name,
            reasoning=f.require_str(reasoning, f"{path}.reasoning_content")
            if reasoning is not None
            else None,
        )
    if role == "tool":
        call_id = f.require_str(item.get("tool_call_id"), f"{path}.tool_call_id")
        return Message(role="tool", content=content, tool_call_id=call_id, name=name)
    if role == "function":  # the pre-tools result spelling
        notes.append(f"{path}: legacy function role read as a tool result")
        return Message(role="tool", content=content, name=f.require_str(item.get("name"), f"{path}.name"))
    raise f.bad(f"{path}.role", "one of system, developer, user, assistant, tool")


def _content(value: Any, path: str, notes: list[str]) -> str:
    return f.text_content(value, path, notes, _TEXT_PARTS)


def _parse_tool_call(raw: Any, path: str, notes: list[str]) -> ToolCall:
    call = f.require_object(raw, path)
    call_id = f.require_str(call.get("id"), f"{path}.id")
    kind = f.optional_str(call, "type", f"{path}.", default="function")
    if kind == "custom":
        custom = f.require_object(call.get("custom"), f"{path}.custom")
        return ToolCall(
            id=call_id,
            name=f.require_str(custom.get("name"), f"{path}.custom.name"),
            arguments=f.require_str(custom.get("input"), f"{path}.custom.input"),
            kind="custom",
        )
    function = f.require_object(call.get("function"), f"{path}.function")
    return _tool_call_from_function(function, call_id, f"{path}.function", notes)


def _tool_call_from_function(function: dict[str, Any], call_id: str, path: str, notes: list[str]) -> ToolCall:
    return ToolCall(
        id=call_id,
        name=f.require_str(function.get("name"), f"{path}.name"),
        arguments=f.parse_arguments(function.get("arguments"), f"{path}.arguments", notes),
    )


def _parse_tool(raw: Any, path: str, notes: list[str]) -> ToolSpec | None:
    tool = f.require_object(raw, path)
    kind = f.require_str(tool.get("type", "function"), f"{path}.type")
    if kind == "function":
        return _function_spec(f.require_object(tool.get("function"), f"{path}.function"), f"{path}.function.")
    if kind == "custom":
        custom = f.require_object(tool.get("custom"), f"{path}.custom")
        return ToolSpec(
            name=f.tool_name(custom.get("name"), f"{path}.custom.name", f.OPENAI_TOOL_NAME),
            description=f.optional_str(custom, "description", f"{path}.custom."),
            parameters=f.custom_tool_parameters(f.dump_json(custom.get("format") or {"type": "text"})),
            kind="custom",
        )
    notes.append(f"{path}: {kind} tool dropped")
    return None


def _function_spec(function: dict[str, Any], path: str) -> ToolSpec:
    return ToolSpec(
        name=f.tool_name(function.get("name"), f"{path}name", f.OPENAI_TOOL_NAME),
        description=f.optional_str(function, "description", path),
        parameters=f.tool_schema(function, "parameters", path),
    )


def _parse_tool_choice(value: Any, notes: list[str]) -> str | dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise f.bad("tool_choice", "auto, none, required or a named function")
        return value
    choice = f.require_object(value, "tool_choice")
    if "name" in choice and "type" not in choice:  # legacy function_call: {"name": ...}
        return {"name": f.require_str(choice["name"], "function_call.name")}
    kind = f.require_str(choice.get("type"), "tool_choice.type")
    if kind == "function":
        function = f.require_object(choice.get("function"), "tool_choice.function")
        return {"name": f.require_str(function.get("name"), "tool_choice.function.name")}
    if kind == "custom":
        custom = f.require_object(choice.get("custom"), "tool_choice.custom")
        return {"name": f.require_str(custom.get("name"), "tool_choice.custom.name")}
    notes.append(f"tool_choice: {kind} read as auto")
    return "auto"


# --- render --------------------------------------------------------------------------------------------


def _completion_id(completion: Completion) -> str:
    return f.with_prefix(COMPLETION_ID_PREFIX, completion.id)


def _finish_reason(completion: Completion) -> str:
    if completion.tool_calls:
        return "tool_calls"
    return "length" if completion.finish_reason == "length" else "stop"


def _usage(completion: Completion) -> dict[str, int]:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
    }


def _wire_tool_call(call: ToolCall) -> dict[str, Any]:
    call_id = f.with_prefix(TOOL_CALL_ID_PREFIX, call.id)
    if call.kind == "custom":
        return {"id": call_id, "type": "custom", "custom": {"name": call.name, "input": f.custom_input(call)}}
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": f.arguments_json(call)},
    }


def render(completion: Completion, conversation: Conversation) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": completion.text if completion.text or not completion.tool_calls else None,
    }
    if completion.reasoning:
        message["reasoning_content"] = completion.reasoning
    if completion.tool_calls:
        message["tool_calls"] = [_wire_tool_call(call) for call in completion.tool_calls]
    return {
        "id": _completion_id(completion),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": conversation.model or completion.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(completion)}
        ],
        "usage": _usage(completion),
    }


async def render_stream(
    events: AsyncIterator[StreamEvent], conversation: Conversation
) -> AsyncIterator[bytes]:
    """``chat.completion.chunk`` data lines: role, deltas, tool calls (by index), finish, usage, ``[DONE]``."""
    # The chunk id must be known before the first byte; the core's completion id only arrives with Finish.
    chunk_id = f.random_id(COMPLETION_ID_PREFIX)
    created = int(time.time())
    tool_index = 0

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return sse_event(
            None,
            {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": conversation.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            },
        )

    yield chunk({"role": "assistant", "content": ""})
    async for event in settled_events(events):
        if isinstance(event, TextDelta):
            yield chunk({"content": event.text})
        elif isinstance(event, ReasoningDelta):
            yield chunk({"reasoning_content": event.text})
        elif isinstance(event, ToolCallEvent):
            wire = _wire_tool_call(event.call)
            if event.call.kind == "custom":
                yield chunk({"tool_calls": [{"index": tool_index, **wire}]})
            else:
                arguments = wire["function"]["arguments"]
                opening = {**wire, "function": {"name": event.call.name, "arguments": ""}}
                yield chunk({"tool_calls": [{"index": tool_index, **opening}]})
                yield chunk({"tool_calls": [{"index": tool_index, "function": {"arguments": arguments}}]})
            tool_index += 1
        elif isinstance(event, Finish):
            yield chunk({}, _finish_reason(event.completion))
            if conversation.include_usage:
                yield sse_event(
                    None,
                    {
                        "id": chunk_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": conversation.model,
                        "choices": [],
                        "usage": _usage(event.completion),
                    },
                )
            yield DONE
        else:  # a ProviderError: OpenAI streams carry the error body as a data line
            yield sse_event(None, render_error(event))
            yield DONE
