"""The updater: makes one vLLM server serve each newly published policy version, and records the outcome.

Owned state and concurrency: one ``Updater`` per vLLM server, one asyncio task (``run``). It applies one
checkpoint at a time, in arrival order; ``served`` is the (run, version) it last made the server serve.

Flow for a published version (a ``weights`` row plus a message on the ``weights`` channel):
  1. row → ``loading``; download the object (absent → ``rejected``);
  2. validate names, shapes, dtypes, finiteness and sha256 against the served model (``checkpoint.py``) —
     a bad checkpoint is ``rejected`` with the reason and the engine is never touched;
  3. swap (``swap.py``): pause → update → label the engine with the version and set the served policy version
     in Redis → resume;
  4. row → ``served`` with ``swap_ms`` and ``applied_at`` (or ``failed`` with the error if the server failed).

Start-up: it subscribes to the channel first and then catches up from the newest ``weights`` row of any run
that is not ``rejected``/``failed``, so a version published while the updater was down is still served, and
a restarted vLLM (base weights again) gets the current policy back. Without such a row the base model is
labelled version 0. A message for a version at or below the one served for the same run is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from services.inference.checkpoint import CheckpointRejected, served_tensor_specs, validate_checkpoint
from services.inference.swap import SwapFailed, init_weight_transfer, label_version, swap_weights
from shared.db import session_scope
from shared.events import connect, set_policy_version, weights_channel
from shared.inference_client import InferenceUnavailable
from shared.models import Weight
from shared.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Published:
    """What a ``weights`` channel message announces."""

    run_id: str
    version: int
    object_key: str

    @classmethod
    def from_message(cls, data: str) -> Published:
        try:
            payload = json.loads(data)
            return cls(str(payload["run_id"]), int(payload["version"]), str(payload["object_key"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"malformed weights message {data[:200]!r}: {exc}") from None


@dataclass(frozen=True)
class Outcome:
    status: str  # served | rejected | failed | skipped
    error: str | None = None
    swap_ms: float | None = None  # how long generation was paused
    prepare_ms: float | None = None  # download + validation + staging, before the pause


class Updater:
    def __init__(
        self,
        base_url: str,
        model_dir: Path,
        store: ObjectStore,
        sessions: sessionmaker[Session],
        redis_url: str,
        work_dir: Path,
        served_by: str = "",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.expected = served_tensor_specs(model_dir)
        self.store = store
        self.sessions = sessions
        self.redis_url = redis_url
        self.work_dir = work_dir
        self.served_by = served_by or self.base_url
        self.served: tuple[str, int] | None = None
        self.last_outcome: tuple[Published, Outcome] | None = None
        self._http: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300))
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    # --- one version ---------------------------------------------------------------------------------
    def _row(self, session: Session, run_id: str, version: int) -> Weight | None:
        return session.scalars(
            select(Weight).where(Weight.run_id == run_id, Weight.version == version)
        ).first()

    def _record(self, published: Published, outcome: Outcome, **fields: object) -> None:
        with session_scope(self.sessions) as session:
            row = self._row(session, published.run_id, published.version)
            if row is None:
                log.warning("no weights row for run %s version %s", published.run_id, published.version)
                return
            row.status = outcome.status
            row.error = outcome.error
            if outcome.swap_ms is not None:
                row.swap_ms = outcome.swap_ms
                row.applied_at = datetime.now(UTC)
            for name, value in fields.items():
                setattr(row, name, value)

    def _expected_sha256(self, published: Published) -> str | None:
        with session_scope(self.sessions) as session:
            row = self._row(session, published.run_id, published.version)
            if row is None:
                return None
            row.status = "loading"
            return row.sha256

    async def apply(self, published: Published) -> Outcome:
        """Validate and serve one published version; the ``weights`` row records the outcome."""
        if (
            self.served is not None
            and self.served[0] == published.run_id
            and published.version <= self.served[1]
        ):
            log.info(
                "version %s of run %s is not newer than the served one", published.version, published.run_id
            )
            return Outcome("skipped")
        sha256 = await asyncio.to_thread(self._expected_sha256, published)
        source = f"weights {published.object_key!r} (run {published.run_id}, version {published.version})"
        started = time.perf_counter()
        try:
            blob = await asyncio.to_thread(self.store.get_bytes, published.object_key)
        except ObjectNotFound:
            return await self._finish(published, Outcome("rejected", f"{source}: object not found"))
        except (ObjectStoreError, OSError) as exc:
            return await self._finish(published, Outcome("failed", f"{source}: object store: {exc}"))
        try:
            await asyncio.to_thread(validate_checkpoint, blob, self.expected, sha256, source)
        except CheckpointRejected as exc:
            return await self._finish(published, Outcome("rejected", str(exc)), size_bytes=len(blob))

        self.work_dir.mkdir(parents=True, exist_ok=True)
        path = self.work_dir / f"incoming-{published.run_id}-{published.version}.safetensors"
        await asyncio.to_thread(path.write_bytes, blob)
        prepare_ms = (time.perf_counter() - started) * 1000

        async def publish_served_version() -> None:
            # Inside the pause: once generation resumes, Redis already names the version being served.
            r = connect(self.redis_url)
            try:
                await asyncio.to_thread(set_policy_version, r, published.version, self.served_by)
            finally:
                r.close()

        try:
            swap_ms = await swap_weights(
                self.http, self.base_url, path, published.version, on_swapped=publish_served_version
            )
        except (SwapFailed, InferenceUnavailable) as exc:
            return await self._finish(published, Outcome("failed", f"{source}: swap failed: {exc}"))
        finally:
            path.unlink(missing_ok=True)
        self.served = (published.run_id, published.version)
        log.info("serving run %s version %s (paused %.0f ms)", published.run_id, published.version, swap_ms)
        return await self._finish(
            published,
            Outcome("served", swap_ms=swap_ms, prepare_ms=prepare_ms),
            size_bytes=len(blob),
            sha256=sha256 or hashlib.sha256(blob).hexdigest(),
        )

    async def _finish(self, published: Published, outcome: Outcome, **fields: object) -> Outcome:
        self.last_outcome = (published, outcome)
        if outcome.status != "served":
            log.warning(
                "not serving run %s version %s: %s", published.run_id, published.version, outcome.error
            )
        await asyncio.to_thread(self._record, published, outcome, **fields)
        return outcome

    # --- lifetime ------------------------------------------------------------------------------------
    def _newest_servable(self) -> Published | None:
        with session_scope(self.sessions) as session:
            row = session.scalars(
                select(Weight)
                .where(Weight.status.in_(("published", "loading", "served")))
                .order_by(Weight.created_at.desc(), Weight.id.desc())
                .limit(1)
            ).first()
            return Published(row.run_id, row.version, row.object_key) if row else None

    async def catch_up(self) -> None:
        """Serve the newest servable version, or label the base model version 0."""
        await init_weight_transfer(self.http, self.base_url)
        newest = await asyncio.to_thread(self._newest_servable)
        if newest is None or (await self.apply(newest)).status != "served":
            await label_version(self.http, self.base_url, 0)
            r = connect(self.redis_url)
            try:
                await asyncio.to_thread(set_policy_version, r, 0, self.served_by)
            finally:
                r.close()

    async def run(self, stop: asyncio.Event, catch_up: bool = True) -> None:
        """Subscribe, catch up (unless told not to), then apply each announced version until ``stop`` is set."""
        sync_redis = connect(self.redis_url)
        channel = weights_channel(sync_redis)
        sync_redis.close()
        r = aioredis.from_url(self.redis_url, decode_responses=True)
        pubsub = r.pubsub()
        try:
            await pubsub.subscribe(channel)
            if catch_up:
                await self.catch_up()
            while not stop.is_set():
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
                if message is None:
                    continue
                try:
                    published = Published.from_message(message["data"])
                except ValueError as exc:
                    log.error("%s", exc)
                    continue
                await self.apply(published)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.unsubscribe(channel)
            await pubsub.aclose()  # type: ignore[attr-defined]  # redis>=5; the stubs predate it
            await r.aclose()  # type: ignore[attr-defined]
            await self.close()
