"""Chat formatting: the suffix after a closed assistant turn tokenizes exactly like the tail of the whole render,
for every template we ship (the tiny model's, tied and untied builds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.gateway.chat_format import ChatFormat, ChatFormatError
from services.gateway.conversation import Conversation, Message, ToolCall, ToolSpec

pytestmark = pytest.mark.unit

BASH = ToolSpec("bash", "Run a command", {"type": "object", "properties": {"command": {"type": "string"}}})
PATCH = ToolSpec("apply_patch", "Edit files", kind="custom")


@pytest.fixture(scope="module", params=["untied", "tied"])
def chat_format(request, tiny_model_dir: Path, tiny_model_dir_tied: Path) -> ChatFormat:
    return ChatFormat.load(tiny_model_dir if request.param == "untied" else tiny_model_dir_tied)


def _call(name: str, arguments: dict | str, kind: str = "function") -> Message:
    return Message("assistant", "", [ToolCall("c1", name, arguments, kind=kind)])  # type: ignore[arg-type]


HISTORIES = {
    "tool_result": [Message("tool", "a\nb  é 🙂", tool_call_id="c1")],
    "two_tool_results": [
        Message("tool", "one", tool_call_id="c1"),
        Message("tool", "two", tool_call_id="c2"),
    ],
    "user_turn": [Message("user", "and now?")],
    "tool_then_user": [Message("tool", "x", tool_call_id="c1"), Message("user", "  spaced  \n")],
    "system_mid": [Message("system", "reminder"), Message("user", "go")],
}


@pytest.mark.parametrize("history", sorted(HISTORIES))
@pytest.mark.parametrize("tools", [[], [BASH, PATCH]], ids=["no_tools", "tools"])
def test_suffix_ids_equal_whole_minus_prefix(
    chat_format: ChatFormat, history: str, tools: list[ToolSpec]
) -> None:
    head = [Message("system", "You are terse."), Message("user", "list files")]
    reply = _call("bash", {"command": "ls -la"}) if tools else Message("assistant", "Sure: ls")
    whole = Conversation("openai_chat", head + [reply] + HISTORIES[history], tools)
    prefix_text = chat_format.render_text(head + [reply], tools, add_generation_prompt=False)
    whole_ids = chat_format.render_prompt(whole)
    closed = chat_format.count_end_of_turn(chat_format.encode(prefix_text))
    suffix = chat_format.render_suffix(whole, closed)
    cut = len(whole_ids) - len(suffix)
    assert whole_ids[cut:] == suffix
    # the boundary is right after the end-of-turn token that closed the assistant turn
    assert whole_ids[cut - 1] == chat_format.end_of_turn_id
    assert chat_format.count_end_of_turn(whole_ids[:cut]) == closed
    assert chat_format.decode(suffix).endswith("<|im_start|>assistant\n")


def test_closing_ids_are_the_end_of_turn_token(chat_format: ChatFormat) -> None:
    assert chat_format.closing_ids == [chat_format.end_of_turn_id]
    assert chat_format.end_of_turn == "<|im_end|>"
    assert chat_format.closes_turn([5, chat_format.end_of_turn_id])
    assert not chat_format.closes_turn([5, 6])
    assert not chat_format.closes_turn([])


def test_suffix_needs_enough_closed_turns(chat_format: ChatFormat) -> None:
    conversation = Conversation("openai_chat", [Message("user", "hi")])
    with pytest.raises(ChatFormatError, match="end-of-turn"):
        chat_format.render_suffix(conversation, 5)


def test_missing_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ChatFormatError, match="init-tiny"):
        ChatFormat.load(tmp_path)


def test_template_without_end_of_turn_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    import shutil

    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tiny_model_dir / name).exists():
            shutil.copy(tiny_model_dir / name, tmp_path / name)
    (tmp_path / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    )
    with pytest.raises(ChatFormatError, match="end-of-turn"):
        ChatFormat.load(tmp_path)
