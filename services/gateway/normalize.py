"""Per-harness rules that make two requests comparable by meaning (used by the splice, never for rendering).

Harnesses change a few bytes of their history on every request (a billing hash, today's date). Left alone, each
change would look like edited history and fork the chain. Each rule below names the harness that needs it and is
tested in ``tests/unit/test_splice.py``. Rules only rewrite the *comparison key*; the prompt the model sees
keeps the chain's original tokens (that is the point of the splice).

Message-level rules (``message_key``): tool-call arguments compare as parsed JSON, tool-call ids are ignored
(Gemini has none, adapters mint their own), surrounding whitespace of text is ignored (harnesses trim or add
``content: null``), reasoning is ignored (some harnesses drop it from the echo, others keep it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from services.gateway.conversation import Conversation, Message, ToolSpec


@dataclass(frozen=True, kw_only=True)
class VolatileLineRule:
    name: str
    harness: str
    pattern: re.Pattern[str]
    replacement: str
    literal: str
    """Text every match holds: a text without it is left as it is without running the pattern (a substring search
    is ~50 times faster than the patterns' scan: ~100 µs for the five rules over an 8 kB turn)."""

    def __post_init__(self) -> None:
        if self.literal not in self.pattern.pattern.replace("\\", ""):
            raise ValueError(f"rule {self.name}: {self.literal!r} is not literal text of its pattern")

    def apply(self, text: str) -> str:
        if self.literal not in text:
            return text
        return self.pattern.sub(self.replacement, text)


RULES: tuple[VolatileLineRule, ...] = (
    # Claude Code: first system block, a hash that changes per request (removable with
    # CLAUDE_CODE_ATTRIBUTION_HEADER=0, but not every runner sets it).
    VolatileLineRule(
        name="claude_billing_header",
        harness="claude-code",
        pattern=re.compile(r"^x-anthropic-billing-header:[^\n]*\n?", re.MULTILINE),
        replacement="",
        literal="x-anthropic-billing-header:",
    ),
    # Claude Code's <system-reminder> "# currentDate\nToday's date is 2026-11-30.", Qwen Code's startup context
    # and Gemini CLI's <session_context> "Today's date is Monday, November 30, 2026." (same words, different date
    # formats).
    VolatileLineRule(
        name="todays_date",
        harness="claude-code,qwen-code,gemini",
        pattern=re.compile(r"Today's date is [^\n<]*"),
        replacement="Today's date is <date>",
        literal="Today's date is ",
    ),
    # Claude Code --bare's system prompt ends "CWD: /workspace\nDate: 2026-11-30"; under --bare the CLI renders its
    # system prompt afresh for every request (``--system-prompt-snapshot`` is off), so the date moves at midnight.
    VolatileLineRule(
        name="claude_bare_date",
        harness="claude-code",
        pattern=re.compile(r"^Date: \d{4}-\d{2}-\d{2}$", re.MULTILINE),
        replacement="Date: <date>",
        literal="Date: ",
    ),
    # Codex's <environment_context>: <current_date>2026-11-30</current_date> and <timezone>.
    VolatileLineRule(
        name="codex_current_date",
        harness="codex",
        pattern=re.compile(r"<current_date>[^<]*</current_date>"),
        replacement="<current_date><date></current_date>",
        literal="<current_date>",
    ),
    # Pi's system prompt: "Current date: 2026-11-30" (and a time when present).
    VolatileLineRule(
        name="pi_current_date",
        harness="pi",
        pattern=re.compile(r"^Current date(?: and time)?: [^\n]*", re.MULTILINE),
        replacement="Current date: <date>",
        literal="Current date",
    ),
)


def normalize_text(text: str) -> str:
    for rule in RULES:
        text = rule.apply(text)
    return text.strip()


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _arguments_key(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, str):
        try:
            return _canonical_json(json.loads(arguments))
        except json.JSONDecodeError:
            return arguments
    return _canonical_json(arguments)


def message_key(message: Message) -> tuple[Any, ...]:
    """What must be equal for two messages to mean the same thing to the model."""
    calls = tuple((call.name, call.kind, _arguments_key(call.arguments)) for call in message.tool_calls)
    return (
        message.role,
        normalize_text(message.content),
        calls,
        message.name if message.role == "tool" else None,
    )


def tools_key(tools: list[ToolSpec]) -> str:
    return _canonical_json(
        [
            {"name": t.name, "kind": t.kind, "description": t.description, "parameters": t.parameters}
            for t in tools
        ]
    )


def conversation_tools_key(conversation: Conversation) -> str:
    """``tools_key`` of the conversation's tools, computed once per request: the size pre-check
    (``request_checks.prompt_chars``) and the splice's tools digest both read it."""
    if conversation.tools_key is None:
        conversation.tools_key = tools_key(conversation.tools)
    return conversation.tools_key
