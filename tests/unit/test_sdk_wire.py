"""The adapters on the wire, read by the official SDKs (``openai``, ``anthropic``, ``google-genai``).

A small aiohttp app serves each vendor path straight from the adapter: the SDK's real request body goes through
``parse`` (so the parsers are also tested on what the SDKs really send), a scripted completion comes back
through ``render`` or ``render_stream``, and the SDK's own stream parser must rebuild exactly that completion.
This checks the adapters alone; the same protocols through the whole gateway are in
``tests/integration/test_sdk_protocols.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anthropic
import openai
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from google import genai
from google.genai import types as genai_types

from services.gateway.conversation import (
    Completion,
    Conversation,
    Finish,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
)
from services.gateway.providers import ADAPTERS, anthropic_messages, gemini, openai_chat, openai_responses

pytestmark = pytest.mark.unit

WEATHER_ARGS = {"city": "Paris", "days": 3}


@dataclass
class Script:
    """What the adapter server answers next, and what it parsed."""

    completion: Completion
    text_deltas: list[str] = field(default_factory=list)
    reasoning_deltas: list[str] = field(default_factory=list)
    fail_with: ProviderError | None = None
    parsed: list[Conversation] = field(default_factory=list)


def tool_call_completion(api: str) -> Completion:
    call = ToolCall(id=ADAPTERS[api].new_tool_call_id(), name="get_weather", arguments=WEATHER_ARGS)  # type: ignore[arg-type]
    return Completion(
        id="c1",
        model="served",
        text="Let me check.",
        tool_calls=[call],
        finish_reason="tool_calls",
        prompt_tokens=21,
        completion_tokens=9,
    )


def text_completion(text: str = "Hello there, world.") -> Completion:
    return Completion(id="c2", model="served", text=text, prompt_tokens=11, completion_tokens=5)


async def scripted_events(script: Script) -> AsyncIterator[StreamEvent]:
    for piece in script.reasoning_deltas:
        yield ReasoningDelta(piece)
    for piece in script.text_deltas:
        yield TextDelta(piece)
    if script.fail_with is not None:
        raise script.fail_with
    for call in script.completion.tool_calls:
        yield ToolCallEvent(call)
    yield Finish(script.completion)


def adapter_app(script: Script) -> web.Application:
    async def serve(request: web.Request, api: str, model: str | None = None, stream: bool | None = None):
        adapter = ADAPTERS[api]  # type: ignore[index]
        try:
            conversation = adapter.parse(await request.json(), model=model, stream=stream)
        except ProviderError as error:
            return web.json_response(adapter.render_error(error), status=error.status)
        if api == "gemini":
            conversation.sse = request.query.get("alt") == "sse"
        script.parsed.append(conversation)
        if not conversation.stream:
            return web.json_response(adapter.render(script.completion, conversation))
        response = web.StreamResponse(headers={"Content-Type": adapter.stream_content_type(conversation)})
        await response.prepare(request)
        async for chunk in adapter.render_stream(scripted_events(script), conversation):
            await response.write(chunk)
        await response.write_eof()
        return response

    async def gemini_route(request: web.Request):
        model, _, method = request.match_info["target"].partition(":")
        return await serve(request, "gemini", model=model, stream=method == "streamGenerateContent")

    def route(api: str):
        async def handler(request: web.Request):
            return await serve(request, api)

        return handler

    app = web.Application()
    app.router.add_post("/v1/chat/completions", route("openai_chat"))
    app.router.add_post("/v1/responses", route("openai_responses"))
    app.router.add_post("/v1/messages", route("anthropic_messages"))
    app.router.add_post("/v1beta/models/{target}", gemini_route)
    return app


@pytest.fixture
def script() -> Script:
    return Script(completion=text_completion())


@pytest_asyncio.fixture(loop_scope="function")
async def base_url(script: Script) -> AsyncIterator[str]:
    server = TestServer(adapter_app(script))
    await server.start_server()
    yield str(server.make_url("")).rstrip("/")
    await server.close()


WEATHER_TOOL_OPENAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather forecast",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


# --- OpenAI Chat Completions ---------------------------------------------------------------------------


async def test_openai_chat_plain_and_streamed_text(base_url: str, script: Script) -> None:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="k", max_retries=0)
    reply = await client.chat.completions.create(
        model="alias", messages=[{"role": "user", "content": "hi"}], max_completion_tokens=50
    )
    assert reply.choices[0].message.content == "Hello there, world."
    assert reply.id.startswith("chatcmpl-") and reply.model == "alias"
    assert reply.usage is not None and reply.usage.total_tokens == 16
    assert script.parsed[0].max_tokens == 50

    script.text_deltas = ["Hello", " there,", " world."]
    stream = await client.chat.completions.create(
        model="alias",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    content = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert content == ["Hello", " there,", " world."]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    assert script.parsed[1].include_usage is True


async def test_openai_chat_tool_call_streamed_with_sdk_accumulator(base_url: str, script: Script) -> None:
    script.completion = tool_call_completion("openai_chat")
    script.text_deltas = ["Let me", " check."]
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="k", max_retries=0)
    async with client.chat.completions.stream(
        model="alias", messages=[{"role": "user", "content": "weather?"}], tools=[WEATHER_TOOL_OPENAI]
    ) as stream:
        final = await stream.get_final_completion()
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert message.content == "Let me check."
    assert message.tool_calls is not None and len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call.id == script.completion.tool_calls[0].id
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == WEATHER_ARGS
    assert script.parsed[0].tools[0].name == "get_weather"


async def test_openai_chat_error_body_reaches_sdk(base_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="alias", messages=[])
    assert caught.value.status_code == 400
    assert caught.value.param == "messages"  # the SDK read our error body, not a generic one


# --- OpenAI Responses ----------------------------------------------------------------------------------


async def test_openai_responses_stream_with_reasoning_text_and_tool_call(
    base_url: str, script: Script
) -> None:
    script.completion = tool_call_completion("openai_responses")
    script.completion.reasoning = "User wants weather."
    script.reasoning_deltas = ["User wants", " weather."]
    script.text_deltas = ["Let me", " check."]
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="k", max_retries=0)
    tool = {
        "type": "function",
        "name": "get_weather",
        "parameters": WEATHER_TOOL_OPENAI["function"]["parameters"],  # type: ignore[index]
    }
    async with client.responses.stream(
        model="gpt-5.5",
        input=[{"role": "developer", "content": "be brief"}, {"role": "user", "content": "weather?"}],
        tools=[tool],  # type: ignore[list-item]
    ) as stream:
        event_types = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert event_types[:2] == ["response.created", "response.in_progress"]
    assert event_types[-1] == "response.completed"
    assert final.output_text == "Let me check."
    calls = [item for item in final.output if item.type == "function_call"]
    assert len(calls) == 1 and json.loads(calls[0].arguments) == WEATHER_ARGS
    assert calls[0].call_id == script.completion.tool_calls[0].id
    reasoning = [item for item in final.output if item.type == "reasoning"]
    assert reasoning[0].summary[0].text == "User wants weather."
    assert final.usage is not None and final.usage.total_tokens == 30
    assert script.parsed[0].messages[0].role == "system"

    # The SDK's own output items, echoed back as the next input, parse to the reply we sent.
    echo = [item.model_dump(exclude_none=True) for item in final.output]
    script.completion = text_completion("Sunny.")
    script.reasoning_deltas = script.text_deltas = []
    await client.responses.create(model="gpt-5.5", input=[{"role": "user", "content": "weather?"}, *echo])
    assistant = script.parsed[1].messages[1]
    assert assistant.role == "assistant" and assistant.content == "Let me check."
    assert assistant.reasoning == "User wants weather."
    assert [(c.id, c.name, c.arguments) for c in assistant.tool_calls] == [
        (calls[0].call_id, "get_weather", WEATHER_ARGS)
    ]


async def test_openai_responses_custom_tool_call_non_streaming(base_url: str, script: Script) -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
    script.completion = Completion(
        id="c3",
        model="served",
        tool_calls=[ToolCall(id="call_p1", name="apply_patch", arguments={"input": patch}, kind="custom")],
        finish_reason="tool_calls",
    )
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="k", max_retries=0)
    response = await client.responses.create(
        model="gpt-5.5",
        input="add hello.txt",
        tools=[
            {
                "type": "custom",
                "name": "apply_patch",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/s"},
            }
        ],  # fmt: skip
    )
    (item,) = response.output
    assert item.type == "custom_tool_call" and item.input == patch and item.call_id == "call_p1"
    assert script.parsed[0].tools[0].kind == "custom"


async def test_openai_responses_stream_failure_is_response_failed(base_url: str, script: Script) -> None:
    script.text_deltas = ["partial"]
    script.fail_with = ProviderError(503, "upstream overloaded", "overloaded_error")
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="k", max_retries=0)
    stream = await client.responses.create(model="gpt-5.5", input="hi", stream=True)
    events = [event async for event in stream]
    assert events[-1].type == "response.failed"
    assert events[-1].response.error is not None  # type: ignore[union-attr]
    assert events[-1].response.error.message == "upstream overloaded"  # type: ignore[union-attr]


# --- Anthropic Messages --------------------------------------------------------------------------------

WEATHER_TOOL_ANTHROPIC = {
    "name": "get_weather",
    "description": "Weather forecast",
    "input_schema": WEATHER_TOOL_OPENAI["function"]["parameters"],  # type: ignore[index]
}


async def test_anthropic_stream_with_thinking_text_and_tool_use(base_url: str, script: Script) -> None:
    script.completion = tool_call_completion("anthropic_messages")
    script.completion.reasoning = "Need the tool."
    script.reasoning_deltas = ["Need", " the tool."]
    script.text_deltas = ["Let me", " check."]
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="k", max_retries=0)
    async with client.messages.stream(
        model="claude-x",
        max_tokens=1000,
        system=[{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
    ) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert texts == ["Let me", " check."]
    assert final.stop_reason == "tool_use"
    assert [block.type for block in final.content] == ["thinking", "text", "tool_use"]
    thinking, text, tool_use = final.content
    assert thinking.thinking == "Need the tool." and thinking.signature  # type: ignore[union-attr]
    assert text.text == "Let me check."  # type: ignore[union-attr]
    assert tool_use.input == WEATHER_ARGS and tool_use.id.startswith("toolu_")  # type: ignore[union-attr]
    assert final.usage.output_tokens == 9

    # Echo the SDK's message back, as Claude Code does, with the tool result.
    script.completion = text_completion("Sunny.")
    script.reasoning_deltas = script.text_deltas = []
    await client.messages.create(
        model="claude-x",
        max_tokens=100,
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [block.model_dump(exclude_none=True) for block in final.content],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "sunny"}],
            },  # type: ignore[union-attr]
        ],
    )
    _, assistant, result = script.parsed[1].messages
    assert assistant.reasoning == "Need the tool." and assistant.content == "Let me check."
    assert assistant.tool_calls[0].arguments == WEATHER_ARGS
    assert result.role == "tool" and result.content == "sunny" and result.tool_call_id == tool_use.id  # type: ignore[union-attr]


async def test_anthropic_non_streaming_and_error(base_url: str, script: Script) -> None:
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="k", max_retries=0)
    message = await client.messages.create(
        model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.content[0].text == "Hello there, world."  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn" and message.id.startswith("msg_")
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(
            model="claude-x", max_tokens=100, messages=[{"role": "robot", "content": "x"}]
        )
    assert "messages[0].role" in caught.value.message


async def test_anthropic_stream_failure_is_error_event(base_url: str, script: Script) -> None:
    script.text_deltas = ["partial"]
    script.fail_with = ProviderError(529, "overloaded", "overloaded_error")
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        async with client.messages.stream(
            model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            async for _ in stream:
                pass
    assert "overloaded" in str(caught.value)


# --- Gemini --------------------------------------------------------------------------------------------


def gemini_client(base_url: str) -> genai.Client:
    return genai.Client(
        api_key="k", http_options=genai_types.HttpOptions(base_url=base_url, api_version="v1beta")
    )


WEATHER_TOOL_GEMINI = genai_types.Tool(
    function_declarations=[
        genai_types.FunctionDeclaration(
            name="get_weather",
            description="Weather forecast",
            parameters=genai_types.Schema(
                type=genai_types.Type.OBJECT,
                properties={"city": genai_types.Schema(type=genai_types.Type.STRING)},
            ),
        )
    ]
)


async def test_gemini_generate_content_with_function_call(base_url: str, script: Script) -> None:
    script.completion = tool_call_completion("gemini")
    client = gemini_client(base_url)
    response = await client.aio.models.generate_content(
        model="gemini-x",
        contents="weather?",
        config=genai_types.GenerateContentConfig(
            system_instruction="be brief", tools=[WEATHER_TOOL_GEMINI], max_output_tokens=64
        ),
    )
    assert response.text == "Let me check."
    assert response.function_calls is not None
    (call,) = response.function_calls
    assert call.name == "get_weather" and call.args == WEATHER_ARGS
    assert response.candidates[0].finish_reason == genai_types.FinishReason.STOP  # type: ignore[index]
    parsed = script.parsed[0]
    assert parsed.model == "gemini-x" and parsed.max_tokens == 64 and parsed.stream is False
    assert parsed.messages[0].content == "be brief"
    assert parsed.tools[0].parameters["properties"]["city"]["type"] == "string"

    # The SDK echoes the model turn; the function response pairs with the call by id.
    script.completion = text_completion("Sunny.")
    await client.aio.models.generate_content(
        model="gemini-x",
        contents=[
            genai_types.Content(role="user", parts=[genai_types.Part(text="weather?")]),
            response.candidates[0].content,  # type: ignore[index, list-item]
            genai_types.Content(
                role="user",
                parts=[
                    genai_types.Part.from_function_response(name="get_weather", response={"output": "sunny"})
                ],
            ),
        ],
    )
    _, assistant, result = script.parsed[1].messages
    assert assistant.tool_calls[0].arguments == WEATHER_ARGS
    assert result.role == "tool" and result.content == "sunny"
    assert result.tool_call_id == assistant.tool_calls[0].id


async def test_gemini_stream_sse(base_url: str, script: Script) -> None:
    script.text_deltas = ["Hello", " there,", " world."]
    client = gemini_client(base_url)
    chunks = [
        chunk
        async for chunk in await client.aio.models.generate_content_stream(model="gemini-x", contents="hi")
    ]
    assert "".join(chunk.text or "" for chunk in chunks) == "Hello there, world."
    assert chunks[-1].candidates[0].finish_reason == genai_types.FinishReason.STOP  # type: ignore[index]
    assert chunks[-1].usage_metadata is not None and chunks[-1].usage_metadata.total_token_count == 16
    assert script.parsed[0].stream is True and script.parsed[0].sse is True


async def test_gemini_error_reaches_sdk(base_url: str) -> None:
    client = gemini_client(base_url)
    with pytest.raises(genai.errors.ClientError) as caught:
        await client.aio.models.generate_content(
            model="gemini-x",
            contents="hi",
            config=genai_types.GenerateContentConfig(candidate_count=2),
        )
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"


def test_every_adapter_exposes_the_contract() -> None:
    for api, adapter in ADAPTERS.items():
        assert api == adapter.API
        for name in ("parse", "render", "render_stream", "render_error", "context_length_error", "models_list",
                     "new_tool_call_id", "stream_content_type"):  # fmt: skip
            assert callable(getattr(adapter, name)), (api, name)
    assert anthropic_messages.count_tokens_body(7) == {"input_tokens": 7}
    assert gemini.count_tokens_body(7) == {"totalTokens": 7}
    assert openai_chat.models_list(["a"])["data"][0]["id"] == "a"
    assert openai_responses.models_list(["a"]) == openai_chat.models_list(["a"])
