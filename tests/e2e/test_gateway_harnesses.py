"""The real CLIs (Codex, Claude Code, Qwen Code, Pi, Gemini CLI) straight against the gateway, backed by the scripted policy:
each writes a file, runs a command and reads the file back (three tool calls), exits 0, and its calls form ONE
chain whose every prompt is the previous prompt + the previous sampled ids + the new suffix. The drift rate (calls
whose from-scratch render differs from the spliced prompt) is measured per harness and printed, with a policy
that formats tool calls like the chat template and with one that does not.

The CLIs run directly here (throwaway HOME, the workdir as cwd, no sandbox): this tests the gateway's protocol
fidelity; the runner's e2e tests drive the same CLIs through the sandbox and the Celery worker. Commands and
settings follow ``docs/harnesses.md``. The CLIs come from ``scripts/install-harnesses.sh``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from shared.db import session_scope
from shared.models import Call, Chain
from shared.trajectory import load_chain
from tests.fixtures.gateway import settle_gateways

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NPM_BIN = Path(os.environ.get("HARNESSRL_NPM_PREFIX", "/opt/harnessrl/npm")) / "bin"
PROMPT = "Create hello.txt containing hi, show it with cat, then read it back."


def binary(name: str) -> str:
    path = NPM_BIN / name
    if not path.exists() and shutil.which(name) is None:
        pytest.skip(f"{name} is not installed; run scripts/install-harnesses.sh")
    return str(path if path.exists() else shutil.which(name))


def codex(url: str, key: str, home: Path) -> tuple[list[str], dict[str, str]]:
    provider = (
        f'model_providers.gw={{name="gw",base_url="{url}/v1",env_key="GW_KEY",wire_api="responses",'
        "request_max_retries=0,stream_max_retries=0}"
    )
    argv = [
        binary("codex"), "exec", "--skip-git-repo-check", "--ephemeral", "--json",
        "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5.5", "-c", "model_provider=gw", "-c", provider,
        "-c", "check_for_update_on_startup=false", "-c", "web_search=disabled", "-c", "analytics.enabled=false",
        "-c", "feedback.enabled=false", "-c", "agents.enabled=false", "--disable", "plugins", "--disable",
        "remote_plugin", "--disable", "apps", "--disable", "goals", "--disable", "skill_search", "--disable",
        "tool_suggest", "--disable", "unbounded_connection_retries", PROMPT,
    ]  # fmt: skip
    (home / "tmp").mkdir()
    (home / ".codex").mkdir()
    return argv, {"GW_KEY": key, "CODEX_HOME": str(home / ".codex"), "TMPDIR": str(home / "tmp")}


def claude(url: str, key: str, home: Path) -> tuple[list[str], dict[str, str]]:
    env = {
        "ANTHROPIC_BASE_URL": f"{url}/r/{key}",
        "ANTHROPIC_API_KEY": key,
        **{
            name: "policy"
            for name in (
                "ANTHROPIC_MODEL",
                "ANTHROPIC_DEFAULT_OPUS_MODEL",
                "ANTHROPIC_DEFAULT_SONNET_MODEL",
                "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                "ANTHROPIC_SMALL_FAST_MODEL",
                "CLAUDE_CODE_SUBAGENT_MODEL",
            )  # fmt: skip
        },
        **{
            name: "1"
            for name in (
                "IS_SANDBOX",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "DISABLE_TELEMETRY",
                "DISABLE_ERROR_REPORTING",
                "DISABLE_AUTOUPDATER",
                "DISABLE_UPDATES",
                "DISABLE_GROWTHBOOK",
                "DISABLE_INSTALLATION_CHECKS",
                "DISABLE_PROMPT_CACHING",
                "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK",
            )  # fmt: skip
        },
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
    }
    argv = [binary("claude"), "-p", PROMPT, "--dangerously-skip-permissions", "--output-format", "json", "--no-session-persistence"]  # fmt: skip
    return argv, env


def qwen(url: str, key: str, home: Path) -> tuple[list[str], dict[str, str]]:
    (home / ".qwen").mkdir()
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": "policy"},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False},
        "tools": {"approvalMode": "yolo"},
    }
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
    env = {
        "OPENAI_API_KEY": key,
        "OPENAI_BASE_URL": f"{url}/v1",
        "OPENAI_MODEL": "policy",
        "QWEN_CODE_NO_RELAUNCH": "1",
    }
    return [
        binary("qwen"),
        "--auth-type",
        "openai",
        "--approval-mode",
        "yolo",
        "--output-format",
        "json",
        PROMPT,
    ], env


def pi(url: str, key: str, home: Path) -> tuple[list[str], dict[str, str]]:
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True)
    models = {"providers": {"gw": {"baseUrl": f"{url}/v1", "api": "openai-completions", "apiKey": key, "models": [{"id": "policy", "reasoning": False}]}}}  # fmt: skip
    (agent / "models.json").write_text(json.dumps(models))
    (agent / "settings.json").write_text(json.dumps({"retry": {"enabled": False}}))
    env = {"PI_OFFLINE": "1", "PI_TELEMETRY": "0", "PI_SKIP_VERSION_CHECK": "1"}
    return [
        binary("pi"),
        "-p",
        "--offline",
        "--no-session",
        "--provider",
        "gw",
        "--model",
        "policy",
        PROMPT,
    ], env


def gemini(url: str, key: str, home: Path) -> tuple[list[str], dict[str, str]]:
    (home / ".gemini").mkdir()
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
        "model": {"name": "policy", "skipNextSpeakerCheck": True},
        "tools": {"exclude": ["google_web_search", "web_fetch"], "useRipgrep": False},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = {
        "GOOGLE_GEMINI_BASE_URL": f"{url}/r/{key}",
        "GEMINI_API_KEY": key,
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }
    argv = [binary("gemini"), "--yolo", "--skip-trust", "--output-format", "json", "-m", "policy", f"--prompt={PROMPT}"]  # fmt: skip
    return argv, env


HARNESSES = {"codex": codex, "claude-code": claude, "qwen-code": qwen, "pi": pi, "gemini": gemini}


def settled_calls(db, rollout_id: str, answered: int) -> tuple[list[Call], list[Chain]]:  # type: ignore[no-untyped-def]
    """The rollout's calls and chains once all ``answered`` calls are recorded with their drift check: the gateway
    replies first and records behind, so a CLI can exit before its last call's rows are written (the runner
    waits on the gateway's flush barrier; this test runs the CLI by hand, so it drains the gateway's writer)."""
    settle_gateways()
    deadline = time.monotonic() + 10
    while True:
        with session_scope(db) as session:
            calls = list(session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.id)))
            chains = list(session.scalars(select(Chain).where(Chain.rollout_id == rollout_id)))
        settled = len(calls) >= answered and all(c.retemplate_drift is not None for c in calls)
        if settled or time.monotonic() > deadline:
            return calls, chains
        time.sleep(0.1)


@pytest.mark.parametrize("style", ["template", "compact"])
@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_real_cli_through_gateway_is_one_exact_chain(
    gateway_server, scripted_policy, make_rollout, db, store, tmp_path, harness, style
):  # type: ignore[no-untyped-def]
    """``style``: the policy writes tool-call JSON as the chat template would (``template``) or without spaces
    (``compact``, a model whose formatting differs from the template: every re-render after a tool call drifts)."""
    scripted_policy.policy.compact_tool_calls = style == "compact"
    ref = make_rollout(harness)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    argv, extra_env = HARNESSES[harness](gateway_server.url, ref.rollout_key, home)
    env = {
        "PATH": f"{NPM_BIN}:{os.environ['PATH']}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        **extra_env,
    }
    result = subprocess.run(
        argv, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert "[API Error" not in result.stdout
    assert (work / "hello.txt").read_text().strip() == "hi"

    calls, chains = settled_calls(db, ref.rollout_id, len(scripted_policy.requests))
    assert len(chains) == 1, [(c.id, c.fork_reason, c.n_calls) for c in chains]
    assert len(calls) >= 4 and [c.position for c in calls] == list(range(len(calls)))
    assert all(c.stream for c in calls), "every harness streams its model calls"
    assert sum(c.tool_call_count for c in calls) >= 3
    chain = load_chain(store, calls)
    ids = chain.ids
    sent = [r["prompt_ids"] for r in scripted_policy.requests]
    assert len(sent) == len(calls)
    for position, prompt in enumerate(sent):
        # every prompt is exactly the chain so far: previous prompt + previous sampled ids + the new suffix
        assert prompt == ids[: chain.prompt_length(position)].tolist()
    drifted = [c.retemplate_drift for c in calls]
    assert None not in drifted
    assert drifted[0] is False  # a first call is a full render: nothing to drift from
    if style == "compact":  # the splice kept the model's own bytes where a re-render would have changed them
        assert all(drifted[1:])
    rate = sum(bool(d) for d in drifted) / len(drifted)
    print(
        f"\n{harness} ({style}): {len(calls)} calls, one chain, drift rate {rate:.2f} ({sum(map(bool, drifted))}/{len(drifted)})"
    )
