"""Session binding: which rollout a request belongs to (docs/design.md#session-binding), never an implicit session.

The rollout key is taken from, in order: the base-URL path prefix ``/r/<rollout-key>/...`` (all four CLIs keep a
path prefix), ``Authorization: Bearer``, ``x-api-key``, ``x-goog-api-key``, ``?key=``. A missing key, an unknown
key, or the key of a rollout that is already over (``ROLLOUT_CLOSED``) is a ``BindingError`` the
handler answers with 401 in the caller's provider shape.

``RolloutDirectory`` reads the key's state in Redis (``shared/capture_state.py``) — one round trip that also brings
the rollout's chain tips for the splice. The binding there was written by the runner when it started the attempt,
or by a gateway after a database lookup; it is trusted for ``BINDING_FRESH_S`` (30 s) after someone last saw the
row running, then re-read from Postgres — for a model call, while the model works on its prompt rather than before
the call plans (``resolve_deferred``; the reply waits for the re-read, so a rollout found over is still refused).
The runner's flush barrier marks the key ``closed`` when the attempt ends and a retried attempt gets a new key, so
a straggler is refused at once. Unknown keys are looked up in Postgres every time, so a rollout created a moment
before its harness starts binds at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from aiohttp import web
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from services.gateway.conversation import ProviderError
from services.gateway.tips import RolloutState, TipStore
from shared.capture_state import BINDING_FRESH_S, Binding
from shared.models import Rollout, Run
from shared.run_config import SamplingConfig, TeacherConfig
from shared.statuses import ROLLOUT_CLOSED

PATH_KEY = "rollout_key"


class BindingError(Exception):
    """No live rollout for this request; the message says what to fix."""


Recheck = Callable[[], Coroutine[Any, Any, Binding]]
"""The re-read of a stale binding's row (``RolloutDirectory.resolve_deferred``); raises ``BindingError`` when the
rollout is over."""


@contextmanager
def binding_errors() -> Iterator[None]:
    """A binding that failed, in the caller's terms: 401 (no live rollout) or 503 (no state store or database)."""
    try:
        yield
    except BindingError as exc:
        raise ProviderError(401, str(exc), "authentication_error") from None
    except (RedisError, OSError) as exc:
        raise ProviderError(503, f"the gateway cannot reach its state store: {exc}", "api_error") from exc
    except SQLAlchemyError as exc:
        raise ProviderError(503, f"the gateway cannot read the rollout: {exc}", "api_error") from exc


@dataclass(frozen=True, kw_only=True)
class BoundRollout:
    rollout_id: str
    run_id: str
    harness: str
    rollout_key: str
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """The run config's ``sampling`` section (temperature, top_p, max_tokens); it overrides the harness's request."""
    lora: bool = False
    """The run trains a LoRA adapter: its calls sample with the run's newest served adapter (``shared.adapters``)."""
    seed: int | None = None
    """The rollout's sampling seed; its n-th call samples with ``shared.sampling_seed.call_seed(seed, n)``."""
    teacher: TeacherConfig | None = None
    """The run's teacher: it answers the calls instead of the policy (``services/gateway/teacher.py``)."""


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
    """Rollout keys to rollouts: Redis first (with the chain tips), Postgres when the binding is unknown or old."""

    def __init__(self, engine: AsyncEngine, tips: TipStore, fresh_s: float = BINDING_FRESH_S) -> None:
        self.engine = engine
        self.tips = tips
        self.fresh_s = fresh_s

    async def resolve(self, key: str | None, serving: str | None = None) -> tuple[BoundRollout, RolloutState]:
        """The rollout a key serves, with its state; ``serving`` marks a model call as being served
        (``shared/capture_state.py``)."""
        bound, state, recheck = await self.resolve_deferred(key, serving)
        if recheck is not None:
            await recheck()
        return bound, state

    async def resolve_deferred(
        self, key: str | None, serving: str | None = None
    ) -> tuple[BoundRollout, RolloutState, Recheck | None]:
        """``resolve``, except that a binding past its freshness comes with the re-read of its row still to do: a
        model call runs it while the model works on its prompt and answers only once it passed (``ModelCall``), so
        a live rollout's call does not wait for the database before it plans and asks the model. The stale
        binding's fields are the row's as of its last read; only its status can have changed since (a rollout's
        run, harness, sampling and seed are fixed). An unknown key is looked up before anything else."""
        if not key:
            raise BindingError(
                "no rollout key: send it as the API key (Authorization: Bearer, x-api-key, x-goog-api-key, "
                "?key=) or in the base URL as /r/<rollout-key>/"
            )
        state = await self.tips.load(key, serving)
        if state.closed:
            raise BindingError("this rollout is over; it takes no more model calls")
        binding = state.binding
        recheck = None
        if binding is None:
            binding = await self._refresh(key)
        elif time.time() - binding.checked_at > self.fresh_s:
            recheck = partial(self._refresh, key)
        # Only the run config's sampling section is kept (validated by its own model), not the whole RunConfig.
        sampling = SamplingConfig.model_validate(binding.sampling)
        teacher = TeacherConfig.model_validate(binding.teacher) if binding.teacher is not None else None
        bound = BoundRollout(
            rollout_id=binding.rollout_id,
            run_id=binding.run_id,
            harness=binding.harness,
            rollout_key=key,
            sampling=sampling,
            lora=binding.lora,
            seed=binding.seed,
            teacher=teacher,
        )
        return bound, state, recheck

    async def _refresh(self, key: str) -> Binding:
        """Read the rollout's row and write what it says to the key's state for the next calls."""
        binding = await self._lookup(key)
        await self.tips.bind(key, binding)
        return binding

    async def _lookup(self, key: str) -> Binding:
        checked_at = time.time()
        # autocommit: one statement, no BEGIN/ROLLBACK round trips around it
        async with self.engine.connect() as connection:
            connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
            row = (
                await connection.execute(
                    select(
                        Rollout.id,
                        Rollout.run_id,
                        Rollout.harness,
                        Rollout.status,
                        Run.config["sampling"],
                        Run.config["lora"],
                        Rollout.sampling_seed,
                        Run.config["teacher"],
                    )
                    .join(Run, Run.id == Rollout.run_id)
                    .where(Rollout.rollout_key == key)
                )
            ).first()
        if row is None:
            raise BindingError("unknown rollout key; this gateway only serves rollouts it was given")
        if row.status in ROLLOUT_CLOSED:
            raise BindingError(f"rollout {row.id} is {row.status}; it takes no more model calls")
        return Binding(
            row.id,
            row.run_id,
            row.harness,
            row[4] or {},
            checked_at,
            row[5] is not None,
            row.sampling_seed,
            teacher=row[7],
        )
