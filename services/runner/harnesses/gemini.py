"""Gemini CLI (``@google/gemini-cli`` 0.61.0): Gemini ``streamGenerateContent``, one-shot ``gemini -p``.

Base URL: the CLI's content generator (and ``@google/genai`` under it) reads ``GOOGLE_GEMINI_BASE_URL`` and keeps
its path prefix, appending ``/v1beta/models/<model>:streamGenerateContent?alt=sse``; the key goes out as
``x-goog-api-key``. Setting that variable also makes the CLI pick its ``gateway`` auth type, which 0.61.0's
headless check then refuses ("Invalid auth method selected.", exit 41), so ``settings.json`` selects
``gemini-api-key`` explicitly: same client, same base URL, a key from ``GEMINI_API_KEY``.

Offline and quiet (docs/harnesses.md#gemini-cli): usage statistics and telemetry off, no auto-update or update notice, no
folder-trust prompt (``--skip-trust``), no self-relaunch into a child node (``GEMINI_CLI_NO_RELAUNCH``), one
attempt per model request (``general.maxAttempts``; the default is 10 with backoff). The model is named
(``-m``), which bypasses the CLI's model router: with the default ``auto`` model every turn first asks the model
for a JSON complexity score, a side call that a policy under training has no reason to answer. The next-speaker
check (another side call) is off. Tools: the sandbox has no network, so ``google_web_search`` and ``web_fetch``
are excluded; files, shell, search and the CLI's own agents stay. Ripgrep is off so the tool list (and the first
prompt) does not depend on whether the host has ``rg``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from services.runner.harnesses.base import (
    HarnessLaunch,
    HarnessRequest,
    HarnessRunResult,
    HarnessVerdict,
    base_env,
    generic_failure,
    npm_prefix,
    require_npm_binary,
    tail,
)

# Tools that need the network, which the sandbox does not have.
EXCLUDED_TOOLS = ("google_web_search", "web_fetch")


def settings_json(request: HarnessRequest) -> str:
    return json.dumps(
        {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {
                "enableAutoUpdate": False,
                "enableAutoUpdateNotification": False,
                "maxAttempts": 1,
                "checkpointing": {"enabled": False},
            },
            "model": {"name": request.model, "skipNextSpeakerCheck": True},
            "tools": {
                "exclude": list(EXCLUDED_TOOLS),
                "useRipgrep": False,
                "shell": {"enableInteractiveShell": False},
            },
        },
        indent=2,
    )


def result_object(text: str) -> dict[str, Any] | None:
    """The last JSON object ``gemini --output-format json`` printed: ``{"response": ...}`` on stdout on success,
    ``{"error": ...}`` on stderr when it failed (after its plain-text warnings). ``None`` when there is none."""
    decoder = json.JSONDecoder()
    found = None
    for line_start in (m.start() for m in re.finditer(r"^\{", text, re.MULTILINE)):
        try:
            value, _ = decoder.raw_decode(text, line_start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found = value
    return found


class GeminiAdapter:
    name = "gemini"

    def check_installed(self) -> None:
        require_npm_binary("gemini")

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        env = base_env(request) | {
            "GOOGLE_GEMINI_BASE_URL": request.base_url,  # no /v1beta: the client appends it
            "GEMINI_API_KEY": request.rollout_key,
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
        argv = [
            "gemini", "--yolo", "--skip-trust", "--output-format", "json", "-m", request.model,
            f"--prompt={request.instruction}",  # one argument, even when the instruction starts with "-"
        ]  # fmt: skip
        return HarnessLaunch(argv, env, {".gemini/settings.json": settings_json(request)}, [npm_prefix()])

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        final = result_object(result.stdout) or result_object(result.stderr)
        error = final.get("error") if final else None
        reported = None
        if isinstance(error, dict):
            code = f" {error['code']}" if error.get("code") is not None else ""
            reported = f"gemini{code}: {tail(str(error.get('message')))}"
        elif error:
            reported = f"gemini: {tail(str(error))}"
        if failure := generic_failure(result, reported):
            return failure
        if final is None or "response" not in final:
            return HarnessVerdict("harness_error", f"gemini printed no JSON response: {tail(result.stdout)}")
        return HarnessVerdict("completed")
