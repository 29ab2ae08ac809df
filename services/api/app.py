"""The REST API aiohttp app: ``create_app(settings)``; routes, auth, error mapping, resources.

Middlewares, outermost first: request metrics (``shared.metrics``), bearer auth (every route but ``/health``
and ``/metrics``; ``hmac.compare_digest`` so the token cannot be guessed byte by byte from timing), then error
mapping (typed ``ApiError`` -> JSON ``Error`` with its status; anything unexpected -> logged 500 without
internals). Handlers parse and validate, call one function of ``runs``/``rollouts`` inside one transaction,
and serialize a pydantic model; enqueueing happens after the commit (see ``scheduler.py``).

Resources (database engine, object store, Celery producer, scheduler loop) are opened and closed in one
``cleanup_ctx``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.api import evals, rollouts, runs, sft
from services.api.errors import ApiError, Invalid, NotFound, Unauthorized
from services.api.openapi import MAX_PAGE, build_openapi
from services.api.plot import reward_curve_png
from services.api.scheduler import PoolGate, Scheduler, SendRollout, enqueue_pending
from services.api.schemas import EvalCreate, Health, RunCreate, SFTCreate, TasksAdd
from shared.db import async_session_factory, async_session_scope, make_async_engine
from shared.logging import bind
from shared.metrics import RUNS_CREATED, instrument_app
from shared.objectstore import ObjectStore, open_store
from shared.queues import RUN_ROLLOUT, make_celery
from shared.run_config import read_run_config
from shared.settings import Settings
from shared.statuses import RUN_STATUSES
from shared.tensorboard import ScalarLog

log = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/health", "/metrics"})
Model = TypeVar("Model", bound=BaseModel)

SETTINGS = web.AppKey("settings", Settings)
SESSIONS = web.AppKey("sessions", async_sessionmaker[AsyncSession])
STORE = web.AppKey("store", ObjectStore)  # type: ignore[type-abstract]
SEND_ROLLOUT: web.AppKey[SendRollout] = web.AppKey("send_rollout")
OPENAPI = web.AppKey("openapi", dict[str, Any])

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# --- middlewares ------------------------------------------------------------------------------------------


def _error_response(error: ApiError) -> web.Response:
    body = {"error": error.code, "message": error.message, "detail": error.detail}
    headers = {"WWW-Authenticate": 'Bearer realm="harnessrl"'} if error.status == 401 else None
    return web.json_response(body, status=error.status, headers=headers)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in PUBLIC_PATHS:
        return await handler(request)
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    expected = request.app[SETTINGS].api_token.encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
        return _error_response(Unauthorized("missing or wrong bearer token (Authorization: Bearer <token>)"))
    return await handler(request)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        return _error_response(error)
    except web.HTTPNotFound:
        return _error_response(NotFound(f"no route {request.method} {request.path}"))
    except web.HTTPException:
        raise
    except Exception:
        log.exception("unhandled error in %s %s", request.method, request.path)
        return web.json_response(
            {"error": "internal_error", "message": "internal error", "detail": []}, status=500
        )


# --- request parsing --------------------------------------------------------------------------------------


async def _body(request: web.Request, model: type[Model]) -> Model:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Invalid.field("body", f"not JSON: {exc}", "json_invalid") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Invalid.from_pydantic(exc, "body") from None


def _int_query(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    # Strict: int() would also take " 5", "+5" and "5_0", which the document does not allow.
    if not re.fullmatch(r"-?[0-9]{1,9}", raw):
        raise Invalid.field(f"query.{name}", "must be an integer", "int_parsing")
    value = int(raw)
    if not low <= value <= high:
        raise Invalid.field(f"query.{name}", f"must be between {low} and {high}", "range")
    return value


def _idempotency_key(request: web.Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not 0 < len(key) <= 200 or not key.isascii() or not key.isprintable() or " " in key:
        raise Invalid.field("header.Idempotency-Key", "1-200 visible ASCII characters")
    return key


def _model_response(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(text=model.model_dump_json(), status=status, content_type="application/json")


# --- handlers ---------------------------------------------------------------------------------------------


async def health(request: web.Request) -> web.Response:
    return _model_response(Health(status="ok"))


async def openapi_document(request: web.Request) -> web.Response:
    return web.json_response(request.app[OPENAPI])


async def create_run(request: web.Request) -> web.Response:
    body = await _body(request, RunCreate)
    key = _idempotency_key(request)
    warnings = await asyncio.to_thread(runs.preflight_run, body, request.app[SETTINGS])
    async with async_session_scope(request.app[SESSIONS]) as session:
        run, created = await runs.create_run(session, body, key, queued=request.app[SETTINGS].pool_exclusive)
    with bind(run_id=run.id):
        if created:
            RUNS_CREATED.labels(harness=run.harness).inc()
            log.info(
                "run created", extra={"harness": run.harness, "tasks": len(read_run_config(run).task_ids)}
            )
            await _enqueue_now(request.app, run.id)
        async with async_session_scope(request.app[SESSIONS]) as session:
            detail = await runs.run_detail(session, run.id)
    for warning in warnings:
        log.warning("run %s: %s", run.id, warning)
    return _model_response(detail.model_copy(update={"warnings": warnings}), 201 if created else 200)


async def _enqueue_now(app: web.Application, run_id: str) -> None:
    """Send the new rollouts right away; if Redis is down the scheduler's next tick sends them."""
    try:
        await enqueue_pending(app[SESSIONS], app[SEND_ROLLOUT], run_id)
    except Exception:
        log.warning("enqueue deferred to the scheduler", exc_info=True)


def _known_query(request: web.Request, *names: str) -> None:
    """A query parameter the document does not list is a mistake (a typo'd ``stauts=failed`` would silently list
    every run): refused, naming it."""
    for name in request.query:
        if name not in names:
            raise Invalid.field(
                f"query.{name}", f"unknown query parameter (known: {', '.join(names)})", "extra_forbidden"
            )


async def list_runs(request: web.Request) -> web.Response:
    _known_query(request, "limit", "cursor", "status")
    limit = _int_query(request, "limit", 50, 1, MAX_PAGE)
    status = request.query.get("status")
    if status is not None and status not in RUN_STATUSES:
        raise Invalid.field("query.status", f"one of {', '.join(RUN_STATUSES)}")
    async with async_session_scope(request.app[SESSIONS]) as session:
        items, next_cursor = await runs.list_runs(session, limit, request.query.get("cursor"), status)
    page = {"items": [i.model_dump(mode="json") for i in items], "next_cursor": next_cursor}
    return web.json_response(page)


async def get_run(request: web.Request) -> web.Response:
    async with async_session_scope(request.app[SESSIONS]) as session:
        detail = await runs.run_detail(session, request.match_info["run_id"])
    return _model_response(detail)


async def plot_run(request: web.Request) -> web.Response:
    async with async_session_scope(request.app[SESSIONS]) as session:
        detail = await runs.run_detail(session, request.match_info["run_id"])
    png = await asyncio.to_thread(reward_curve_png, detail)
    return web.Response(body=png, content_type="image/png")


async def add_tasks(request: web.Request) -> web.Response:
    body = await _body(request, TasksAdd)
    async with async_session_scope(request.app[SESSIONS]) as session:
        added = await runs.add_tasks(session, request.match_info["run_id"], body)
    return _model_response(added)


async def stop_run(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    async with async_session_scope(request.app[SESSIONS]) as session:
        await runs.stop_run(session, run_id)
    async with async_session_scope(request.app[SESSIONS]) as session:
        summary = await runs.run_summary(session, run_id)
    return _model_response(summary)


async def create_eval(request: web.Request) -> web.Response:
    body = await _body(request, EvalCreate)
    settings = request.app[SETTINGS]
    if body.harness.name == "shell":
        await asyncio.to_thread(runs.check_harness_paths, body.harness, settings)
    async with async_session_scope(request.app[SESSIONS]) as session:
        run = await evals.create_eval(session, body, settings.served_model_name)
    log.info("eval created", extra={"run_id": run.id, "harness": run.harness})
    async with async_session_scope(request.app[SESSIONS]) as session:
        detail = await evals.eval_detail(session, run.id)
    return _model_response(detail, 201)


async def create_sft(request: web.Request) -> web.Response:
    body = await _body(request, SFTCreate)
    async with async_session_scope(request.app[SESSIONS]) as session:
        run = await sft.create_sft(session, body, request.app[SETTINGS])
    log.info("SFT run created", extra={"run_id": run.id, "steps": read_run_config(run).steps})
    async with async_session_scope(request.app[SESSIONS]) as session:
        detail = await runs.run_detail(session, run.id)
    return _model_response(detail, 201)


async def get_eval(request: web.Request) -> web.Response:
    async with async_session_scope(request.app[SESSIONS]) as session:
        detail = await evals.eval_detail(session, request.match_info["eval_id"])
    return _model_response(detail)


async def get_eval_samples(request: web.Request) -> web.Response:
    async with async_session_scope(request.app[SESSIONS]) as session:
        samples = await evals.eval_samples(session, request.match_info["eval_id"])
    return _model_response(samples)


async def get_rollout(request: web.Request) -> web.Response:
    async with async_session_scope(request.app[SESSIONS]) as session:
        detail = await rollouts.rollout_detail(session, request.app[STORE], request.match_info["rollout_id"])
    return _model_response(detail)


# --- the app ----------------------------------------------------------------------------------------------


def _celery_sender(settings: Settings) -> tuple[SendRollout, Callable[[], None]]:
    celery = make_celery(settings, "harnessrl-api")
    # One thread owns the producer: kombu connections are not shared safely between threads.
    executor = ThreadPoolExecutor(1, thread_name_prefix="enqueue")

    def send(rollout_id: str) -> None:
        executor.submit(celery.send_task, RUN_ROLLOUT, args=[rollout_id]).result()

    def close() -> None:
        executor.shutdown(wait=True)
        celery.close()

    return send, close


def create_app(
    settings: Settings,
    *,
    scheduler: bool = True,
    scheduler_interval_s: float = 1.0,
    send_rollout: SendRollout | None = None,
) -> web.Application:
    """The api app. ``scheduler=False`` leaves step scheduling to another api process (or to a test)."""
    app = web.Application(
        middlewares=[auth_middleware, error_middleware], client_max_size=settings.max_request_bytes
    )
    app[SETTINGS] = settings
    app[OPENAPI] = build_openapi()
    instrument_app(app, "api")

    async def resources(app: web.Application) -> AsyncIterator[None]:
        engine = make_async_engine(settings.database_url)
        app[SESSIONS] = async_session_factory(engine)
        app[STORE] = await asyncio.to_thread(open_store, settings)
        close_sender: Callable[[], None] = lambda: None  # noqa: E731
        if send_rollout is not None:
            app[SEND_ROLLOUT] = send_rollout
        else:
            app[SEND_ROLLOUT], close_sender = _celery_sender(settings)
        loop = Scheduler(
            app[SESSIONS],
            app[SEND_ROLLOUT],
            scheduler_interval_s,
            PoolGate(settings.redis_url, settings.pool_exclusive),
            ScalarLog(settings, app[STORE], writer="api"),
        )
        try:
            if scheduler:
                async with loop.running():
                    yield
            else:
                yield
        finally:
            await asyncio.to_thread(close_sender)
            await engine.dispose()

    app.cleanup_ctx.append(resources)
    app.router.add_get("/health", health)
    app.router.add_get("/openapi.json", openapi_document)
    app.router.add_post("/v1/runs", create_run)
    app.router.add_get("/v1/runs", list_runs)
    app.router.add_get("/v1/runs/{run_id}", get_run)
    app.router.add_get("/v1/runs/{run_id}/plot", plot_run)
    app.router.add_post("/v1/runs/{run_id}/tasks", add_tasks)
    app.router.add_post("/v1/runs/{run_id}/stop", stop_run)
    app.router.add_post("/v1/evals", create_eval)
    app.router.add_get("/v1/evals/{eval_id}", get_eval)
    app.router.add_post("/v1/sft", create_sft)
    app.router.add_get("/v1/evals/{eval_id}/samples", get_eval_samples)
    app.router.add_get("/v1/rollouts/{rollout_id}", get_rollout)
    return app
