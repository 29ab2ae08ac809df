"""Server-sent-event framing and the event-stream discipline every ``render_stream`` shares.

``sse_event`` frames one event; ``settled_events`` wraps the core's ``StreamEvent`` iterator so that each
vendor renderer can be a plain state machine:

- whatever the ``Finish`` completion holds that the deltas did not show (a text tail, a tool call without its
  ``ToolCallEvent``) is emitted as synthetic events just before ``Finish``, so a streamed answer always shows
  exactly the ``Completion`` the core recorded;
- a ``ProviderError`` raised by the core mid-stream (upstream died after the headers went out) and a stream
  that ends without ``Finish`` both come out as one final ``ProviderError`` item, which the renderer turns into
  its vendor's in-stream error event instead of cutting the connection silently.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from services.gateway.conversation import (
    Finish,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
)

SSE_CONTENT_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse_event(event: str | None, data: Any) -> bytes:
    """One SSE event: ``event: <name>`` (omitted for data-only streams such as Chat) and one ``data:`` line."""
    payload = data if isinstance(data, str) else to_json(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


async def settled_events(events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent | ProviderError]:
    """The core's events, completed against ``Finish`` and ending in either ``Finish`` or a ``ProviderError``."""
    shown_text: list[str] = []
    shown_reasoning: list[str] = []
    shown_call_ids: set[str] = set()
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                if event.text:
                    shown_text.append(event.text)
                    yield event
            elif isinstance(event, ReasoningDelta):
                if event.text:
                    shown_reasoning.append(event.text)
                    yield event
            elif isinstance(event, ToolCallEvent):
                shown_call_ids.add(event.call.id)
                yield event
            elif isinstance(event, Finish):
                completion = event.completion
                reasoning_tail = _unshown_tail(completion.reasoning or "", "".join(shown_reasoning))
                if reasoning_tail:
                    yield ReasoningDelta(reasoning_tail)
                text_tail = _unshown_tail(completion.text, "".join(shown_text))
                if text_tail:
                    yield TextDelta(text_tail)
                for call in completion.tool_calls:
                    if call.id not in shown_call_ids:
                        yield ToolCallEvent(call)
                yield event
                return
    except ProviderError as error:
        yield error
        return
    yield ProviderError(502, "the model stream ended before it finished", "api_error")


def _unshown_tail(full: str, shown: str) -> str:
    # Only a clean continuation is appended; if the deltas diverged from the final text we trust the deltas
    # (they are what the client already has) rather than emitting something that would garble it.
    return full[len(shown) :] if full.startswith(shown) else ""
