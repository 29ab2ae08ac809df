"""Harness adapters by name: the runner's half of the harness registry (``shared/harnesses.py``).

``ADAPTERS`` maps every name of ``shared.harnesses.HARNESS_NAMES`` to a factory that takes that harness's
validated options (the run config's ``harness`` section) and returns its adapter. ``make_adapter`` builds one
from a ``HarnessOptions`` object, or from a name and an options dict (validated on the way).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.runner.harnesses.base import HarnessAdapter, HarnessNotInstalled
from services.runner.harnesses.claude_code import ClaudeCodeAdapter
from services.runner.harnesses.codeblock import CodeblockAdapter
from services.runner.harnesses.codex import CodexAdapter
from services.runner.harnesses.gemini import GeminiAdapter
from services.runner.harnesses.mini_swe_agent import MiniSweAgentAdapter
from services.runner.harnesses.pi import PiAdapter
from services.runner.harnesses.qwen_code import QwenCodeAdapter
from services.runner.harnesses.reference import ReferenceAdapter
from services.runner.harnesses.shell import ShellAdapter
from shared.harnesses import HARNESS_NAMES, HarnessOptions, harness_config

ADAPTERS: dict[str, Callable[[Any], HarnessAdapter]] = {
    "codex": lambda _options: CodexAdapter(),
    "claude-code": ClaudeCodeAdapter,
    "qwen-code": lambda _options: QwenCodeAdapter(),
    "pi": lambda _options: PiAdapter(),
    "gemini": lambda _options: GeminiAdapter(),
    "mini-swe-agent": MiniSweAgentAdapter,
    "shell": ShellAdapter,
    "reference": ReferenceAdapter,
    "codeblock": CodeblockAdapter,
}
assert tuple(ADAPTERS) == HARNESS_NAMES, "every harness of shared/harnesses.py needs an adapter here"


class UnknownHarness(ValueError):
    pass


def make_adapter(harness: HarnessOptions | str, options: dict[str, Any] | None = None) -> HarnessAdapter:
    """The adapter of ``harness`` (options already validated), or of a name with its options dict (validated
    here: a wrong option raises ``pydantic.ValidationError``, a ``ValueError``)."""
    if isinstance(harness, str):
        if harness not in ADAPTERS:
            raise UnknownHarness(f"unknown harness {harness!r}; choose one of {', '.join(HARNESS_NAMES)}")
        harness = harness_config(harness, **(options or {}))
    return ADAPTERS[harness.name](harness)


__all__ = ["ADAPTERS", "HARNESS_NAMES", "HarnessNotInstalled", "UnknownHarness", "make_adapter"]
