"""The ``shell`` harness: any installed agent, run by a command line (options: ``shared.harnesses.ShellOptions``).

The command runs with ``/bin/sh -c`` in the workspace. It gets every provider's usual base-URL and API-key
variables (OpenAI, Anthropic, Gemini), so an agent that reads them talks to the gateway bound to this rollout, plus
what its options add:

- ``mounts``: host paths bound read-only at the same path (the agent's install prefix, its virtual environment);
  without them the sandbox shows only ``/usr``, ``/etc`` and the sandbox venv;
- ``home_template``: a directory the runner copies into the throwaway HOME first (config files);
- ``env``: variables whose values may hold ``{base_url}``, ``{api_key}``, ``{model}`` and ``{instruction}``;
- ``provider_api``: the API the agent speaks, which decides what ``{base_url}`` is.

The same placeholders work in the command, shell-quoted. Exit code 0 is success. The paths are checked before a
run is created and before each attempt (``shared/host_paths.py``).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from services.runner.harnesses.base import (
    HarnessLaunch,
    HarnessRequest,
    HarnessRunResult,
    HarnessVerdict,
    base_env,
    generic_failure,
)
from shared.harnesses import INSTRUCTION_PLACEHOLDER, ShellOptions


def base_url_for(provider_api: str, base_url: str) -> str:
    """The base URL an SDK of ``provider_api`` expects: OpenAI's includes ``/v1``; Anthropic's and Gemini's
    SDKs append their own version path."""
    return f"{base_url}/v1" if provider_api.startswith("openai") else base_url


class ShellAdapter:
    name = "shell"

    def __init__(self, options: ShellOptions) -> None:
        self.options = options

    def check_installed(self) -> None:
        """Nothing to check ahead: a missing program shows as exit code 127 and is classified then."""

    def placeholders(self, request: HarnessRequest) -> dict[str, str]:
        return {
            "{base_url}": base_url_for(self.options.provider_api, request.base_url),
            "{api_key}": request.rollout_key,
            "{model}": request.model,
            INSTRUCTION_PLACEHOLDER: request.instruction,
        }

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        key = request.rollout_key
        values = self.placeholders(request)
        env = base_env(request) | {
            "OPENAI_BASE_URL": f"{request.base_url}/v1",
            "OPENAI_API_KEY": key,
            "ANTHROPIC_BASE_URL": request.base_url,
            "ANTHROPIC_API_KEY": key,
            "GOOGLE_GEMINI_BASE_URL": request.base_url,
            "GEMINI_API_KEY": key,
            "HARNESSRL_MODEL": request.model,
        }
        env |= {name: fill(value, values) for name, value in self.options.env.items()}
        command = fill(self.options.command, {k: shlex.quote(v) for k, v in values.items()})
        return HarnessLaunch(
            ["/bin/sh", "-c", command],
            env,
            ro_paths=[Path(p) for p in self.options.mounts],
            home_template=Path(self.options.home_template) if self.options.home_template else None,
        )

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        return generic_failure(result) or HarnessVerdict("completed")


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with each placeholder replaced in one pass (a value that contains a placeholder stays as is)."""
    out, at = [], 0
    while at < len(text):
        match = next((p for p in values if text.startswith(p, at)), None)
        if match is None:
            out.append(text[at])
            at += 1
        else:
            out.append(values[match])
            at += len(match)
    return "".join(out)
