"""Tool calls from sampled text, incrementally, for streaming and plain replies alike.

Two model formats are recognised:

- hermes: ``<tool_call>{"name": "...", "arguments": {...}}</tool_call>`` (Qwen2.5, the tiny model);
- Qwen3-coder XML: ``<tool_call><function=NAME><parameter=P>VALUE</parameter>...</function></tool_call>``, also
  without the ``<tool_call>`` wrapper.

``ToolCallParser.feed(delta)`` takes text as the model produces it and returns events: text outside blocks streams
out at once as ``TextDelta`` (only a tail that could be the start of an opening tag is held back), ``<think>``
content streams as ``ReasoningDelta``, and a ``ToolCallEvent`` comes out when its block closes. ``finish()``
flushes; whitespace right before a block or at the end is dropped (formatting). A block that does not parse (bad JSON, no name, unclosed at the end) is not a tool call: its raw text is
returned as text and the first such failure is kept in ``parse_error`` (recorded on the call).

Parameter values of the XML format are strings unless the offered tool's schema types them otherwise (then JSON).
A call to a ``custom`` (freeform) tool carries its ``input`` string as arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.gateway.conversation import ReasoningDelta, TextDelta, ToolCall, ToolCallEvent, ToolSpec
from shared.ids import unique_hex

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
PARAMETER_OPEN = "<parameter="
PARAMETER_CLOSE = "</parameter>"

# opening tag -> closing tag of the block it starts
_BLOCKS = {TOOL_CALL_OPEN: TOOL_CALL_CLOSE, FUNCTION_OPEN: FUNCTION_CLOSE, THINK_OPEN: THINK_CLOSE}


class ToolCallParseError(ValueError):
    """A tool-call block that is not a valid call; the message says why."""


def new_call_id() -> str:
    return "call_" + unique_hex(24)


@dataclass(kw_only=True)
class ToolCallParser:
    """Incremental splitter of sampled text into text, reasoning and tool calls (one per completion)."""

    tools: list[ToolSpec] = field(default_factory=list)
    text: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    parse_error: str | None = None
    new_id: Callable[[], str] = new_call_id
    _buffer: str = ""
    _open_tag: str | None = None
    _pending_space: str = ""
    _space_before_block: str = ""

    def feed(self, delta: str) -> list[TextDelta | ReasoningDelta | ToolCallEvent]:
        self._buffer += delta
        events: list[TextDelta | ReasoningDelta | ToolCallEvent] = []
        while self._buffer:
            if self._open_tag is None:
                if not self._scan_outside(events):
                    break
            elif not self._scan_inside(events):
                break
        return events

    def finish(self) -> list[TextDelta | ReasoningDelta | ToolCallEvent]:
        """Flush what is held back; an unclosed tool-call block becomes text and a parse error."""
        events: list[TextDelta | ReasoningDelta | ToolCallEvent] = []
        if self._open_tag == THINK_OPEN:
            self._emit_reasoning(self._buffer, events)
        elif self._open_tag is not None:
            self._fail(f"unclosed {self._open_tag} block", self._open_tag + self._buffer, events)
        else:
            self._emit_text(self._buffer, events)
        self._buffer = ""
        self._open_tag = None
        return events

    # --- states --------------------------------------------------------------------------------------
    def _scan_outside(self, events: list[Any]) -> bool:
        starts = [(self._buffer.find(tag), tag) for tag in _BLOCKS if tag in self._buffer]
        if starts:
            index, tag = min(starts)
            self._emit_text(self._buffer[:index], events)
            self._buffer = self._buffer[index + len(tag) :]
            self._open_tag = tag
            if tag != THINK_OPEN:  # kept aside: a block that fails to parse is text again, with its space
                self._space_before_block, self._pending_space = self._pending_space, ""
            return True
        keep = _partial_tag_tail(self._buffer)
        self._emit_text(self._buffer[: len(self._buffer) - keep], events)
        self._buffer = self._buffer[len(self._buffer) - keep :]
        return False

    def _scan_inside(self, events: list[Any]) -> bool:
        assert self._open_tag is not None
        close = _BLOCKS[self._open_tag]
        index = self._buffer.find(close)
        if self._open_tag == THINK_OPEN:
            if index < 0:
                keep = _partial_suffix(self._buffer, close)
                self._emit_reasoning(self._buffer[: len(self._buffer) - keep], events)
                self._buffer = self._buffer[len(self._buffer) - keep :]
                return False
            self._emit_reasoning(self._buffer[:index], events)
        else:
            if index < 0:
                return False
            body = self._buffer[:index]
            raw = self._open_tag + body + close
            try:
                call = self._parse_block(self._open_tag, body)
            except ToolCallParseError as exc:
                self._fail(str(exc), raw, events)
            else:
                self.calls.append(call)
                events.append(ToolCallEvent(call))
        self._buffer = self._buffer[index + len(close) :]
        self._open_tag = None
        return True

    # --- emitting ------------------------------------------------------------------------------------
    def _emit_text(self, text: str, events: list[Any]) -> None:
        # Trailing whitespace is held until more text follows: newlines around a tool-call block and at the
        # end are formatting, and holding them makes the split independent of how the text was chunked.
        text = self._pending_space + text
        body = text.rstrip()
        self._pending_space = text[len(body) :]
        if body:
            self.text += body
            events.append(TextDelta(body))

    def _emit_reasoning(self, text: str, events: list[Any]) -> None:
        if text:
            self.reasoning += text
            events.append(ReasoningDelta(text))

    def _fail(self, reason: str, raw: str, events: list[Any]) -> None:
        if self.parse_error is None:
            self.parse_error = reason
        self._emit_text(self._space_before_block + raw, events)

    # --- block parsing -------------------------------------------------------------------------------
    def _parse_block(self, open_tag: str, body: str) -> ToolCall:
        if open_tag == FUNCTION_OPEN:
            return self._parse_xml(body)
        inner = body.strip()
        if inner.startswith(FUNCTION_OPEN):
            if not inner.endswith(FUNCTION_CLOSE):
                raise ToolCallParseError("<function=...> block without </function> inside <tool_call>")
            return self._parse_xml(inner[len(FUNCTION_OPEN) : -len(FUNCTION_CLOSE)])
        return self._parse_json(inner)

    def _parse_json(self, inner: str) -> ToolCall:
        try:
            payload = json.loads(inner)
        except json.JSONDecodeError as exc:
            raise ToolCallParseError(f"tool call is not valid JSON: {exc.msg} at char {exc.pos}") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str) or not payload["name"]:
            raise ToolCallParseError('tool call JSON needs a "name" string')
        arguments = payload.get("arguments", payload.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                raise ToolCallParseError("tool call arguments string is not JSON") from None
        if not isinstance(arguments, dict):
            raise ToolCallParseError("tool call arguments must be a JSON object")
        return self._make_call(payload["name"], arguments)

    def _parse_xml(self, body: str) -> ToolCall:
        """``body`` is what follows ``<function=`` up to (not including) ``</function>``."""
        name, sep, rest = body.partition(">")
        name = name.strip()
        if not sep or not name:
            raise ToolCallParseError("<function=NAME> tag without a name")
        schema = self._schema(name)
        arguments: dict[str, Any] = {}
        while PARAMETER_OPEN in rest:
            _, _, rest = rest.partition(PARAMETER_OPEN)
            param, sep, rest = rest.partition(">")
            if not sep or not param.strip():
                raise ToolCallParseError("<parameter=NAME> tag without a name")
            value, sep, rest = rest.partition(PARAMETER_CLOSE)
            if not sep:
                raise ToolCallParseError(f"parameter {param.strip()!r} has no </parameter>")
            arguments[param.strip()] = _typed_value(_strip_one_newline(value), schema.get(param.strip()))
        if rest.strip():
            raise ToolCallParseError(f"unexpected text in <function={name}> block: {rest.strip()[:40]!r}")
        return self._make_call(name, arguments)

    def _schema(self, name: str) -> dict[str, Any]:
        for tool in self.tools:
            if tool.name == name:
                properties = tool.parameters.get("properties", {})
                return properties if isinstance(properties, dict) else {}
        return {}

    def _make_call(self, name: str, arguments: dict[str, Any]) -> ToolCall:
        tool = next((t for t in self.tools if t.name == name), None)
        if tool is not None and tool.kind == "custom":
            freeform = arguments.get("input", "") if len(arguments) <= 1 else json.dumps(arguments)
            return ToolCall(id=self.new_id(), name=name, arguments=str(freeform), kind="custom")
        return ToolCall(id=self.new_id(), name=name, arguments=arguments)


def _strip_one_newline(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def _typed_value(value: str, schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind in (None, "string") or (isinstance(kind, list) and "string" in kind):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _partial_suffix(buffer: str, tag: str) -> int:
    """Length of the longest tail of ``buffer`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(buffer)), 0, -1):
        if tag.startswith(buffer[-size:]):
            return size
    return 0


def _partial_tag_tail(buffer: str) -> int:
    return max(_partial_suffix(buffer, tag) for tag in _BLOCKS)
