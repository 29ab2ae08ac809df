"""The ``shell`` harness: any command line with an ``{instruction}`` placeholder (shell-quoted on substitution).

The command gets every provider's base URL and API key in its environment (OpenAI, Anthropic, Gemini), so any
agent that reads the usual variables talks to the gateway bound to this rollout. Exit code 0 is success.
"""

from __future__ import annotations

import shlex

from services.runner.harnesses.base import (
    HarnessLaunch,
    HarnessRequest,
    HarnessRunResult,
    HarnessVerdict,
    base_env,
    generic_failure,
)

PLACEHOLDER = "{instruction}"


class ShellAdapter:
    name = "shell"

    def __init__(self, command: str) -> None:
        if PLACEHOLDER not in command:
            raise ValueError(f"the shell harness command must contain {PLACEHOLDER}, got {command!r}")
        self.command = command

    def check_installed(self) -> None:
        """Nothing to check ahead: a missing program shows as exit code 127 and is classified then."""

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        key = request.rollout_key
        env = base_env(request) | {
            "OPENAI_BASE_URL": f"{request.base_url}/v1",
            "OPENAI_API_KEY": key,
            "ANTHROPIC_BASE_URL": request.base_url,
            "ANTHROPIC_API_KEY": key,
            "GOOGLE_GEMINI_BASE_URL": request.base_url,
            "GEMINI_API_KEY": key,
            "HARNESSRL_MODEL": request.model,
        }
        command = self.command.replace(PLACEHOLDER, shlex.quote(request.instruction))
        return HarnessLaunch(["/bin/sh", "-c", command], env)

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        return generic_failure(result) or HarnessVerdict("completed")
