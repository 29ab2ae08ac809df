"""Harness adapters: each one binds its CLI to the gateway with the rollout key, and classifies outcomes
(a CLI that exits 0 after an API error is a harness error)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from services.runner.harnesses import HARNESS_NAMES, UnknownHarness, make_adapter
from services.runner.harnesses.base import HarnessRequest, HarnessRunResult
from services.runner.harnesses.reference_agent import run_tool

pytestmark = pytest.mark.unit

REQUEST = HarnessRequest(
    instruction="fix the bug; don't break 'quotes'",
    model="policy",
    base_url="http://127.0.0.1:8301/r/rk_secret",
    rollout_key="rk_secret",
    home=Path("/home/sandbox"),
    workspace=Path("/workspace"),
)


def ok(stdout: str) -> HarnessRunResult:
    return HarnessRunResult(exit_code=0, timed_out=False, stdout=stdout, stderr="")


def test_codex_config_points_at_gateway_with_fail_fast_retries() -> None:
    launch = make_adapter("codex").launch(REQUEST)
    config = tomllib.loads(launch.files[".codex/config.toml"])
    provider = config["model_providers"]["gw"]
    assert provider["base_url"] == "http://127.0.0.1:8301/r/rk_secret/v1"
    assert (provider["request_max_retries"], provider["stream_max_retries"]) == (0, 0)
    assert config["features"]["unbounded_connection_retries"] is False
    assert launch.env["GW_KEY"] == "rk_secret" and launch.env["CODEX_HOME"] == "/home/sandbox/.codex"
    assert not launch.env["CODEX_HOME"].startswith(launch.env["TMPDIR"])  # Codex refuses helpers under TMPDIR
    assert launch.argv[0] == "codex" and launch.argv[-1] == REQUEST.instruction


def test_claude_env_binds_anthropic_base_url_without_v1() -> None:
    launch = make_adapter("claude-code").launch(REQUEST)
    assert launch.env["ANTHROPIC_BASE_URL"] == REQUEST.base_url
    assert launch.env["ANTHROPIC_API_KEY"] == "rk_secret"
    assert launch.env["CLAUDE_CODE_MAX_RETRIES"] == "0" and launch.env["IS_SANDBOX"] == "1"
    assert "--dangerously-skip-permissions" in launch.argv


def test_qwen_and_pi_use_the_chat_api_under_the_prefix() -> None:
    qwen = make_adapter("qwen-code").launch(REQUEST)
    assert qwen.env["OPENAI_BASE_URL"] == f"{REQUEST.base_url}/v1"
    assert json.loads(qwen.files[".qwen/settings.json"])["privacy"]["usageStatisticsEnabled"] is False
    pi = make_adapter("pi").launch(REQUEST)
    provider = json.loads(pi.files[".pi/agent/models.json"])["providers"]["gw"]
    assert (provider["baseUrl"], provider["apiKey"]) == (f"{REQUEST.base_url}/v1", "rk_secret")
    assert json.loads(pi.files[".pi/agent/settings.json"]) == {"retry": {"enabled": False}}


def test_shell_quotes_the_instruction_and_exports_every_provider() -> None:
    launch = make_adapter("shell", {"command": "echo {instruction} > out.txt"}).launch(REQUEST)
    assert launch.argv == [
        "/bin/sh",
        "-c",
        "echo 'fix the bug; don'\"'\"'t break '\"'\"'quotes'\"'\"'' > out.txt",
    ]
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        assert launch.env[name] == "rk_secret"
    with pytest.raises(ValueError, match="instruction"):
        make_adapter("shell", {"command": "echo hi"})


def test_reference_agent_source_travels_in_home() -> None:
    launch = make_adapter("reference").launch(REQUEST)
    assert launch.argv[1] == "/home/sandbox/reference_agent.py"
    assert "def run_agent" in launch.files["reference_agent.py"]
    assert launch.argv[launch.argv.index("--api-key") + 1] == "rk_secret"


def test_unknown_harness_is_named() -> None:
    with pytest.raises(UnknownHarness, match="choose one of"):
        make_adapter("cursor")
    assert set(HARNESS_NAMES) == {"codex", "claude-code", "qwen-code", "pi", "shell", "reference"}


@pytest.mark.parametrize(
    ("harness", "stdout", "outcome"),
    [
        ("qwen-code", '{"type":"result","is_error":false,"result":"[API Error: Connection error.]"}', "harness_error"),
        ("qwen-code", '[{"type":"system"},{"type":"result","is_error":false,"result":"done"}]', "completed"),
        ("claude-code", '{"type":"result","subtype":"success","is_error":false,"result":"done"}', "completed"),
        ("claude-code", '{"type":"result","subtype":"success","is_error":true,"result":"API Error: 401"}', "harness_error"),
        ("codex", '{"type":"thread.started"}\n{"type":"turn.completed","usage":{}}', "completed"),
        ("codex", '{"type":"turn.failed","error":{"message":"stream closed"}}', "harness_error"),
        ("codex", '{"type":"thread.started"}', "harness_error"),
        ("pi", '{"type":"agent_end","messages":[]}', "completed"),
        ("pi", '{"type":"message_end","message":{"role":"assistant","stopReason":"error","errorMessage":"401"}}', "harness_error"),
        ("reference", '{"finish": "stop", "turns": 3}', "completed"),
    ],
)  # fmt: skip
def test_exit_zero_is_judged_by_what_the_cli_printed(harness: str, stdout: str, outcome: str) -> None:
    options = {"command": "x {instruction}"} if harness == "shell" else None
    assert make_adapter(harness, options).classify(ok(stdout)).outcome == outcome


def test_timeouts_and_nonzero_exits_are_not_success() -> None:
    adapter = make_adapter("shell", {"command": "run {instruction}"})
    assert adapter.classify(HarnessRunResult(None, True, "", "")).outcome == "timeout"
    verdict = adapter.classify(HarnessRunResult(127, False, "", "sh: run: not found"))
    assert verdict.outcome == "harness_error" and "not found" in (verdict.reason or "")
    reference = make_adapter("reference", {"max_turns": 5})
    assert (
        reference.classify(HarnessRunResult(3, False, '{"finish": "max_turns"}', "")).outcome == "completed"
    )
    assert (
        reference.classify(HarnessRunResult(1, False, "", "API error: HTTP 401")).outcome == "harness_error"
    )


def test_reference_agent_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_tool("write", json.dumps({"path": "sub/a.txt", "content": "hi\n"}), 10).startswith("wrote 3")
    assert run_tool("read", json.dumps({"path": "sub/a.txt"}), 10) == "hi\n"
    assert run_tool("bash", json.dumps({"command": "cat sub/a.txt; exit 4"}), 10) == "exit code: 4\nhi\n"
    assert run_tool("bash", "{not json", 10).startswith("error: arguments are not valid JSON")
    assert run_tool("read", json.dumps({"path": "missing"}), 10).startswith("error:")
    assert run_tool("delete", "{}", 10).startswith("error: unknown tool")
