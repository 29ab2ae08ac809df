"""Codex CLI (``@openai/codex`` 0.171.0): OpenAI Responses API, ``codex exec --json``.

Fail-fast knobs (docs/harnesses.md#codex-cli): ``unbounded_connection_retries`` off and zero request/stream retries,
else an unreachable gateway hangs it forever; plugins/apps/remote plugin off, else it reaches github.com and
chatgpt.com. ``CODEX_HOME`` must not lie under ``TMPDIR``. Our sandbox replaces Codex's own, so approvals and its
sandbox are bypassed.
"""

from __future__ import annotations

from typing import Any

from services.runner.harnesses.base import (
    HarnessLaunch,
    HarnessRequest,
    HarnessRunResult,
    HarnessVerdict,
    base_env,
    generic_failure,
    json_lines,
    npm_prefix,
    require_npm_binary,
)

DISABLED_FEATURES = (
    "plugins",
    "remote_plugin",
    "apps",
    "goals",
    "skill_search",
    "tool_suggest",
    "unbounded_connection_retries",
)


def config_toml(request: HarnessRequest) -> str:
    features = "\n".join(f"{name} = false" for name in DISABLED_FEATURES)
    return f"""model = "{request.model}"
model_provider = "gw"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.gw]
name = "gw"
base_url = "{request.base_url}/v1"
env_key = "GW_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
{features}

[agents]
enabled = false

[analytics]
enabled = false

[feedback]
enabled = false
"""


class CodexAdapter:
    name = "codex"

    def check_installed(self) -> None:
        require_npm_binary("codex")

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        env = base_env(request) | {"GW_KEY": request.rollout_key, "CODEX_HOME": str(request.home / ".codex")}
        argv = [
            "codex", "exec", "--skip-git-repo-check", "--ephemeral", "--json",
            "--dangerously-bypass-approvals-and-sandbox", "-m", request.model,
            *(arg for name in DISABLED_FEATURES for arg in ("--disable", name)),
            request.instruction,
        ]  # fmt: skip
        return HarnessLaunch(argv, env, {".codex/config.toml": config_toml(request)}, [npm_prefix()])

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        events = list(json_lines(result.stdout))
        if failure := generic_failure(result, reported_error(events)):
            return failure
        if not any(event.get("type") == "turn.completed" for event in events):
            return HarnessVerdict("harness_error", "codex exited 0 without a turn.completed event")
        return HarnessVerdict("completed")


def reported_error(events: list[dict[str, Any]]) -> str | None:
    """The message of the first ``turn.failed`` or ``error`` event of ``codex exec --json``."""
    for event in events:
        if event.get("type") in ("turn.failed", "error"):
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else event.get("message")
            return f"codex {event['type']}: {message}"
    return None
