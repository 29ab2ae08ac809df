"""Session binding: which rollout a request belongs to (DESIGN §2), never an implicit session.

The rollout key is taken from, in order: the base-URL path prefix ``/r/<rollout-key>/...`` (all four CLIs keep a
path prefix), ``Authorization: Bearer``, ``x-api-key``, ``x-goog-api-key``, ``?key=``. A missing key, an unknown
key, or the key of a rollout that is already over (finished, grading, graded, failed) is a ``BindingError`` the
handler answers with 401 in the caller's provider shape.

``RolloutDirectory`` looks keys up in Postgres and caches hits for ``ttl_s`` (2 s: a burst of calls costs one
query, and a rollout the runner closes or re-keys stops binding almost at once). Misses are not cached, so a rollout created a moment before its harness starts binds at
once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from shared.models import Rollout, Run

CLOSED_STATUSES = ("finished", "grading", "graded", "failed")
PATH_KEY = "rollout_key"


class BindingError(Exception):
    """No live rollout for this request; the message says what to fix."""


@dataclass(frozen=True)
class BoundRollout:
    rollout_id: str
    run_id: str
    harness: str
    rollout_key: str
    sampling: dict[str, Any] = field(default_factory=dict)
    """The run's ``config.sampling`` (temperature, top_p, max_tokens) that overrides the harness's request."""

    @property
    def session(self) -> str:
        """What the splicer keys chain tips by: the key, so a retried rollout (the runner issues a new key) starts
        clean instead of extending chains its previous attempt left (and the runner deleted)."""
        return self.rollout_key


def rollout_key_of(request: web.Request) -> str | None:
    """The key the request presents, or None."""
    if key := request.match_info.get(PATH_KEY):
        return key
    authorization = request.headers.get("Authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    for header in ("x-api-key", "x-goog-api-key"):
        if value := request.headers.get(header, "").strip():
            return value
    return request.query.get("key") or None


class RolloutDirectory:
    """Rollout keys to rollouts, from Postgres, with a small positive cache."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], ttl_s: float = 2.0) -> None:
        self.sessions = sessions
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, BoundRollout]] = {}

    async def resolve(self, key: str | None) -> BoundRollout:
        if not key:
            raise BindingError(
                "no rollout key: send it as the API key (Authorization: Bearer, x-api-key, x-goog-api-key, "
                "?key=) or in the base URL as /r/<rollout-key>/"
            )
        hit = self._cache.get(key)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        async with self.sessions() as session:
            row = (
                await session.execute(
                    select(
                        Rollout.id, Rollout.run_id, Rollout.harness, Rollout.status, Run.config["sampling"]
                    )
                    .join(Run, Run.id == Rollout.run_id)
                    .where(Rollout.rollout_key == key)
                )
            ).first()
        if row is None:
            raise BindingError("unknown rollout key; this gateway only serves rollouts it was given")
        if row.status in CLOSED_STATUSES:
            raise BindingError(f"rollout {row.id} is {row.status}; it takes no more model calls")
        bound = BoundRollout(row.id, row.run_id, row.harness, key, row[4] or {})
        self._cache[key] = (time.monotonic() + self.ttl_s, bound)
        if len(self._cache) > 65536:
            self._cache.clear()
        return bound
