"""Stream behaviour of every adapter's ``render_stream`` that the decoders in the property tests cannot see:

- **real streaming**: a text delta and a tool call leave as bytes while the core is still generating (the
  event source is blocked until the consumer has seen them);
- a ``ProviderError`` raised mid-stream and a stream that ends without ``Finish`` end in the vendor's own
  in-stream error (Chat ``data: {"error"}`` + ``[DONE]``, Responses ``response.failed``, Anthropic
  ``event: error``, Gemini an ``{"error"}`` element) rather than a silently cut connection;
- Gemini's JSON-array framing is one valid JSON array in every case.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.gateway.conversation import (
    Completion,
    Conversation,
    Finish,
    Message,
    ProviderError,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
)
from services.gateway.providers import ADAPTERS

pytestmark = pytest.mark.unit

APIS = sorted(ADAPTERS)


def conversation_for(api: str, *, sse: bool = True) -> Conversation:
    return Conversation(
        provider_api=api,  # type: ignore[arg-type]
        messages=[Message(role="user", content="go")],
        model="m",
        stream=True,
        include_usage=True,
        sse=sse,
    )


async def read_until(stream: AsyncIterator[bytes], needle: str, seen: list[bytes]) -> None:
    async for frame in stream:
        seen.append(frame)
        if needle in frame.decode():
            return
    raise AssertionError(f"stream ended before {needle!r}")


@pytest.mark.parametrize("api", APIS)
async def test_text_and_tool_calls_leave_before_the_model_finishes(api: str) -> None:
    adapter = ADAPTERS[api]  # type: ignore[index]
    call = ToolCall(id=adapter.new_tool_call_id(), name="write_file", arguments={"path": "a"})
    text_seen, call_seen = asyncio.Event(), asyncio.Event()

    async def events() -> AsyncIterator[StreamEvent]:
        yield TextDelta("Hello-delta")
        await text_seen.wait()  # the core is "still sampling" until the client has the delta
        yield ToolCallEvent(call)
        await call_seen.wait()
        yield Finish(
            Completion(id="c", model="m", text="Hello-delta", tool_calls=[call], finish_reason="tool_calls")
        )

    stream = adapter.render_stream(events(), conversation_for(api))
    seen: list[bytes] = []
    await asyncio.wait_for(read_until(stream, "Hello-delta", seen), timeout=5)
    text_seen.set()
    await asyncio.wait_for(read_until(stream, "write_file", seen), timeout=5)
    call_seen.set()
    rest = [frame async for frame in stream]
    assert rest, "closing events follow the finish"


def error_of(api: str, raw: bytes, sse: bool = True) -> dict[str, Any]:
    """The vendor's in-stream error payload (asserting the stream is framed the vendor's way)."""
    if api == "gemini" and not sse:
        elements = json.loads(raw)
        assert isinstance(elements, list)
        return elements[-1]["error"]
    blocks = [b for b in raw.decode().split("\n\n") if b.strip()]
    if api == "openai_chat":
        assert blocks[-1] == "data: [DONE]"
        return json.loads(blocks[-2].removeprefix("data: "))["error"]
    name, data = blocks[-1].split("\n", 1) if api != "gemini" else ("", blocks[-1])
    payload = json.loads(data.removeprefix("data: "))
    if api == "openai_responses":
        assert name == "event: response.failed" and payload["response"]["status"] == "failed"
        return payload["response"]["error"]
    if api == "anthropic_messages":
        assert name == "event: error" and payload["type"] == "error"
        return payload["error"]
    return payload["error"]


@pytest.mark.parametrize("api", APIS)
async def test_upstream_failure_mid_stream_is_the_vendor_error_event(api: str) -> None:
    adapter = ADAPTERS[api]  # type: ignore[index]

    async def events() -> AsyncIterator[StreamEvent]:
        yield TextDelta("partial")
        raise ProviderError(503, "inference overloaded", "overloaded_error")

    raw = b"".join([f async for f in adapter.render_stream(events(), conversation_for(api))])
    assert b"partial" in raw
    error = error_of(api, raw)
    assert error["message"] == "inference overloaded"
    if api == "gemini":
        assert error["status"] == "UNAVAILABLE" and error["code"] == 503
    if api == "openai_chat":
        assert error["type"] == "server_error"


@pytest.mark.parametrize("api", APIS)
async def test_stream_without_finish_ends_in_an_error_not_a_cut(api: str) -> None:
    adapter = ADAPTERS[api]  # type: ignore[index]

    async def events() -> AsyncIterator[StreamEvent]:
        yield TextDelta("partial")

    raw = b"".join([f async for f in adapter.render_stream(events(), conversation_for(api))])
    assert "ended before it finished" in error_of(api, raw)["message"]


async def test_gemini_json_array_framing_is_one_array() -> None:
    adapter = ADAPTERS["gemini"]

    async def events() -> AsyncIterator[StreamEvent]:
        yield TextDelta("a")
        yield TextDelta("b")
        yield Finish(Completion(id="c", model="m", text="ab", prompt_tokens=1, completion_tokens=2))

    conversation = conversation_for("gemini", sse=False)
    elements = json.loads(b"".join([f async for f in adapter.render_stream(events(), conversation)]))
    assert [e["candidates"][0]["content"]["parts"][0]["text"] for e in elements] == ["a", "b", ""]
    assert elements[-1]["usageMetadata"]["totalTokenCount"] == 3

    async def failing() -> AsyncIterator[StreamEvent]:
        raise ProviderError(429, "slow down")
        yield  # pragma: no cover - makes this an async generator

    raw = b"".join([f async for f in adapter.render_stream(failing(), conversation)])
    assert error_of("gemini", raw, sse=False) == {
        "code": 429,
        "message": "slow down",
        "status": "RESOURCE_EXHAUSTED",
    }


async def test_chat_usage_chunk_only_when_asked() -> None:
    adapter = ADAPTERS["openai_chat"]

    async def events() -> AsyncIterator[StreamEvent]:
        yield Finish(Completion(id="c", model="m", text="x", prompt_tokens=4, completion_tokens=1))

    for include_usage in (True, False):
        conversation = conversation_for("openai_chat")
        conversation.include_usage = include_usage
        raw = b"".join([f async for f in adapter.render_stream(events(), conversation)]).decode()
        assert ('"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}' in raw) is include_usage
        assert raw.endswith("data: [DONE]\n\n")
