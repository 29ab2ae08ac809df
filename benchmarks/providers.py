"""``harnessrl bench providers``: what the provider adapters cost per call, next to what decoding the JSON costs.

For each API a request body at real harness scale (docs/harnesses.md: Claude Code's 24 tools / 64k chars and
6k system prompt, Codex's 21k developer prompt, Qwen Code's 38k system prompt and 15 tools, 20 tool round trips
of history each) is timed through ``json.loads`` and ``parse`` (the ratio says how much the adapter adds to the
unavoidable decode), ``render`` of a tool-call reply, and ``render_stream`` of a 500-delta reply with one tool
call (per-delta cost: what streaming adds to each sampled token). Pure CPU, one process, no services.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import click

from services.gateway.conversation import Completion, Finish, StreamEvent, TextDelta, ToolCall, ToolCallEvent
from services.gateway.providers import ADAPTERS

ROUND_TRIPS = 20
STREAM_DELTAS = 500
SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command to run. " * 8},
        "timeout": {"type": "integer", "description": "Milliseconds before the command is stopped."},
        "description": {"type": "string", "description": "What the command does, in five to ten words."},
    },
    "required": ["command"],
}
TOOL_DESCRIPTION = "Executes a given command in a persistent shell session with optional timeout. " * 30
TOOL_OUTPUT = "total 8\n-rw-r--r-- 1 root root 3 hello.txt\n" * 10


def _arguments(turn: int) -> dict[str, Any]:
    return {"command": f"cat file_{turn}.txt", "description": f"Show file {turn}"}


def chat_body() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are Qwen Code. " * 2000},
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]},
    ]
    for turn in range(ROUND_TRIPS):
        call_id = f"call_{turn}"
        messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function",
                         "function": {"name": "tool_0", "arguments": json.dumps(_arguments(turn))}}]})  # fmt: skip
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "content": [{"type": "text", "text": TOOL_OUTPUT}]}
        )
    tools = [
        {
            "type": "function",
            "function": {"name": f"tool_{i}", "description": TOOL_DESCRIPTION, "parameters": SCHEMA},
        }
        for i in range(15)
    ]
    return {"model": "policy", "messages": messages, "tools": tools, "stream": True,
            "stream_options": {"include_usage": True}, "max_tokens": 8000}  # fmt: skip


def responses_body() -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "You are Codex. " * 1500}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Fix the failing test."}],
        },
    ]
    for turn in range(ROUND_TRIPS):
        items.append({"type": "reasoning", "id": f"rs_{turn}", "summary": [{"type": "summary_text", "text": "Look."}],
                      "content": None, "encrypted_content": "gAAAA" + "x" * 800})  # fmt: skip
        items.append({"type": "function_call", "id": f"fc_{turn}", "call_id": f"call_{turn}", "name": "tool_0",
                      "arguments": json.dumps(_arguments(turn)), "status": "completed"})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": f"call_{turn}", "output": TOOL_OUTPUT})
    tools: list[dict[str, Any]] = [
        {"type": "function", "name": f"tool_{i}", "description": TOOL_DESCRIPTION, "parameters": SCHEMA}
        for i in range(4)
    ]
    tools.append({"type": "custom", "name": "apply_patch", "description": "Edit files.",
                  "format": {"type": "grammar", "syntax": "lark", "definition": "start: patch\n" * 40}})  # fmt: skip
    return {"model": "gpt-5.5", "input": items, "tools": tools, "stream": True, "store": False}


def anthropic_body() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}
    ]
    for turn in range(ROUND_TRIPS):
        tool_id = f"toolu_{turn}"
        messages.append({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Look at the file.", "signature": "s" * 200},
            {"type": "tool_use", "id": tool_id, "name": "tool_0", "input": _arguments(turn)}]})  # fmt: skip
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                         "content": TOOL_OUTPUT, "is_error": False}]})  # fmt: skip
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    tools = [
        {"name": f"tool_{i}", "description": TOOL_DESCRIPTION, "input_schema": SCHEMA} for i in range(24)
    ]
    return {"model": "policy", "max_tokens": 32000, "stream": True, "messages": messages, "tools": tools,
            "system": [{"type": "text", "text": "You are a Claude agent. " * 250}],
            "thinking": {"type": "adaptive"}}  # fmt: skip


def gemini_body() -> dict[str, Any]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Fix the failing test."}]}]
    for turn in range(ROUND_TRIPS):
        contents.append(
            {"role": "model", "parts": [{"functionCall": {"name": "tool_0", "args": _arguments(turn)}}]}
        )
        contents.append({"role": "user", "parts": [
            {"functionResponse": {"name": "tool_0", "response": {"output": TOOL_OUTPUT}}}]})  # fmt: skip
    declarations = [
        {"name": f"tool_{i}", "description": TOOL_DESCRIPTION, "parameters": SCHEMA} for i in range(15)
    ]
    return {"systemInstruction": {"parts": [{"text": "You are a coding agent. " * 1500}]}, "contents": contents,
            "tools": [{"functionDeclarations": declarations}], "generationConfig": {"maxOutputTokens": 8000}}  # fmt: skip


BODIES: dict[str, Callable[[], dict[str, Any]]] = {
    "openai_chat": chat_body,
    "openai_responses": responses_body,
    "anthropic_messages": anthropic_body,
    "gemini": gemini_body,
}


def _median_us(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def _reply(api: str) -> Completion:
    call = ToolCall(id=ADAPTERS[api].new_tool_call_id(), name="tool_0", arguments=_arguments(99))  # type: ignore[index]
    return Completion(id="bench", model="policy", text="tok" * STREAM_DELTAS, tool_calls=[call],
                      finish_reason="tool_calls", prompt_tokens=30000, completion_tokens=STREAM_DELTAS + 20)  # fmt: skip


async def _drain_stream(api: str, conversation: Any, completion: Completion) -> int:
    async def events() -> AsyncIterator[StreamEvent]:
        for _ in range(STREAM_DELTAS):
            yield TextDelta("tok")
        for call in completion.tool_calls:
            yield ToolCallEvent(call)
        yield Finish(completion)

    size = 0
    async for frame in ADAPTERS[api].render_stream(events(), conversation):  # type: ignore[index]
        size += len(frame)
    return size


def measure_api(api: str, repeat: int) -> dict[str, Any]:
    adapter = ADAPTERS[api]  # type: ignore[index]
    raw = json.dumps(BODIES[api]()).encode()
    decoded = json.loads(raw)
    kwargs = {"model": "policy", "stream": True} if api == "gemini" else {}
    conversation = adapter.parse(decoded, **kwargs)
    completion = _reply(api)

    def render_json() -> str:
        return json.dumps(adapter.render(completion, conversation))

    def stream_once() -> int:
        return asyncio.run(_drain_stream(api, conversation, completion))

    loads_us = _median_us(partial(json.loads, raw), repeat)
    parse_us = _median_us(partial(adapter.parse, decoded, **kwargs), repeat)
    return {
        "api": api,
        "body_kb": round(len(raw) / 1024, 1),
        "messages": len(conversation.messages),
        "json_loads_us": round(loads_us, 1),
        "parse_us": round(parse_us, 1),
        "parse_over_json_loads": round(parse_us / loads_us, 2),
        "render_us": round(_median_us(render_json, repeat), 1),
        "stream_us_per_delta": round(_median_us(stream_once, max(3, repeat // 5)) / STREAM_DELTAS, 2),
        "stream_kb": round(stream_once() / 1024, 1),
    }


def measure(repeat: int) -> dict[str, Any]:
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "repeat": repeat,
        "stream_deltas": STREAM_DELTAS,
        "rows": [measure_api(api, repeat) for api in BODIES],
    }


@click.command("providers")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option(
    "--repeat", default=50, show_default=True, help="Timed repetitions per figure (median reported)."
)
def bench_providers(as_json: bool, repeat: int) -> None:
    """Adapter cost per call: parse vs json.loads, render, and streaming per delta, at harness-scale bodies."""
    result = measure(repeat)
    if as_json:
        click.echo(json.dumps(result))
        return
    columns = ["api", "body_kb", "messages", "json_loads_us", "parse_us", "parse_over_json_loads", "render_us",
               "stream_us_per_delta", "stream_kb"]  # fmt: skip
    widths = [max(len(c), *(len(str(r[c])) for r in result["rows"])) for c in columns]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in result["rows"]:
        click.echo("  ".join(str(row[c]).ljust(w) for c, w in zip(columns, widths, strict=True)))
    click.echo(
        f"machine: {result['machine']}; median of {repeat} runs; stream = {STREAM_DELTAS} deltas + 1 tool call"
    )
