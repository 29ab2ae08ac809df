"""The four provider protocols through the official Python SDKs (openai, anthropic, google-genai), streaming and
not, with tool calls: a 4-call agent loop (write, run, read back, answer) against the real gateway and the
scripted policy. Each loop must be recorded as ONE chain whose every prompt is exactly the previous prompt + the
previous sampled ids + the new suffix, with token arrays that reconstruct what the policy server was sent."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import pytest
import zstandard
from sqlalchemy import select

from shared.db import session_scope
from shared.models import Call, Chain
from shared.trajectory import load_chain
from tests.fixtures.gateway import settle_gateways
from tests.fixtures.scripted_policy import fixed_logprob

pytestmark = pytest.mark.integration

SYSTEM = "You are a test agent. Use the tools."
TASK = "Create hello.txt containing hi, show it with a command, then read it back."
TOOLS = {
    "bash": (
        "Run a shell command",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    ),
    "write": (
        "Write a file",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    ),
    "read": (
        "Read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
}
EXPECTED_CALLS = [
    ("write", {"path": "hello.txt", "content": "hi\n"}),
    ("bash", {"command": "cat hello.txt"}),
    ("read", {"path": "hello.txt"}),
]
MAX_TURNS = 6


def chat_loop(url: str, key: str, stream: bool) -> tuple[str, list[tuple[str, dict]]]:
    from openai import OpenAI

    client = OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    tools = [
        {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
        for n, (d, p) in TOOLS.items()
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    seen: list[tuple[str, dict]] = []
    for _ in range(MAX_TURNS):
        if stream:
            text, by_index = "", {}
            chunks = client.chat.completions.create(
                model="policy",
                messages=messages,
                tools=tools,
                stream=True,
                stream_options={"include_usage": True},
            )
            for chunk in chunks:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                text += delta.content or ""
                for tc in delta.tool_calls or []:
                    entry = by_index.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                    entry["id"] = tc.id or entry["id"]
                    if tc.function is not None:
                        entry["name"] += tc.function.name or ""
                        entry["arguments"] += tc.function.arguments or ""
            calls = list(by_index.values())
        else:
            message = (
                client.chat.completions.create(model="policy", messages=messages, tools=tools)
                .choices[0]
                .message
            )
            text = message.content or ""
            calls = [
                {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                for c in message.tool_calls or []
            ]
        if not calls:
            return text, seen
        seen += [(c["name"], json.loads(c["arguments"])) for c in calls]
        # echo the arguments re-serialized compact, as Qwen Code and Pi do
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": json.dumps(json.loads(c["arguments"]), separators=(",", ":")),
                        },
                    }
                    for c in calls
                ],
            }
        )
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": f"ran {c['name']}"} for c in calls]
    raise AssertionError("the agent loop did not finish")


def responses_loop(url: str, key: str, stream: bool) -> tuple[str, list[tuple[str, dict]]]:
    from openai import OpenAI

    client = OpenAI(base_url=f"{url}/r/{key}/v1", api_key="not-the-key", max_retries=0)
    tools = [
        {"type": "function", "name": n, "description": d, "parameters": p, "strict": False}
        for n, (d, p) in TOOLS.items()
    ]
    items: list[dict[str, Any]] = [
        {"role": "developer", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    seen: list[tuple[str, dict]] = []
    for _ in range(MAX_TURNS):
        if stream:
            final = None
            for event in client.responses.create(model="policy", input=items, tools=tools, stream=True):
                if event.type == "response.completed":
                    final = event.response
            assert final is not None, "stream ended without response.completed"
            response = final
        else:
            response = client.responses.create(model="policy", input=items, tools=tools)
        output = [item.model_dump(exclude_none=True) for item in response.output]
        calls = [item for item in output if item["type"] == "function_call"]
        text = "".join(
            part["text"]
            for item in output
            if item["type"] == "message"
            for part in item["content"]
            if part["type"] == "output_text"
        )
        if not calls:
            return text, seen
        seen += [(c["name"], json.loads(c["arguments"])) for c in calls]
        items += output
        items += [
            {"type": "function_call_output", "call_id": c["call_id"], "output": f"ran {c['name']}"}
            for c in calls
        ]
    raise AssertionError("the agent loop did not finish")


def anthropic_loop(url: str, key: str, stream: bool) -> tuple[str, list[tuple[str, dict]]]:
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
    tools = [{"name": n, "description": d, "input_schema": p} for n, (d, p) in TOOLS.items()]
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    seen: list[tuple[str, dict]] = []
    for _ in range(MAX_TURNS):
        kwargs = {
            "model": "policy",
            "max_tokens": 256,
            "system": SYSTEM,
            "messages": messages,
            "tools": tools,
        }
        if stream:
            with client.messages.stream(**kwargs) as events:  # type: ignore[arg-type]
                message = events.get_final_message()
        else:
            message = client.messages.create(**kwargs)  # type: ignore[arg-type]
        content = [block.model_dump(exclude_none=True) for block in message.content]
        calls = [block for block in content if block["type"] == "tool_use"]
        text = "".join(block["text"] for block in content if block["type"] == "text")
        if not calls:
            return text, seen
        seen += [(c["name"], c["input"]) for c in calls]
        messages.append({"role": "assistant", "content": content})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c["id"], "content": f"ran {c['name']}"}
                    for c in calls
                ],
            }
        )
    raise AssertionError("the agent loop did not finish")


def gemini_loop(url: str, key: str, stream: bool) -> tuple[str, list[tuple[str, dict]]]:
    from google import genai
    from google.genai import types

    client = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=url))
    declarations = [
        types.FunctionDeclaration(name=n, description=d, parameters_json_schema=p)
        for n, (d, p) in TOOLS.items()
    ]
    config = types.GenerateContentConfig(
        system_instruction=SYSTEM,
        tools=[types.Tool(function_declarations=declarations)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text=TASK)])]
    seen: list[tuple[str, dict]] = []
    for _ in range(MAX_TURNS):
        parts: list[types.Part] = []
        if stream:
            for chunk in client.models.generate_content_stream(
                model="policy", contents=contents, config=config
            ):
                if chunk.candidates and chunk.candidates[0].content and chunk.candidates[0].content.parts:
                    parts += chunk.candidates[0].content.parts
        else:
            response = client.models.generate_content(model="policy", contents=contents, config=config)
            parts = list(response.candidates[0].content.parts or [])
        text = "".join(part.text or "" for part in parts if part.text)
        calls = [part.function_call for part in parts if part.function_call]
        if not calls:
            return text, seen
        seen += [(c.name, dict(c.args or {})) for c in calls]
        merged = (
            [part for part in parts if part.function_call]
            if not text
            else [types.Part(text=text)] + [p for p in parts if p.function_call]
        )
        contents.append(types.Content(role="model", parts=merged))
        contents.append(
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(name=c.name, response={"output": f"ran {c.name}"})
                    for c in calls
                ],
            )
        )
    raise AssertionError("the agent loop did not finish")


LOOPS = {
    "openai_chat": chat_loop,
    "openai_responses": responses_loop,
    "anthropic_messages": anthropic_loop,
    "gemini": gemini_loop,
}


def recorded(db, rollout_id: str) -> tuple[list[Call], list[Chain]]:  # type: ignore[no-untyped-def]
    """The rollout's calls and chains, once the gateway has written them (it records after the reply)."""
    settle_gateways()
    deadline = time.monotonic() + 10
    while True:
        with session_scope(db) as session:
            query = select(Call).where(Call.rollout_id == rollout_id).order_by(Call.position)
            calls = list(session.scalars(query))
            chains = list(session.scalars(select(Chain).where(Chain.rollout_id == rollout_id)))
        if all(c.retemplate_drift is not None for c in calls) or time.monotonic() > deadline:
            return calls, chains
        time.sleep(0.05)


def assert_one_exact_chain(
    db, store, scripted_policy, rollout_id: str, provider_api: str, stream: bool
) -> list[Call]:  # type: ignore[no-untyped-def]
    calls, chains = recorded(db, rollout_id)
    assert len(chains) == 1 and chains[0].fork_reason is None, [c.fork_reason for c in chains]
    assert [c.position for c in calls] == [0, 1, 2, 3]
    assert all(
        c.chain_id == chains[0].id and c.provider_api == provider_api and c.stream == stream for c in calls
    )
    assert [c.finish_reason for c in calls] == ["tool_calls"] * 3 + ["stop"]
    assert [c.tool_call_count for c in calls] == [1, 1, 1, 0]
    assert [c.parent_call_id for c in calls] == [None] + [c.id for c in calls[:-1]]
    assert chains[0].n_calls == 4
    chain = load_chain(store, calls)
    ids, mask, logprobs, versions = chain.ids, chain.loss_mask, chain.behavior_logprobs, chain.policy_versions
    assert chains[0].suffix_tokens + chains[0].sampled_tokens == len(ids)
    # the prompts the policy server received are exactly the chain's prefixes (prompt = previous prompt +
    # previous sampled ids + new suffix, by construction of the stored segments)
    sent = [r["prompt_ids"] for r in scripted_policy.requests]
    assert len(sent) == 4
    for position, prompt in enumerate(sent):
        assert prompt == ids[: chain.prompt_length(position)].tolist()
        assert calls[position].prompt_tokens == len(prompt)
    for position in range(1, 4):
        previous_end = len(sent[position - 1]) + calls[position - 1].completion_tokens
        assert sent[position][:previous_end] == ids[:previous_end].tolist()
    sampled = ids[mask == 1]
    assert np.allclose(logprobs[mask == 1], [fixed_logprob(int(i)) for i in sampled])
    assert (
        versions == 0
    ).all()  # prompt tokens carry the version of the call they entered (shared/trajectory.py)
    assert all(
        c.suffix_tokens == len(p) - (len(sent[i - 1]) + calls[i - 1].completion_tokens)
        for i, (c, p) in enumerate(zip(calls, sent, strict=True))
        if i
    )
    raw = json.loads(zstandard.ZstdDecompressor().decompress(store.get_bytes(calls[0].raw_key)))
    assert "request" in raw and "response" in raw
    for call in calls:
        assert call.total_ms >= call.inference_ms >= 0 and call.queue_ms >= 0
        assert (call.ttfb_ms is not None) == stream
        assert call.retemplate_drift is not None
    return calls


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("provider_api", sorted(LOOPS))
def test_sdk_agent_loop_is_one_exact_chain(
    gateway_server, scripted_policy, make_rollout, db, store, provider_api, stream
):  # type: ignore[no-untyped-def]
    ref = make_rollout(provider_api)
    text, seen = LOOPS[provider_api](gateway_server.url, ref.rollout_key, stream)
    assert seen == EXPECTED_CALLS
    assert text == "done"
    assert_one_exact_chain(db, store, scripted_policy, ref.rollout_id, provider_api, stream)
