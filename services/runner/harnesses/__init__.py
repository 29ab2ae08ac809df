"""Harness adapters by name: ``codex``, ``claude-code``, ``qwen-code``, ``pi``, ``shell``, ``reference``.

``make_adapter(name, options)`` builds one; ``options`` comes from the run config (``harness_options``):
``command`` for ``shell``, ``python``/``max_turns``/``max_tokens`` for ``reference``.
"""

from __future__ import annotations

from typing import Any

from services.runner.harnesses.base import HarnessAdapter, HarnessNotInstalled
from services.runner.harnesses.claude_code import ClaudeCodeAdapter
from services.runner.harnesses.codex import CodexAdapter
from services.runner.harnesses.pi import PiAdapter
from services.runner.harnesses.qwen_code import QwenCodeAdapter
from services.runner.harnesses.reference import ReferenceAdapter
from services.runner.harnesses.shell import ShellAdapter

HARNESS_NAMES = ("codex", "claude-code", "qwen-code", "pi", "shell", "reference")


class UnknownHarness(ValueError):
    pass


def make_adapter(name: str, options: dict[str, Any] | None = None) -> HarnessAdapter:
    options = options or {}
    if name == "codex":
        return CodexAdapter()
    if name == "claude-code":
        return ClaudeCodeAdapter()
    if name == "qwen-code":
        return QwenCodeAdapter()
    if name == "pi":
        return PiAdapter()
    if name == "reference":
        return ReferenceAdapter(
            **{k: options[k] for k in ("python", "max_turns", "max_tokens") if k in options}
        )
    if name == "shell":
        if "command" not in options:
            raise ValueError(
                "the shell harness needs harness_options.command (a command line with {instruction})"
            )
        return ShellAdapter(str(options["command"]))
    raise UnknownHarness(f"unknown harness {name!r}; choose one of {', '.join(HARNESS_NAMES)}")


__all__ = ["HARNESS_NAMES", "HarnessNotInstalled", "UnknownHarness", "make_adapter"]
