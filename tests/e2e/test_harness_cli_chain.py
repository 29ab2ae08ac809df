"""The real harness CLIs end to end (issue 4's must-show): Codex, Claude Code, Qwen Code, Pi, Gemini CLI,
mini-swe-agent (and the reference agent), unmodified and sandboxed, run a multi-turn task through the real gateway
backed by the scripted policy: write a file, run a command, read it back, say done (mini-swe-agent: run its submit
command). Each finishes successfully, the file is in the rollout's patch, and the calls form ONE chain in which
every prompt the model saw is exactly the previous prompt + the previous sampled ids + the new suffix — checked
against the token ids the upstream actually received. Options that change what a CLI sends are cases of their own
(``VARIANTS``): ``claude-code-bare`` is ``claude -p --bare``, which offers only ``Bash``, ``Edit`` and ``Read`` (the
write step becomes a ``Bash`` command); ``mini-swe-agent-toolcall`` runs mini-swe-agent's default config, which
calls a ``bash`` tool, where the default ``mini_textbased`` config offers no tools and takes one fenced command per
answer (counted as that answer's action).

The first call also checks context fit's counting (``shared/context_fit.py``): the call's conversation, rendered
by the model's chat template, is exactly as many tokens as the first prompt the upstream received, and the
captured first call checked in for the case (``shared/harness_prompts/<HarnessOptions.first_call_name>.json.zst``)
counts within 3% of it (paths and dates differ). ``HARNESSRL_FIRST_PROMPT_DIR=shared/harness_prompts`` re-captures
them from the installed CLIs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import zstandard
from sqlalchemy import select

from services.gateway.chat_format import message_to_template, tool_to_template
from services.gateway.providers import ADAPTERS
from services.runner.harnesses.base import npm_prefix
from services.runner.harnesses.mini_swe_agent import mini_swe_agent_venv
from services.runner.rollout import Attempt, claim, execute_attempt
from shared.context_fit import (
    INSTRUCTION_MARK,
    FirstCall,
    first_call_path,
    first_prompt_tokens,
    load_first_call,
)
from shared.db import session_scope
from shared.harnesses import harness_config
from shared.models import Call, Chain, Rollout
from shared.trajectory import load_segment
from tests.fixtures.scripted_policy import MINI_SWE_AGENT_SCRIPT
from tests.fixtures.services import REPO_ROOT

pytestmark = [pytest.mark.e2e]

HARNESSES = ["codex", "claude-code", "qwen-code", "pi", "gemini", "mini-swe-agent", "reference"]
VARIANTS: dict[str, dict[str, object]] = {
    "claude-code-bare": {"name": "claude-code", "bare": True},
    "mini-swe-agent-toolcall": {"name": "mini-swe-agent", "config": "mini"},
}
"""Case id -> a harness section with options; each variant's first call is captured under its own name."""
BARE_TOOLS = {"Bash", "Edit", "Read"}
SCRIPTS = {"mini-swe-agent": MINI_SWE_AGENT_SCRIPT}
"""Harness -> its script where the default one does not end it."""
NOT_STREAMED = {"reference", "mini-swe-agent"}
"""Harnesses that ask for whole answers (the reference agent; LiteLLM as mini-swe-agent calls it)."""
TEXT_ACTION = "```mswea_bash_command\n"


@pytest.mark.parametrize("case", [*HARNESSES, *VARIANTS])
def test_real_cli_multi_turn_task_forms_one_exact_chain(  # type: ignore[no-untyped-def]
    case, scripted_gateway, scripted_policy, sandbox, db, store, toy_task, make_rollouts, tiny_model_dir
):
    settings = scripted_gateway.settings
    section = VARIANTS.get(case, case)
    options = harness_config(**section) if isinstance(section, dict) else harness_config(section)
    harness, first_call_name = options.name, options.first_call_name
    assert first_call_name == case
    if harness in SCRIPTS:
        scripted_policy.set_script(SCRIPTS[harness])
    _, _, [rollout_id] = make_rollouts(toy_task, section)
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    outcome = execute_attempt(settings, db, store, sandbox, attempt)

    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        stdout = store.get_bytes(f"{rollout.logs_key}/harness.stdout").decode()[-2000:]
        stderr = store.get_bytes(f"{rollout.logs_key}/harness.stderr").decode()[-2000:]
        detail = f"{rollout.error}\nstdout: {stdout}\nstderr: {stderr}"
        harness_outcome, error = rollout.harness_outcome, rollout.error
        calls = list(session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.id)))
        chains = list(session.scalars(select(Chain).where(Chain.rollout_id == rollout_id)))
        patch = store.get_bytes(rollout.patch_key) if rollout.patch_key else b""

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    # Token faithfulness against what the upstream received: prompt k = prompt k-1 + sampled k-1 + suffix k.
    received = [request["prompt_ids"] for request in scripted_policy.requests]
    spliced: list[list[int]] = []
    seen: list[int] = []
    actions: list[int] = []  # per call: its tool calls, or its fenced command (a text-based agent's action)
    for call in calls:
        segment = load_segment(store, call.tokens_key)
        seen += segment.suffix_ids.tolist()
        spliced.append(list(seen))
        seen += segment.sampled_ids.tolist()
        answer = tokenizer.decode(segment.sampled_ids.tolist(), skip_special_tokens=True)
        actions.append(call.tool_call_count or answer.count(TEXT_ACTION))
    first_call, capture_error, stored_tokens, used_tools = None, None, None, set()
    try:
        first_call = captured_first_call(
            store, calls[0], harness, first_call_name, toy_task.problem_statement
        )
        stored = load_first_call(case) if first_call_path(case).is_file() else None
        if stored is not None and stored.version == first_call.version:
            stored_tokens = first_prompt_tokens(case, tiny_model_dir, toy_task.problem_statement)
        used_tools = tools_called(store, calls[-1])
    except Exception as exc:  # noqa: BLE001 - reported, then asserted below
        capture_error = f"{type(exc).__name__}: {exc}"
    report_chain_outcome(
        harness=case,
        status=outcome.status,
        harness_outcome=harness_outcome,
        error=error,
        calls=len(calls),
        tool_calls=sum(actions),
        chains=len(chains),
        forks=[c.fork_reason for c in chains if c.fork_reason],
        streamed=all(c.stream for c in calls),
        exact=received == spliced,
        first_prompt_tokens=len(received[0]) if received else None,
        first_prompt_tokens_captured=stored_tokens,
        file_written=b"+++ b/hello.txt" in patch and b"\n+hi\n" in patch,
    )

    assert outcome.status == "finished" and harness_outcome == "completed", detail
    # The file the agent wrote is the rollout's change.
    assert b"+++ b/hello.txt" in patch and b"\n+hi\n" in patch, patch.decode(errors="replace")
    # Write, run, read back, then the final answer: >= 4 calls, >= 3 of them tool calls, all in one chain.
    assert len(chains) == 1 and chains[0].fork_reason is None, [c.fork_reason for c in chains]
    assert [c.position for c in calls] == list(range(len(calls))) and len(calls) >= 4, detail
    assert sum(actions) >= 3, list(enumerate(actions))
    if options.first_call_name == "mini-swe-agent":  # text-based: every action is a fenced block
        assert sum(c.tool_call_count for c in calls) == 0 and actions == [1] * len(calls), actions
    assert all(c.fork_reason is None for c in calls)
    # The CLIs stream every call through the gateway (the reference agent and LiteLLM ask for whole answers).
    assert all(c.stream for c in calls) == (harness not in NOT_STREAMED), [c.stream for c in calls]
    assert len(received) == len(calls)
    for position, (prompt_ids, expected) in enumerate(zip(received, spliced, strict=True)):
        assert prompt_ids == expected, f"call {position}: the prompt is not the spliced chain"

    # Context fit counts a harness's first call the way the gateway renders it.
    assert first_call is not None, capture_error
    if case == "claude-code-bare":  # --bare offers three tools, and the agent used nothing else
        assert {tool["function"]["name"] for tool in first_call.tools} == BARE_TOOLS, first_call.tools
        assert used_tools <= BARE_TOOLS and len(used_tools) >= 2, used_tools
    if directory := os.environ.get("HARNESSRL_FIRST_PROMPT_DIR"):
        (Path(directory) / f"{first_call_name}.json.zst").write_bytes(first_call.encode())
    if case == "mini-swe-agent":
        assert not first_call.tools and TEXT_ACTION in str(first_call.messages[0]["content"])
    if case == "mini-swe-agent-toolcall":
        assert [tool["function"]["name"] for tool in first_call.tools] == ["bash"], first_call.tools
    messages, tools = first_call.with_instruction(toy_task.problem_statement)
    text = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=True
    )
    assert len(tokenizer.encode(text, add_special_tokens=False)) == len(received[0])
    if stored_tokens is not None:
        assert abs(stored_tokens - len(received[0])) <= 0.03 * len(received[0]), (
            stored_tokens,
            len(received[0]),
        )


def installed_version(harness: str) -> str:
    """The version of the harness CLI under the npm prefix or in its virtual environment (``built-in`` for the
    reference agent)."""
    pins = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "install-harnesses.sh"), "--list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in pins.splitlines():
        name, _bin, package, _pinned, registry, runtime = line.split()
        if name != harness:
            continue
        if registry == "pypi":
            python = mini_swe_agent_venv() / "bin" / "python"
            script = f"import importlib.metadata as m; print(m.version({package!r}))"
            return subprocess.run(
                [str(python), "-c", script], capture_output=True, text=True, check=True
            ).stdout.strip()
        # A harness on a runtime of its own is installed in the prefix's folder of that name.
        prefix = npm_prefix() if runtime == "node" else npm_prefix() / runtime
        manifest = prefix / "lib" / "node_modules" / package / "package.json"
        return str(json.loads(manifest.read_text())["version"])
    return "built-in"


def parsed_call(store, call: Call) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # type: ignore[no-untyped-def]
    """A call's request as the gateway parsed it, template-shaped: (messages, tools)."""
    raw = json.loads(
        zstandard.ZstdDecompressor().decompress(store.get_bytes(call.raw_key), max_output_size=1 << 28)
    )
    url_fields = (
        {"model": call.model_alias or "policy", "stream": call.stream}
        if call.provider_api == "gemini"
        else {}
    )
    conversation = ADAPTERS[call.provider_api].parse(raw["request"], **url_fields)  # type: ignore[index]
    return [message_to_template(m) for m in conversation.messages], [
        tool_to_template(t) for t in conversation.tools
    ]


def captured_first_call(store, call: Call, harness: str, name: str, instruction: str) -> FirstCall:  # type: ignore[no-untyped-def]
    """The harness's first model call as the gateway parsed it, template-shaped, the instruction marked, stored
    under ``name`` (``HarnessOptions.first_call_name``)."""
    messages, tools = parsed_call(store, call)
    text = json.dumps(messages, ensure_ascii=False)
    marked = json.loads(text.replace(json.dumps(instruction, ensure_ascii=False)[1:-1], INSTRUCTION_MARK))
    assert marked != messages, f"the instruction is not in {name}'s first call"
    return FirstCall(name, installed_version(harness), marked, tools)


def tools_called(store, last_call: Call) -> set[str]:  # type: ignore[no-untyped-def]
    """The names of the tools the agent called, from the history its last call echoes."""
    messages, _ = parsed_call(store, last_call)
    return {tc["function"]["name"] for m in messages for tc in m.get("tool_calls") or []}


def report_chain_outcome(**facts: object) -> None:
    """Append this run's facts as a JSON line to ``$HARNESSRL_CHAIN_REPORT`` when set (the harness-version drift
    check, ``scripts/check-harness-versions.sh``, reads them); written before the assertions so a failing
    harness is reported too."""
    path = os.environ.get("HARNESSRL_CHAIN_REPORT")
    if path:
        with open(path, "a") as report:
            report.write(json.dumps(facts) + "\n")


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
    _, _, [rollout_id] = make_rollouts(toy_task, {"name": "shell", "command": command})
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


def test_claude_code_stops_at_its_turn_budget_as_a_completed_rollout(  # type: ignore[no-untyped-def]
    scripted_gateway, scripted_policy, sandbox, db, store, toy_task, make_rollouts
):
    """``max_turns`` 2 on the default script (write, run, read back, say done: four calls): the real CLI stops
    after its second model call, and the rollout is a completed one whose reason says the budget was spent."""
    section = {"name": "claude-code", "bare": True, "max_turns": 2}
    _, _, [rollout_id] = make_rollouts(toy_task, section)
    attempt = claim(scripted_gateway.settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    outcome = execute_attempt(scripted_gateway.settings, db, store, sandbox, attempt)
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        stdout = store.get_bytes(f"{rollout.logs_key}/harness.stdout").decode()[-2000:]
        calls = session.scalars(select(Call).where(Call.rollout_id == rollout_id)).all()
        verdict = (outcome.status, rollout.harness_outcome, rollout.error, len(calls))
    assert verdict[:2] == ("finished", "completed"), (verdict, stdout)
    assert len(calls) == 2 and '"subtype":"error_max_turns"' in stdout.replace(" ", ""), (verdict, stdout)
