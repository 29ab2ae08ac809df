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

A LoRA run's version is an adapter (``adapters/<run>/<version>/``, ``shared.adapters``): it is downloaded next to
its ``adapter_config.json``, checked against its sha256 and loaded into vLLM under the name ``<run>-v<version>``
(``POST /v1/load_lora_adapter``; the server runs with ``--enable-lora`` and runtime LoRA updating) — no pause, the
base weights stay — then the run's served adapter is set in Redis, so the gateway samples the run's next calls
with it and records the version the name carries. The adapter before it stays loaded for calls in flight; older
ones are unloaded.

Start-up: it subscribes to the channel first and then catches up from the newest ``weights`` row that is not
``rejected``/``failed`` of a run that is not over (with an exclusive pool, of the run holding the pool), so a
version published while the updater was down is still served, and a restarted vLLM (base weights again) gets
the current policy back; a finished run's weights are never applied again. Without such a row the base model is
labelled version 0. A message for a version at or below the one served for the same run is ignored.

Exclusive pool (``Settings.pool_exclusive``, the default): one run at a time holds the pool. A rebase message
(``shared.events.publish_rebase``, sent by the api's scheduler before it starts a queued run) makes the engine
serve the base weights again (a swap from the model directory's own safetensors; only a relabel when the engine
still holds them) as version 0 of that run, and the pool's state in Redis names the run. A version published by
a run that does not hold the pool is rejected with the reason, never served.

A training run started from another run's version (``RunSpec.init``: an SFT run's, a GRPO run's) has those weights
as its version 0: the rebase (and a catch-up before the run published a version of its own) serves that version's
full weights, checked against its ``weights`` row's sha256, labelled 0 under the run's name. SFT runs
(``runs.kind = 'sft'``) sample nothing: they never hold the pool and catch-up never serves their versions, which
are served only as an eval's target or a run's init.

Evals (``runs.kind = 'eval'``) take the pool with the same rebase message; the updater reads what the eval
evaluates from its config (``RunConfig.target``) and serves it under the eval's name: the base weights (version
0), a run's published full weights of version N (its ``weights`` row's object, checked against the row's sha256;
only a relabel when the engine holds exactly those weights already), a model directory of the same architecture
(version 0; its tensors checked against the served model's), or a LoRA adapter, loaded under the name
``<eval>-v<N>`` and set as the eval's served adapter. So the one case where a finished run's weights are applied
again is as the target of the eval that now holds the pool, labelled with the evaluated version; catch-up
re-serves an active eval's target the same way. A target that cannot be served (object gone, wrong shapes) fails
the eval with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from services.inference.checkpoint import CheckpointRejected, served_tensor_specs, validate_checkpoint
from services.inference.swap import (
    SwapFailed,
    init_weight_transfer,
    label_version,
    load_adapter,
    swap_weights,
    unload_adapter,
)
from shared.adapters import adapter_config_key, adapter_name, is_adapter_key, set_served_adapter
from shared.db import session_scope
from shared.events import connect, rebase_request, weights_channel
from shared.inference_client import InferenceUnavailable
from shared.models import Run, Weight
from shared.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from shared.pool import set_served
from shared.run_config import EvalTarget, InitFrom, RunConfigError, read_run_config
from shared.statuses import RUN_FINISHED, RunKind, RunStatus

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
        exclusive: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model_dir = model_dir
        self.expected = served_tensor_specs(model_dir)
        self.exclusive = exclusive
        self.engine_holds_base = True  # a vLLM server starts from the model directory's weights
        # What the engine's weights are (besides adapters): ("base",), ("weights", run, version), ("model_dir", path).
        self.engine_source: tuple[object, ...] = ("base",)
        self.store = store
        self.sessions = sessions
        self.redis_url = redis_url
        self.work_dir = work_dir
        self.served_by = served_by or self.base_url
        self.served: tuple[str, int] | None = None
        self.adapters: dict[str, list[int]] = {}  # run → adapter versions loaded, oldest first
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
        if is_adapter_key(published.object_key):
            return await self.apply_adapter(published)
        if self.exclusive and self.served is not None and self.served[0] != published.run_id:
            holder = f"run {self.served[0]}" if self.served[0] else "no run (the base model)"
            error = f"run {published.run_id} does not hold the inference pool ({holder} does); not served"
            return await self._finish(published, Outcome("rejected", error))
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
                await asyncio.to_thread(set_served, r, published.run_id, published.version, self.served_by)
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
        self.engine_holds_base = False
        self.engine_source = ("weights", published.run_id, published.version)
        log.info("serving run %s version %s (paused %.0f ms)", published.run_id, published.version, swap_ms)
        return await self._finish(
            published,
            Outcome("served", swap_ms=swap_ms, prepare_ms=prepare_ms),
            size_bytes=len(blob),
            sha256=sha256 or hashlib.sha256(blob).hexdigest(),
        )

    async def apply_adapter(self, published: Published, serve_as: str | None = None) -> Outcome:
        """Load a LoRA run's adapter version into vLLM at run time and make it the run's served adapter.
        ``serve_as``: an eval of that version; the adapter is loaded under the eval's name and served to it, and
        the version's ``weights`` row is left alone."""
        run_id, version = serve_as or published.run_id, published.version
        if version <= self.adapters.get(run_id, [0])[-1]:
            return Outcome("skipped")
        if serve_as is None:
            sha256 = await asyncio.to_thread(self._expected_sha256, published)
        else:
            sha256 = (await asyncio.to_thread(self._weights_row, published.run_id, version) or ("", None))[1]
        source = f"adapter {published.object_key!r} (run {run_id}, version {version})"

        async def finish(published: Published, outcome: Outcome, **fields: object) -> Outcome:
            # An eval's load is not the version's publication: its weights row stays as the run left it.
            return outcome if serve_as is not None else await self._finish(published, outcome, **fields)

        started = time.perf_counter()
        name = adapter_name(run_id, version)
        folder = self.work_dir / "adapters" / name
        try:
            blob = await asyncio.to_thread(self.store.get_bytes, published.object_key)
            config = await asyncio.to_thread(self.store.get_bytes, adapter_config_key(published.object_key))
        except ObjectNotFound:
            return await finish(published, Outcome("rejected", f"{source}: object not found"))
        except (ObjectStoreError, OSError) as exc:
            return await finish(published, Outcome("failed", f"{source}: object store: {exc}"))
        if sha256 is not None and hashlib.sha256(blob).hexdigest() != sha256:
            return await finish(published, Outcome("rejected", f"{source}: sha256 does not match"))
        folder.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread((folder / "adapter_model.safetensors").write_bytes, blob)
        await asyncio.to_thread((folder / "adapter_config.json").write_bytes, config)
        prepare_ms = (time.perf_counter() - started) * 1000
        try:
            await load_adapter(self.http, self.base_url, name, folder)
        except (SwapFailed, InferenceUnavailable) as exc:
            return await finish(published, Outcome("failed", f"{source}: load failed: {exc}"))
        r = connect(self.redis_url)
        try:
            await asyncio.to_thread(set_served_adapter, r, run_id, name)
        finally:
            r.close()
        loaded = self.adapters.setdefault(run_id, [])
        loaded.append(version)
        for old in loaded[:-2]:  # keep the previous adapter for calls in flight
            with contextlib.suppress(SwapFailed, InferenceUnavailable):
                await unload_adapter(self.http, self.base_url, adapter_name(run_id, old))
            await asyncio.to_thread(
                shutil.rmtree, self.work_dir / "adapters" / adapter_name(run_id, old), True
            )
        del loaded[:-2]
        load_ms = (time.perf_counter() - started) * 1000 - prepare_ms
        log.info("serving run %s adapter %s (loaded in %.0f ms)", run_id, name, load_ms)
        return await finish(
            published,
            Outcome("served", swap_ms=load_ms, prepare_ms=prepare_ms),
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

    # --- the pool's holder ---------------------------------------------------------------------------
    async def _set_served(self, run_id: str, version: int) -> None:
        r = connect(self.redis_url)
        try:
            await asyncio.to_thread(set_served, r, run_id, version, self.served_by)
        finally:
            r.close()

    async def rebase(self, run_id: str) -> Outcome:
        """Serve what ``run_id`` (the run about to hold the pool) samples from: the base weights as its version
        0, or, for an eval, its target (module docstring)."""
        target = await asyncio.to_thread(self._target_of, run_id)
        if target is not None and target.source != "base":
            return await self.serve_eval(run_id, target)
        init = await asyncio.to_thread(self._init_of, run_id)
        if init is not None:
            return await self.serve_init(run_id, init)
        if self.served == (run_id, 0) and self.engine_holds_base:
            return Outcome("skipped")
        outcome = await self._serve_base(run_id)
        if outcome.status == "served":
            log.info(
                "the pool serves run %s at version 0 (base weights; paused %.0f ms)", run_id, outcome.swap_ms
            )
        return outcome

    async def _serve_base(self, run_id: str) -> Outcome:
        if self.engine_holds_base:
            await label_version(self.http, self.base_url, 0)
            await self._set_served(run_id, 0)
            swap_ms = 0.0
        else:
            files = sorted(self.model_dir.glob("*.safetensors"))
            try:
                swap_ms = await swap_weights(
                    self.http, self.base_url, files, 0, on_swapped=lambda: self._set_served(run_id, 0)
                )
            except (SwapFailed, InferenceUnavailable) as exc:
                log.error("rebase to the base weights for run %s failed: %s", run_id, exc)
                return Outcome("failed", f"rebase failed: {exc}")
        self.served, self.engine_holds_base, self.engine_source = (run_id, 0), True, ("base",)
        return Outcome("served", swap_ms=swap_ms)

    # --- evals ---------------------------------------------------------------------------------------------
    def _target_of(self, run_id: str) -> EvalTarget | None:
        with session_scope(self.sessions) as session:
            run = session.get(Run, run_id)
            if run is None or run.kind != RunKind.EVAL:
                return None
            try:
                return read_run_config(run).target
            except RunConfigError:
                return None

    def _fail_eval(self, run_id: str, error: str) -> None:
        """An eval whose target cannot be served ends ``failed`` with the reason (nothing was sampled yet)."""
        with session_scope(self.sessions) as session:
            run = session.get(Run, run_id, with_for_update=True)
            if run is not None and run.status in (RunStatus.QUEUED, RunStatus.RUNNING):
                run.status, run.error = RunStatus.FAILED, error

    def _weights_row(self, run_id: str, version: int) -> tuple[str, str | None] | None:
        with session_scope(self.sessions) as session:
            row = self._row(session, run_id, version)
            return None if row is None else (row.object_key, row.sha256)

    async def serve_eval(self, eval_id: str, target: EvalTarget) -> Outcome:
        """Serve an eval's target under the eval's name (labelled with the evaluated version)."""
        source = (
            f"eval {eval_id}: {target.source} {target.run_id or target.model_dir or ''} v{target.version}"
        )
        try:
            if target.source == "adapter":
                outcome = await self._serve_eval_adapter(eval_id, target)
            elif target.source == "weights":
                outcome = await self._serve_eval_weights(eval_id, target)
            else:
                outcome = await self._serve_model_dir(eval_id, Path(target.model_dir or ""))
        except (SwapFailed, InferenceUnavailable, ObjectStoreError, OSError, CheckpointRejected) as exc:
            outcome = Outcome("failed", f"{source}: {exc}")
        if outcome.status in ("rejected", "failed"):
            log.error("cannot serve %s: %s", source, outcome.error)
            await asyncio.to_thread(
                self._fail_eval, eval_id, f"the inference pool cannot serve it: {outcome.error}"
            )
        else:
            log.info("the pool serves %s (%s)", source, outcome.status)
        return outcome

    async def _serve_eval_weights(self, eval_id: str, target: EvalTarget) -> Outcome:
        return await self._serve_run_weights(eval_id, target.run_id or "", target.version, target.version)

    # --- a training run's init ------------------------------------------------------------------------------
    def _init_of(self, run_id: str) -> InitFrom | None:
        """A training run's ``init`` (another run's version it starts from; ``RunSpec.init``), None for the base."""
        with session_scope(self.sessions) as session:
            run = session.get(Run, run_id)
            if run is None or run.kind != RunKind.TRAIN:
                return None
            try:
                init = read_run_config(run).init
            except RunConfigError:
                return None
            return init if init is not None and init.version else None

    async def serve_init(self, run_id: str, init: InitFrom) -> Outcome:
        """Serve the version a run starts from as its version 0 (``RunSpec.init``; the pool's rebase of it)."""
        try:
            outcome = await self._serve_run_weights(run_id, init.run_id, init.version or 0, 0)
        except (SwapFailed, InferenceUnavailable, ObjectStoreError, OSError, CheckpointRejected) as exc:
            outcome = Outcome("failed", str(exc))
        if outcome.status in ("rejected", "failed"):
            log.error("cannot serve run %s's init %s: %s", run_id, init, outcome.error)
        else:
            log.info(
                "the pool serves run %s at version 0: the weights of %s (%s)", run_id, init, outcome.status
            )
        return outcome

    async def _serve_run_weights(self, serve_as: str, run_id: str, version: int, label: int) -> Outcome:
        """Serve run ``run_id``'s published full weights of ``version`` under the name ``serve_as``, labelled
        ``label`` (an eval: the evaluated version; a run started from them: its version 0)."""
        if self.engine_source == (
            "weights",
            run_id,
            version,
        ):  # already loaded: only the pool's state changes
            await label_version(self.http, self.base_url, label)
            await self._set_served(serve_as, label)
            self.served = (serve_as, label)
            return Outcome("skipped")
        row = await asyncio.to_thread(self._weights_row, run_id, version)
        if row is None:
            return Outcome("rejected", f"run {run_id} has no weights row of version {version}")
        key, sha256 = row
        if is_adapter_key(key):
            return Outcome("rejected", f"version {version} of run {run_id} is an adapter, not full weights")
        blob = await asyncio.to_thread(self.store.get_bytes, key)
        await asyncio.to_thread(validate_checkpoint, blob, self.expected, sha256, f"weights {key!r}")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        path = self.work_dir / f"serve-{serve_as}.safetensors"
        await asyncio.to_thread(path.write_bytes, blob)
        try:
            swap_ms = await swap_weights(
                self.http, self.base_url, path, label, on_swapped=lambda: self._set_served(serve_as, label)
            )
        finally:
            path.unlink(missing_ok=True)
        self.served, self.engine_holds_base = (serve_as, label), False
        self.engine_source = ("weights", run_id, version)
        return Outcome("served", swap_ms=swap_ms)

    async def _serve_model_dir(self, eval_id: str, folder: Path) -> Outcome:
        if self.engine_source == ("model_dir", str(folder)):
            await self._set_served(eval_id, 0)
            self.served = (eval_id, 0)
            return Outcome("skipped")
        specs = await asyncio.to_thread(served_tensor_specs, folder)
        if specs != self.expected:
            differ = sorted(set(specs.items()) ^ set(self.expected.items()))[:3]
            return Outcome("rejected", f"{folder} does not match the served model's tensors: {differ}")
        files = sorted(folder.glob("*.safetensors"))
        swap_ms = await swap_weights(
            self.http, self.base_url, files, 0, on_swapped=lambda: self._set_served(eval_id, 0)
        )
        self.served, self.engine_holds_base = (eval_id, 0), False
        self.engine_source = ("model_dir", str(folder))
        return Outcome("served", swap_ms=swap_ms)

    async def _serve_eval_adapter(self, eval_id: str, target: EvalTarget) -> Outcome:
        """A LoRA run's version N, loaded as ``<eval>-v<N>`` on the base weights (swapped back first if the engine
        holds other full weights: only when no LoRA run is active, which the pool gate guarantees)."""
        if not self.engine_holds_base:
            outcome = await self._serve_base(eval_id)
            if outcome.status != "served":
                return outcome
        row = await asyncio.to_thread(self._weights_row, target.run_id or "", target.version)
        if row is None or not is_adapter_key(row[0]):
            return Outcome("rejected", f"run {target.run_id} has no adapter of version {target.version}")
        return await self.apply_adapter(
            Published(target.run_id or "", target.version, row[0]), serve_as=eval_id
        )

    def _holder(self, session: Session) -> str | None:
        """The run holding an exclusive pool: the active one, else the oldest queued (next to start)."""
        for statuses in ((RunStatus.RUNNING, RunStatus.STOPPING), (RunStatus.QUEUED,)):
            run_id = session.scalar(
                select(Run.id)
                .where(Run.status.in_(statuses), Run.kind != RunKind.SFT)  # an SFT run samples nothing
                .order_by(Run.created_at, Run.id)
                .limit(1)
            )
            if run_id is not None:
                return str(run_id)
        return None

    # --- lifetime ------------------------------------------------------------------------------------
    def _catch_up_plan(self) -> tuple[str, list[Published]]:
        """(the run the pool serves, "" for none; the newest servable versions to apply, the holder's first): the newest
        of any run that is not over or, with an exclusive pool, of the holder, plus the newest adapter of every
        other active run (LoRA runs share the pool)."""
        with session_scope(self.sessions) as session:
            servable = (
                select(Weight)
                .join(Run, Run.id == Weight.run_id)
                .where(
                    Weight.status.in_(("published", "loading", "served")),
                    Run.status.not_in(RUN_FINISHED),
                    Run.kind != RunKind.SFT,  # served only as an eval's target or a run's init
                )
                .order_by(Weight.created_at.desc(), Weight.id.desc())
            )
            holder = ""
            if not self.exclusive:
                rows = session.scalars(servable.limit(1)).all()
            else:
                holder = self._holder(session) or ""
                active = session.scalars(
                    select(Run.id).where(
                        Run.status.in_((RunStatus.RUNNING, RunStatus.STOPPING)), Run.kind != RunKind.SFT
                    )
                ).all()
                rows = []
                for run_id in dict.fromkeys([holder, *active]):
                    row = session.scalars(servable.where(Weight.run_id == run_id).limit(1)).first()
                    if row is not None and (run_id == holder or is_adapter_key(row.object_key)):
                        rows.append(row)
            return holder, [Published(r.run_id, r.version, r.object_key) for r in rows]

    async def catch_up(self) -> None:
        """Serve the newest servable version of a run that is not over (with an exclusive pool: of the holder,
        and every active LoRA run's newest adapter), or label the base model version 0 (of the holder)."""
        await init_weight_transfer(self.http, self.base_url)
        holder, newest = await asyncio.to_thread(self._catch_up_plan)
        if self.exclusive:
            self.served = (holder, 0)  # a restarted engine holds the base weights
        weights_served = False
        for published in newest:
            outcome = await self.apply(published)
            weights_served |= outcome.status == "served" and not is_adapter_key(published.object_key)
        # Active evals get their targets back under their own names: the holder's (full weights, a model directory),
        # or an adapter beside LoRA runs. An eval a running run scheduled of its own version samples the run's.
        evals = await asyncio.to_thread(self._active_eval_targets)
        holder_target = next((t for e, t in evals if e == holder and t.source != "base"), None)
        init = await asyncio.to_thread(self._init_of, holder) if holder else None
        if not weights_served and holder_target is None and init is not None:
            await self.serve_init(
                holder, init
            )  # a run started from another run's version: that is its version 0
        elif not weights_served and (holder_target is None or holder_target.source == "adapter"):
            await label_version(self.http, self.base_url, 0)
            await self._set_served(holder, 0)
        for eval_id, target in evals:
            if target.source == "adapter" or target is holder_target:
                await self.serve_eval(eval_id, target)

    def _active_eval_targets(self) -> list[tuple[str, EvalTarget]]:
        with session_scope(self.sessions) as session:
            rows = session.scalars(
                select(Run)
                .where(Run.kind == RunKind.EVAL, Run.status.in_((RunStatus.RUNNING, RunStatus.STOPPING)))
                .order_by(Run.created_at, Run.id)
            ).all()
            targets = []
            for run in rows:
                try:
                    target = read_run_config(run).target
                except RunConfigError:
                    continue
                if target is not None and target.at_step is None:
                    targets.append((run.id, target))
            return targets

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
                    payload = json.loads(message["data"])
                    rebase_to = rebase_request(payload) if isinstance(payload, dict) else None
                    published = None if rebase_to else Published.from_message(message["data"])
                except ValueError as exc:
                    log.error("malformed weights message %r: %s", str(message["data"])[:200], exc)
                    continue
                if rebase_to:
                    await self.rebase(rebase_to)
                elif published is not None:
                    await self.apply(published)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.unsubscribe(channel)
            await pubsub.aclose()  # type: ignore[attr-defined]  # redis>=5; the stubs predate it
            await r.aclose()  # type: ignore[attr-defined]
            await self.close()
