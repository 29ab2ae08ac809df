"""Teachers at the gateway (``services/gateway/teacher.py``): a teacher's reply is recorded as the student would
have produced it (one chain the next calls splice onto, ``source = teacher``, no logprobs), a teacher that fails
is an error in the harness's shape with an incident and nothing recorded, and the reference demonstrator acts out
the rollout's own task's fix. The teacher endpoint is the scripted policy speaking OpenAI chat, a real HTTP server."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import numpy as np
import pytest

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Message, ToolCall, ToolSpec
from shared.incidents import take_incidents
from shared.trajectory import TEACHER, load_chain
from tests.fixtures.scripted_policy import DEFAULT_SCRIPT
from tests.integration.test_gateway_app import BASH, calls_of, chat_body, count_calls
from tests.unit.test_demonstrator import FIX

pytestmark = pytest.mark.integration

KEY_ENV = "HARNESSRL_TEST_TEACHER_KEY"
KEY = "sk-teacher-secret-0123456789"


def teacher_url(scripted_policy) -> dict:  # type: ignore[no-untyped-def]
    return {"kind": "url", "base_url": scripted_policy.url + "/v1", "api_key_env": KEY_ENV, "model": "big"}


def as_message(reply: dict) -> Message:
    """An OpenAI reply message as the gateway's neutral message (what the chat template renders)."""
    calls = [
        ToolCall(id=c["id"], name=c["function"]["name"], arguments=json.loads(c["function"]["arguments"]))
        for c in reply.get("tool_calls") or []
    ]
    return Message(role="assistant", content=reply.get("content") or "", tool_calls=calls)


def neutral(messages: list[dict]) -> list[Message]:
    out = []
    for m in messages:
        if m["role"] == "assistant":
            out.append(as_message(m))
        else:
            out.append(Message(role=m["role"], content=m["content"], tool_call_id=m.get("tool_call_id")))
    return out


def test_a_teachers_recorded_tokens_re_render_to_the_exact_prompt_the_next_call_sends(
    gateway_server, scripted_policy, make_rollout, db, store, tiny_model_dir: Path, monkeypatch
):  # type: ignore[no-untyped-def]
    monkeypatch.setenv(KEY_ENV, KEY)
    scripted_policy.set_script(DEFAULT_SCRIPT)
    ref = make_rollout(teacher=teacher_url(scripted_policy))
    headers = {"Authorization": f"Bearer {ref.rollout_key}"}
    messages = chat_body()["messages"]
    replies = []
    for turn in range(4):  # write, run, read (tool calls), then "done"
        response = httpx.post(
            gateway_server.url + "/v1/chat/completions",
            json=chat_body(messages),
            headers=headers,
            timeout=30,
        )
        assert response.status_code == 200, response.text
        reply = response.json()["choices"][0]["message"]
        replies.append(reply)
        messages = messages + [reply]
        for call in reply.get("tool_calls") or []:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"output {turn}"})
    assert [bool(r.get("tool_calls")) for r in replies] == [True, True, True, False]
    assert replies[-1]["content"] == "done"

    # The teacher got the conversation as an OpenAI chat request with its key; the policy sampled nothing.
    asked = [r for r in scripted_policy.requests if r["path"] == "/v1/chat/completions"]
    assert len(asked) == 4 and all(r["authorization"] == f"Bearer {KEY}" for r in asked)
    assert asked[0]["body"]["model"] == "big" and asked[0]["body"]["tools"][0]["function"]["name"] == "bash"
    assert not [r for r in scripted_policy.requests if r["path"] != "/v1/chat/completions"]

    calls = calls_of(db, ref.rollout_id)
    assert len(calls) == 4
    assert len({c.chain_id for c in calls}) == 1, "one chain, no fork"
    assert [c.position for c in calls] == [0, 1, 2, 3] and all(c.fork_reason is None for c in calls)
    assert all(c.source == TEACHER for c in calls)
    assert all(c.retemplate_drift is False for c in calls)
    assert all(c.notes["teacher"] == "url:big" for c in calls)
    chain = load_chain(store, calls)
    assert all(segment.source == TEACHER for segment in chain.calls)
    assert all(np.isnan(segment.sampled_logprobs).all() for segment in chain.calls)
    assert np.array_equal(chain.teacher_mask, chain.loss_mask)  # every trained token is the teacher's

    # Each call's prompt ids (the chain's ids before its sampled ids) are the previous call's prompt, the
    # teacher's recorded reply ids and the new suffix — and exactly the student's template render of that call's
    # messages from scratch: the teacher's ids are what the student's chat format says the reply is.
    chat_format = ChatFormat.load(tiny_model_dir)
    tools = [ToolSpec(name="bash", parameters=BASH)]
    sent = chat_body()["messages"]
    for position in range(len(calls)):
        prompt = chain.ids[: chain.prompt_length(position)].tolist()
        rendered = chat_format.encode(
            chat_format.render_text(neutral(sent), tools, add_generation_prompt=True)
        )
        assert prompt == rendered, f"call {position}'s prompt is not its messages' render"
        sampled = chain.calls[position].sampled_ids.tolist()
        assert sampled[-1] == chat_format.end_of_turn_id and chat_format.end_of_turn_id not in sampled[:-1]
        if position + 1 < len(calls):
            assert chain.prompt_length(position + 1) > len(prompt) + len(sampled)  # extends, never re-renders
        reply = replies[position]
        sent = (
            sent
            + [reply]
            + [
                {"role": "tool", "tool_call_id": c["id"], "content": f"output {position}"}
                for c in reply.get("tool_calls") or []
            ]
        )


def test_a_streaming_harness_gets_the_teachers_reply_as_a_stream(
    gateway_server, scripted_policy, make_rollout, db
):  # type: ignore[no-untyped-def]
    scripted_policy.set_script([{"run": "ls"}])
    ref = make_rollout(teacher={"kind": "url", "base_url": scripted_policy.url + "/v1"})
    with httpx.stream(
        "POST",
        gateway_server.url + "/v1/chat/completions",
        json=chat_body(stream=True),
        headers={"Authorization": f"Bearer {ref.rollout_key}"},
        timeout=30,
    ) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith(
            "text/event-stream"
        )
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
    deltas = [c for e in events for c in e["choices"][0]["delta"].get("tool_calls") or []]
    assert [d["function"]["name"] for d in deltas if d["function"].get("name")] == ["bash"]
    arguments = "".join(d["function"].get("arguments") or "" for d in deltas)
    assert json.loads(arguments) == {"command": "ls"}
    (call,) = calls_of(db, ref.rollout_id)
    assert call.stream and call.source == TEACHER and call.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("teacher_status", "harness_status"), [(500, 503), (429, 503), (401, 502), (400, 502)]
)
def test_a_teacher_error_answers_in_the_harness_shape_notes_an_incident_and_records_nothing(
    gateway_server,
    scripted_policy,
    make_rollout,
    db,
    redis_client,
    monkeypatch,
    teacher_status,
    harness_status,
):  # type: ignore[no-untyped-def]
    monkeypatch.setenv(KEY_ENV, KEY)
    scripted_policy.policy.fail_status = teacher_status
    ref = make_rollout(teacher=teacher_url(scripted_policy))
    for path, body in (
        ("/v1/chat/completions", chat_body()),
        ("/v1/messages", {"model": "p", "max_tokens": 64, "messages": [{"role": "user", "content": "go"}]}),
    ):
        response = httpx.post(
            gateway_server.url + path,
            json=body,
            headers={"Authorization": f"Bearer {ref.rollout_key}"},
            timeout=30,
        )
        assert response.status_code == harness_status
        error = response.json()["error"]
        assert "teacher" in error["message"]
        assert scripted_policy.url not in response.text and KEY not in response.text
    assert count_calls(db, ref.rollout_id) == 0
    incidents = take_incidents(redis_client, ref.rollout_id)
    assert [i.cause for i in incidents] == ["teacher_unavailable"] * 2


def test_an_unreachable_teacher_or_a_missing_key_is_a_503(
    gateway_server, scripted_policy, make_rollout, db, monkeypatch
):  # type: ignore[no-untyped-def]
    monkeypatch.delenv(KEY_ENV, raising=False)
    for teacher in (
        {"kind": "url", "base_url": "http://127.0.0.1:9/v1"},  # discard port: nothing listens
        teacher_url(scripted_policy),  # its key's variable is not set
    ):
        ref = make_rollout(teacher=teacher)
        response = httpx.post(
            gateway_server.url + "/v1/chat/completions",
            json=chat_body(),
            headers={"Authorization": f"Bearer {ref.rollout_key}"},
            timeout=30,
        )
        assert response.status_code == 503, response.text
        assert "teacher" in response.json()["error"]["message"] and "127.0.0.1:9" not in response.text
        assert count_calls(db, ref.rollout_id) == 0


def test_a_malformed_teacher_reply_is_a_502(gateway_server, scripted_policy, make_rollout, db):  # type: ignore[no-untyped-def]
    scripted_policy.set_script([{"raw": '<tool_call>\n{"name": "bash", "arguments": [1]}\n</tool_call>'}])
    ref = make_rollout(teacher={"kind": "url", "base_url": scripted_policy.url + "/v1"})
    response = httpx.post(
        gateway_server.url + "/v1/chat/completions",
        json=chat_body(),
        headers={"Authorization": f"Bearer {ref.rollout_key}"},
        timeout=30,
    )
    assert response.status_code == 502 and "not a chat completion" in response.json()["error"]["message"]
    assert count_calls(db, ref.rollout_id) == 0


def task_spec(patch: str) -> dict:
    return {
        "instance_id": "teacher-clamp",
        "repo": "harnessrl/teacher-tests",
        "source": {"kind": "dir", "path": "/nonexistent"},
        "base_commit": "0" * 40,
        "problem_statement": "clamp does not clamp",
        "FAIL_TO_PASS": ["tests/test_clamp.py::test_clamp"],
        "test_command": "python -m pytest -q --junitxml={junit_xml}",
        "patch": patch,
    }


def test_the_reference_teacher_demonstrates_the_rollouts_own_fix_as_tool_calls(
    gateway_server, scripted_policy, make_rollout, db, store
):  # type: ignore[no-untyped-def]
    ref = make_rollout(
        harness="qwen-code",
        dataset=f"teacher-{id(db)}",
        task_spec=task_spec(FIX),
        teacher={"kind": "reference"},
    )
    headers = {"Authorization": f"Bearer {ref.rollout_key}"}
    messages = chat_body()["messages"]
    commands = []
    for _ in range(5):
        response = httpx.post(
            gateway_server.url + "/v1/chat/completions", json=chat_body(messages), headers=headers, timeout=30
        )
        assert response.status_code == 200, response.text
        reply = response.json()["choices"][0]["message"]
        messages = messages + [reply]
        for call in reply.get("tool_calls") or []:
            commands.append(json.loads(call["function"]["arguments"])["command"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})
    assert commands[:2] == ["ls", "cat ranges.py"]
    # the task's own patch (not a bundled solution): its files' fixed text is unknown here, so the diff is applied
    assert commands[2] == f"git apply <<'HARNESSRL_REFERENCE_FIX'\n{FIX}HARNESSRL_REFERENCE_FIX"
    assert commands[3] == "python -m pytest -q --junitxml=/tmp/harnessrl-reference-junit.xml"
    assert len(commands) == 4 and reply["content"] and not reply.get("tool_calls")  # then it says it is done
    assert not scripted_policy.requests  # neither the policy nor any endpoint was asked
    calls = calls_of(db, ref.rollout_id)
    assert len(calls) == 5 and len({c.chain_id for c in calls}) == 1
    assert all(c.source == TEACHER and c.notes["teacher"] == "reference" for c in calls)
    assert all(math.isnan(lp) for s in load_chain(store, calls).calls for lp in s.sampled_logprobs)
