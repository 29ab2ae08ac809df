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
    "negative max_tokens": lambda api, body: [json.dumps(max_tokens_field(api, body, -1)).encode()],
    "huge max_tokens": lambda api, body: [
        json.dumps(max_tokens_field(api, body, 10**12)).encode(),
        json.dumps(max_tokens_field(api, body, 2**31 - 1)).encode(),
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
            if case == "10 MB prompt":
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
