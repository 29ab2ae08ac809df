"""The gateway's HTTP boundary: binding and 401s per provider shape, error statuses, nothing recorded for a
rejected request, real streaming (TTFB < total), fork reasons recorded, cut replies, parse errors, probes."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from sqlalchemy import func, select

from shared.db import session_scope
from shared.models import Call, Chain
from tests.fixtures.gateway import settle_gateways

pytestmark = pytest.mark.integration

BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


def chat_body(messages: list[dict] | None = None, **extra: object) -> dict:
    return {
        "model": "policy",
        "messages": messages or [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": BASH}}],
        **extra,
    }


BODIES = {
    "openai_chat": ("/v1/chat/completions", chat_body()),
    "openai_responses": (
        "/v1/responses",
        {
            "model": "policy",
            "input": [{"role": "user", "content": "go"}],
            "tools": [{"type": "function", "name": "bash", "parameters": BASH}],
        },
    ),
    "anthropic_messages": (
        "/v1/messages",
        {
            "model": "policy",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "go"}],
            "tools": [{"name": "bash", "input_schema": BASH}],
        },
    ),
    "gemini": (
        "/v1beta/models/policy:generateContent",
        {
            "contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "bash", "parameters": BASH}]}],
        },
    ),
}


def error_kind(provider_api: str, body: dict) -> str:
    """The vendor's error type field (OpenAI/Anthropic ``error.type``, Gemini ``error.status``)."""
    if provider_api == "anthropic_messages":
        assert body["type"] == "error"
        return str(body["error"]["type"])
    if provider_api == "gemini":
        return str(body["error"]["status"])
    return str(body["error"]["type"])


def count_calls(db, rollout_id: str | None = None) -> int:  # type: ignore[no-untyped-def]
    settle_gateways()
    with session_scope(db) as session:
        query = select(func.count()).select_from(Call)
        if rollout_id:
            query = query.where(Call.rollout_id == rollout_id)
        return int(session.scalar(query) or 0)


def chains_of(db, rollout_id: str) -> list[Chain]:  # type: ignore[no-untyped-def]
    settle_gateways()
    with session_scope(db) as session:
        return list(session.scalars(select(Chain).where(Chain.rollout_id == rollout_id).order_by(Chain.id)))


def calls_of(db, rollout_id: str) -> list[Call]:  # type: ignore[no-untyped-def]
    settle_gateways()
    with session_scope(db) as session:
        return list(session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.id)))


# --- binding ---------------------------------------------------------------------------------------------


UNAUTHENTICATED = {
    "openai_chat": "authentication_error",
    "openai_responses": "authentication_error",
    "anthropic_messages": "authentication_error",
    "gemini": "UNAUTHENTICATED",
}


@pytest.mark.parametrize("provider_api", sorted(BODIES))
@pytest.mark.parametrize("case", ["missing", "unknown", "finished"])
def test_unbound_request_is_401_in_provider_shape(
    gateway_server, scripted_policy, make_rollout, db, provider_api, case
):  # type: ignore[no-untyped-def]
    path, body = BODIES[provider_api]
    headers = {}
    if case == "unknown":
        headers = {
            "Authorization": "Bearer rk_not-a-rollout",
            "x-api-key": "rk_nope",
            "x-goog-api-key": "rk_nope",
        }
    elif case == "finished":
        headers = {"Authorization": f"Bearer {make_rollout(status='finished').rollout_key}"}
    before = count_calls(db)
    response = httpx.post(gateway_server.url + path, json=body, headers=headers, timeout=30)
    assert response.status_code == 401
    assert error_kind(provider_api, response.json()) == UNAUTHENTICATED[provider_api]
    assert count_calls(db) == before
    assert scripted_policy.requests == []


@pytest.mark.parametrize("method", ["prefix", "bearer", "x-api-key", "x-goog-api-key", "query"])
def test_every_binding_method_reaches_the_rollout(gateway_server, scripted_policy, make_rollout, db, method):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    url, headers, params = gateway_server.url, {}, {}
    if method == "prefix":
        url += f"/r/{ref.rollout_key}"
        headers = {"Authorization": "Bearer dummy-key-the-harness-insists-on"}
    elif method == "bearer":
        headers = {"Authorization": f"Bearer {ref.rollout_key}"}
    elif method == "query":
        params = {"key": ref.rollout_key}
    else:
        headers = {method: ref.rollout_key}
    response = httpx.post(
        url + "/v1/chat/completions", json=chat_body(), headers=headers, params=params, timeout=30
    )
    assert response.status_code == 200, response.text
    assert count_calls(db, ref.rollout_id) == 1


# --- request errors: right status, caller's shape, nothing recorded -----------------------------------------


@pytest.mark.parametrize("provider_api", sorted(BODIES))
def test_malformed_json_and_bad_fields_are_400(
    gateway_server, scripted_policy, make_rollout, db, provider_api
):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    path, _ = BODIES[provider_api]
    headers = {"x-api-key": ref.rollout_key, "content-type": "application/json"}
    for payload in (b"{not json", b"[1, 2]", b'{"model": "policy"}'):
        response = httpx.post(gateway_server.url + path, content=payload, headers=headers, timeout=30)
        assert response.status_code == 400, (payload, response.text)
        assert error_kind(provider_api, response.json()) in ("invalid_request_error", "INVALID_ARGUMENT")
    assert count_calls(db, ref.rollout_id) == 0
    assert scripted_policy.requests == []


def test_a_bad_key_is_answered_before_a_bad_body(gateway_server, scripted_policy, db):  # type: ignore[no-untyped-def]
    """An unknown key is the answer (401), whatever the body: the binding comes before the body is read."""
    before = count_calls(db)
    for payload in (b"{not json", b"[1, 2]", b'{"model": "policy"}'):
        response = httpx.post(
            gateway_server.url + "/v1/chat/completions",
            content=payload,
            headers={"x-api-key": "rk_not-a-rollout", "content-type": "application/json"},
            timeout=30,
        )
        assert response.status_code == 401, (payload, response.text)
        assert error_kind("openai_chat", response.json()) == "authentication_error"
    assert count_calls(db) == before
    assert scripted_policy.requests == []


def test_a_client_gone_mid_body_leaves_no_call_marked_as_served(
    gateway_server, scripted_policy, make_rollout, db, redis_client
):  # type: ignore[no-untyped-def]
    """A harness that hangs up halfway through sending its request: the binding (read before the body) marked
    the call as being served; the mark goes, so the rollout's flush barrier does not wait for a call that will
    never be recorded, and nothing is recorded or sent upstream."""
    from urllib.parse import urlsplit

    from shared import capture_state

    ref = make_rollout()  # opened as the runner opens it, so the binding's script marks its calls
    binding = capture_state.Binding(ref.rollout_id, ref.run_id, "codex", {}, time.time())
    capture_state.open_rollout(redis_client, ref.rollout_key, binding)
    body = json.dumps(chat_body()).encode()
    where = urlsplit(gateway_server.url)
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\n"
        f"Host: {where.hostname}\r\nx-api-key: {ref.rollout_key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    pending = capture_state.pending_key(ref.rollout_key)
    with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
        sock.sendall(head + body[: len(body) // 2])
        deadline = time.monotonic() + 10
        while not redis_client.hlen(pending) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert redis_client.hlen(pending) == 1  # bound and marked, the body still arriving
    deadline = time.monotonic() + 10
    while redis_client.hlen(pending) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert redis_client.hgetall(pending) == {}
    assert count_calls(db, ref.rollout_id) == 0
    assert scripted_policy.requests == []
    answered = httpx.post(
        gateway_server.url + "/v1/chat/completions",
        json=chat_body(),
        headers={"x-api-key": ref.rollout_key},
        timeout=30,
    )
    assert answered.status_code == 200, answered.text
    assert count_calls(db, ref.rollout_id) == 1


@pytest.mark.parametrize("provider_api", sorted(BODIES))
def test_limits_upstream_failures_and_context_errors(
    gateway_factory, scripted_policy, make_rollout, db, provider_api
):  # type: ignore[no-untyped-def]
    small = gateway_factory(max_request_bytes=4096, max_model_len=400)
    ref = make_rollout()
    path, body = BODIES[provider_api]
    headers = {"Authorization": f"Bearer {ref.rollout_key}", "x-goog-api-key": ref.rollout_key}

    too_big = json.dumps(body).encode() + b" " * 5000
    response = httpx.post(
        small.url + path, content=too_big, headers={**headers, "content-type": "application/json"}, timeout=30
    )
    assert response.status_code == 413

    long_body = json.loads(json.dumps(body).replace('"go"', json.dumps("word " * 400)))
    response = httpx.post(small.url + path, json=long_body, headers=headers, timeout=30)
    assert response.status_code == 400
    message = json.dumps(response.json())
    assert "400" in message or "context" in message or "too long" in message or "exceeds" in message
    if provider_api.startswith("openai"):
        assert response.json()["error"]["code"] == "context_length_exceeded"

    scripted_policy.policy.fail_status = 503
    response = httpx.post(small.url + path, json=body, headers=headers, timeout=30)
    assert response.status_code == (529 if provider_api == "anthropic_messages" else 503)
    assert response.headers.get("x-should-retry") == "true"
    scripted_policy.policy.fail_status = None

    dead = gateway_factory(inference_urls=["http://127.0.0.1:9"])
    response = httpx.post(dead.url + path, json=body, headers=headers, timeout=30)
    assert response.status_code == 503
    assert error_kind(provider_api, response.json()) in (
        "server_error",
        "api_error",
        "UNAVAILABLE",
        "overloaded_error",
    )

    assert count_calls(db, ref.rollout_id) == 0
    assert chains_of(db, ref.rollout_id) == []


# --- streaming, cut replies, parse errors ----------------------------------------------------------------


def test_streaming_is_real_ttfb_before_total(gateway_server, scripted_policy, make_rollout, db):  # type: ignore[no-untyped-def]
    scripted_policy.policy.token_delay_s = 0.02
    scripted_policy.set_script([{"say": "one two three four five six seven eight nine ten"}])
    ref = make_rollout()
    arrivals = []
    start = time.monotonic()
    with httpx.stream(
        "POST",
        gateway_server.url + "/v1/chat/completions",
        json=chat_body(stream=True),
        headers={"Authorization": f"Bearer {ref.rollout_key}"},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {") and '"content": "' in line.replace('":"', '": "'):
                arrivals.append(time.monotonic() - start)
    assert len(arrivals) > 5
    assert (
        arrivals[-1] - arrivals[1] > 0.1
    )  # text deltas spread over the generation, not one burst at the end
    (call,) = calls_of(db, ref.rollout_id)
    assert call.stream and call.ttfb_ms is not None
    assert call.ttfb_ms < call.total_ms
    assert call.ttfb_ms < call.inference_ms


def test_cut_reply_is_closed_with_mask_zero_tokens_next_call(
    gateway_server, scripted_policy, make_rollout, db, store
):  # type: ignore[no-untyped-def]
    from shared.trajectory import load_chain

    scripted_policy.set_script([{"say": "a long answer that will not fit in three tokens"}])
    ref = make_rollout()
    headers = {"Authorization": f"Bearer {ref.rollout_key}"}
    first = httpx.post(
        gateway_server.url + "/v1/chat/completions", json=chat_body(max_tokens=3), headers=headers, timeout=30
    ).json()
    assert first["choices"][0]["finish_reason"] == "length"
    text = first["choices"][0]["message"]["content"]
    messages = chat_body()["messages"] + [
        {"role": "assistant", "content": text},
        {"role": "user", "content": "go on"},
    ]
    second = httpx.post(
        gateway_server.url + "/v1/chat/completions", json=chat_body(messages), headers=headers, timeout=30
    )
    assert second.status_code == 200
    calls = calls_of(db, ref.rollout_id)
    assert [c.position for c in calls] == [0, 1] and calls[0].chain_id == calls[1].chain_id
    assert calls[0].finish_reason == "length" and calls[0].completion_tokens == 3
    chain = load_chain(store, calls)
    ids, mask = chain.ids, chain.loss_mask
    end_of_turn = ids[calls[0].prompt_tokens + 3]  # first id after the cut reply: the closing token
    assert mask[calls[0].prompt_tokens + 3] == 0
    assert scripted_policy.requests[1]["prompt_ids"][calls[0].prompt_tokens + 3] == end_of_turn
    assert calls[1].prompt_tokens == calls[0].prompt_tokens + 3 + calls[1].suffix_tokens


def test_unparsable_tool_call_is_text_and_recorded(gateway_server, scripted_policy, make_rollout, db):  # type: ignore[no-untyped-def]
    scripted_policy.set_script([{"raw": '<tool_call>{"name": "bash", "arguments": {broken</tool_call>'}])
    ref = make_rollout()
    response = httpx.post(
        gateway_server.url + "/v1/chat/completions",
        json=chat_body(),
        headers={"x-api-key": ref.rollout_key},
        timeout=30,
    )
    message = response.json()["choices"][0]["message"]
    assert message.get("tool_calls") in (None, [])
    assert "<tool_call>" in message["content"]
    (call,) = calls_of(db, ref.rollout_id)
    assert call.parse_error and "JSON" in call.parse_error and call.tool_call_count == 0


def test_the_raw_body_keeps_the_request_and_the_reply_as_sent(  # type: ignore[no-untyped-def]
    gateway_server, scripted_policy, make_rollout, db, store
):
    """A JSON reply's raw body holds the very bytes the client got; a streamed one the whole reply, rendered."""
    import zstandard

    ref = make_rollout()
    sent = json.dumps(chat_body()).encode()
    plain = httpx.post(
        gateway_server.url + "/v1/chat/completions",
        content=sent,
        headers={"x-api-key": ref.rollout_key, "content-type": "application/json"},
        timeout=30,
    )
    assert plain.status_code == 200 and plain.headers["content-type"] == "application/json; charset=utf-8"
    streamed = httpx.post(
        gateway_server.url + "/v1/chat/completions",
        json=chat_body(stream=True),
        headers={"x-api-key": ref.rollout_key},
        timeout=30,
    )
    assert streamed.status_code == 200
    settle_gateways()
    first, second = sorted(calls_of(db, ref.rollout_id), key=lambda c: c.id)
    raw = zstandard.ZstdDecompressor().decompress(store.get_bytes(first.raw_key))
    assert raw == b'{"request":' + sent + b',"response":' + plain.content + b"}"
    whole = json.loads(zstandard.ZstdDecompressor().decompress(store.get_bytes(second.raw_key)))
    assert whole["request"]["stream"] is True
    assert whole["response"]["object"] == "chat.completion" and whole["response"]["choices"][0]["message"]


# --- forks recorded with their reason ----------------------------------------------------------------------

SYS, TASK = {"role": "system", "content": "sys"}, {"role": "user", "content": "go"}


def _reply(command: str = "ls") -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }
        ],
    }


TOOL = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
SECOND_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
FORK_SECOND_CALL = {
    "retry": chat_body([SYS, TASK]),
    "tools_changed": {**chat_body([SYS, TASK]), "tools": chat_body()["tools"] + SECOND_TOOLS},
    "system_changed": chat_body([{"role": "system", "content": "other"}, TASK]),
    "subagent": {
        **chat_body([{"role": "system", "content": "explorer"}, {"role": "user", "content": "find x"}]),
        "tools": SECOND_TOOLS,
    },
    "new_conversation": chat_body([SYS, {"role": "user", "content": "unrelated"}]),
    "truncated_history": {},  # built from the first reply in the test
    "compaction": chat_body([SYS, TASK]),
    "edited_history": chat_body([SYS, TASK, _reply("rm -rf /tmp/x"), TOOL]),
}


@pytest.mark.parametrize("reason", sorted(FORK_SECOND_CALL))
def test_fork_is_recorded_with_its_reason(gateway_server, scripted_policy, make_rollout, db, reason):  # type: ignore[no-untyped-def]
    scripted_policy.set_script([{"run": "ls"}, {"run": "ls"}, {"say": "done"}])
    ref = make_rollout()
    headers = {"Authorization": f"Bearer {ref.rollout_key}"}
    first_messages = [SYS, TASK] if reason != "compaction" else [SYS, TASK, _reply(), TOOL]
    first = httpx.post(
        gateway_server.url + "/v1/chat/completions",
        json=chat_body(first_messages),
        headers=headers,
        timeout=30,
    )
    assert first.status_code == 200
    if reason == "compaction":  # the harness replaces the long history with a summary
        second_body = chat_body([SYS, TASK, {"role": "assistant", "content": "Summary of earlier work."}])
    elif reason == "truncated_history":
        # the harness drops the oldest turn (the task) and keeps our reply and its result
        echo = first.json()["choices"][0]["message"]
        first_tool = {"role": "tool", "tool_call_id": echo["tool_calls"][0]["id"], "content": "ok"}
        second_body = chat_body([SYS, echo, first_tool])
    else:
        second_body = FORK_SECOND_CALL[reason]
    assert (
        httpx.post(
            gateway_server.url + "/v1/chat/completions", json=second_body, headers=headers, timeout=30
        ).status_code
        == 200
    )
    chains = chains_of(db, ref.rollout_id)
    calls = calls_of(db, ref.rollout_id)
    assert [c.fork_reason for c in chains] == [None, reason]
    assert chains[1].parent_chain_id == chains[0].id
    assert (
        calls[1].fork_reason == reason and calls[1].position == 0 and calls[1].parent_call_id == calls[0].id
    )
    assert calls[1].suffix_tokens == calls[1].prompt_tokens  # a new chain stores its whole first prompt


# --- token counting, model lists, probes, the Unix socket ---------------------------------------------------


def test_count_tokens_and_model_lists(gateway_server, scripted_policy, make_rollout, db):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    _, anthropic_body = BODIES["anthropic_messages"]
    counted = httpx.post(
        gateway_server.url + "/v1/messages/count_tokens",
        json=anthropic_body,
        headers={"x-api-key": ref.rollout_key},
        timeout=30,
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 10
    _, gemini_body = BODIES["gemini"]
    counted = httpx.post(
        gateway_server.url + "/v1beta/models/policy:countTokens",
        json=gemini_body,
        params={"key": ref.rollout_key},
        timeout=30,
    )
    assert counted.status_code == 200 and counted.json()["totalTokens"] > 10
    openai_models = httpx.get(
        gateway_server.url + "/v1/models", headers={"Authorization": f"Bearer {ref.rollout_key}"}
    ).json()
    assert [m["id"] for m in openai_models["data"]] == ["policy"]
    anthropic_models = httpx.get(
        gateway_server.url + f"/r/{ref.rollout_key}/v1/models", headers={"anthropic-version": "2023-06-01"}
    ).json()
    assert anthropic_models["data"][0]["type"] == "model"
    assert httpx.get(gateway_server.url + "/v1beta/models", params={"key": ref.rollout_key}).json()["models"]
    assert httpx.get(gateway_server.url + "/v1/models").status_code == 401
    assert count_calls(db, ref.rollout_id) == 0
    assert scripted_policy.requests == []


def test_probes_and_unix_socket(gateway_server, scripted_policy, make_rollout, db):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    assert httpx.head(gateway_server.url + "/").status_code == 200
    assert httpx.head(gateway_server.url + f"/r/{ref.rollout_key}/").status_code == 200
    assert httpx.get(gateway_server.url + "/healthz").status_code == 200
    assert b"harnessrl_http_request_duration_seconds" in httpx.get(gateway_server.url + "/metrics").content
    transport = httpx.HTTPTransport(uds=str(gateway_server.socket_path))
    with httpx.Client(transport=transport, base_url="http://gateway") as client:
        response = client.post(f"/r/{ref.rollout_key}/v1/chat/completions", json=chat_body(), timeout=30)
    assert response.status_code == 200
    assert count_calls(db, ref.rollout_id) == 1
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(gateway_server.socket_path))


def test_a_rekeyed_retry_starts_clean_and_the_old_key_stops_binding(
    gateway_server, scripted_policy, make_rollout, db, redis_client
):  # type: ignore[no-untyped-def]
    """The runner re-runs a crashed rollout by deleting its calls and chains, issuing a new key and closing the old
    one in the gateway's state (``services/runner/rollout.py``: ``claim``)."""
    from sqlalchemy import delete, update

    from shared import capture_state
    from shared.ids import new_rollout_key
    from shared.models import Rollout

    ref = make_rollout()
    url = gateway_server.url + "/v1/chat/completions"
    assert (
        httpx.post(url, json=chat_body(), headers={"x-api-key": ref.rollout_key}, timeout=30).status_code
        == 200
    )
    settle_gateways()
    new_key = new_rollout_key()
    with session_scope(db) as session:
        session.execute(delete(Chain).where(Chain.rollout_id == ref.rollout_id))
        session.execute(
            update(Rollout).where(Rollout.id == ref.rollout_id).values(rollout_key=new_key, attempt=1)
        )
    capture_state.release(redis_client, ref.rollout_key)
    assert (
        httpx.post(url, json=chat_body(), headers={"x-api-key": ref.rollout_key}, timeout=30).status_code
        == 401
    )
    response = httpx.post(url, json=chat_body(), headers={"x-api-key": new_key}, timeout=30)
    assert response.status_code == 200, response.text
    chains = chains_of(db, ref.rollout_id)
    assert [c.fork_reason for c in chains] == [None] and chains[0].n_calls == 1


@pytest.mark.parametrize("stream", [False, True])
def test_a_stale_binding_is_reread_beside_the_call_and_a_rollout_found_over_is_refused(
    gateway_server, scripted_policy, make_rollout, db, redis_client, stream
):  # type: ignore[no-untyped-def]
    """A binding older than ``BINDING_FRESH_S`` is re-read from Postgres while the call plans and asks the model
    (``binding.py``: ``resolve_deferred``): a live rollout's call is answered and the binding's check time moves
    on; a rollout whose row is over by then is refused with a 401 before any byte of a reply, nothing is recorded
    and no call of it is left marked as being served."""
    from sqlalchemy import update

    from shared import capture_state
    from shared.models import Rollout

    live, over = make_rollout(), make_rollout()
    stale = time.time() - capture_state.BINDING_FRESH_S - 60
    for ref in (live, over):
        binding = capture_state.Binding(ref.rollout_id, ref.run_id, "codex", {}, stale)
        capture_state.open_rollout(redis_client, ref.rollout_key, binding)
    with session_scope(db) as session:
        session.execute(update(Rollout).where(Rollout.id == over.rollout_id).values(status="cancelled"))
    url = gateway_server.url + "/v1/chat/completions"

    answered = httpx.post(
        url, json=chat_body(stream=stream), headers={"x-api-key": live.rollout_key}, timeout=30
    )
    assert answered.status_code == 200, answered.text
    assert count_calls(db, live.rollout_id) == 1
    raw = redis_client.hget(capture_state.state_key(live.rollout_key), capture_state.FIELD_BIND)
    assert capture_state.Binding.from_json(raw).checked_at > time.time() - capture_state.BINDING_FRESH_S

    refused = httpx.post(
        url, json=chat_body(stream=stream), headers={"x-api-key": over.rollout_key}, timeout=30
    )
    assert refused.status_code == 401
    assert error_kind("openai_chat", refused.json()) == "authentication_error"
    assert "cancelled" in refused.json()["error"]["message"]
    assert count_calls(db, over.rollout_id) == 0
    deadline = time.monotonic() + 10
    while redis_client.hlen(capture_state.pending_key(over.rollout_key)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert redis_client.hgetall(capture_state.pending_key(over.rollout_key)) == {}


def test_a_stale_bindings_reread_waits_beside_the_upstream_request_not_before_it(
    gateway_server, scripted_policy, make_rollout, db, redis_client
):  # type: ignore[no-untyped-def]
    """While the rollouts table is locked, a call whose binding is stale still plans and sends its prompt upstream;
    its answer waits for the row's re-read and comes once the lock is gone."""
    import threading

    from sqlalchemy import text

    from shared import capture_state

    ref = make_rollout()
    stale = time.time() - capture_state.BINDING_FRESH_S - 60
    capture_state.open_rollout(
        redis_client, ref.rollout_key, capture_state.Binding(ref.rollout_id, ref.run_id, "codex", {}, stale)
    )
    answers: list[httpx.Response] = []
    call = threading.Thread(
        target=lambda: answers.append(
            httpx.post(
                gateway_server.url + "/v1/chat/completions",
                json=chat_body(),
                headers={"x-api-key": ref.rollout_key},
                timeout=60,
            )
        )
    )
    with session_scope(db) as session:
        session.execute(text("LOCK TABLE rollouts IN ACCESS EXCLUSIVE MODE"))
        call.start()
        deadline = time.monotonic() + 20
        while not scripted_policy.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(scripted_policy.requests) == 1  # the prompt went upstream while the row could not be read
        call.join(0.5)
        assert call.is_alive() and not answers  # and the answer waits for the re-read
    call.join(30)
    assert answers and answers[0].status_code == 200, answers and answers[0].text
    assert count_calls(db, ref.rollout_id) == 1


def test_gemini_stream_without_alt_sse_is_a_json_array(gateway_server, scripted_policy, make_rollout, db):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    _, body = BODIES["gemini"]
    response = httpx.post(
        gateway_server.url + "/v1beta/models/policy:streamGenerateContent",
        json=body,
        headers={"x-goog-api-key": ref.rollout_key},
        timeout=30,
    )
    assert response.status_code == 200
    chunks = json.loads(response.text)
    assert isinstance(chunks, list) and chunks
    parts = [
        p
        for c in chunks
        for cand in c.get("candidates", [])
        for p in cand.get("content", {}).get("parts", [])
    ]
    assert any("functionCall" in p for p in parts)
    (call,) = calls_of(db, ref.rollout_id)
    assert call.stream and call.provider_api == "gemini"


def test_run_sampling_settings_override_the_harness_request(
    gateway_server, scripted_policy, make_rollout, db
):  # type: ignore[no-untyped-def]
    from shared.models import Run
    from shared.run_config import SamplingConfig, read_run_config

    ref = make_rollout()
    with session_scope(db) as session:
        run = session.get(Run, ref.run_id)
        sampling = SamplingConfig(temperature=0.5, top_p=0.9, max_tokens=7)
        run.config = read_run_config(run).model_copy(update={"sampling": sampling}).model_dump(mode="json")
    body = chat_body(max_tokens=500, temperature=1.3)
    response = httpx.post(
        gateway_server.url + "/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {ref.rollout_key}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    sampling = scripted_policy.requests[-1]["sampling"]
    assert sampling["max_tokens"] == 7  # the run's cap beats the harness's 500
    assert sampling["temperature"] == 0.5 and sampling["top_p"] == 0.9


def test_lora_run_samples_with_its_served_adapter_and_records_its_version(
    gateway_server, scripted_policy, make_rollout, db, redis_client
):  # type: ignore[no-untyped-def]
    """A LoRA run's calls name the run's served adapter as the model (the updater sets it in Redis once vLLM
    serves it) and record the version the name carries; before any adapter, the base model is version 0."""
    from sqlalchemy import update

    from shared.adapters import adapter_name, set_served_adapter
    from shared.models import Run

    ref = make_rollout()
    with session_scope(db) as session:
        session.execute(update(Run).where(Run.id == ref.run_id).values(config={"lora": {"rank": 8}}))
    headers = {"Authorization": f"Bearer {ref.rollout_key}"}
    url = gateway_server.url + "/v1/chat/completions"
    first = httpx.post(url, json=chat_body(), headers=headers, timeout=30)
    assert first.status_code == 200, first.text
    assert scripted_policy.requests[-1]["model"] in (None, "policy")
    set_served_adapter(redis_client, ref.run_id, adapter_name(ref.run_id, 3))
    second = httpx.post(
        url,
        json=chat_body([{"role": "system", "content": "sys"}, {"role": "user", "content": "again"}]),
        headers=headers,
        timeout=30,
    )
    assert second.status_code == 200, second.text
    assert scripted_policy.requests[-1]["model"] == adapter_name(ref.run_id, 3)
    deadline = time.monotonic() + 20  # capture is write-behind: the reply may come before the row
    recorded: list[tuple[int, str]] = []
    while len(recorded) < 2 and time.monotonic() < deadline:
        with session_scope(db) as session:
            calls = session.scalars(
                select(Call).where(Call.rollout_id == ref.rollout_id).order_by(Call.id)
            ).all()
            recorded = [(c.policy_version, c.notes["policy_version_source"]) for c in calls]
        time.sleep(0.1)
    assert recorded == [(0, "base"), (3, "adapter")]


def test_records_of_calls_answered_close_together_land_in_one_transaction(
    gateway_factory, scripted_policy, make_rollout, db
):  # type: ignore[no-untyped-def]
    """The write-behind queue lingers ``capture_linger_ms`` after its oldest record: calls answered within that
    window are written by one transaction, and every one of them is recorded."""
    from concurrent.futures import ThreadPoolExecutor

    from prometheus_client import REGISTRY

    def batches() -> tuple[float, float]:
        count = REGISTRY.get_sample_value("harnessrl_capture_batch_records_count") or 0.0
        return count, REGISTRY.get_sample_value("harnessrl_capture_batch_records_sum") or 0.0

    gateway = gateway_factory(capture_linger_ms=1000)

    def call(rollout) -> int:  # type: ignore[no-untyped-def]
        headers = {"Authorization": f"Bearer {rollout.rollout_key}"}
        response = httpx.post(
            gateway.url + "/v1/chat/completions", json=chat_body(), headers=headers, timeout=30
        )
        return response.status_code

    assert call(make_rollout()) == 200  # a warm gateway: tokenizer, connections, row ids
    rollouts = [make_rollout() for _ in range(6)]
    settle_gateways()
    before = batches()
    started = time.monotonic()
    with ThreadPoolExecutor(len(rollouts)) as pool:
        assert list(pool.map(call, rollouts)) == [200] * len(rollouts)
    assert time.monotonic() - started < 1.0, "the calls were not answered within one linger window"
    assert all(count_calls(db, r.rollout_id) == 1 for r in rollouts)
    count, records = (after - prior for after, prior in zip(batches(), before, strict=True))
    assert (count, records) == (1.0, 6.0)


def test_a_call_while_the_pool_restarts_is_refused_with_503_and_not_recorded(
    gateway_server, scripted_policy, make_rollout, db, redis_client
):  # type: ignore[no-untyped-def]
    """What the pool serves is read by the binding's one Redis script: while the updater has marked the pool
    ``starting`` (its engine holds weights that are not the run's), a call is refused in the caller's shape and
    may be retried; once the pool is ready again the same rollout's call goes through."""
    from shared.pool import SERVED_KEY, mark_starting, set_served

    ref = make_rollout()
    headers = {"Authorization": f"Bearer {ref.rollout_key}"}
    mark_starting(redis_client, served_by="replica-0")
    try:
        response = httpx.post(
            gateway_server.url + "/v1/chat/completions", json=chat_body(), headers=headers, timeout=30
        )
        assert response.status_code == 503 and response.headers["x-should-retry"] == "true"
        assert "starting" in response.json()["error"]["message"]
        assert scripted_policy.requests == [] and count_calls(db, ref.rollout_id) == 0
        set_served(redis_client, ref.run_id, 0, served_by="replica-0")
        response = httpx.post(
            gateway_server.url + "/v1/chat/completions", json=chat_body(), headers=headers, timeout=30
        )
        assert response.status_code == 200, response.text
    finally:
        redis_client.delete(
            SERVED_KEY
        )  # later tests' gateways would refuse calls while the pool is "starting"
    settle_gateways()
    assert count_calls(db, ref.rollout_id) == 1
