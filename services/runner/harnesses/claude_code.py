"""Claude Code (``@anthropic-ai/claude-code`` 2.1.332): Anthropic Messages API, ``claude -p``.

``IS_SANDBOX=1`` is required to skip permissions as root; retries off (the default is 10 with backoff);
prompt caching and the attribution header off so the prefix stays exact; the non-streaming fallback off so a
broken stream fails instead of re-sending every turn (docs/harnesses.md#claude-code).

Options: ``shared.harnesses.ClaudeCodeOptions``. ``bare`` adds ``--bare``: the tools are ``Bash``, ``Edit`` and
``Read`` (no ``Write``: files are written with ``Bash``), the system prompt is one line, and hooks, plugins,
CLAUDE.md discovery and auto-memory are skipped; authentication is then only ``ANTHROPIC_API_KEY``, which is
what we set. Checked on the pinned CLI by the real-CLI chain test (``claude-code-bare``). ``max_turns`` adds
``--max-turns N``; the CLI then ends with the result subtype ``error_max_turns``, a completed rollout whose reason
says the budget was spent.
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
    tail,
)
from shared.harnesses import ClaudeCodeOptions

QUIET_ENV = {
    "IS_SANDBOX": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1",
    "DISABLE_GROWTHBOOK": "1",
    "DISABLE_INSTALLATION_CHECKS": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "DISABLE_PROMPT_CACHING": "1",
    "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
    "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK": "1",
}


MAX_TURNS = "error_max_turns"
"""The result subtype ``claude -p`` ends with when ``--max-turns`` stopped it."""


class ClaudeCodeAdapter:
    name = "claude-code"

    def __init__(self, options: ClaudeCodeOptions | None = None) -> None:
        options = options or ClaudeCodeOptions()
        self.bare, self.max_turns = options.bare, options.max_turns

    def check_installed(self) -> None:
        require_npm_binary("claude")

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        model_env = {
            name: request.model
            for name in (
                "ANTHROPIC_MODEL",
                "ANTHROPIC_DEFAULT_OPUS_MODEL",
                "ANTHROPIC_DEFAULT_SONNET_MODEL",
                "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                "ANTHROPIC_SMALL_FAST_MODEL",
                "CLAUDE_CODE_SUBAGENT_MODEL",
            )
        }
        env = (
            base_env(request)
            | QUIET_ENV
            | model_env
            | {
                "ANTHROPIC_BASE_URL": request.base_url,  # no /v1: Claude appends /v1/messages itself
                "ANTHROPIC_API_KEY": request.rollout_key,
                "CLAUDE_CONFIG_DIR": str(request.home / ".claude"),
            }
        )
        argv = [
            "claude", "-p", request.instruction, "--dangerously-skip-permissions",
            "--output-format", "json", "--no-session-persistence",
        ]  # fmt: skip
        if self.bare:
            argv.append("--bare")
        if self.max_turns is not None:
            argv += ["--max-turns", str(self.max_turns)]
        # Pre-accepting onboarding keeps the first start from asking anything.
        files = {".claude/.claude.json": json.dumps({"hasCompletedOnboarding": True})}
        return HarnessLaunch(argv, env, files, [npm_prefix()])

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        results = [event for event in json_lines(result.stdout) if event.get("type") == "result"]
        final = results[-1] if results else {}
        text = str(final.get("result", ""))
        if final.get("subtype") == MAX_TURNS and result.exit_code in (0, 1) and not result.timed_out:
            return HarnessVerdict("completed", f"turn budget of {self.max_turns} spent")
        failed = (
            final.get("is_error")
            or final.get("subtype", "success") != "success"
            or text.startswith("API Error")
        )
        if failure := generic_failure(
            result, f"claude {final.get('subtype')}: {tail(text)}" if failed else None
        ):
            return failure
        if not results:
            return HarnessVerdict("harness_error", f"claude printed no result object: {tail(result.stdout)}")
        return HarnessVerdict("completed")
