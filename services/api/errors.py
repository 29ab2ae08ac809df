"""Typed API errors; the error middleware in ``app.py`` turns them into JSON ``Error`` documents."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


class ApiError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str, detail: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail or []


class Unauthorized(ApiError):
    status = 401
    code = "unauthorized"


class NotFound(ApiError):
    status = 404
    code = "not_found"


class Conflict(ApiError):
    status = 409
    code = "conflict"


class Invalid(ApiError):
    """422: the request is well-formed HTTP but a field is wrong; ``detail`` names each field by its path."""

    status = 422
    code = "validation_error"

    @classmethod
    def field(cls, loc: str, msg: str, type_: str = "value_error") -> Invalid:
        return cls(f"{loc}: {msg}", [{"loc": loc, "msg": msg, "type": type_}])

    @classmethod
    def from_pydantic(cls, exc: ValidationError, prefix: str) -> Invalid:
        detail = [
            {
                "loc": ".".join([prefix, *(str(p) for p in err["loc"])]),
                "msg": err["msg"].removeprefix("Value error, "),
                "type": err["type"],
            }
            for err in exc.errors(include_url=False)
        ]
        first = detail[0]
        return cls(f"{first['loc']}: {first['msg']}", detail)
