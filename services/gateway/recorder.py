"""Write-behind capture: calls are recorded after their reply went out, in batches, and none is lost silently.

Concurrency model: ``ModelCall`` (the handler's task) commits the chain tip — which registers the call as pending
under this process's lease (``shared/capture_state.py``) — then ``submit``s its ``CallRecord`` and sends the reply's
last bytes, then calls ``reply_done``. One writer task per process owns everything after that: it takes whatever is
queued (up to ``batch_max`` records, once a short queue has had ``linger_s`` — ``settings.capture_linger_ms`` — to
fill), waits for their drift checks, and writes them in one transaction
(``capture.CallWriter``). A call leaves the pending set only when both its rows are committed and its reply
was written, so a process that dies between the tip commit and either of them leaves the call pending under a
dead lease: the runner's flush barrier reports it lost and the attempt is retried, never graded.

- ``deferred`` records (their parent call is another process's, not written yet) are retried every
  ``defer_s`` until ``give_up_s``;
- a failed transaction is retried with backoff until ``give_up_s``; then each of its calls is marked failed in
  the pending set (the barrier fails fast instead of waiting for a timeout);
- ``stale`` records (the runner has moved on) are dropped and their pending entries removed.

``close`` (the app's shutdown) drains the queue before the process exits; a SIGKILL is what the barrier is for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable

import redis.asyncio as aioredis

from services.gateway.capture import CallRecord, CallWriter
from shared import capture_state as cs
from shared import metrics

log = logging.getLogger("harnessrl.gateway")


class Recorder:
    def __init__(
        self,
        writer: CallWriter,
        redis_client: aioredis.Redis,
        *,
        batch_max: int = 64,
        linger_s: float = 0.01,
        defer_s: float = 0.05,
        give_up_s: float = 60.0,
    ) -> None:
        self.writer = writer
        self.redis = redis_client
        self.batch_max = batch_max
        self.linger_s = linger_s
        self.defer_s = defer_s
        self.give_up_s = give_up_s
        self._queue: deque[tuple[float, CallRecord]] = deque()  # (first seen, record)
        self._deferred: list[tuple[float, float, CallRecord]] = []  # (retry at, first seen, record)
        self._wake = asyncio.Event()
        self._replied: set[int] = set()
        self._written: dict[int, str] = {}
        self._writer: asyncio.Task[None] | None = None
        self._side: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    # --- the handlers' side --------------------------------------------------------------------------------
    def start(self) -> None:
        self._writer = asyncio.create_task(self._run(), name="capture-writer")

    def submit(self, record: CallRecord) -> None:
        self._queue.append((time.monotonic(), record))
        self._idle.clear()
        self._wake.set()

    def reply_done(self, rollout_key: str, call_id: int) -> None:
        """The call's reply was written (or its client went away): once its rows are in, it is no longer pending."""
        if self._written.pop(call_id, None) is not None:
            self._background(self.redis.hdel(cs.pending_key(rollout_key), str(call_id)))  # type: ignore[arg-type]
        else:
            self._replied.add(call_id)

    @property
    def backlog(self) -> int:
        return len(self._queue) + len(self._deferred)

    async def flushed(self, timeout_s: float | None = None) -> None:
        """Wait until everything submitted so far is written or given up (tests, shutdown)."""
        await asyncio.wait_for(self._idle.wait(), timeout_s)

    async def close(self, timeout_s: float = 30.0) -> None:
        try:
            await self.flushed(timeout_s)
        except TimeoutError:
            log.error("capture writer: %d records still unwritten at shutdown", self.backlog)
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        if self._side:
            await asyncio.wait(self._side, timeout=5)
        await self.writer.close()

    # --- the writer ----------------------------------------------------------------------------------------
    def _background(self, work: Awaitable[object]) -> None:
        task = asyncio.ensure_future(work)
        self._side.add(task)
        task.add_done_callback(self._side.discard)

    def _take(self) -> list[tuple[float, CallRecord]]:
        now = time.monotonic()
        ready = [item for item in self._deferred if item[0] <= now]
        self._deferred = [item for item in self._deferred if item[0] > now]
        batch = [(first, record) for _, first, record in ready[: self.batch_max]]
        self._deferred += ready[self.batch_max :]
        while self._queue and len(batch) < self.batch_max:
            batch.append(self._queue.popleft())
        return batch

    async def _linger(self) -> None:
        """Let a short queue fill for up to ``linger_s`` after its oldest record came: each transaction costs a
        fixed handful of round trips, so under load fewer, fuller batches spend less of Postgres and of this
        process per record (the records only land that much later; replies are not waiting on them)."""
        if self._queue and len(self._queue) < self.batch_max:
            wait_s = self._queue[0][0] + self.linger_s - time.monotonic()
            if wait_s > 0:
                await asyncio.sleep(wait_s)

    async def _run(self) -> None:
        while True:
            await self._linger()
            batch = self._take()
            if not batch:
                if not self._deferred:
                    self._idle.set()
                    self._wake.clear()
                    await self._wake.wait()
                else:
                    wait_s = max(0.0, min(item[0] for item in self._deferred) - time.monotonic())
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), wait_s)
                continue
            try:
                await self._write([record for _, record in batch], [first for first, _ in batch])
            except Exception:  # never let the writer die: log and go on with the next batch
                log.exception("capture writer failed on a batch of %d records", len(batch))

    async def _write(self, records: list[CallRecord], first_seen: list[float]) -> None:
        for record in records:
            if record.drift is not None and record.retemplate_drift is None:
                try:
                    record.retemplate_drift = await record.drift
                except Exception:  # the drift check is a measurement; the record goes in without it
                    log.warning("drift check of call %d failed", record.call_id, exc_info=True)
        started = time.monotonic()
        delay = 0.05
        while True:
            try:
                outcome = await self.writer.write(records)
                break
            except Exception as exc:
                if time.monotonic() - min(first_seen) > self.give_up_s:
                    log.exception("capture writer gives up on %d records", len(records))
                    await self._give_up(records, f"{type(exc).__name__}: {exc}")
                    return
                log.warning("capture write failed (%s); retrying in %.2f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        metrics.CAPTURE_WRITE_SECONDS.observe(time.monotonic() - started)
        metrics.CAPTURE_BATCH_RECORDS.observe(len(outcome.written))
        for record in outcome.written:
            metrics.CALLS_CAPTURED.labels(record.provider_api, record.finish_reason).inc()
        pipe = self.redis.pipeline(transaction=False)
        for record in outcome.written:
            if record.call_id in self._replied:
                self._replied.discard(record.call_id)
                pipe.hdel(cs.pending_key(record.rollout_key), str(record.call_id))
            else:
                self._written[record.call_id] = record.rollout_key
        for record in outcome.stale:
            log.warning(
                "call %d of rollout %s dropped: the runner has moved on from key %s",
                record.call_id,
                record.rollout_id,
                record.rollout_key[:8],
            )
            self._replied.discard(record.call_id)
            pipe.hdel(cs.pending_key(record.rollout_key), str(record.call_id))
        await pipe.execute()
        seen = dict(zip((id(r) for r in records), first_seen, strict=True))
        now = time.monotonic()
        for record in outcome.deferred:
            if now - seen[id(record)] > self.give_up_s:
                await self._give_up([record], "its parent call was never recorded")
            else:
                self._deferred.append((now + self.defer_s, seen[id(record)], record))

    async def _give_up(self, records: list[CallRecord], reason: str) -> None:
        metrics.CAPTURE_LOST.inc(len(records))
        pipe = self.redis.pipeline(transaction=False)
        for record in records:
            self._replied.discard(record.call_id)
            pipe.hset(
                cs.pending_key(record.rollout_key), str(record.call_id), cs.FAILED_PREFIX + reason[:200]
            )
        try:
            await pipe.execute()
        except Exception:  # the lease will run out only when the process dies; the barrier then times out
            log.exception("could not mark %d lost records in Redis", len(records))
