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

The handler of a model call binds the rollout (401 in the caller's shape), reads the body (413 over
``settings.max_request_bytes``, 400 for malformed JSON), lets the provider adapter parse it, then runs a
``ModelCall``: any failure before the first sampled token is an error response and records nothing; after it, the
reply streams (or is collected into one JSON body) and the call is recorded before the reply's final bytes.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from aiohttp import web

from services.gateway.binding import BindingError, BoundRollout, rollout_key_of
from services.gateway.conversation import Conversation, Finish, ProviderError
from services.gateway.model_call import ModelCall
from services.gateway.splice import SpliceMode
from services.gateway.state import GatewayState, open_state
from shared import metrics
from shared.logging import bind
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


async def read_json(request: web.Request, limit: int) -> Any:
    if request.content_length is not None and request.content_length > limit:
        raise ProviderError(413, f"request body is {request.content_length} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > limit:
            raise ProviderError(413, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProviderError(400, f"request body is not valid JSON: {exc}") from None


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


def error_response(adapter: ModuleType, error: ProviderError) -> web.Response:
    headers = {"x-should-retry": "true"} if error.status in (429, 503, 529) else {}
    return web.json_response(adapter.render_error(error), status=error.status, headers=headers)


async def bind_rollout(request: web.Request) -> BoundRollout:
    try:
        return await request.app[STATE].directory.resolve(rollout_key_of(request))
    except BindingError as exc:
        raise ProviderError(401, str(exc), "authentication_error") from None


# --- model calls ----------------------------------------------------------------------------------------


async def model_call(
    request: web.Request, api: str, *, model: str | None = None, stream: bool | None = None
) -> web.StreamResponse:
    arrived = time.monotonic()
    state = request.app[STATE]
    adapter = request.app[ADAPTERS_KEY][api]
    request[metrics.PROVIDER_KEY] = api
    try:
        rollout = await bind_rollout(request)
        body = await read_json(request, state.settings.max_request_bytes)
        conversation: Conversation = parse_request(adapter, body, model=model, stream=stream)
    except ProviderError as error:
        return error_response(adapter, error)
    if api == "gemini":
        conversation.sse = request.query.get("alt") == "sse"
    with bind(run_id=rollout.run_id, rollout_id=rollout.rollout_id):
        call = ModelCall(state, rollout, conversation, adapter, body, arrived)
        try:
            await call.start()
        except ProviderError as error:
            await call.aclose()
            return error_response(adapter, error)
        try:
            if conversation.stream:
                return await _stream_reply(request, call, adapter, conversation)
            return await _json_reply(call, adapter, conversation)
        finally:
            await call.aclose()


async def _stream_reply(
    request: web.Request, call: ModelCall, adapter: ModuleType, conversation: Conversation
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
    async for data in adapter.render_stream(call.events(), conversation):
        await response.write(data)
        call.mark_first_byte()
    await response.write_eof()
    return response


async def _json_reply(call: ModelCall, adapter: ModuleType, conversation: Conversation) -> web.Response:
    try:
        async for event in call.events():
            if isinstance(event, Finish):
                return web.json_response(adapter.render(event.completion, conversation))
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
