"""Structured JSON logs with run and rollout ids, for every harnessrl service.

A service calls ``configure_logging("gateway")`` once at start; from then on every record of every logger is
one JSON object per line on stderr::

    {"ts": "2026-11-30T18:01:02.345Z", "level": "info", "service": "gateway", "logger": "services.gateway.app",
     "msg": "call captured", "run_id": "run_…", "rollout_id": "ro_…", "call_id": 17}

Ids get into records without being passed to each log call: ``bind(run_id=..., rollout_id=...)`` puts them
into a ``contextvars`` context for the duration of a ``with`` block, so they follow an asyncio task (an
aiohttp request) or a thread (a Celery task) and never leak into another one. Per-record fields go in
``extra={"call_id": 17}``. ``bind`` nests; an inner binding overrides an outer one until its block ends.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("harnessrl_log_context", default={})  # noqa: B039 - never mutated, replaced on bind

# Attributes every LogRecord has; anything else on a record came from ``extra=`` and is logged as a field.
_RECORD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[dict[str, Any]]:
    """Attach ``fields`` (e.g. ``run_id``, ``rollout_id``) to every record logged inside the block."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield _context.get()
    finally:
        _context.reset(token)


def bound() -> dict[str, Any]:
    """The fields bound in the current context (a copy)."""
    return dict(_context.get())


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, service, logger, message, bound ids, extras, exception."""

    def __init__(self, service: str = "") -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_context.get())
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(
    service: str, level: str | int = "INFO", stream: TextIO | None = None
) -> logging.Handler:
    """Route every logger of this process through one JSON handler; returns the handler (tests read it).

    Replaces handlers a previous call installed, so calling it twice does not duplicate lines.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_harnessrl", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    handler._harnessrl = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    return handler
