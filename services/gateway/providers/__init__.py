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
"""
