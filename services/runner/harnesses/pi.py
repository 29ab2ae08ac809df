"""Pi (``@earendil-works/pi-coding-agent`` 1.6.0): OpenAI Chat API through a custom provider in models.json.

It needs Node >= 22.19: ``scripts/install-harnesses.sh`` installs it with its own Node 22 and makes ``pi`` a
wrapper that runs it so, which is all the adapter sees.

Retries are off in ``~/.pi/agent/settings.json`` (default 3 with backoff, ~20 s against a dead gateway). ``--mode
json`` gives an event stream whose final ``agent_end`` tells a clean finish from an API error that Pi reports
as the last assistant message's ``stopReason: "error"``.
"""

from __future__ import annotations

import json

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


def models_json(request: HarnessRequest) -> str:
    provider = {
        "baseUrl": f"{request.base_url}/v1",
        "api": "openai-completions",
        "apiKey": request.rollout_key,
        "models": [{"id": request.model, "reasoning": False}],
    }
    return json.dumps({"providers": {"gw": provider}}, indent=2)


class PiAdapter:
    name = "pi"

    def check_installed(self) -> None:
        require_npm_binary("pi")

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        env = base_env(request) | {"PI_OFFLINE": "1", "PI_TELEMETRY": "0", "PI_SKIP_VERSION_CHECK": "1"}
        argv = [
            "pi", "-p", "--offline", "--no-session", "--mode", "json", "--provider", "gw", "--model", request.model,
            request.instruction,
        ]  # fmt: skip
        files = {
            ".pi/agent/models.json": models_json(request),
            ".pi/agent/settings.json": json.dumps({"retry": {"enabled": False}}),
        }
        return HarnessLaunch(argv, env, files, [npm_prefix()])

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        return generic_failure(result, reported_error(result.stdout)) or HarnessVerdict("completed")


def reported_error(stdout: str) -> str | None:
    """Pi reports an API error as an assistant message with ``stopReason: "error"``."""
    for event in json_lines(stdout):
        message = event.get("message")
        if isinstance(message, dict) and message.get("stopReason") == "error":
            return f"pi: {message.get('errorMessage') or 'API error'}"
    return None
