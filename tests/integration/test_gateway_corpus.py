"""The malformed-request corpus, on each of the four provider routes: truncated and deeply nested JSON, wrong
types, lone surrogates, impossible sampling values, bad tool schemas, orphan tool results, 10 MB and 40 MB
bodies, and a client that disconnects mid-stream.

Every answer is a 4xx in the caller's provider shape, within a second (the 10 MB prompt included: its length is
estimated before it is tokenized), never a 5xx, and nothing is recorded and nothing reaches the model. A context
error quotes the engine's own limit, not the gateway's setting. A disconnect mid-stream is one INFO line naming
the rollout, without a traceback.
"""

from __future__ import annotations

import copy
import json
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.integration.test_gateway_app import BODIES, chains_of, count_calls, error_kind

pytestmark = pytest.mark.integration

ROUTES = sorted(BODIES)
ANSWER_WITHIN_S = 1.0
ENGINE_LIMIT = 4096  # what the upstream reports; the gateway's own setting is larger


def with_text(provider_api: str, body: dict[str, Any], text: str) -> dict[str, Any]:
    """``body`` with its user turn's text replaced."""
    return json.loads(json.dumps(body).replace('"go"', json.dumps(text)))


def max_tokens_field(provider_api: str, body: dict[str, Any], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    if provider_api == "gemini":
        out["generationConfig"] = {"maxOutputTokens": value}
    else:
        out["max_output_tokens" if provider_api == "openai_responses" else "max_tokens"] = value
    return out


def sampling_field(provider_api: str, body: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    if provider_api == "gemini":
        out["generationConfig"] = {{"temperature": "temperature", "top_p": "topP"}[name]: value}
    else:
        out[name] = value
    return out


BAD_SCHEMA = {"type": "object", "properties": {"command": "a string, please"}}


def bad_tool(provider_api: str, body: dict[str, Any], schema: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    if provider_api == "openai_chat":
        out["tools"] = [{"type": "function", "function": {"name": "bash", "parameters": schema}}]
    elif provider_api == "openai_responses":
        out["tools"] = [{"type": "function", "name": "bash", "parameters": schema}]
    elif provider_api == "anthropic_messages":
        out["tools"] = [{"name": "bash", "input_schema": schema}]
    else:
        out["tools"] = [{"functionDeclarations": [{"name": "bash", "parameters": schema}]}]
    return out


def nameless_tool(provider_api: str, body: dict[str, Any]) -> dict[str, Any]:
    out = bad_tool(provider_api, body, {"type": "object"})
    tool = out["tools"][0]
    target = tool.get(
        "function", tool.get("functionDeclarations", [tool])[0] if provider_api == "gemini" else tool
    )
    target.pop("name")
    return out


def orphan_tool_result(provider_api: str, body: dict[str, Any]) -> dict[str, Any]:
    """A tool result that answers no tool call of the conversation."""
    out = copy.deepcopy(body)
    if provider_api == "openai_chat":
        out["messages"] = [
            {"role": "user", "content": "go"},
            {"role": "tool", "tool_call_id": "call_nobody_made", "content": "output"},
        ]
    elif provider_api == "openai_responses":
        out["input"] = [
            {"role": "user", "content": "go"},
            {"type": "function_call_output", "call_id": "call_nobody_made", "output": "output"},
        ]
    elif provider_api == "anthropic_messages":
        out["messages"] = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "I will look."},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_nobody", "content": "x"}],
            },
        ]
    else:
        out["contents"] = [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "bash", "response": {"out": "x"}}}]},
        ]
    return out


def wrong_types(provider_api: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    key = {"openai_chat": "messages", "openai_responses": "input", "anthropic_messages": "messages"}.get(
        provider_api, "contents"
    )
    flag = (
        {"generationConfig": "hot"} if provider_api == "gemini" else {"stream": "yes"}
    )  # Gemini has no stream field
    bodies = [{**body, key: 5}, {**body, key: [5]}, {**body, **flag}, {**body, "tools": {"a": 1}}]
    if provider_api == "openai_chat":
        bodies.append({**body, "messages": [{"role": "user", "content": {"text": 1}}]})
    return bodies


def budget_spellings(provider_api: str, body: dict[str, Any], value: Any) -> list[dict[str, Any]]:
    """``value`` in every place the API reads a completion budget from, and in places it refuses one: the other
    API's spelling (Responses), both spellings at once (Chat), snake_case and duplicate spellings and the top
    level (Gemini). Each must be refused, never read from one spelling and checked on another."""
    out = [max_tokens_field(provider_api, body, value)]
    if provider_api == "openai_chat":
        out.append({**body, "max_completion_tokens": value})
        out.append({**body, "max_completion_tokens": 64, "max_tokens": value})
        out.append({**body, "max_completion_tokens": value, "max_tokens": 64})
    elif provider_api == "openai_responses":
        out.append({**body, "max_tokens": value})
        out.append({**body, "max_completion_tokens": value})
    elif provider_api == "gemini":
        out.append({**body, "generation_config": {"max_output_tokens": value}})
        out.append({**body, "generationConfig": {"maxOutputTokens": None, "max_output_tokens": value}})
        out.append({**body, "generationConfig": {}, "generation_config": {"maxOutputTokens": value}})
        out.append({**body, "maxOutputTokens": value})
    return out


def named_tool(provider_api: str, body: dict[str, Any], name: Any) -> list[dict[str, Any]]:
    """A tool whose name is ``name``: as a function tool, and as the API's other tool kinds."""
    out = bad_tool(provider_api, body, {"type": "object"})
    tool = out["tools"][0]
    if provider_api == "openai_chat":
        tool["function"]["name"] = name
        custom = {**body, "tools": [{"type": "custom", "custom": {"name": name}}]}
        return [out, custom]
    if provider_api == "openai_responses":
        tool["name"] = name
        custom = {**body, "tools": [{"type": "custom", "name": name}]}
        hosted = {**body, "tools": [{"type": "web_search", "name": name}]}
        return [out, custom, hosted]
    if provider_api == "anthropic_messages":
        tool["name"] = name
        server = {**body, "tools": [{"type": "bash_20250124", "name": name}]}
        return [out, server]
    tool["functionDeclarations"][0]["name"] = name
    snake = {**body, "tools": [{"function_declarations": [{"name": name}]}]}
    return [out, snake]


# Names no vendor takes: not a string, empty, characters outside the vendor's set, longer than its limit (Anthropic
# allows 128, the others 64).
BAD_TOOL_NAMES: list[Any] = [
    5,
    ["bash"],
    {"name": "bash"},
    True,
    "",
    "rm -rf /",
    "bash;ls",
    "é",
    "x" * 129,
    "y" * 300,
]


def schemaless_or_scalar_tools(provider_api: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Schemas that are not a JSON object's (a string, an array), and Anthropic's required ``input_schema`` left out."""
    out = [bad_tool(provider_api, body, {"type": "string"}), bad_tool(provider_api, body, {"type": "array"})]
    if provider_api == "anthropic_messages":
        out.append({**body, "tools": [{"name": "bash"}]})
    return out


BIG = "word " * 2_000_000  # 10 MB: far over the engine's context in any tokenizer


def oversize_parts(provider_api: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A small message with 10 MB in a part that reaches the model other than message text: a tool's description,
    its schema, a tool call's arguments in the history, a tool result."""
    schema = {"type": "object", "properties": {"command": {"type": "string", "description": BIG}}}
    out = [bad_tool(provider_api, body, schema)]
    described = bad_tool(provider_api, body, {"type": "object"})
    tool = described["tools"][0]
    target = tool.get("function") or (tool.get("functionDeclarations") or [tool])[0]
    target["description"] = BIG
    out.append(described)
    for arguments, result in ((BIG, "ok"), ("ls", BIG)):
        out.append(with_history(provider_api, body, arguments, result))
    return out


def with_history(provider_api: str, body: dict[str, Any], command: str, result: str) -> dict[str, Any]:
    """``body`` with one tool call (``command``) and its result (``result``) in the history."""
    out = copy.deepcopy(body)
    if provider_api == "openai_chat":
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        out["messages"] = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": result},
        ]
    elif provider_api == "openai_responses":
        out["input"] = [
            {"role": "user", "content": "go"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "bash",
                "arguments": json.dumps({"command": command}),
            },
            {"type": "function_call_output", "call_id": "call_1", "output": result},
        ]
    elif provider_api == "anthropic_messages":
        out["messages"] = [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": command}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}],
            },
        ]
    else:
        out["contents"] = [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {"command": command}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "bash", "response": {"out": result}}}]},
        ]
    return out


def deep(levels: int) -> bytes:
    return b'{"model": "policy", "messages": ' + b"[" * levels + b"]" * levels + b"}"


CORPUS: dict[str, Callable[[str, dict[str, Any]], list[bytes]]] = {
    "truncated": lambda api, body: [json.dumps(body).encode()[: len(json.dumps(body)) // 2]],
    "deeply nested": lambda api, body: [deep(100_000), deep(5_000)],
    "wrong types": lambda api, body: [json.dumps(b).encode() for b in wrong_types(api, body)],
    "lone surrogates": lambda api, body: [
        json.dumps(with_text(api, body, "go")).replace('"go"', '"a \\ud800 b"').encode(),
        json.dumps(with_text(api, body, "go")).replace('"go"', '"a \\udfff"').encode(),
        json.dumps(with_text(api, body, "go")).encode().replace(b'"go"', b'"\xed\xa0\x80"'),
    ],
    "negative max_tokens": lambda api, body: [
        json.dumps(b).encode()
        for value in (-1, -(10**9), 0, -0.5)
        for b in budget_spellings(api, body, value)
    ],
    "huge max_tokens": lambda api, body: [
        json.dumps(b).encode()
        for value in (10**12, 2**31 - 1, 2**20, 10**6, 1e9, 10**30)
        for b in budget_spellings(api, body, value)
    ],
    "non-integer max_tokens": lambda api, body: [
        json.dumps(b).encode()
        for value in ("100", 1.5, True, [1], {"n": 1})
        for b in budget_spellings(api, body, value)
    ],
    "bad tool names": lambda api, body: [
        json.dumps(b).encode() for name in BAD_TOOL_NAMES for b in named_tool(api, body, name)
    ],
    "non-object tool schemas": lambda api, body: [
        json.dumps(b).encode() for b in schemaless_or_scalar_tools(api, body)
    ],
    "10 MB outside the messages' text": lambda api, body: [
        json.dumps(b).encode() for b in oversize_parts(api, body)
    ],
    "impossible sampling": lambda api, body: [
        json.dumps(sampling_field(api, body, "temperature", -1)).encode(),
        json.dumps(sampling_field(api, body, "top_p", 1.5)).encode(),
    ],
    "bad tool schemas": lambda api, body: [
        json.dumps(bad_tool(api, body, BAD_SCHEMA)).encode(),
        json.dumps(bad_tool(api, body, "not a schema")).encode(),
        json.dumps(bad_tool(api, body, {"type": 5})).encode(),
        json.dumps(nameless_tool(api, body)).encode(),
    ],
    "orphan tool results": lambda api, body: [json.dumps(orphan_tool_result(api, body)).encode()],
    "10 MB prompt": lambda api, body: [json.dumps(with_text(api, body, "word " * 2_000_000)).encode()],
    "40 MB body": lambda api, body: [json.dumps(with_text(api, body, "word " * 8_000_000)).encode()],
}


@pytest.fixture
def engine_limited(scripted_policy):  # type: ignore[no-untyped-def]
    """The scripted policy, reporting a context of ENGINE_LIMIT tokens (as vLLM's /v1/models does)."""
    scripted_policy.policy.max_model_len = ENGINE_LIMIT
    yield scripted_policy
    scripted_policy.policy.max_model_len = None


@pytest.mark.parametrize("provider_api", ROUTES)
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_malformed_requests_get_a_fast_provider_shaped_4xx_and_record_nothing(  # type: ignore[no-untyped-def]
    case, provider_api, engine_limited, gateway_factory, make_rollout, db
):
    gateway = gateway_factory(max_model_len=8192)
    ref = make_rollout()
    path, body = BODIES[provider_api]
    headers = {"x-api-key": ref.rollout_key, "content-type": "application/json"}
    scripted_policy = engine_limited
    before = len(scripted_policy.requests)
    with httpx.Client(timeout=30) as client:
        client.post(
            gateway.url + path, json=body, headers=headers
        )  # warm: the first call loads what it loads
        warm_calls = count_calls(db, ref.rollout_id)
        for payload in CORPUS[case](provider_api, body):
            started = time.monotonic()
            try:
                response = client.post(gateway.url + path, content=payload, headers=headers)
            except httpx.WriteError:  # the gateway answered 413 and closed before the 40 MB were sent
                assert case == "40 MB body"
                continue
            elapsed = time.monotonic() - started
            where = f"{case} on {provider_api} ({len(payload)} bytes): {response.status_code} {response.text[:300]}"
            assert 400 <= response.status_code < 500, where
            assert error_kind(provider_api, response.json()) in (
                "invalid_request_error",
                "INVALID_ARGUMENT",
                "request_too_large",
                "FAILED_PRECONDITION",
                "OUT_OF_RANGE",
            ), where
            assert elapsed < ANSWER_WITHIN_S, f"{where} took {elapsed:.2f}s"
            if case in ("10 MB prompt", "10 MB outside the messages' text"):
                message = json.dumps(response.json())
                assert str(ENGINE_LIMIT) in message and "8192" not in message, where
    assert count_calls(db, ref.rollout_id) == warm_calls
    assert len(chains_of(db, ref.rollout_id)) == (1 if warm_calls else 0)
    assert len(scripted_policy.requests) == before + 1  # the warm-up call only


def test_a_client_gone_mid_stream_is_one_info_line_with_the_rollout(  # type: ignore[no-untyped-def]
    gateway_server, scripted_policy, make_rollout, db, caplog
):
    ref = make_rollout()
    scripted_policy.policy.token_delay_s = 0.05  # a reply of several seconds
    path, body = BODIES["openai_chat"]
    request = json.dumps({**body, "stream": True}).encode()
    caplog.set_level(logging.INFO)
    try:
        with socket.create_connection(
            ("127.0.0.1", int(gateway_server.url.rsplit(":", 1)[1])), timeout=10
        ) as conn:
            conn.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ref.rollout_key}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(request)}\r\n\r\n".encode()
                + request
            )
            assert b"200" in conn.recv(4096)  # headers and the first deltas, then we hang up
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not [
            r for r in caplog.records if "disconnected" in r.getMessage()
        ]:
            time.sleep(0.1)
    finally:
        scripted_policy.policy.token_delay_s = 0.0
    gone = [r for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(gone) == 1, [r.getMessage() for r in caplog.records]
    assert gone[0].levelno == logging.INFO and gone[0].exc_info is None
    assert ref.rollout_id in gone[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records
    ]
    assert count_calls(db, ref.rollout_id) == 0  # the harness never got the whole answer: nothing recorded
