"""Provider adapters: one small module per vendor API, all with the same four functions.

Each module ``openai_chat``, ``openai_responses``, ``anthropic_messages``, ``gemini`` defines:

- ``API``: its ``ProviderApi`` name;
- ``parse(body: dict, *, model: str | None = None, stream: bool | None = None) -> Conversation``
  (``model``/``stream`` come from the URL for Gemini); raises ``ProviderError`` (status 400/422) on bad input;
- ``render(completion: Completion, conversation: Conversation) -> dict``: the non-streaming JSON body;
- ``render_stream(events: AsyncIterator[StreamEvent], conversation: Conversation) -> AsyncIterator[bytes]``:
  the vendor's full SSE event sequence, bytes ready to write (text deltas as they come; a tool call when its
  ``ToolCallEvent`` arrives; usage and the closing events from ``Finish``);
- ``render_error(error: ProviderError) -> dict``: the vendor's error body (the caller sends ``error.status``).

``ADAPTERS`` maps each ``ProviderApi`` to its module. The core never branches on the vendor.

Every module also defines ``context_length_error(limit, requested) -> ProviderError`` (the vendor's own
context-overflow error), ``models_list(names) -> dict`` (its model-list body), ``new_tool_call_id() -> str``
(an id in the vendor's style: mint tool-call ids with it so they round-trip verbatim) and
``stream_content_type(conversation) -> str``. ``anthropic_messages.count_tokens_body(n)`` and
``gemini.count_tokens_body(n)`` answer the token-count endpoints. Shared pieces: ``fields`` (typed readers
of untrusted bodies), ``sse`` (framing and the stream discipline), ``openai_errors`` (both OpenAI APIs);
``bench`` is ``harnessrl bench providers``.
"""

from __future__ import annotations

from types import ModuleType

from services.gateway.conversation import ProviderApi
from services.gateway.providers import anthropic_messages, gemini, openai_chat, openai_responses

ADAPTERS: dict[ProviderApi, ModuleType] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic_messages": anthropic_messages,
    "gemini": gemini,
}
