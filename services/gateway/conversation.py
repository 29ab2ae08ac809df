"""The provider-neutral types every gateway module speaks.

A provider adapter (``services/gateway/providers/<api>.py``) turns a vendor request body into one
``Conversation`` (``parse``) and turns the core's answer back into the vendor's shape: a JSON body from one
``Completion`` (``render``), or the vendor's SSE event sequence from a stream of ``StreamEvent``s
(``render_stream``). The core (chat formatting, splice, sampling, capture) never knows which vendor it serves.

Normalization rules the adapters keep:
- roles are ``system``, ``user``, ``assistant``, ``tool``; ``developer`` becomes ``system``; an Anthropic
  ``role: system`` inside ``messages`` stays a system message at its position (recorded in ``notes``);
- text content is a plain string (content-part lists are joined); non-text parts are recorded in ``notes``;
- an assistant tool call carries ``arguments`` as the parsed JSON object for function tools (so an echo that
  re-serializes the JSON compares equal) and as the raw string for ``custom`` (freeform grammar) tools;
- ``cache_control`` and other transport-only fields are dropped (recorded in ``notes`` when unusual).
- ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or ``{"name": <tool>}`` whatever the vendor spelling.
- a ``custom`` (freeform) tool is offered to the model as a function with one string parameter ``input``;
  its calls carry the raw input string as ``arguments``.

Fields added by the providers engineer (all optional, for "gateway"): ``Conversation.sse`` (Gemini's stream
framing, from the URL's ``alt=sse``), ``ProviderError.code`` / ``ProviderError.param`` (vendor error fields).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from shared.trajectory import FinishReason

Role = Literal["system", "user", "assistant", "tool"]
ProviderApi = Literal["openai_chat", "openai_responses", "anthropic_messages", "gemini"]


@dataclass(kw_only=True)
class ToolSpec:
    """A tool offered to the model. ``kind='custom'`` is a freeform-input tool (Codex ``apply_patch``)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    kind: Literal["function", "custom"] = "function"


@dataclass(kw_only=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    kind: Literal["function", "custom"] = "function"


@dataclass(kw_only=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None


@dataclass(kw_only=True)
class Conversation:
    """One provider request, normalized."""

    provider_api: ProviderApi
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    model: str = ""
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    include_usage: bool = False
    notes: list[str] = field(default_factory=list)
    # Gemini only: ``streamGenerateContent?alt=sse`` streams SSE; without ``alt=sse`` it streams one JSON
    # array. The gateway sets this from the URL; the adapter's ``stream_content_type`` follows it.
    sse: bool = True
    # The tools' canonical JSON once computed (``normalize.conversation_tools_key``); not part of the request.
    tools_key: str | None = field(default=None, repr=False, compare=False)


@dataclass(kw_only=True)
class Completion:
    """What the model produced for one call, in neutral form."""

    id: str
    model: str
    text: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    parse_error: str | None = None


@dataclass
class TextDelta:
    text: str


@dataclass
class ReasoningDelta:
    text: str


@dataclass
class ToolCallEvent:
    """A whole tool call, emitted when its block closes in the sampled text."""

    call: ToolCall


@dataclass
class Finish:
    """Last event of a stream; carries the complete ``Completion``."""

    completion: Completion


StreamEvent = TextDelta | ReasoningDelta | ToolCallEvent | Finish


class ProviderError(Exception):
    """A request the gateway refuses; adapters render it in the caller's error shape with ``status``."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        *,
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        # OpenAI's ``error.code`` (e.g. ``context_length_exceeded``) and ``error.param`` (the field at fault).
        self.code = code
        self.param = param
        # (prompt tokens, context length) when the prompt did not fit the model's context: the runner is told.
        self.context_overflow: tuple[int, int] | None = None
        self.context_overflow_at_least = (
            False  # the prompt count is a lower bound (refused before tokenizing)
        )
