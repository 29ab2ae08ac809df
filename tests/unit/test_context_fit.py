"""Context fit (``shared/context_fit.py``): the model's context length, the captured first calls of the harnesses
counted for a model and an instruction, and the overflow record's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.context_fit import (
    INSTRUCTION_MARK,
    ContextOverflow,
    FirstCall,
    FirstPromptUnknown,
    first_prompt_tokens,
    first_prompt_warning,
    load_first_call,
    model_context_length,
)
from shared.harnesses import harness_config

pytestmark = pytest.mark.unit

CAPTURED = (
    "codex",
    "claude-code",
    "claude-code-bare",
    "qwen-code",
    "pi",
    "gemini",
    "mini-swe-agent",
    "mini-swe-agent-toolcall",
    "reference",
)


def test_context_length_is_the_gateway_limit_capped_by_the_model(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    assert model_context_length(tiny_model_dir, 131072) == 4096  # the tiny model's positions
    assert model_context_length(tiny_model_dir, 2048) == 2048
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"max_position_embeddings": 8192}}))
    assert model_context_length(tmp_path, 32768) == 8192
    assert model_context_length(tmp_path / "missing", 1000) == 1000


@pytest.mark.parametrize("harness", CAPTURED)
def test_every_harness_has_a_captured_first_call_with_the_instruction_marked(harness: str) -> None:
    first = load_first_call(harness)
    assert first.harness == harness and first.version
    assert INSTRUCTION_MARK in json.dumps(first.messages, ensure_ascii=False)
    messages, _ = first.with_instruction('fix "it"\n\\now')
    text = json.dumps(messages, ensure_ascii=False)
    assert INSTRUCTION_MARK not in text and 'fix \\"it\\"\\n\\\\now' in text


def test_first_prompt_counts_the_instruction(tiny_model_dir: Path) -> None:
    short = first_prompt_tokens("claude-code", tiny_model_dir, "Fix it.")
    long = first_prompt_tokens("claude-code", tiny_model_dir, "Fix it. " + "Details follow. " * 200)
    assert 10_000 < short < long  # Claude Code's first call is ~17k tiny-tokenizer tokens, with 24 tools
    assert first_prompt_tokens("pi", tiny_model_dir, "Fix it.") < 3000  # Pi: 4 tools, short system prompt
    # claude -p --bare: 3 tools and a one-line system prompt, ~1.5k tokens
    assert first_prompt_tokens("claude-code-bare", tiny_model_dir, "Fix it.") < 2000
    with pytest.raises(FirstPromptUnknown):
        first_prompt_tokens("shell", tiny_model_dir, "Fix it.")


def test_first_call_round_trips() -> None:
    first = FirstCall("x", "1.0", [{"role": "user", "content": INSTRUCTION_MARK}], [{"type": "function"}])
    assert FirstCall.decode(first.encode()) == first


def test_overflow_names_both_numbers() -> None:
    text = ContextOverflow(prompt_tokens=28812, context_length=8192).describe()
    assert text.startswith("context: ") and "28812" in text and "8192" in text
    bound = ContextOverflow(prompt_tokens=9000, context_length=8192, at_least=True).describe()
    assert "at least 9000 tokens" in bound


def test_run_create_warning_names_both_numbers(tiny_model_dir: Path) -> None:
    claude = harness_config("claude-code")
    warning = first_prompt_warning(claude, tiny_model_dir, 131072, ["Fix it.", "Fix the bug in greet."])
    assert warning is not None and "4096" in warning and "'claude-code' sends" in warning
    pi = harness_config("pi")
    assert first_prompt_warning(pi, tiny_model_dir, 131072, ["Fix it."]) is None  # ~2k tokens fit in 4k
    shell = harness_config("shell", command="agent {instruction}")
    assert first_prompt_warning(shell, tiny_model_dir, 131072, ["Fix it."]) is None  # unknown: no claim


def test_the_warning_counts_the_capture_of_the_run_options(tiny_model_dir: Path) -> None:
    """``bare`` changes Claude Code's first call: its own capture is counted, and the warning names the option."""
    bare = harness_config("claude-code", bare=True)
    assert bare.first_call_name == "claude-code-bare"
    assert first_prompt_warning(bare, tiny_model_dir, 131072, ["Fix it."]) is None  # ~1.5k tokens fit in 4k
    tokens = first_prompt_tokens("claude-code-bare", tiny_model_dir, "Fix it.")
    warning = first_prompt_warning(bare, tiny_model_dir, 1024, ["Fix it."])
    assert warning is not None and warning.startswith(
        f"harness 'claude-code' (bare=true) sends a first prompt of {tokens} "
    )
    assert "context length is 1024" in warning
