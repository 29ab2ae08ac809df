"""The gateway's pre-parse checks (``services/gateway/request_checks.py``) on their own."""

from __future__ import annotations

import json

import pytest

from services.gateway.conversation import Conversation, Message, ProviderError, ToolCall
from services.gateway.request_checks import check_conversation, nesting_depth, prompt_token_floor

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "depth"),
    [({}, 1), ([], 1), ({"a": [1, {"b": []}]}, 4), ("[[[[", 0), ({"s": ']]]}}} [[[ \\" {{'}, 1), (3, 0)],
)
def test_nesting_depth_skips_brackets_inside_strings(value: object, depth: int) -> None:
    raw = json.dumps(value).encode()
    assert nesting_depth(raw) == depth
    assert nesting_depth(raw, at_most=0) == depth or depth == 0


def test_a_body_without_many_brackets_is_answered_from_the_count() -> None:
    assert nesting_depth(b'{"a": "' + b"x" * 1000 + b'"}', at_most=100) == 1
    assert nesting_depth(b"[" * 500 + b"]" * 500, at_most=100) == 500


def conversation(*messages: Message, max_tokens: int | None = None) -> Conversation:
    return Conversation(provider_api="openai_chat", messages=list(messages), max_tokens=max_tokens)


def test_tool_results_must_answer_an_earlier_call() -> None:
    call = ToolCall(id="call_1", name="bash", arguments={"command": "ls"})
    check_conversation(
        conversation(
            Message(role="user", content="go"),
            Message(role="assistant", content="", tool_calls=[call]),
            Message(role="tool", content="x", tool_call_id="call_1"),
        ),
        4096,
    )
    with pytest.raises(ProviderError, match="call_2") as orphan:
        check_conversation(
            conversation(
                Message(role="user", content="go"), Message(role="tool", content="x", tool_call_id="call_2")
            ),
            4096,
        )
    assert orphan.value.status == 400


def test_an_impossible_max_tokens_is_refused_a_large_one_is_left_to_the_cap() -> None:
    check_conversation(
        conversation(Message(role="user", content="go"), max_tokens=32000), 4096
    )  # Claude Code's default
    with pytest.raises(ProviderError, match="max_tokens is too large: 2147483647; at most 131072"):
        check_conversation(conversation(Message(role="user", content="go"), max_tokens=2**31 - 1), 4096)


def test_the_prompt_floor_is_a_lower_bound() -> None:
    assert prompt_token_floor(conversation(Message(role="user", content="a" * 100)), 16) == 7
    assert (
        prompt_token_floor(conversation(Message(role="assistant", content="", reasoning="b" * 32)), 16) == 2
    )


def test_the_prompt_floor_counts_tools_and_tool_call_arguments() -> None:
    from services.gateway.conversation import ToolSpec

    plain = conversation(Message(role="user", content="go"))
    tooled = Conversation(
        provider_api="openai_chat",
        messages=[
            Message(role="user", content="go"),
            Message(
                role="assistant",
                content="",
                tool_calls=[ToolCall(id="c1", name="bash", arguments={"command": "x" * 1600})],
            ),
        ],
        tools=[
            ToolSpec(
                name="bash",
                description="d" * 3200,
                parameters={"type": "object", "properties": {"p": {"description": "s" * 1600}}},
            )
        ],
    )
    assert prompt_token_floor(plain, 16) == 1
    assert prompt_token_floor(tooled, 16) >= (1600 + 3200 + 1600) // 16
    # with a limit, counting stops once the floor reaches it (before the schemas are encoded)
    assert prompt_token_floor(tooled, 16, limit=100) >= 100
