"""What the two OpenAI APIs (Chat Completions, Responses) share: the error body, the context-length error and
the model list. ``openai_chat`` and ``openai_responses`` re-export these under the adapter contract names."""

from __future__ import annotations

from typing import Any

from services.gateway.conversation import ProviderError

_TYPE_BY_STATUS = {429: "rate_limit_error"}
_KNOWN_TYPES = {"invalid_request_error", "authentication_error", "rate_limit_error", "server_error"}


def error_type(error: ProviderError) -> str:
    if error.kind in _KNOWN_TYPES and not (error.kind == "invalid_request_error" and error.status >= 429):
        return error.kind
    if error.status >= 500:
        return "server_error"
    return _TYPE_BY_STATUS.get(error.status, "invalid_request_error")


def error_code(error: ProviderError) -> str | None:
    if error.code is not None:
        return error.code
    return "invalid_api_key" if error.status == 401 else None


def render_error(error: ProviderError) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}``, as the OpenAI SDKs read it."""
    return {
        "error": {
            "message": error.message,
            "type": error_type(error),
            "param": error.param,
            "code": error_code(error),
        }
    }


def context_length_error(limit: int, requested: int, *, param: str = "messages") -> ProviderError:
    return ProviderError(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{requested} tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
        param=param,
    )


def models_list(names: list[str]) -> dict[str, Any]:
    """``GET /v1/models``."""
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": 0, "owned_by": "harnessrl"} for name in names],
    }
