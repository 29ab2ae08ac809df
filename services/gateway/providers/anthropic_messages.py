"""Anthropic Messages (``POST /v1/messages``, ``/v1/messages/count_tokens``): Claude Code, Qwen Code and Pi in
their Anthropic modes.

What Claude Code sends and how it is read: ``system`` as a string or text blocks (joined); a ``role: "system"``
message inside ``messages`` (beta ``mid-conversation-system``) kept as a system message at its position;
user turns whose blocks mix ``tool_result``s (content a string or blocks, ``is_error``) and text — each
``tool_result`` becomes a tool message, the text a user message, in block order; assistant ``thinking`` blocks
(with ``signature``) become ``reasoning``; ``tool_use.input`` objects become arguments. ``cache_control`` is
dropped everywhere (it moves every turn); ``metadata``, ``thinking``, ``output_config``,
``context_management`` and other fields are accepted and noted. ``?beta=true`` is the caller's URL business.
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

API: ProviderApi = "anthropic_messages"
MESSAGE_ID_PREFIX = "msg_"
TOOL_CALL_ID_PREFIX = "toolu_"

_TEXT_BLOCKS = frozenset({"text"})
_HANDLED = {
    "model", "messages", "system", "tools", "tool_choice", "stream", "max_tokens", "temperature", "top_p",
    "stop_sequences",
}  # fmt: skip
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def new_tool_call_id() -> str:
    return f.random_id(TOOL_CALL_ID_PREFIX)


def stream_content_type(conversation: Conversation) -> str:
    return SSE_CONTENT_TYPE


# --- parse ---------------------------------------------------------------------------------------------


@f.refuses_deep_nesting
def parse(body: Any, *, model: str | None = None, stream: bool | None = None) -> Conversation:
    body = f.require_object(body, "body")
    notes: list[str] = []
    messages: list[Message] = []
    system = _text_of(body.get("system"), "system", notes)
    if system:
        messages.append(Message(role="system", content=system))
    raw_messages = f.require_list(body.get("messages"), "messages")
    if not raw_messages:
        raise f.bad("messages", "a non-empty array")
    for i, raw in enumerate(raw_messages):
        messages.extend(_parse_message(raw, f"messages[{i}]", notes))
    tools = [
        tool
        for i, raw in enumerate(f.optional_list(body, "tools"))
        if (tool := _parse_tool(raw, f"tools[{i}]", notes))
    ]
    return Conversation(
        provider_api=API,
        messages=messages,
        tools=tools,
        model=model if model is not None else f.optional_str(body, "model"),
        stream=stream if stream is not None else f.optional_bool(body, "stream"),
        max_tokens=f.optional_int(body, "max_tokens", minimum=1),
        temperature=f.optional_float(body, "temperature", minimum=0.0, maximum=1.0),
        top_p=f.optional_float(body, "top_p", minimum=0.0, maximum=1.0),
        stop=f.stop_list(body.get("stop_sequences"), "stop_sequences"),
        # Claude Code sends tools=[] with a tool_choice on compaction turns; a choice without tools means nothing.
        tool_choice=_parse_tool_choice(body.get("tool_choice"), notes) if tools else None,
        notes=notes + f.ignored_fields_note(body, _HANDLED),
    )


def _text_of(value: Any, path: str, notes: list[str]) -> str:
    """A string or a list of blocks of which only text counts (``system``, ``tool_result.content``)."""
    return f.text_content(value, path, notes, _TEXT_BLOCKS)


def _parse_message(raw: Any, path: str, notes: list[str]) -> list[Message]:
    item = f.require_object(raw, path)
    role = f.require_str(item.get("role"), f"{path}.role")
    content = item.get("content")
    if role == "system":
        notes.append(f"{path}: mid-conversation system message")
        return [Message(role="system", content=_text_of(content, f"{path}.content", notes))]
    if role == "assistant":
        return [_parse_assistant(content, f"{path}.content", notes)]
    if role != "user":
        raise f.bad(f"{path}.role", "one of user, assistant, system")
    if isinstance(content, str):
        return [Message(role="user", content=content)]
    out: list[Message] = []
    texts: list[str] = []
    for i, raw_block in enumerate(f.require_list(content, f"{path}.content")):
        block_path = f"{path}.content[{i}]"
        block = f.require_object(raw_block, block_path)
        kind = f.require_str(block.get("type"), f"{block_path}.type")
        if kind == "text":
            texts.append(f.require_str(block.get("text"), f"{block_path}.text"))
        elif kind == "tool_result":
            if texts:
                out.append(Message(role="user", content=f.join_parts(texts)))
                texts = []
            if f.optional_bool(block, "is_error", f"{block_path}."):
                notes.append(f"{block_path}: tool_result is_error")
            out.append(
                Message(
                    role="tool",
                    content=_text_of(block.get("content"), f"{block_path}.content", notes),
                    tool_call_id=f.require_str(block.get("tool_use_id"), f"{block_path}.tool_use_id"),
                )
            )
        else:
            notes.append(f"{block_path}: {kind} block dropped")
    if texts or not out:
        out.append(Message(role="user", content=f.join_parts(texts)))
    return out


def _parse_assistant(content: Any, path: str, notes: list[str]) -> Message:
    if isinstance(content, str):
        return Message(role="assistant", content=content)
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for i, raw_block in enumerate(f.require_list(content, path)):
        block_path = f"{path}[{i}]"
        block = f.require_object(raw_block, block_path)
        kind = f.require_str(block.get("type"), f"{block_path}.type")
        if kind == "text":
            texts.append(f.require_str(block.get("text"), f"{block_path}.text"))
        elif kind == "thinking":
            thoughts.append(f.require_str(block.get("thinking"), f"{block_path}.thinking"))
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=f.require_str(block.get("id"), f"{block_path}.id"),
                    name=f.require_str(block.get("name"), f"{block_path}.name"),
                    arguments=f.optional_opaque(block, "input", f"{block_path}."),
                )
            )
        else:
            notes.append(f"{block_path}: {kind} block dropped")
    return Message(
        role="assistant",
        content=f.join_parts(texts),
        tool_calls=calls,
        reasoning=f.join_parts(thoughts) if thoughts else None,
    )


def _parse_tool(raw: Any, path: str, notes: list[str]) -> ToolSpec | None:
    tool = f.require_object(raw, path)
    kind = f.optional_str(tool, "type", f"{path}.", default="custom")
    # Every tool has a name the API checks, built-in ones included (it refuses the request otherwise).
    name = f.tool_name(tool.get("name"), f"{path}.name", f.ANTHROPIC_TOOL_NAME)
    if kind != "custom":  # server and versioned built-in tools (web_search_2025…, bash_2025…)
        notes.append(f"{path}: {kind} tool dropped")
        return None
    return ToolSpec(
        name=name,
        description=f.optional_str(tool, "description", f"{path}."),
        parameters=f.tool_schema(tool, "input_schema", f"{path}.", required=True),
    )


def _parse_tool_choice(value: Any, notes: list[str]) -> str | dict[str, Any] | None:
    if value is None:
        return None
    choice = f.require_object(value, "tool_choice")
    kind = f.require_str(choice.get("type"), "tool_choice.type")
    if kind in ("auto", "none"):
        return kind
    if kind == "any":
        return "required"
    if kind == "tool":
        return {"name": f.require_str(choice.get("name"), "tool_choice.name")}
    raise f.bad("tool_choice.type", "one of auto, any, tool, none")


# --- render --------------------------------------------------------------------------------------------


def _stop_reason(completion: Completion) -> str:
    return "tool_use" if completion.tool_calls else _STOP_REASONS.get(completion.finish_reason, "end_turn")


def _usage(completion: Completion | None) -> dict[str, int]:
    return {
        "input_tokens": completion.prompt_tokens if completion else 0,
        "output_tokens": completion.completion_tokens if completion else 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _tool_use_block(call: ToolCall) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f.with_prefix(TOOL_CALL_ID_PREFIX, call.id),
        "name": call.name,
        "input": f.arguments_object(call),
    }


def _message(
    message_id: str, model: str, content: list[dict[str, Any]], completion: Completion | None
) -> dict:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(completion) if completion else None,
        "stop_sequence": None,
        "usage": _usage(completion),
    }


def render(completion: Completion, conversation: Conversation) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if completion.reasoning:
        content.append(
            {
                "type": "thinking",
                "thinking": completion.reasoning,
                "signature": f.reasoning_signature(completion.reasoning),
            }
        )
    if completion.text or not completion.tool_calls:
        content.append({"type": "text", "text": completion.text})
    content.extend(_tool_use_block(call) for call in completion.tool_calls)
    message_id = f.with_prefix(MESSAGE_ID_PREFIX, completion.id)
    return _message(message_id, conversation.model or completion.model, content, completion)


def _frame(event_type: str, **payload: Any) -> bytes:
    return sse_event(event_type, {"type": event_type, **payload})


class _MessagesStream:
    """The content blocks of one streamed Messages reply: which block is open and the thinking it holds."""

    def __init__(self) -> None:
        self.index = -1
        self.open_kind: str | None = None  # "thinking" or "text": the block receiving deltas
        self.thinking: list[str] = []

    def open_block(self, kind: str, block: dict[str, Any]) -> bytes:
        self.index += 1
        self.open_kind = kind
        return _frame("content_block_start", index=self.index, content_block=block)

    def close_block(self) -> list[bytes]:
        if self.open_kind is None:
            return []
        frames = []
        if self.open_kind == "thinking":
            signature = f.reasoning_signature("".join(self.thinking))
            frames.append(
                _frame(
                    "content_block_delta",
                    index=self.index,
                    delta={"type": "signature_delta", "signature": signature},
                )
            )
            self.thinking.clear()
        frames.append(_frame("content_block_stop", index=self.index))
        self.open_kind = None
        return frames

    def delta(self, delta: dict[str, Any]) -> bytes:
        return _frame("content_block_delta", index=self.index, delta=delta)


async def render_stream(
    events: AsyncIterator[StreamEvent], conversation: Conversation
) -> AsyncIterator[bytes]:
    """``message_start``, ``ping``, per block start/delta(s)/stop, ``message_delta``, ``message_stop``."""
    blocks = _MessagesStream()
    message_id = f.random_id(MESSAGE_ID_PREFIX)
    yield _frame("message_start", message=_message(message_id, conversation.model, [], None))
    yield _frame("ping")
    emitted_visible = False
    async for event in settled_events(events):
        frames: list[bytes] = []
        if isinstance(event, ReasoningDelta):
            if blocks.open_kind != "thinking":
                frames += blocks.close_block()
                frames.append(
                    blocks.open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                )
            blocks.thinking.append(event.text)
            frames.append(blocks.delta({"type": "thinking_delta", "thinking": event.text}))
        elif isinstance(event, TextDelta):
            if blocks.open_kind != "text":
                frames += blocks.close_block()
                frames.append(blocks.open_block("text", {"type": "text", "text": ""}))
            emitted_visible = True
            frames.append(blocks.delta({"type": "text_delta", "text": event.text}))
        elif isinstance(event, ToolCallEvent):
            frames += blocks.close_block()
            block = _tool_use_block(event.call)
            frames.append(blocks.open_block("tool_use", {**block, "input": {}}))
            frames.append(blocks.delta({"type": "input_json_delta", "partial_json": to_json(block["input"])}))
            frames += blocks.close_block()
            emitted_visible = True
        elif isinstance(event, Finish):
            frames += blocks.close_block()
            if not emitted_visible:  # same content as ``render``: an empty reply is one empty text block
                frames.append(blocks.open_block("text", {"type": "text", "text": ""}))
                frames += blocks.close_block()
            completion = event.completion
            frames.append(
                _frame(
                    "message_delta",
                    delta={"stop_reason": _stop_reason(completion), "stop_sequence": None},
                    # input_tokens too: message_start went out before the prompt length was known here.
                    usage={
                        "input_tokens": completion.prompt_tokens,
                        "output_tokens": completion.completion_tokens,
                    },
                )
            )
            frames.append(_frame("message_stop"))
        else:
            frames += blocks.close_block()
            frames.append(sse_event("error", render_error(event)))
        for chunk in frames:
            yield chunk


# --- errors, counts, models ----------------------------------------------------------------------------


def render_error(error: ProviderError) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}``."""
    if error.kind in _ERROR_TYPES.values() and error.kind != "invalid_request_error":
        kind = error.kind
    elif error.status in _ERROR_TYPES:
        kind = _ERROR_TYPES[error.status]
    else:
        kind = "api_error" if error.status >= 500 else "invalid_request_error"
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def context_length_error(limit: int, requested: int) -> ProviderError:
    return ProviderError(400, f"prompt is too long: {requested} tokens > {limit} maximum")


def count_tokens_body(input_tokens: int) -> dict[str, Any]:
    """``POST /v1/messages/count_tokens``."""
    return {"input_tokens": input_tokens}


def models_list(names: list[str]) -> dict[str, Any]:
    """``GET /v1/models`` in Anthropic's shape."""
    data = [
        {"type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}
        for name in names
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": names[0] if names else None,
        "last_id": names[-1] if names else None,
    }
