"""OpenAI Responses (``POST /v1/responses``): Codex CLI, Pi's ``openai-responses`` mode.

``input`` is a flat list of items. Normalization folds them into turns: consecutive assistant-side items
(``reasoning``, assistant ``message``, ``function_call``, ``custom_tool_call``) become ONE assistant message,
exactly the shape ``render`` produces for one completion, so an echoed reply parses back to what we sent;
``function_call_output`` / ``custom_tool_call_output`` become tool messages. ``developer`` items and
``instructions`` become system messages. Codex's ``custom`` grammar tools (``apply_patch``) become
``ToolSpec(kind="custom")`` and are answered as ``custom_tool_call`` with the raw ``input``; ``namespace``,
``web_search`` and other hosted tool types are dropped and noted. Reasoning items are read back from our own
``encrypted_content`` blob (the full sampled reasoning), else from their summary.

No server state: ``previous_response_id`` is refused (every harness re-sends the full input anyway).
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
from services.gateway.providers import openai_errors
from services.gateway.providers.openai_errors import models_list, render_error
from services.gateway.providers.sse import SSE_CONTENT_TYPE, settled_events, sse_event

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

API: ProviderApi = "openai_responses"
RESPONSE_ID_PREFIX = "resp_"
TOOL_CALL_ID_PREFIX = "call_"

_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_HANDLED = {
    "model", "input", "instructions", "tools", "tool_choice", "stream", "max_output_tokens", "temperature",
    "top_p", "previous_response_id",
}  # fmt: skip


# Completion-budget fields of the other OpenAI API; the Responses API answers them with a 400.
_OTHER_APIS_LIMITS = ("max_tokens", "max_completion_tokens")


def new_tool_call_id() -> str:
    return f.random_id(TOOL_CALL_ID_PREFIX)


def stream_content_type(conversation: Conversation) -> str:
    return SSE_CONTENT_TYPE


def context_length_error(limit: int, requested: int) -> ProviderError:
    return openai_errors.context_length_error(limit, requested, param="input")


# --- parse ---------------------------------------------------------------------------------------------


@f.refuses_deep_nesting
def parse(body: Any, *, model: str | None = None, stream: bool | None = None) -> Conversation:
    body = f.require_object(body, "body")
    notes: list[str] = []
    for other in _OTHER_APIS_LIMITS:  # the API refuses these spellings; ignoring them would sample unbounded
        if other in body:
            raise ProviderError(
                400,
                f"Unsupported parameter: '{other}'. In the Responses API, this parameter has moved to "
                "'max_output_tokens'.",
                param=other,
                code="unsupported_parameter",
            )
    if body.get("previous_response_id") is not None:
        raise ProviderError(
            400,
            "previous_response_id: not supported; this server keeps no responses, send the full input",
            param="previous_response_id",
        )
    messages: list[Message] = []
    instructions = f.optional_str(body, "instructions")
    if instructions:
        messages.append(Message(role="system", content=instructions))
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        messages.append(Message(role="user", content=raw_input))
    else:
        items = f.require_list(raw_input, "input")
        for i, raw in enumerate(items):
            _fold_item(messages, f.require_object(raw, f"input[{i}]"), f"input[{i}]", notes)
    if not messages:
        raise f.bad("input", "at least one item")
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
        max_tokens=f.optional_int(body, "max_output_tokens", minimum=1),
        temperature=f.optional_float(body, "temperature", minimum=0.0, maximum=2.0),
        top_p=f.optional_float(body, "top_p", minimum=0.0, maximum=1.0),
        tool_choice=_parse_tool_choice(body.get("tool_choice"), notes),
        notes=notes + f.ignored_fields_note(body, _HANDLED),
    )


def _open_assistant(messages: list[Message]) -> Message:
    """The assistant turn the next assistant-side item belongs to (a new one unless the last is assistant)."""
    if messages and messages[-1].role == "assistant":
        return messages[-1]
    messages.append(Message(role="assistant"))
    return messages[-1]


def _fold_item(messages: list[Message], item: dict[str, Any], path: str, notes: list[str]) -> None:
    kind = f.optional_str(item, "type", f"{path}.", default="message")
    if kind == "message":
        role = f.require_str(item.get("role"), f"{path}.role")
        text = _content(item.get("content"), f"{path}.content", notes)
        if role == "assistant":
            turn = _open_assistant(messages)
            turn.content = f.join_parts([turn.content, text]) if turn.content else text
        elif role in ("system", "developer"):
            if role == "developer":
                notes.append(f"{path}: developer role read as system")
            messages.append(Message(role="system", content=text))
        elif role == "user":
            messages.append(Message(role="user", content=text))
        else:
            raise f.bad(f"{path}.role", "one of user, assistant, system, developer")
    elif kind == "reasoning":
        turn = _open_assistant(messages)
        reasoning = _reasoning_text(item, path, notes)
        turn.reasoning = f.join_parts([turn.reasoning, reasoning]) if turn.reasoning else reasoning
    elif kind == "function_call":
        _open_assistant(messages).tool_calls.append(
            ToolCall(
                id=f.require_str(item.get("call_id"), f"{path}.call_id"),
                name=f.require_str(item.get("name"), f"{path}.name"),
                arguments=f.parse_arguments(item.get("arguments"), f"{path}.arguments", notes),
            )
        )
    elif kind == "custom_tool_call":
        _open_assistant(messages).tool_calls.append(
            ToolCall(
                id=f.require_str(item.get("call_id"), f"{path}.call_id"),
                name=f.require_str(item.get("name"), f"{path}.name"),
                arguments=f.require_str(item.get("input"), f"{path}.input"),
                kind="custom",
            )
        )
    elif kind in ("function_call_output", "custom_tool_call_output"):
        messages.append(
            Message(
                role="tool",
                content=_content(item.get("output"), f"{path}.output", notes),
                tool_call_id=f.require_str(item.get("call_id"), f"{path}.call_id"),
            )
        )
    else:
        notes.append(f"{path}: {kind} item dropped")


def _content(value: Any, path: str, notes: list[str]) -> str:
    return f.text_content(value, path, notes, _TEXT_PARTS)


def _reasoning_text(item: dict[str, Any], path: str, notes: list[str]) -> str:
    blob = f.optional_str(item, "encrypted_content", f"{path}.")
    if blob:
        ours = f.decode_reasoning_blob(blob)
        if ours is not None:
            return ours
        notes.append(f"{path}: foreign encrypted_content not readable; using the summary")
    content = _content(item.get("content"), f"{path}.content", notes)
    return content or _content(item.get("summary"), f"{path}.summary", notes)


def _parse_tool(raw: Any, path: str, notes: list[str]) -> ToolSpec | None:
    tool = f.require_object(raw, path)
    kind = f.require_str(tool.get("type"), f"{path}.type")
    if kind == "function":
        return ToolSpec(
            name=f.tool_name(tool.get("name"), f"{path}.name", f.OPENAI_TOOL_NAME),
            description=f.optional_str(tool, "description", f"{path}."),
            parameters=f.tool_schema(tool, "parameters", f"{path}."),
        )
    if kind == "custom":
        fmt = f.optional_object(tool, "format", f"{path}.") or {"type": "text"}
        if fmt.get("type") == "grammar":
            format_text = (
                f"freeform text in this {f.optional_str(fmt, 'syntax', f'{path}.format.')} grammar:\n"
                + f.optional_str(fmt, "definition", f"{path}.format.")
            )
        else:
            format_text = "freeform text"
        return ToolSpec(
            name=f.tool_name(tool.get("name"), f"{path}.name", f.OPENAI_TOOL_NAME),
            description=f.optional_str(tool, "description", f"{path}."),
            parameters=f.custom_tool_parameters(format_text),
            kind="custom",
        )
    if "name" in tool:  # a hosted tool is dropped, but not one the API itself would refuse
        f.tool_name(tool["name"], f"{path}.name", f.OPENAI_TOOL_NAME)
    notes.append(f"{path}: {kind} tool dropped")
    return None


def _parse_tool_choice(value: Any, notes: list[str]) -> str | dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise f.bad("tool_choice", "auto, none, required or a named tool")
        return value
    choice = f.require_object(value, "tool_choice")
    kind = f.require_str(choice.get("type"), "tool_choice.type")
    if kind in ("function", "custom"):
        return {"name": f.require_str(choice.get("name"), "tool_choice.name")}
    notes.append(f"tool_choice: {kind} read as auto")
    return "auto"


# --- render --------------------------------------------------------------------------------------------


def _suffix(vendor_id: str) -> str:
    """The random part of an id, to derive sibling item ids (``call_X`` → ``fc_X``) deterministically."""
    return vendor_id.split("_", 1)[1] if "_" in vendor_id else vendor_id


def _usage(completion: Completion) -> dict[str, Any]:
    return {
        "input_tokens": completion.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
    }


def _reasoning_item(item_id: str, reasoning: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": reasoning}],
        "encrypted_content": f.encode_reasoning_blob(reasoning),
    }


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _tool_call_item(call: ToolCall, *, done: bool = True) -> dict[str, Any]:
    call_id = f.with_prefix(TOOL_CALL_ID_PREFIX, call.id)
    if call.kind == "custom":
        return {
            "type": "custom_tool_call",
            "id": "ctc_" + _suffix(call_id),
            "status": "completed" if done else "in_progress",
            "call_id": call_id,
            "name": call.name,
            "input": f.custom_input(call) if done else "",
        }
    return {
        "type": "function_call",
        "id": "fc_" + _suffix(call_id),
        "status": "completed" if done else "in_progress",
        "call_id": call_id,
        "name": call.name,
        "arguments": f.arguments_json(call) if done else "",
    }


def _response(
    response_id: str,
    created_at: int,
    conversation: Conversation,
    *,
    status: str,
    output: list[dict[str, Any]],
    completion: Completion | None,
) -> dict[str, Any]:
    tool_choice = conversation.tool_choice
    if isinstance(tool_choice, dict):
        tool_choice = {"type": "function", "name": tool_choice.get("name", "")}
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": None,
        "incomplete_details": (
            {"reason": "max_output_tokens"} if completion and completion.finish_reason == "length" else None
        ),
        "instructions": None,
        "model": conversation.model or (completion.model if completion else ""),
        "output": output,
        "parallel_tool_calls": True,
        "temperature": conversation.temperature,
        "top_p": conversation.top_p,
        "max_output_tokens": conversation.max_tokens,
        "tool_choice": tool_choice or "auto",
        "tools": [],
        "usage": _usage(completion) if completion else None,
    }


def _status(completion: Completion) -> str:
    return "incomplete" if completion.finish_reason == "length" and not completion.tool_calls else "completed"


def render(completion: Completion, conversation: Conversation) -> dict[str, Any]:
    response_id = f.with_prefix(RESPONSE_ID_PREFIX, completion.id)
    suffix = _suffix(response_id)
    output: list[dict[str, Any]] = []
    if completion.reasoning:
        output.append(_reasoning_item("rs_" + suffix, completion.reasoning))
    # An empty reply is still one (empty) message, so the turn exists when the harness echoes it back.
    if completion.text or not completion.tool_calls:
        output.append(_message_item("msg_" + suffix, completion.text))
    output.extend(_tool_call_item(call) for call in completion.tool_calls)
    return _response(
        response_id,
        int(time.time()),
        conversation,
        status=_status(completion),
        output=output,
        completion=completion,
    )


class _ResponsesStream:
    """The output items of one streamed Responses reply and the event frames that build them, numbered in order."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix
        self.sequence_number = 0
        self.output: list[dict[str, Any]] = []
        self.open_kind: str | None = None  # "reasoning" or "message": the item receiving deltas
        self.open_text: list[str] = []

    def emit(self, event_type: str, **payload: Any) -> bytes:
        data = {"type": event_type, "sequence_number": self.sequence_number, **payload}
        self.sequence_number += 1
        return sse_event(event_type, data)

    def open_item(self, kind: str) -> list[bytes]:
        emit, output = self.emit, self.output
        self.open_kind = kind
        self.open_text.clear()
        index = len(output)
        if kind == "reasoning":
            item_id = f"rs_{self.suffix}_{index}"
            output.append({"type": "reasoning", "id": item_id, "summary": []})
            summary_part: dict[str, Any] = {"type": "summary_text", "text": ""}
            return [
                emit("response.output_item.added", output_index=index, item=dict(output[-1])),
                emit("response.reasoning_summary_part.added", item_id=item_id, output_index=index,
                     summary_index=0, part=summary_part),
            ]  # fmt: skip
        item_id = f"msg_{self.suffix}_{index}"
        output.append(_message_item(item_id, "", status="in_progress"))
        output[-1]["content"] = []
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return [
            emit("response.output_item.added", output_index=index, item=dict(output[-1])),
            emit(
                "response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=part
            ),
        ]

    def delta(self, text: str) -> bytes:
        self.open_text.append(text)
        index = len(self.output) - 1
        item_id = self.output[index]["id"]
        if self.open_kind == "reasoning":
            return self.emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=index,
                             summary_index=0, delta=text)  # fmt: skip
        return self.emit("response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
                         delta=text, logprobs=[])  # fmt: skip

    def close_item(self) -> list[bytes]:
        emit, output = self.emit, self.output
        if self.open_kind is None:
            return []
        index = len(output) - 1
        item_id = output[index]["id"]
        text = "".join(self.open_text)
        if self.open_kind == "reasoning":
            output[index] = _reasoning_item(item_id, text)
            part = {"type": "summary_text", "text": text}
            frames = [
                emit("response.reasoning_summary_text.done", item_id=item_id, output_index=index,
                     summary_index=0, text=text),
                emit("response.reasoning_summary_part.done", item_id=item_id, output_index=index,
                     summary_index=0, part=part),
            ]  # fmt: skip
        else:
            output[index] = _message_item(item_id, text)
            part = output[index]["content"][0]
            frames = [
                emit("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                     text=text, logprobs=[]),
                emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0,
                     part=part),
            ]  # fmt: skip
        frames.append(emit("response.output_item.done", output_index=index, item=output[index]))
        self.open_kind = None
        return frames

    def tool_call(self, call: ToolCall) -> list[bytes]:
        emit = self.emit
        index = len(self.output)
        item = _tool_call_item(call)
        self.output.append(item)
        frames = [
            emit("response.output_item.added", output_index=index, item=_tool_call_item(call, done=False))
        ]
        if call.kind == "custom":
            frames += [
                emit("response.custom_tool_call_input.delta", item_id=item["id"], output_index=index,
                     delta=item["input"]),
                emit("response.custom_tool_call_input.done", item_id=item["id"], output_index=index,
                     input=item["input"]),
            ]  # fmt: skip
        else:
            frames += [
                emit("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                     delta=item["arguments"]),
                emit("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                     name=call.name, arguments=item["arguments"]),
            ]  # fmt: skip
        frames.append(emit("response.output_item.done", output_index=index, item=item))
        return frames


async def render_stream(
    events: AsyncIterator[StreamEvent], conversation: Conversation
) -> AsyncIterator[bytes]:
    """The full Responses event sequence (every event with ``sequence_number``), ending in
    ``response.completed`` / ``response.incomplete`` (or ``response.failed``)."""
    response_id = f.random_id(RESPONSE_ID_PREFIX)
    created_at = int(time.time())
    stream = _ResponsesStream(_suffix(response_id))
    output = stream.output
    in_progress = _response(
        response_id, created_at, conversation, status="in_progress", output=[], completion=None
    )
    yield stream.emit("response.created", response=in_progress)
    yield stream.emit("response.in_progress", response=in_progress)
    async for event in settled_events(events):
        frames: list[bytes] = []
        if isinstance(event, ReasoningDelta | TextDelta):
            kind = "reasoning" if isinstance(event, ReasoningDelta) else "message"
            if stream.open_kind != kind:
                frames += stream.close_item() + stream.open_item(kind)
            frames.append(stream.delta(event.text))
        elif isinstance(event, ToolCallEvent):
            frames += stream.close_item() + stream.tool_call(event.call)
        elif isinstance(event, Finish):
            frames += stream.close_item()
            if not any(item["type"] != "reasoning" for item in output):  # same empty message as ``render``
                frames += stream.open_item("message") + stream.close_item()
            status = _status(event.completion)
            final = _response(
                response_id,
                created_at,
                conversation,
                status=status,
                output=output,
                completion=event.completion,
            )
            frames.append(stream.emit(f"response.{status}", response=final))
        else:
            frames += stream.close_item()
            failed = _response(
                response_id, created_at, conversation, status="failed", output=output, completion=None
            )
            failed["error"] = {
                "code": openai_errors.error_code(event) or "server_error",
                "message": event.message,
            }
            frames.append(stream.emit("response.failed", response=failed))
        for frame in frames:
            yield frame
