"""Tool calls from sampled text: both formats, fed whole and one character at a time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.gateway.conversation import ReasoningDelta, TextDelta, ToolCallEvent, ToolSpec
from services.gateway.toolcalls import ToolCallParser

pytestmark = pytest.mark.unit

TOOLS = [
    ToolSpec(
        name="exec",
        parameters={
            "type": "object",
            "properties": {
                "cmd": {"type": "string"},
                "timeout": {"type": "integer"},
                "flags": {"type": "array"},
            },
        },
    ),
    ToolSpec(name="apply_patch", kind="custom"),
]

HERMES = (
    'Let me look.\n<tool_call>\n{"name": "exec", "arguments": {"cmd": "ls -la", "timeout": 5}}\n</tool_call>'
)
XML = (
    "<tool_call>\n<function=exec>\n<parameter=cmd>\nprintf 'a\\nb'\n</parameter>\n"
    "<parameter=timeout>\n7\n</parameter>\n<parameter=flags>\n[1, 2]\n</parameter>\n</function>\n</tool_call>"
)


def run(text: str, step: int | None = None) -> tuple[ToolCallParser, list]:
    parser = ToolCallParser(tools=TOOLS)
    events: list = []
    pieces = [text] if step is None else [text[i : i + step] for i in range(0, len(text), step)]
    for piece in pieces:
        events += parser.feed(piece)
    events += parser.finish()
    return parser, events


@pytest.mark.parametrize("step", [None, 1, 3, 7])
def test_hermes_call_with_text_before(step: int | None) -> None:
    parser, events = run(HERMES, step)
    assert parser.parse_error is None
    assert [(c.name, c.arguments) for c in parser.calls] == [("exec", {"cmd": "ls -la", "timeout": 5})]
    assert parser.text == "Let me look."
    assert isinstance(events[-1], ToolCallEvent)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me look."


@pytest.mark.parametrize("step", [None, 1, 5])
def test_qwen3_coder_xml_typed_by_schema(step: int | None) -> None:
    parser, _ = run(XML, step)
    assert parser.parse_error is None
    (call,) = parser.calls
    assert call.arguments == {"cmd": "printf 'a\\nb'", "timeout": 7, "flags": [1, 2]}


def test_bare_function_block_and_two_calls() -> None:
    text = "<function=exec><parameter=cmd>pwd</parameter></function>" + HERMES
    parser, _ = run(text)
    assert [c.name for c in parser.calls] == ["exec", "exec"]
    assert parser.calls[0].id != parser.calls[1].id


def test_custom_tool_gets_raw_input() -> None:
    body = '{"name": "apply_patch", "arguments": {"input": "*** Begin Patch\\n*** End Patch\\n"}}'
    parser, _ = run(f"<tool_call>{body}</tool_call>")
    (call,) = parser.calls
    assert call.kind == "custom"
    assert call.arguments == "*** Begin Patch\n*** End Patch\n"


def test_arguments_as_json_string_are_parsed() -> None:
    parser, _ = run('<tool_call>{"name": "exec", "arguments": "{\\"cmd\\": \\"x\\"}"}</tool_call>')
    assert parser.calls[0].arguments == {"cmd": "x"}


@pytest.mark.parametrize(
    "text, reason",
    [
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', '"name"'),
        ('<tool_call>{"name": "exec", "arguments": [1]}</tool_call>', "JSON object"),
        ("<tool_call>\n<function=exec><parameter=cmd>x</function>\n</tool_call>", "</parameter>"),
        ('ok <tool_call>{"name": "exec"', "unclosed"),
    ],
)
def test_parse_failure_returns_text_and_records_error(text: str, reason: str) -> None:
    parser, events = run(text)
    assert parser.calls == []
    assert parser.parse_error is not None and reason in parser.parse_error
    assert parser.text == text.rstrip()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text.rstrip()


def test_text_streams_before_block_closes() -> None:
    parser = ToolCallParser(tools=TOOLS)
    first = parser.feed("Hello wor")
    assert [e.text for e in first] == ["Hello wor"]
    held = parser.feed("ld <tool_")
    assert [e.text for e in held] == ["ld"]  # "<tool_" might open a block, the space may precede it: held
    assert parser.feed('call>{"name": "exec", "arguments": {}}') == []
    (event,) = parser.feed("</tool_call>")
    assert isinstance(event, ToolCallEvent)


def test_reasoning_streams_separately() -> None:
    parser, events = run("<think>plan it</think>\nanswer", step=2)
    assert parser.reasoning == "plan it"
    assert parser.text == "\nanswer"
    assert any(isinstance(e, ReasoningDelta) for e in events)


def test_whitespace_around_a_call_is_not_text() -> None:
    parser, events = run("\n\n" + HERMES.split("\n", 1)[1] + "\n")
    assert parser.text == ""
    assert not [e for e in events if isinstance(e, TextDelta)]


@given(
    st.text(alphabet=st.sampled_from(list('<>/{}"=:tool_cafunctionpm x\n')), max_size=80), st.integers(1, 9)
)
def test_any_text_is_split_losslessly(text: str, step: int) -> None:
    """Whatever the model samples, text + raw failed blocks + calls account for it; nothing raises."""
    whole, _ = run(text)
    pieces, _ = run(text, step)
    assert [(c.name, c.arguments) for c in whole.calls] == [(c.name, c.arguments) for c in pieces.calls]
    assert whole.text == pieces.text
    if not whole.calls and "<think>" not in text:
        assert whole.text == text.rstrip()
