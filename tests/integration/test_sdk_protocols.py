"""Harness-specific protocol features through the real gateway, driven by the official SDKs.

``test_gateway_sdks.py`` runs plain agent loops for all four APIs; this file covers what only the real CLIs send
and what the provider adapters translate: Codex's freeform ``apply_patch`` (a ``custom`` tool answered as
``custom_tool_call`` with the raw patch, echoed back with ``custom_tool_call_output``) next to dropped
``namespace`` / ``web_search`` tools; Claude Code's ``?beta=true`` Messages with a mid-conversation
``role: "system"`` message, ``cache_control`` markers that move every turn and the thinking / effort /
context-management fields; and Gemini's streaming without ``alt=sse`` (one JSON array). Each conversation must
still be recorded as ONE chain, and what the adapters dropped must be in the call's notes.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from shared.db import session_scope
from shared.models import Call, Chain
from tests.fixtures.gateway import settle_gateways

pytestmark = pytest.mark.integration

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"


def recorded(db, rollout_id: str) -> tuple[list[Call], list[Chain]]:  # type: ignore[no-untyped-def]
    settle_gateways()
    with session_scope(db) as session:
        calls = list(
            session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.position))
        )
        chains = list(session.scalars(select(Chain).where(Chain.rollout_id == rollout_id)))
        session.expunge_all()
    return calls, chains


def codex_request(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The body fields Codex CLI sends (docs/harnesses.md#codex-cli), around the given input items."""
    return {
        "model": "policy",
        "input": items,
        "tools": [
            {
                "type": "function",
                "name": "exec_command",
                "description": "Runs a command in a PTY",
                "parameters": {
                    "type": "object",
                    "properties": {"cmd": {"type": "string"}},
                    "required": ["cmd"],
                },
                "strict": False,
            },
            {
                "type": "custom",
                "name": "apply_patch",
                "description": "Use the `apply_patch` tool to edit files.",
                "format": {
                    "type": "grammar",
                    "syntax": "lark",
                    "definition": 'start: "*** Begin Patch" /(.|\\n)+/',
                },
            },
            {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": []},
            {"type": "web_search", "external_web_access": True},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"effort": "medium"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "thread-1",
    }


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_codex_apply_patch_is_a_custom_tool_call_and_one_chain(
    gateway_server, scripted_policy, make_rollout, db, stream
):  # type: ignore[no-untyped-def]
    from openai import OpenAI

    scripted_policy.set_script([{"tool": "apply_patch", "arguments": {"input": PATCH}}, {"say": "done"}])
    ref = make_rollout("codex")
    client = OpenAI(base_url=f"{gateway_server.url}/r/{ref.rollout_key}/v1", api_key="unused", max_retries=0)
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "You are Codex."}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add hello.txt"}]},
    ]

    def respond() -> Any:
        body = codex_request(items)
        if not stream:
            return client.responses.create(**body)
        events = list(client.responses.create(**body, stream=True))
        types = [event.type for event in events]
        assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        return events[-1].response

    first = respond()
    (call,) = [item for item in first.output if item.type != "reasoning"]
    assert call.type == "custom_tool_call" and call.name == "apply_patch" and call.input == PATCH
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append(
        {
            "type": "custom_tool_call_output",
            "call_id": call.call_id,
            "output": "Success. Updated the following files:\nA hello.txt\n",
        }
    )
    second = respond()
    assert second.output_text == "done"

    calls, chains = recorded(db, ref.rollout_id)
    assert len(calls) == 2 and len(chains) == 1 and chains[0].fork_reason is None
    assert [c.finish_reason for c in calls] == ["tool_calls", "stop"]
    notes = "\n".join(calls[0].notes["conversation"])
    assert "namespace tool dropped" in notes and "web_search tool dropped" in notes


def claude_code_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Claude Code's body fields (docs/harnesses.md#claude-code); ``cache_control`` sits on the last block, as it does."""
    messages = json.loads(json.dumps(messages))
    last = messages[-1]["content"]
    if isinstance(last, list):
        last[-1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "policy",
        "max_tokens": 512,
        "system": [
            {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."},
            {"type": "text", "text": "Use the tools.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": messages,
        "tools": [
            {
                "name": "Write",
                "description": "Write a file",
                "input_schema": {
                    "type": "object",
                    "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["file_path", "content"],
                },
            }
        ],
        "metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "s"})},
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "stream": True,
    }


def test_claude_code_beta_messages_with_system_role_and_moving_cache_control(
    gateway_server, scripted_policy, make_rollout, db
):  # type: ignore[no-untyped-def]
    import anthropic

    scripted_policy.set_script([{"write": {"path": "hello.txt", "content": "hi\n"}}, {"say": "done"}])
    ref = make_rollout("claude")
    client = anthropic.Anthropic(base_url=gateway_server.url, api_key=ref.rollout_key, max_retries=0)
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>Today's date is 2026-11-30.</system-reminder>"},
                {"type": "text", "text": "Working directory: /work\nCreate hello.txt containing hi."},
            ],
        },
        {"role": "system", "content": "Available agent types for the Agent tool: none."},
    ]

    def respond() -> Any:
        body = claude_code_body(messages)
        body.pop("stream")
        # ``client.beta.messages`` posts to /v1/messages?beta=true with anthropic-beta headers, as Claude Code does.
        with client.beta.messages.stream(**body, betas=["claude-code-20250219"]) as events:
            return events.get_final_message()

    first = respond()
    (tool_use,) = [block for block in first.content if block.type == "tool_use"]
    assert tool_use.name == "Write" and tool_use.input["content"] == "hi\n"
    assert first.stop_reason == "tool_use"
    messages.append(
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]}
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_use.id, "content": "ok", "is_error": False}
            ],
        }
    )
    second = respond()
    assert [block.text for block in second.content if block.type == "text"] == ["done"]

    calls, chains = recorded(db, ref.rollout_id)
    assert len(calls) == 2 and len(chains) == 1 and chains[0].fork_reason is None
    notes = "\n".join(calls[0].notes["conversation"])
    assert "mid-conversation system message" in notes
    assert "context_management, metadata, output_config, thinking" in notes


def test_gemini_stream_without_alt_sse_is_one_json_array(gateway_server, scripted_policy, make_rollout, db):  # type: ignore[no-untyped-def]
    scripted_policy.set_script([{"say": "hello from the policy"}])
    ref = make_rollout("gemini")
    body = {
        "contents": [{"role": "user", "parts": [{"text": "greet me"}]}],
        "generationConfig": {"maxOutputTokens": 64},
    }
    url = f"{gateway_server.url}/v1beta/models/policy:streamGenerateContent"
    array = httpx.post(url, json=body, params={"key": ref.rollout_key}, timeout=60)
    assert array.status_code == 200 and array.headers["content-type"].startswith("application/json")
    chunks = array.json()
    assert isinstance(chunks, list) and chunks
    text = "".join(part.get("text", "") for c in chunks for part in c["candidates"][0]["content"]["parts"])
    assert text == "hello from the policy"
    assert (
        chunks[-1]["candidates"][0]["finishReason"] == "STOP"
        and chunks[-1]["usageMetadata"]["totalTokenCount"] > 0
    )

    sse = httpx.post(url, json=body, params={"key": ref.rollout_key, "alt": "sse"}, timeout=60)
    assert sse.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line[len("data: ") :]) for line in sse.text.splitlines() if line.startswith("data: ")
    ]
    assert "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"]) == text
    calls, _ = recorded(db, ref.rollout_id)
    assert [c.provider_api for c in calls] == ["gemini", "gemini"] and all(c.stream for c in calls)
