"""The gateway's walls against an agent that floods or malforms its own model calls (issue 36, items 4 and 7).

Each test is a shell-harness rollout (``attack``) whose agent talks to the real gateway from inside the sandbox the
way any harness does (``$OPENAI_BASE_URL``, ``$ANTHROPIC_BASE_URL``, ``$GOOGLE_GEMINI_BASE_URL``), writes what it
got back (status, headers, error body, time taken) into its workspace — the stored patch carries it to the test —
and is graded. The gateway runs as its own process in front of the scripted policy (``tests/e2e/conftest.py``).

- Many concurrent calls on one rollout key: at most ``settings.gateway_max_calls_in_flight_per_rollout`` are
  served; every other one is refused at once with the provider's 429 (rate-limit error body, ``retry-after``),
  never queued; only the served ones are recorded.
- Requests the provider itself would refuse — a negative, zero or absurd completion budget in any spelling, a tool
  whose name is not a string or not one the API allows, a tool schema that is not an object's, 12 MB inside a
  tool's description or a tool call's arguments (outside the message text the old size pre-check counted) — get
  that provider's 400 at once; nothing reaches the model and nothing is recorded.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select

from shared.db import session_scope
from shared.models import Call

pytestmark = [pytest.mark.e2e]

CONCURRENT_CALLS = 20
DEFAULT_LIMIT = 8  # settings.gateway_max_calls_in_flight_per_rollout's default


def workspace_json(patch: bytes | None, name: str) -> Any:
    """The one-line JSON file ``name`` the agent added, read back from the stored patch."""
    assert patch is not None, "the rollout stored no patch"
    lines = patch.decode().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("+++ ") and line.endswith("/" + name))
    added = next(line for line in lines[start + 1 :] if line.startswith("+") and not line.startswith("+++"))
    return json.loads(added[1:])


def recorded_calls(db, rollout_id: str) -> int:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        return int(
            session.scalar(select(func.count()).select_from(Call).where(Call.rollout_id == rollout_id)) or 0
        )


FLOOD = r"""
python3 - <<'PY'
import json, os, threading, time, urllib.error, urllib.request

url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
key = os.environ["OPENAI_API_KEY"]
body = json.dumps({"model": "policy", "messages": [{"role": "user", "content": "flood"}], "max_tokens": 64})
results = []
gate = threading.Barrier(COUNT)

def call():
    request = urllib.request.Request(url, body.encode(), {"Content-Type": "application/json", "Authorization": "Bearer " + key})
    gate.wait()
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            status, headers, text = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, headers, text = error.code, error.headers, error.read()
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    results.append({"status": status, "retry_after": headers.get("retry-after"), "body": payload,
                    "elapsed_s": time.monotonic() - started})

threads = [threading.Thread(target=call) for _ in range(COUNT)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
with open("flood.json", "w") as out:
    out.write(json.dumps(results) + "\n")
PY
""".replace("COUNT", str(CONCURRENT_CALLS))


def test_one_rollout_gets_at_most_its_limit_of_calls_in_flight_the_rest_a_429_at_once(  # type: ignore[no-untyped-def]
    attack, toy_task, scripted_gateway, scripted_policy, db
):
    limit = scripted_gateway.settings.model_dump().get(
        "gateway_max_calls_in_flight_per_rollout", DEFAULT_LIMIT
    )
    assert limit == DEFAULT_LIMIT
    # Each served call takes ~3 s (12 tokens at 0.25 s), so all the flood's calls overlap.
    scripted_policy.policy.script = [{"say": "a reply that takes the model a few seconds to write"}]
    scripted_policy.policy.token_delay_s = 0.25

    result = attack(toy_task, FLOOD)

    assert result.status == "graded", result.error
    assert result.reward == 0.0, result  # the bug is untouched: flooding the gateway earns nothing
    results = workspace_json(result.patch, "flood.json")
    assert len(results) == CONCURRENT_CALLS
    served = [r for r in results if r["status"] == 200]
    refused = [r for r in results if r["status"] != 200]
    assert len(served) == limit, [r["status"] for r in results]
    for r in refused:
        assert r["status"] == 429, r
        assert r["retry_after"] is not None and float(r["retry_after"]) > 0, r
        assert r["body"]["error"]["type"] == "rate_limit_error", r  # OpenAI's own shape for a rate limit
        assert r["elapsed_s"] < 2.0, r  # refused at once, not queued behind the calls in flight
    # The model call of the attack harness plus the served ones; a refused call records nothing.
    assert recorded_calls(db, result.rollout_id) == 1 + limit


BAD_REQUESTS = r"""
python3 - <<'PY'
import json, os, time, urllib.error, urllib.request

openai = os.environ["OPENAI_BASE_URL"]
anthropic = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
gemini = os.environ["GOOGLE_GEMINI_BASE_URL"] + "/v1beta/models/policy:generateContent"
key = os.environ["OPENAI_API_KEY"]
big = "word " * 2_400_000  # 12 MB

chat = lambda **extra: ("chat", openai + "/chat/completions", dict({"model": "policy", "messages": [{"role": "user", "content": "hi"}]}, **extra))
responses = lambda **extra: ("responses", openai + "/responses", dict({"model": "policy", "input": "hi"}, **extra))
messages = lambda **extra: ("anthropic", anthropic, dict({"model": "policy", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}, **extra))
generate = lambda **extra: ("gemini", gemini, dict({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, **extra))
schema = {"type": "object", "properties": {"command": {"type": "string"}}}
call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": big})}}

cases = {
    "responses negative budget": responses(max_output_tokens=-1),
    "responses absurd budget": responses(max_output_tokens=1_000_000),
    "responses budget in another API's spelling": responses(max_tokens=-5),
    "gemini negative budget": generate(generationConfig={"maxOutputTokens": -1}),
    "gemini absurd budget": generate(generationConfig={"maxOutputTokens": 1_000_000}),
    "gemini budget in both spellings": generate(generationConfig={"maxOutputTokens": None, "max_output_tokens": -1}),
    "gemini budget at the top level": generate(maxOutputTokens=-1),
    "chat zero budget": chat(max_completion_tokens=0),
    "chat absurd budget behind the newer spelling": chat(max_completion_tokens=64, max_tokens=1_000_000),
    "anthropic absurd budget": messages(max_tokens=1_000_000),
    "anthropic server tool named by a number": messages(tools=[{"type": "bash_20250124", "name": 5}]),
    "anthropic tool name with a space": messages(tools=[{"name": "run it", "input_schema": schema}]),
    "anthropic tool without a schema": messages(tools=[{"name": "bash"}]),
    "gemini tool named by a number": generate(tools=[{"function_declarations": [{"name": 5}]}]),
    "gemini tool name with a slash": generate(tools=[{"functionDeclarations": [{"name": "a/b", "parameters": schema}]}]),
    "responses hosted tool named by a list": responses(tools=[{"type": "web_search", "name": ["x"]}]),
    "responses tool name of 65 characters": responses(tools=[{"type": "function", "name": "x" * 65, "parameters": schema}]),
    "chat tool schema of a string": chat(tools=[{"type": "function", "function": {"name": "bash", "parameters": {"type": "string"}}}]),
    "chat 12 MB tool description": chat(tools=[{"type": "function", "function": {"name": "bash", "description": big, "parameters": schema}}]),
    "chat 12 MB tool-call arguments": chat(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]),
}
results = {}
for name, (api, url, body) in cases.items():
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", "Authorization": "Bearer " + key, "x-api-key": key, "x-goog-api-key": key})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    results[name] = {"api": api, "status": status, "body": payload, "elapsed_s": time.monotonic() - started}
with open("refused.json", "w") as out:
    out.write(json.dumps(results) + "\n")
PY
"""

ERROR_TYPE = {  # the provider's own 400 shape
    "chat": lambda body: body["error"]["type"] == "invalid_request_error",
    "responses": lambda body: body["error"]["type"] == "invalid_request_error",
    "anthropic": lambda body: body["type"] == "error" and body["error"]["type"] == "invalid_request_error",
    "gemini": lambda body: body["error"]["code"] == 400 and body["error"]["status"] == "INVALID_ARGUMENT",
}


def test_requests_the_provider_would_refuse_get_its_400_at_once_and_reach_nothing(  # type: ignore[no-untyped-def]
    attack, toy_task, scripted_policy, db
):
    result = attack(toy_task, BAD_REQUESTS)

    assert result.status == "graded", result.error
    assert result.reward == 0.0, result
    results = workspace_json(result.patch, "refused.json")
    assert len(results) == 20
    for name, r in results.items():
        where = f"{name}: {r['status']} {json.dumps(r['body'])[:300]}"
        assert r["status"] == 400, where
        assert ERROR_TYPE[r["api"]](r["body"]), where
        assert r["elapsed_s"] < 5.0, f"{where} took {r['elapsed_s']:.1f}s"  # refused before any tokenizing
    # Only the attack harness's own first call reached the model and was recorded.
    assert len(scripted_policy.policy.requests) == 1
    assert recorded_calls(db, result.rollout_id) == 1
