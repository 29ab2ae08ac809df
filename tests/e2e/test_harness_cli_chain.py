"""The real harness CLIs end to end (issue 4's must-show): Codex, Claude Code, Qwen Code, Pi (and the reference
agent), unmodified and sandboxed, run a multi-turn task through the real gateway backed by the scripted policy:
write a file, run a command, read it back, say done. Each finishes successfully, the file is in the rollout's
patch, and the calls form ONE chain in which every prompt the model saw is exactly the previous prompt + the
previous sampled ids + the new suffix — checked against the token ids the upstream actually received."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.runner.rollout import Attempt, claim, execute_attempt
from shared.db import session_scope
from shared.models import Call, Chain, Rollout
from shared.trajectory import load_segment

pytestmark = [pytest.mark.e2e]

HARNESSES = ["codex", "claude-code", "qwen-code", "pi", "reference"]


@pytest.mark.parametrize("harness", HARNESSES)
def test_real_cli_multi_turn_task_forms_one_exact_chain(  # type: ignore[no-untyped-def]
    harness, scripted_gateway, scripted_policy, sandbox, db, store, toy_task, make_rollouts
):
    settings = scripted_gateway.settings
    _, _, [rollout_id] = make_rollouts(toy_task, harness)
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    outcome = execute_attempt(settings, db, store, sandbox, attempt)

    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        stdout = store.get_bytes(f"{rollout.logs_key}/harness.stdout").decode()[-2000:]
        stderr = store.get_bytes(f"{rollout.logs_key}/harness.stderr").decode()[-2000:]
        detail = f"{rollout.error}\nstdout: {stdout}\nstderr: {stderr}"
        assert outcome.status == "finished" and rollout.harness_outcome == "completed", detail
        calls = list(session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.id)))
        chains = list(session.scalars(select(Chain).where(Chain.rollout_id == rollout_id)))
        patch = store.get_bytes(rollout.patch_key or "")

    # The file the agent wrote is the rollout's change.
    assert b"+++ b/hello.txt" in patch and b"\n+hi\n" in patch, patch.decode(errors="replace")
    # Write, run, read back, then the final answer: >= 4 calls, >= 3 of them tool calls, all in one chain.
    assert len(chains) == 1 and chains[0].fork_reason is None, [c.fork_reason for c in chains]
    assert [c.position for c in calls] == list(range(len(calls))) and len(calls) >= 4, detail
    assert sum(c.tool_call_count for c in calls) >= 3, [(c.position, c.tool_call_count) for c in calls]
    assert all(c.fork_reason is None for c in calls)

    # Token faithfulness against what the upstream received: prompt k = prompt k-1 + sampled k-1 + suffix k.
    received = [request["prompt_ids"] for request in scripted_policy.requests]
    assert len(received) == len(calls)
    seen: list[int] = []
    for call, prompt_ids in zip(calls, received, strict=True):
        segment = load_segment(store, call.tokens_key)
        seen += segment["prompt_ids"].tolist()
        assert seen == prompt_ids, f"call {call.position}: the prompt is not the spliced chain"
        seen += segment["sampled_ids"].tolist()


def test_shell_harness_reaches_the_gateway_with_the_usual_variables(  # type: ignore[no-untyped-def]
    scripted_gateway, scripted_policy, sandbox, db, store, toy_task, make_rollouts
):
    """``shell``: any command; here curl speaks the OpenAI chat API using the exported base URL and key."""
    settings = scripted_gateway.settings
    scripted_policy.set_scripts([[{"say": "hello from the policy"}]])
    body = '{"model": "policy", "messages": [{"role": "user", "content": "hi"}]}'
    command = (
        'curl -sf -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" '
        f"-d '{body}' \"$OPENAI_BASE_URL/chat/completions\" > answer.json && echo {{instruction}} > task.txt"
    )
    _, _, [rollout_id] = make_rollouts(toy_task, "shell", config={"harness_options": {"command": command}})
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    outcome = execute_attempt(settings, db, store, sandbox, attempt)
    assert outcome.status == "finished", outcome.error
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None and rollout.meta["attempts"][-1]["calls"] == 1
        patch = store.get_bytes(rollout.patch_key or "").decode()
    assert "hello from the policy" in patch  # the answer came back through the sandbox's forwarder
    assert f"+{toy_task.problem_statement}" in patch  # the instruction was substituted, quoted intact
