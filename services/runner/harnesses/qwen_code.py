"""Qwen Code (``@qwen-code/qwen-code`` 0.24.4): OpenAI Chat API, one-shot ``qwen --output-format json``.

Qwen exits 0 in JSON mode after an API error and reports it as a result string starting with ``[API Error``,
so the result text decides the outcome, not the exit code. Usage statistics go to an external host unless
``privacy.usageStatisticsEnabled`` is off (docs/harnesses.md#qwen-code).
"""

from __future__ import annotations

import json
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

QWEN_ADDRESS_SPACE_BYTES = 64 * 1024**3


def settings_json(request: HarnessRequest) -> str:
    return json.dumps(
        {
            "security": {"auth": {"selectedType": "openai"}},
            "model": {"name": request.model, "generationConfig": {"maxRetries": 0}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False},
            "tools": {"approvalMode": "yolo"},
        },
        indent=2,
    )


def result_objects(stdout: str) -> list[dict[str, Any]]:
    """Qwen's JSON output: one object or an array of events; returns the ``result`` objects."""
    try:
        parsed = json.loads(stdout)
    except json.JSONDecodeError:
        return []
    events = parsed if isinstance(parsed, list) else [parsed]
    return [e for e in events if isinstance(e, dict) and (e.get("type") == "result" or "result" in e)]


class QwenCodeAdapter:
    name = "qwen-code"

    def check_installed(self) -> None:
        require_npm_binary("qwen")

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        env = (
            base_env(request)
            | {
                "OPENAI_API_KEY": request.rollout_key,
                "OPENAI_BASE_URL": f"{request.base_url}/v1",
                "OPENAI_MODEL": request.model,
                "QWEN_CODE_NO_RELAUNCH": "1",  # skip the self-relaunch into a child node (~1.5 s)
                "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",  # 0.24 warns on stderr that yolo runs without its own sandbox
            }
        )
        argv = [
            "qwen", "--auth-type", "openai", "--approval-mode", "yolo", "--output-format", "json",
            request.instruction,
        ]  # fmt: skip
        files = {".qwen/settings.json": settings_json(request)}
        # Qwen's first shell command aborts with std::bad_alloc under a 16 GiB address-space limit (V8 reserves
        # far more than it uses; measured: 16 GiB fails, 64 GiB works). RLIMIT_AS cannot cap Node's real memory
        # use; the sandbox's rlimit is the wrong tool for this harness, so it gets room and the other limits.
        return HarnessLaunch(
            argv, env, files, [npm_prefix()], min_address_space_bytes=QWEN_ADDRESS_SPACE_BYTES
        )

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        results = result_objects(result.stdout.strip())
        final = results[-1] if results else {}
        error = final.get("error")
        # 0.24 reports a failure as {"is_error": true, "error": {"message": ...}} and no "result" text.
        text = str(final.get("result") or (error.get("message") if isinstance(error, dict) else error) or "")
        failed = final.get("is_error") or "[API Error" in text
        if failure := generic_failure(result, f"qwen: {tail(text)}" if failed else None):
            return failure
        if not results:
            return HarnessVerdict("harness_error", f"qwen printed no JSON result: {tail(result.stdout)}")
        return HarnessVerdict("completed")
