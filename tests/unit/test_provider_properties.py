"""Property tests over the four provider adapters (hypothesis).

1. No body makes ``parse`` raise anything but a 4xx ``ProviderError``: random JSON built from the vendors'
   own field names, and realistic harness bodies with one random subtree replaced or deleted. Whatever parses
   also renders (JSON and stream) without error, so the gateway never answers 500 to a malformed request.
2. Echo round trip: a reply we render, sent back as history the way each harness does it (Qwen and Pi
   re-serialize arguments compactly), parses to the same assistant turn — text, reasoning, tool calls.
3. Streaming equals non-streaming: however the text is cut into deltas and whichever tool calls arrive as
   events or only in ``Finish``, the vendor stream decodes to the completion, in a valid event order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.gateway.conversation import (
    Completion,
    Conversation,
    Finish,
    Message,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
)
from services.gateway.providers import ADAPTERS
from tests.unit.test_provider_parsing import REALISTIC_BODIES

pytestmark = pytest.mark.unit

APIS = sorted(ADAPTERS)
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FIELD_NAMES = [
    "model", "messages", "input", "instructions", "system", "systemInstruction", "contents", "parts", "role",
    "content", "text", "type", "tools", "tool_choice", "toolConfig", "functionCallingConfig", "mode",
    "allowedFunctionNames", "function", "functions", "function_call", "functionCall", "functionResponse",
    "functionDeclarations", "name", "arguments", "args", "input_schema", "parameters", "tool_calls", "id",
    "call_id", "tool_call_id", "tool_use_id", "output", "summary", "encrypted_content", "thinking", "signature",
    "is_error", "stream", "stream_options", "include_usage", "max_tokens", "max_completion_tokens",
    "max_output_tokens", "generationConfig", "maxOutputTokens", "temperature", "topP", "top_p", "stop",
    "stop_sequences", "stopSequences", "candidateCount", "n", "custom", "format", "syntax", "definition",
    "reasoning_content", "previous_response_id", "cache_control", "thought", "response", "refusal",
]  # fmt: skip
VOCABULARY = [
    "user", "assistant", "system", "developer", "tool", "model", "function", "text", "tool_use", "tool_result",
    "thinking", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "reasoning", "message", "custom", "input_text", "output_text", "grammar", "auto", "any", "none", "required",
    "ANY", "NONE", "AUTO", "tool", '{"a": 1}', "[1]", "", "hrl1.!!", "hrl1.aGk=",
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(VOCABULARY)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=6), children, max_size=6)
    ),
    max_leaves=40,
)


def sample_completion() -> Completion:
    return Completion(
        id="c", model="m", text="ok", tool_calls=[ToolCall(id="call_1", name="t", arguments={})]
    )


async def one_event_stream(completion: Completion) -> AsyncIterator[StreamEvent]:
    yield TextDelta(completion.text)
    yield Finish(completion)


def render_everything(api: str, conversation: Conversation) -> None:
    adapter = ADAPTERS[api]  # type: ignore[index]
    completion = sample_completion()
    json.dumps(adapter.render(completion, conversation))

    async def drain() -> bytes:
        return b"".join(
            [chunk async for chunk in adapter.render_stream(one_event_stream(completion), conversation)]
        )

    assert asyncio.run(drain())


def assert_parse_is_safe(api: str, body: Any) -> None:
    adapter = ADAPTERS[api]  # type: ignore[index]
    try:
        conversation = adapter.parse(body, model="m" if api == "gemini" else None)
    except ProviderError as error:
        assert 400 <= error.status < 500 and error.message
        json.dumps(adapter.render_error(error))
        return
    assert conversation.messages, "a parsed conversation has at least one message"
    render_everything(api, conversation)


@pytest.mark.parametrize("api", APIS)
@PROPERTY_SETTINGS
@given(body=json_values)
def test_parse_random_json_raises_only_provider_errors(api: str, body: Any) -> None:
    assert_parse_is_safe(api, body)


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += paths_of(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += paths_of(child, (*prefix, index))
    return out


def mutated(body: Any, path: tuple[Any, ...], replacement: Any, delete: bool) -> Any:
    if not path:
        return replacement
    copy = json.loads(json.dumps(body))
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return copy


@pytest.mark.parametrize("api", APIS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_parse_mutated_harness_bodies_raises_only_provider_errors(api: str, data: st.DataObject) -> None:
    body = data.draw(st.sampled_from(REALISTIC_BODIES[api]))
    path = data.draw(st.sampled_from(paths_of(body)))
    delete = bool(path) and data.draw(st.booleans())
    replacement = None if delete else data.draw(json_values)
    assert_parse_is_safe(api, mutated(body, path, replacement, delete))


@pytest.mark.parametrize("api", APIS)
def test_realistic_bodies_parse(api: str) -> None:
    for body in REALISTIC_BODIES[api]:
        conversation = ADAPTERS[api].parse(body, model="m" if api == "gemini" else None)  # type: ignore[index]
        assert conversation.messages and conversation.provider_api == api


def test_deeply_nested_body_is_a_400() -> None:
    deep: Any = "x"
    for _ in range(900):
        deep = {"a": deep}
    for api in APIS:
        body = REALISTIC_BODIES[api][0] | {
            "tools": [deep],
            "messages": [deep],
            "input": [deep],
            "contents": [deep],
        }
        with pytest.raises(ProviderError) as caught:
            ADAPTERS[api].parse(body, model="m")  # type: ignore[index]
        assert caught.value.status == 400


# --- echo round trip -----------------------------------------------------------------------------------

json_safe = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
tool_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)


@st.composite
def completions(draw: st.DrawFn, api: str) -> Completion:
    adapter = ADAPTERS[api]  # type: ignore[index]
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        custom = api in ("openai_chat", "openai_responses") and draw(st.booleans())
        arguments: dict[str, Any] | str = (
            draw(st.text(max_size=40))
            if custom
            else draw(st.dictionaries(st.text(max_size=6), json_safe, max_size=3))
        )
        calls.append(
            ToolCall(
                id=adapter.new_tool_call_id(),
                name=draw(tool_names),
                arguments=arguments,
                kind="custom" if custom else "function",
            )
        )
    return Completion(
        id="c" + str(draw(st.integers(0, 10**6))),
        model="served",
        text=draw(st.text(max_size=40)),
        reasoning=draw(st.none() | st.text(max_size=40)),
        tool_calls=calls,
        finish_reason=draw(st.sampled_from(["stop", "length"])) if not calls else "tool_calls",
        prompt_tokens=draw(st.integers(0, 10**6)),
        completion_tokens=draw(st.integers(0, 10**6)),
    )


def echo_body(api: str, rendered: dict[str, Any], compact_arguments: bool) -> dict[str, Any]:
    """The next request a harness sends after ``rendered``: the user turn, our reply echoed, nothing else."""
    if api == "openai_chat":
        message = dict(rendered["choices"][0]["message"])
        if compact_arguments:  # Qwen Code and Pi re-serialize arguments
            message["tool_calls"] = [
                {**call, "function": {**call["function"],
                                      "arguments": json.dumps(json.loads(call["function"]["arguments"]),
                                                              separators=(",", ":"))}}
                if call["type"] == "function" else call
                for call in message.get("tool_calls", [])
            ]  # fmt: skip
        return {"model": "m", "messages": [{"role": "user", "content": "go"}, message]}
    if api == "openai_responses":
        items = [
            {k: v for k, v in item.items() if k != "status"} for item in rendered["output"]
        ]  # Pi drops status
        return {"model": "m", "input": [{"role": "user", "content": "go"}, *items]}
    if api == "anthropic_messages":
        return {
            "model": "m",
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": rendered["content"]},
            ],
        }
    return {"contents": [{"role": "user", "parts": [{"text": "go"}]}, rendered["candidates"][0]["content"]]}


def assert_same_turn(assistant: Message, completion: Completion) -> None:
    assert assistant.role == "assistant"
    assert assistant.content == completion.text
    assert assistant.reasoning == (completion.reasoning or None)
    expected = [(c.id, c.name, c.arguments, c.kind) for c in completion.tool_calls]
    assert [(c.id, c.name, c.arguments, c.kind) for c in assistant.tool_calls] == expected


@pytest.mark.parametrize("api", APIS)
@PROPERTY_SETTINGS
@given(data=st.data(), compact_arguments=st.booleans())
def test_rendered_reply_echoed_back_parses_to_the_same_turn(
    api: str, data: st.DataObject, compact_arguments: bool
) -> None:
    adapter = ADAPTERS[api]  # type: ignore[index]
    completion = data.draw(completions(api))
    conversation = Conversation(provider_api=api, messages=[Message(role="user", content="go")], model="m")  # type: ignore[arg-type]
    rendered = json.loads(json.dumps(adapter.render(completion, conversation)))
    parsed = adapter.parse(echo_body(api, rendered, compact_arguments), model="m")
    assert_same_turn(parsed.messages[-1], completion)


# --- streaming equals non-streaming --------------------------------------------------------------------


def cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:], strict=False) if b > a]


def sse_payloads(raw: bytes) -> list[tuple[str | None, str]]:
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data.append(line[len("data: ") :])
        events.append((name, "\n".join(data)))
    return events


def decode_chat(raw: bytes) -> tuple[str, str | None, list[tuple[str, str, Any, str]], str]:
    payloads = sse_payloads(raw)
    assert payloads[-1] == (None, "[DONE]")
    text, reasoning, finish = "", "", None
    calls: dict[int, dict[str, Any]] = {}
    for _, data in payloads[:-1]:
        chunk = json.loads(data)
        if not chunk["choices"]:
            assert "usage" in chunk
            continue
        choice = chunk["choices"][0]
        delta = choice["delta"]
        text += delta.get("content") or ""
        reasoning += delta.get("reasoning_content") or ""
        for call in delta.get("tool_calls", []):
            slot = calls.setdefault(call["index"], {"arguments": ""})
            if "id" in call:
                slot.update(id=call["id"], type=call["type"])
            if call.get("type") == "custom":
                slot.update(name=call["custom"]["name"], arguments=call["custom"]["input"])
            else:
                slot["name"] = call.get("function", {}).get("name") or slot.get("name")
                slot["arguments"] += call.get("function", {}).get("arguments", "")
        if choice["finish_reason"]:
            finish = choice["finish_reason"]
    decoded_calls = [
        (
            c["id"],
            c["name"],
            c["arguments"] if c["type"] == "custom" else json.loads(c["arguments"]),
            c["type"],
        )
        for _, c in sorted(calls.items())
    ]
    assert finish is not None
    return text, reasoning or None, decoded_calls, finish


def decode_responses(raw: bytes) -> tuple[str, str | None, list[tuple[str, str, Any, str]], str]:
    payloads = [(name, json.loads(data)) for name, data in sse_payloads(raw)]
    assert [p["sequence_number"] for _, p in payloads] == list(range(len(payloads)))
    assert all(name == p["type"] for name, p in payloads)
    assert payloads[0][0] == "response.created" and payloads[1][0] == "response.in_progress"
    added = [p["output_index"] for name, p in payloads if name == "response.output_item.added"]
    done = [p["output_index"] for name, p in payloads if name == "response.output_item.done"]
    assert added == done == list(range(len(added)))
    final_name, final = payloads[-1]
    assert final_name in ("response.completed", "response.incomplete")
    output = final["response"]["output"]
    assert len(output) == len(added)
    text = "".join(p["delta"] for name, p in payloads if name == "response.output_text.delta")
    reasoning = "".join(p["delta"] for name, p in payloads if name == "response.reasoning_summary_text.delta")
    calls = []
    for item in output:
        if item["type"] == "function_call":
            calls.append((item["call_id"], item["name"], json.loads(item["arguments"]), "function"))
        elif item["type"] == "custom_tool_call":
            calls.append((item["call_id"], item["name"], item["input"], "custom"))
    status = final["response"]["status"]
    finish = "tool_calls" if calls else ("length" if status == "incomplete" else "stop")
    return text, reasoning or None, calls, finish


def decode_anthropic(raw: bytes) -> tuple[str, str | None, list[tuple[str, str, Any, str]], str]:
    payloads = [(name, json.loads(data)) for name, data in sse_payloads(raw)]
    names = [name for name, _ in payloads]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    blocks: dict[int, dict[str, Any]] = {}
    open_index = None
    for name, p in payloads:
        if name == "content_block_start":
            assert open_index is None, "blocks do not overlap"
            open_index = p["index"]
            blocks[open_index] = {**p["content_block"], "partial_json": ""}
        elif name == "content_block_delta":
            assert p["index"] == open_index
            delta, block = p["delta"], blocks[open_index]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            else:
                block["partial_json"] += delta["partial_json"]
        elif name == "content_block_stop":
            assert p["index"] == open_index
            open_index = None
    assert list(blocks) == list(range(len(blocks)))
    ordered = [blocks[i] for i in range(len(blocks))]
    text = "".join(b["text"] for b in ordered if b["type"] == "text")
    reasoning = "".join(b["thinking"] for b in ordered if b["type"] == "thinking")
    assert all(b["signature"] for b in ordered if b["type"] == "thinking")
    calls = [
        (b["id"], b["name"], json.loads(b["partial_json"]), "function")
        for b in ordered
        if b["type"] == "tool_use"
    ]
    stop = payloads[-2][1]["delta"]["stop_reason"]
    finish = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"}[stop]
    return text, reasoning or None, calls, finish


def decode_gemini(raw: bytes) -> tuple[str, str | None, list[tuple[str, str, Any, str]], str]:
    chunks = [json.loads(data) for _, data in sse_payloads(raw)]
    parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
    text = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
    reasoning = "".join(p["text"] for p in parts if p.get("thought"))
    calls = [(p["functionCall"]["id"], p["functionCall"]["name"], p["functionCall"]["args"], "function")
             for p in parts if "functionCall" in p]  # fmt: skip
    assert all("finishReason" not in chunk["candidates"][0] for chunk in chunks[:-1])
    reason = chunks[-1]["candidates"][0]["finishReason"]
    finish = "tool_calls" if calls else {"STOP": "stop", "MAX_TOKENS": "length"}[reason]
    return text, reasoning or None, calls, finish


DECODERS = {
    "openai_chat": decode_chat,
    "openai_responses": decode_responses,
    "anthropic_messages": decode_anthropic,
    "gemini": decode_gemini,
}


def expected_calls(api: str, completion: Completion) -> list[tuple[str, str, Any, str]]:
    out = []
    for call in completion.tool_calls:
        if call.kind == "custom" and api in ("anthropic_messages", "gemini"):
            out.append((call.id, call.name, {"input": call.arguments}, "function"))
        else:
            out.append((call.id, call.name, call.arguments, call.kind))
    return out


@pytest.mark.parametrize("api", APIS)
@PROPERTY_SETTINGS
@given(
    data=st.data(),
    text_cuts=st.lists(st.integers(0, 100), max_size=6),
    reasoning_cuts=st.lists(st.integers(0, 100), max_size=6),
    include_usage=st.booleans(),
)
def test_stream_decodes_to_the_completion(
    api: str, data: st.DataObject, text_cuts: list[int], reasoning_cuts: list[int], include_usage: bool
) -> None:
    adapter = ADAPTERS[api]  # type: ignore[index]
    completion = data.draw(completions(api))
    # Some tool calls come as events, the rest only inside Finish; a prefix of the text may be withheld too.
    announced = data.draw(
        st.lists(st.booleans(), min_size=len(completion.tool_calls), max_size=len(completion.tool_calls))
    )
    withheld = data.draw(st.integers(0, len(completion.text)))

    async def events() -> AsyncIterator[StreamEvent]:
        for piece in cut(completion.reasoning or "", reasoning_cuts):
            yield ReasoningDelta(piece)
        for piece in cut(completion.text[: len(completion.text) - withheld], text_cuts):
            yield TextDelta(piece)
        for call, early in zip(completion.tool_calls, announced, strict=True):
            if early:
                yield ToolCallEvent(call)
        yield Finish(completion)

    conversation = Conversation(
        provider_api=api,  # type: ignore[arg-type]
        messages=[Message(role="user", content="go")],
        model="m",
        stream=True,
        include_usage=include_usage,
    )

    async def drain() -> bytes:
        return b"".join([chunk async for chunk in adapter.render_stream(events(), conversation)])

    text, reasoning, calls, finish = DECODERS[api](asyncio.run(drain()))
    assert text == completion.text
    assert reasoning == (completion.reasoning or None)
    assert sorted(calls, key=str) == sorted(expected_calls(api, completion), key=str)
    assert finish == completion.finish_reason
