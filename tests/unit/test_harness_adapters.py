"""Harness adapters: each one binds its CLI to the gateway with the rollout key, and classifies outcomes
(a CLI that exits 0 after an API error is a harness error)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from services.runner.harnesses import ADAPTERS, HARNESS_NAMES, UnknownHarness, make_adapter
from services.runner.harnesses.base import (
    HarnessNotInstalled,
    HarnessRequest,
    HarnessRunResult,
    HarnessVerdict,
)
from services.runner.harnesses.reference_agent import run_tool
from shared.harnesses import HARNESS_OPTIONS, NAME_ALONE, ShellOptions, harness_config

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
    assert "--bare" not in launch.argv


def test_claude_bare_option_passes_bare_and_keeps_the_gateway_binding() -> None:
    bare = make_adapter("claude-code", {"bare": True}).launch(REQUEST)
    default = make_adapter("claude-code").launch(REQUEST)
    assert bare.argv == [*default.argv, "--bare"] and bare.env == default.env and bare.files == default.files
    with pytest.raises(ValueError, match="bare"):
        make_adapter("claude-code", {"bare": "true"})  # strict: a string is not a boolean


def test_claude_turn_budget_passes_max_turns_and_ends_as_a_completed_rollout() -> None:
    adapter = make_adapter("claude-code", {"bare": True, "max_turns": 6})
    assert adapter.launch(REQUEST).argv[-3:] == ["--bare", "--max-turns", "6"]
    spent = '{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":7}'
    assert adapter.classify(HarnessRunResult(1, False, spent, "")) == HarnessVerdict(
        "completed", "turn budget of 6 spent"
    )
    # a kill at the time limit stays a timeout, and a crash after the result stays a failure
    assert adapter.classify(HarnessRunResult(None, True, spent, "")).outcome == "timeout"
    assert adapter.classify(HarnessRunResult(139, False, spent, "")).outcome == "harness_error"
    for bad in (0, "6"):
        with pytest.raises(ValueError, match="max_turns"):
            make_adapter("claude-code", {"max_turns": bad})


def test_qwen_and_pi_use_the_chat_api_under_the_prefix() -> None:
    qwen = make_adapter("qwen-code").launch(REQUEST)
    assert qwen.env["OPENAI_BASE_URL"] == f"{REQUEST.base_url}/v1"
    assert json.loads(qwen.files[".qwen/settings.json"])["privacy"]["usageStatisticsEnabled"] is False
    pi = make_adapter("pi").launch(REQUEST)
    provider = json.loads(pi.files[".pi/agent/models.json"])["providers"]["gw"]
    assert (provider["baseUrl"], provider["apiKey"]) == (f"{REQUEST.base_url}/v1", "rk_secret")
    assert json.loads(pi.files[".pi/agent/settings.json"]) == {"retry": {"enabled": False}}


def test_gemini_points_its_client_at_the_gateway_offline() -> None:
    launch = make_adapter("gemini").launch(REQUEST)
    assert launch.env["GOOGLE_GEMINI_BASE_URL"] == REQUEST.base_url  # the client appends /v1beta/models/...
    assert launch.env["GEMINI_API_KEY"] == "rk_secret" and launch.env["GEMINI_CLI_NO_RELAUNCH"] == "true"
    settings = json.loads(launch.files[".gemini/settings.json"])
    # 0.61.0 refuses its implicit "gateway" auth type headless; the API-key type uses the same base URL.
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert (
        settings["privacy"]["usageStatisticsEnabled"] is False and settings["telemetry"]["enabled"] is False
    )
    assert settings["general"]["enableAutoUpdate"] is False and settings["general"]["maxAttempts"] == 1
    # no network in the sandbox
    assert {"google_web_search", "web_fetch"} <= set(settings["tools"]["exclude"])
    assert launch.argv[launch.argv.index("-m") + 1] == "policy"  # a named model bypasses the router side call
    assert launch.argv[-1] == f"--prompt={REQUEST.instruction}" and "--yolo" in launch.argv


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
    with pytest.raises(ValueError, match="command\n  Field required"):
        make_adapter("shell")


def test_reference_agent_source_travels_in_home() -> None:
    launch = make_adapter("reference").launch(REQUEST)
    assert launch.argv[1] == "/home/sandbox/reference_agent.py"
    assert "def run_agent" in launch.files["reference_agent.py"]
    assert launch.argv[launch.argv.index("--api-key") + 1] == "rk_secret"


def test_shell_options_bring_mounts_a_home_template_and_placeholder_env() -> None:
    options = {
        "command": "{model} --key {api_key} {instruction}",
        "mounts": ["/opt/agents/qwen", "/opt/agents/venv"],
        "home_template": "/opt/agents/home",
        "env": {
            "AGENT_URL": "{base_url}",
            "AGENT_TASK": "task: {instruction}",
            "LITERAL": "{not_a_placeholder}",
        },
        "provider_api": "anthropic_messages",
    }
    launch = make_adapter("shell", options).launch(REQUEST)
    assert launch.ro_paths == [Path("/opt/agents/qwen"), Path("/opt/agents/venv")]
    assert launch.home_template == Path("/opt/agents/home")
    assert launch.env["AGENT_URL"] == REQUEST.base_url  # Anthropic's SDK appends /v1/messages itself
    assert launch.env["AGENT_TASK"] == f"task: {REQUEST.instruction}"  # raw in the environment
    assert launch.env["LITERAL"] == "{not_a_placeholder}"
    assert launch.argv[-1].startswith("policy --key rk_secret 'fix the bug;")  # quoted in the command
    chat = make_adapter("shell", {**options, "provider_api": "openai_chat"}).launch(REQUEST)
    assert chat.env["AGENT_URL"] == f"{REQUEST.base_url}/v1"
    with pytest.raises(ValueError, match="environment variable name"):
        make_adapter("shell", {**options, "env": {"NOT-A-NAME": "x"}})
    with pytest.raises(ValueError, match="absolute host path"):
        make_adapter("shell", {**options, "mounts": ["relative/path"]})


def test_unknown_harness_is_named() -> None:
    with pytest.raises(UnknownHarness, match="choose one of"):
        make_adapter("cursor")
    assert set(HARNESS_NAMES) == {
        "codex",
        "claude-code",
        "qwen-code",
        "pi",
        "gemini",
        "mini-swe-agent",
        "shell",
        "reference",
        "codeblock",
    }


def test_one_registry_names_every_harness_with_its_options_and_adapter() -> None:
    """``shared/harnesses.py`` lists the names and option models; the runner has an adapter for each, built from
    the validated options section of a run config."""
    assert tuple(HARNESS_OPTIONS) == tuple(ADAPTERS) == HARNESS_NAMES
    for name in NAME_ALONE:
        assert make_adapter(harness_config(name)).name == name
    shell = make_adapter(ShellOptions(command="agent {instruction}"))
    assert shell.launch(REQUEST).argv[-1] == "agent 'fix the bug; don'\"'\"'t break '\"'\"'quotes'\"'\"''"
    reference = make_adapter(harness_config("reference", max_turns=7))
    assert reference.launch(REQUEST).argv[reference.launch(REQUEST).argv.index("--max-turns") + 1] == "7"
    with pytest.raises(ValueError, match="max_turns"):
        make_adapter("reference", {"max_turns": "7"})  # strict: no coercion from strings


@pytest.mark.parametrize(
    ("harness", "stdout", "outcome"),
    [
        ("qwen-code", '{"type":"result","is_error":false,"result":"[API Error: Connection error.]"}', "harness_error"),
        ("qwen-code", '[{"type":"system"},{"type":"result","is_error":false,"result":"done"}]', "completed"),
        ("qwen-code", '[{"type":"result","subtype":"error_during_execution","is_error":true,"error":{"message":"[API Error: 401]"}}]', "harness_error"),
        ("claude-code", '{"type":"result","subtype":"success","is_error":false,"result":"done"}', "completed"),
        ("claude-code", '{"type":"result","subtype":"success","is_error":true,"result":"API Error: 401"}', "harness_error"),
        ("codex", '{"type":"thread.started"}\n{"type":"turn.completed","usage":{}}', "completed"),
        ("codex", '{"type":"turn.failed","error":{"message":"stream closed"}}', "harness_error"),
        ("codex", '{"type":"thread.started"}', "harness_error"),
        ("pi", '{"type":"agent_end","messages":[]}', "completed"),
        ("pi", '{"type":"message_end","message":{"role":"assistant","stopReason":"error","errorMessage":"401"}}', "harness_error"),
        ("reference", '{"finish": "stop", "turns": 3}', "completed"),
        ("gemini", '{\n  "session_id": "s",\n  "response": "done",\n  "stats": {}\n}', "completed"),
        ("gemini", '{"session_id": "s", "error": {"type": "Error", "message": "[API Error: 503]"}}', "harness_error"),
        ("gemini", "Warning: Basic terminal detected", "harness_error"),
        ("mini-swe-agent", "\nExit:\n\nSaved trajectory to \n'/home/x/last_mini_run.traj.json'\n", "completed"),
    ],
)  # fmt: skip
def test_exit_zero_is_judged_by_what_the_cli_printed(harness: str, stdout: str, outcome: str) -> None:
    options = {"command": "x {instruction}"} if harness == "shell" else None
    assert make_adapter(harness, options).classify(ok(stdout)).outcome == outcome


def test_qwen_024_error_object_is_the_reason() -> None:
    stdout = '[{"type":"result","is_error":true,"error":{"message":"[API Error: 401 unknown rollout key]"}}]'
    verdict = make_adapter("qwen-code").classify(ok(stdout))
    assert (
        verdict.outcome == "harness_error" and verdict.reason == "qwen: [API Error: 401 unknown rollout key]"
    )


def test_gemini_error_on_stderr_is_the_reason() -> None:
    stderr = (
        "YOLO mode is enabled. All tool calls will be automatically approved.\n"
        '{\n  "session_id": "s",\n  "error": {"type": "Error", "message": "Invalid auth method selected.", "code": 41}\n}\n'
    )
    verdict = make_adapter("gemini").classify(HarnessRunResult(41, False, "", stderr))
    assert verdict.outcome == "harness_error" and verdict.reason == "gemini 41: Invalid auth method selected."


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


def mini_venv(root: Path) -> Path:
    """The layout of an installed mini-swe-agent venv, as the adapter looks it up (its entry point and configs)."""
    venv = root / "mini-swe-agent"
    configs = venv / "lib" / "python3.11" / "site-packages" / "minisweagent" / "config"
    configs.mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "mini").write_text("#!/bin/sh\n")
    for name in ("mini", "mini_textbased"):
        (configs / f"{name}.yaml").write_text("agent: {}\n")
    return venv


def test_mini_swe_agent_runs_a_shipped_config_by_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESSRL_RECIPES_DIR", str(tmp_path))
    adapter = make_adapter("mini-swe-agent", {"step_limit": 7})
    with pytest.raises(HarnessNotInstalled, match="install-recipe-agents.sh"):
        adapter.check_installed()
    venv = mini_venv(tmp_path)
    adapter.check_installed()
    launch = adapter.launch(REQUEST)
    argv = launch.argv
    configs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    # the shipped text-based config by its absolute path (a bare name is looked up in the task's checkout first)
    assert configs[0] == str(venv / "lib/python3.11/site-packages/minisweagent/config/mini_textbased.yaml")
    assert "agent.step_limit=7" in configs and "model.cost_tracking=ignore_errors" in configs
    assert argv[argv.index("--model-class") + 1] == "litellm_textbased"
    assert argv[argv.index("--model") + 1] == "openai/policy" and argv[-2:] == ["--task", REQUEST.instruction]
    assert {"--yolo", "--exit-immediately"} <= set(argv) and argv[argv.index("--cost-limit") + 1] == "0"
    assert (
        launch.env["OPENAI_BASE_URL"] == f"{REQUEST.base_url}/v1"
        and launch.env["OPENAI_API_KEY"] == "rk_secret"
    )
    assert launch.env["MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT"] == "1" and launch.ro_paths == [venv]
    toolcall = make_adapter("mini-swe-agent", {"config": "mini"}).launch(REQUEST).argv
    assert toolcall[toolcall.index("--model-class") + 1] == "litellm" and toolcall[2].endswith(
        "/config/mini.yaml"
    )
    with pytest.raises(ValueError, match="config"):
        make_adapter("mini-swe-agent", {"config": "swebench"})  # only the configs the harness is tested with


def test_mini_swe_agent_says_why_it_stopped_without_submitting() -> None:
    adapter = make_adapter("mini-swe-agent", {"step_limit": 5})
    printed = (
        "mini-swe-agent (step 5, $0.00):\nls\n\nExit:\nLimitsExceeded\nSaved trajectory to \n'/h/t.json'\n"
    )
    assert adapter.classify(ok(printed)) == HarnessVerdict("completed", "step limit of 5 reached")
    assert adapter.classify(ok("\nExit:\nRepeatedFormatError\n")).reason is not None
    traceback = (
        "Traceback (most recent call last):\n  ...\nlitellm.exceptions.APIConnectionError: first\n\n"
        "During handling of the above exception, another exception occurred:\n\nTraceback ...\n"
        "litellm.exceptions.ServiceUnavailableError: litellm.ServiceUnavailableError: upstream\ndown\n"
    )
    failed = adapter.classify(HarnessRunResult(1, False, "", traceback))
    assert failed == HarnessVerdict(
        "harness_error",
        "mini-swe-agent 503: ServiceUnavailableError: litellm.ServiceUnavailableError: upstream down",
    )
    crashed = adapter.classify(HarnessRunResult(1, False, "", "Traceback ...\nValueError: no model"))
    assert crashed.outcome == "harness_error" and "ValueError: no model" in (crashed.reason or "")


def test_reference_agent_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_tool("write", json.dumps({"path": "sub/a.txt", "content": "hi\n"}), 10).startswith("wrote 3")
    assert run_tool("read", json.dumps({"path": "sub/a.txt"}), 10) == "hi\n"
    assert run_tool("bash", json.dumps({"command": "cat sub/a.txt; exit 4"}), 10) == "exit code: 4\nhi\n"
    assert run_tool("bash", "{not json", 10).startswith("error: arguments are not valid JSON")
    assert run_tool("read", json.dumps({"path": "missing"}), 10).startswith("error:")
    assert run_tool("delete", "{}", 10).startswith("error: unknown tool")


def test_codeblock_launches_its_agent_with_one_call_budget(tmp_path: Path) -> None:
    adapter = make_adapter("codeblock", {"max_tokens": 200})
    request = HarnessRequest("fix it", "policy", "http://127.0.0.1:9/r/key", "key", tmp_path, tmp_path)
    launch = adapter.launch(request)
    assert launch.argv[1] == str(tmp_path / "codeblock_agent.py") and launch.argv[-1] == "fix it"
    assert launch.argv[launch.argv.index("--max-tokens") + 1] == "200"
    assert launch.argv[launch.argv.index("--base-url") + 1] == "http://127.0.0.1:9/r/key/v1"
    assert "def apply_reply" in launch.files["codeblock_agent.py"]
    ok = adapter.classify(HarnessRunResult(0, False, '{"finish": "stop", "replaced": []}\n', ""))
    assert ok.outcome == "completed"
    assert adapter.classify(HarnessRunResult(1, False, "", "API error")).outcome == "harness_error"
