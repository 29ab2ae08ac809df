"""The gateway's aiohttp application: routes, request boundary (binding, size, JSON, errors), streaming replies.

``create_app(settings)`` builds the app; its resources live in ``GatewayState`` (opened by a cleanup_ctx). Routes,
each also under the per-rollout prefix ``/r/{rollout_key}``:

| route | provider |
|---|---|
| ``POST /v1/chat/completions`` | OpenAI Chat Completions |
| ``POST /v1/responses`` | OpenAI Responses |
| ``POST /v1/messages``, ``POST /v1/messages/count_tokens`` | Anthropic Messages |
| ``POST /v1beta/models/{model}:generateContent`` / ``:streamGenerateContent`` (also ``/v1/models/...``) | Gemini |
| ``GET /v1/models`` (Anthropic shape when ``anthropic-version`` is sent), ``GET /v1beta/models`` | model lists |
| ``HEAD /``, ``GET /healthz``, ``GET /metrics`` | probes |

The handler of a model call binds the rollout (401 in the caller's shape) and, in the same Redis script, counts the
rollout's calls in flight across every gateway process: one over ``settings.gateway_max_calls_in_flight_per_rollout``
is refused at once with the provider's 429 and a ``retry-after`` (never queued; ``tips.LOAD_SCRIPT``). It then
reads and checks the body
(``request_checks.py``: 413 over ``settings.max_request_bytes``, 400 for nesting, malformed JSON or lone
surrogates, all before or instead of parsing), lets the provider adapter parse it, refuses orphan tool results,
an absurd completion budget, and a prompt whose length alone is over the context (``request_checks.py``: every
part that reaches the model counts), then runs a ``ModelCall``: any failure before the first sampled token is an error response and records nothing; after it, the
reply streams (or is collected into one JSON body), the chain tip is committed before the reply's final bytes, and
the call's rows are written behind it (``recorder.py``; the runner's flush barrier waits for them). An
answer that is our fault (5xx, or the pool not ready) is noted as an incident of the rollout for the runner
(``shared/incidents.py``); a client that hangs up mid-stream is one INFO line.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import ModuleType
from typing import Any

from aiohttp import web

from services.gateway.binding import BoundRollout, binding_errors, rollout_key_of
from services.gateway.conversation import Conversation, Finish, ProviderError, StreamEvent
from services.gateway.model_call import ModelCall, context_length_error
from services.gateway.request_checks import RAW_BODY, check_conversation, prompt_token_floor, read_json
from services.gateway.splice import SpliceMode
from services.gateway.state import GatewayState, open_state
from services.gateway.teacher import TEACHER_ERROR
from services.gateway.tips import RolloutState
from shared import capture_state, metrics
from shared.context_fit import ContextOverflow, record_overflow_async
from shared.ids import unique_hex
from shared.incidents import new_incident, record_incident_async
from shared.logging import bind
from shared.pool import Served
from shared.settings import Settings

log = logging.getLogger("harnessrl.gateway")

STATE = web.AppKey("gateway_state", GatewayState)
ADAPTERS_KEY = web.AppKey("gateway_adapters", dict)
PROVIDER_APIS = ("openai_chat", "openai_responses", "anthropic_messages", "gemini")
GEMINI_ACTIONS = {"generateContent": False, "streamGenerateContent": True}
PREFIX = "/r/{rollout_key}"


def load_adapters() -> dict[str, ModuleType]:
    """The provider adapter modules, by API name (``services/gateway/providers``)."""
    providers = importlib.import_module("services.gateway.providers")
    registry = getattr(providers, "ADAPTERS", None)
    if registry:
        return dict(registry)
    return {api: importlib.import_module(f"services.gateway.providers.{api}") for api in PROVIDER_APIS}


# --- request boundary ----------------------------------------------------------------------------------


def parse_request(adapter: ModuleType, body: Any, **url_fields: Any) -> Conversation:
    """The adapter's parse; a crash on some odd body is that body's fault to the caller (400) and a bug to us
    (logged with the traceback), never a 500 that a harness would retry."""
    try:
        return adapter.parse(body, **url_fields)  # type: ignore[no-any-return]
    except ProviderError:
        raise
    except Exception as exc:
        log.exception("provider adapter %s failed to parse a request", adapter.API)
        raise ProviderError(400, f"could not read this request: {type(exc).__name__}: {exc}") from exc


BUSY_RETRY_AFTER_S = 1
"""The ``retry-after`` of a call refused because its rollout has its limit of calls in flight: one of them is
likely done by then (a model call takes seconds)."""


def error_response(adapter: ModuleType, error: ProviderError) -> web.Response:
    headers = {"x-should-retry": "true"} if error.status in (429, 503, 529) else {}
    if error.status == 429:
        headers["retry-after"] = str(BUSY_RETRY_AFTER_S)
    return web.json_response(adapter.render_error(error), status=error.status, headers=headers)


def too_many_in_flight(in_flight: int) -> ProviderError:
    """The provider's rate-limit error for a call over its rollout's limit of calls in flight
    (``settings.gateway_max_calls_in_flight_per_rollout``): refused at once, never queued."""
    return ProviderError(
        429,
        f"Rate limit reached: this rollout already has {in_flight} model calls in flight, the most it may have "
        f"at once; retry after one of them has finished.",
        "rate_limit_error",
        code="rate_limit_exceeded",
    )


async def bind_rollout(request: web.Request, serving: str | None = None) -> tuple[BoundRollout, RolloutState]:
    with binding_errors():
        return await request.app[STATE].directory.resolve(rollout_key_of(request), serving)


async def _served(state: GatewayState, key: str | None, serving: str) -> None:
    if key:
        await state.tips.served(key, serving)


# --- infrastructure incidents (shared/incidents.py) ------------------------------------------------------

POOL_NOT_READY = "pool_not_ready"  # ProviderError.code of a call refused while the pool is not ready


def is_infrastructure_error(error: ProviderError) -> bool:
    """An answer that is our fault, not the caller's: every 5xx and Anthropic's 529 (overloaded)."""
    return error.status >= 500


async def note_incident(state: GatewayState, rollout: BoundRollout, error: ProviderError) -> None:
    """Tell the runner that this rollout was refused a model answer for an infrastructure reason."""
    if not is_infrastructure_error(error):
        return
    cause = {POOL_NOT_READY: "inference_pool_not_ready", TEACHER_ERROR: "teacher_unavailable"}.get(
        error.code or "", "inference_unavailable"
    )
    try:
        await record_incident_async(state.redis, rollout.rollout_id, new_incident(cause, error.message))
    except Exception as exc:  # Redis down: the reply still goes out; the runner just sees less
        log.warning("could not record an incident for rollout %s: %s", rollout.rollout_id, exc)


async def note_context_overflow(state: GatewayState, rollout: BoundRollout, error: ProviderError) -> None:
    """Tell the runner that this rollout's prompt did not fit the model's context, with both numbers
    (``shared/context_fit.py``): the rollout then ends with reason ``context``."""
    if error.context_overflow is None:
        return
    overflow = ContextOverflow(*error.context_overflow, at_least=error.context_overflow_at_least)
    try:
        await record_overflow_async(state.redis, rollout.rollout_id, overflow)
    except Exception as exc:  # Redis down: the reply still goes out; the rollout ends a plain harness error
        log.warning("could not record a context overflow for rollout %s: %s", rollout.rollout_id, exc)


async def watched(
    state: GatewayState, rollout: BoundRollout, events: AsyncIterator[StreamEvent]
) -> AsyncIterator[StreamEvent]:
    """``events`` as they come; an upstream failure mid-answer is noted as an incident before it goes on."""
    try:
        async for event in events:
            yield event
    except ProviderError as error:
        await note_incident(state, rollout, error)
        raise


def pool_refusal(served: Served | None) -> ProviderError | None:
    """Why the inference pool cannot answer this rollout now, if it cannot: it is (re)starting with weights that
    are not the run's policy. Sampling anyway would record the wrong policy's tokens. (``served`` was read with
    the rollout's state by the binding's one script, so the check costs no round trip of its own.)"""
    if served is None or served.ready:
        return None
    return ProviderError(503, f"{served.describe()}; try again shortly", "api_error", code=POOL_NOT_READY)


# --- model calls ----------------------------------------------------------------------------------------


async def model_call(
    request: web.Request, api: str, *, model: str | None = None, stream: bool | None = None
) -> web.StreamResponse:
    arrived = time.monotonic()
    state = request.app[STATE]
    adapter = request.app[ADAPTERS_KEY][api]
    request[metrics.PROVIDER_KEY] = api
    serving = capture_state.SERVING_PREFIX + unique_hex(16)
    try:
        with binding_errors():
            key = rollout_key_of(request)
            rollout, rollout_state, recheck = await state.directory.resolve_deferred(key, serving)
    except ProviderError as error:
        state.track(_served(state, rollout_key_of(request), serving))
        return error_response(adapter, error)
    if rollout_state.busy:  # the load script marked nothing: there is no mark to clear
        return error_response(adapter, too_many_in_flight(rollout_state.busy))
    bound = time.monotonic()
    try:
        body = await read_json(request, state.settings.max_request_bytes)
        conversation: Conversation = parse_request(adapter, body, model=model, stream=stream)
        limit = await state.context_limit()
        check_conversation(conversation, limit)
        if (floor := prompt_token_floor(conversation, state.longest_token_chars, limit)) >= limit:
            too_long = context_length_error(adapter, limit, floor)  # at least ``floor``: not worth tokenizing
            too_long.context_overflow_at_least = True
            raise too_long
    except ProviderError as error:
        state.track(_served(state, rollout.rollout_key, serving))
        await note_context_overflow(state, rollout, error)
        return error_response(adapter, error)
    except BaseException:  # e.g. the client went away mid-body: the binding's mark must not outlive the call
        state.track(_served(state, rollout.rollout_key, serving))
        raise
    parsed = time.monotonic()
    if api == "gemini":
        conversation.sse = request.query.get("alt") == "sse"
    with bind(run_id=rollout.run_id, rollout_id=rollout.rollout_id):
        # A teacher's run does not sample from the pool, so whatever the pool serves does not hold it up.
        if rollout.teacher is None and (refusal := pool_refusal(rollout_state.served)):
            state.track(_served(state, rollout.rollout_key, serving))
            await note_incident(state, rollout, refusal)
            return error_response(adapter, refusal)
        call = ModelCall(
            state, rollout, rollout_state, conversation, adapter, request[RAW_BODY], arrived, serving, recheck
        )
        call.timings.bound, call.timings.parsed = bound, parsed
        try:
            await call.start()
        except ProviderError as error:
            await call.aclose()
            await note_incident(state, rollout, error)
            await note_context_overflow(state, rollout, error)
            return error_response(adapter, error)
        events = watched(state, rollout, call.events())
        try:
            if conversation.stream:
                return await _stream_reply(request, events, call, adapter, conversation)
            return await _json_reply(request, events, call, adapter, conversation)
        finally:
            await call.aclose()


async def _stream_reply(
    request: web.Request,
    events: AsyncIterator[StreamEvent],
    call: ModelCall,
    adapter: ModuleType,
    conversation: Conversation,
) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200,
        headers={
            "Content-Type": adapter.stream_content_type(conversation),
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        },
    )
    await response.prepare(request)
    try:
        async for data in adapter.render_stream(events, conversation):
            await response.write(data)
            call.mark_first_byte()
        await response.write_eof()
    except ConnectionResetError:
        # The harness hung up (it was killed, or gave up): normal at the end of a rollout, not our error.
        log.info("client disconnected mid-stream; rollout %s", call.rollout.rollout_id)
    return response


async def _json_reply(
    request: web.Request,
    events: AsyncIterator[StreamEvent],
    call: ModelCall,
    adapter: ModuleType,
    conversation: Conversation,
) -> web.Response:
    try:
        async for event in events:
            if isinstance(event, Finish):
                # Written here, not by aiohttp after the handler returns: the call's record is complete only
                # once its reply is out (``ModelCall.aclose``). Its raw body keeps these very bytes.
                body = json.dumps(adapter.render(event.completion, conversation)).encode()
                if call.record is not None:
                    call.record.response_body = body
                response = web.Response(body=body, content_type="application/json", charset="utf-8")
                try:
                    await response.prepare(request)
                    await response.write_eof()
                except ConnectionResetError:  # the harness hung up; the call is recorded all the same
                    log.info("client disconnected before its reply was written")
                return response
    except ProviderError as error:
        return error_response(adapter, error)
    return error_response(
        adapter, ProviderError(502, "the model stream ended before it finished", "api_error")
    )


def provider_route(api: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await model_call(request, api)

    return handler


async def gemini_call(request: web.Request) -> web.StreamResponse:
    model, _, action = request.match_info["model_action"].partition(":")
    adapter = request.app[ADAPTERS_KEY]["gemini"]
    if action == "countTokens":
        return await count_tokens(request, "gemini", model=model)
    if action not in GEMINI_ACTIONS:
        return error_response(adapter, ProviderError(404, f"unknown method {action!r}; use generateContent"))
    return await model_call(request, "gemini", model=model, stream=GEMINI_ACTIONS[action])


# --- token counting and model lists (record nothing) ---------------------------------------------------


async def count_tokens(request: web.Request, api: str, *, model: str | None = None) -> web.Response:
    state = request.app[STATE]
    adapter = request.app[ADAPTERS_KEY][api]
    try:
        await bind_rollout(request)
        body = await read_json(request, state.settings.max_request_bytes)
        if (
            api == "gemini"
            and isinstance(body, dict)
            and isinstance(body.get("generateContentRequest"), dict)
        ):
            body = body["generateContentRequest"]
        conversation = parse_request(adapter, body, model=model, stream=False)
        limit = await state.context_limit()
        if (floor := prompt_token_floor(conversation, state.longest_token_chars, limit)) >= limit:
            raise context_length_error(adapter, limit, floor)  # not worth tokenizing megabytes to say so
        count = len(await asyncio.to_thread(state.chat_format.render_prompt, conversation))
    except ProviderError as error:
        return error_response(adapter, error)
    except Exception as exc:  # the template refused the conversation
        return error_response(adapter, ProviderError(400, f"cannot format this conversation: {exc}"))
    make_body = getattr(adapter, "count_tokens_body", None)
    if make_body is not None:
        return web.json_response(make_body(count))
    return web.json_response({"totalTokens": count} if api == "gemini" else {"input_tokens": count})


async def anthropic_count_tokens(request: web.Request) -> web.Response:
    return await count_tokens(request, "anthropic_messages")


async def list_models(request: web.Request) -> web.Response:
    anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
    return await _models(request, "anthropic_messages" if anthropic else "openai_chat")


async def list_gemini_models(request: web.Request) -> web.Response:
    return await _models(request, "gemini")


async def _models(request: web.Request, api: str) -> web.Response:
    adapter = request.app[ADAPTERS_KEY][api]
    try:
        await bind_rollout(request)
    except ProviderError as error:
        return error_response(adapter, error)
    names = [request.app[STATE].settings.served_model_name]
    return web.json_response(adapter.models_list(names))


async def probe(request: web.Request) -> web.Response:
    """``HEAD /``: Claude Code's reachability probe; ``GET /healthz`` for supervisors."""
    return web.Response(text="ok")


# --- the application -----------------------------------------------------------------------------------


def create_app(
    settings: Settings,
    *,
    splice_mode: SpliceMode = "splice",
    measure_drift: bool = True,
    inference_urls: list[str] | None = None,
) -> web.Application:
    """The gateway app. ``inference_urls`` overrides ``settings.resolved_inference_urls`` (tests, benchmarks)."""
    app = web.Application(client_max_size=settings.max_request_bytes + 1)
    app[ADAPTERS_KEY] = load_adapters()

    async def state_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        async for state in open_state(
            settings, splice_mode=splice_mode, measure_drift=measure_drift, inference_urls=inference_urls
        ):
            app[STATE] = state
            yield

    app.cleanup_ctx.append(state_ctx)
    for prefix in ("", PREFIX):
        for api, path in (
            ("openai_chat", "/v1/chat/completions"),
            ("openai_responses", "/v1/responses"),
            ("anthropic_messages", "/v1/messages"),
        ):
            app.router.add_post(prefix + path, provider_route(api))
        app.router.add_post(prefix + "/v1/messages/count_tokens", anthropic_count_tokens)
        app.router.add_post(prefix + "/v1beta/models/{model_action}", gemini_call)
        app.router.add_post(prefix + "/v1/models/{model_action}", gemini_call)
        app.router.add_get(prefix + "/v1/models", list_models)
        app.router.add_get(prefix + "/v1beta/models", list_gemini_models)
        app.router.add_route("HEAD", prefix + "/", probe)
    app.router.add_get("/healthz", probe)
    metrics.instrument_app(app, "gateway")
    return app
