"""Prometheus metrics of every harnessrl service, defined in ONE place, and the ``/metrics`` helpers.

Every service imports the metric objects it updates from here, so names, label sets and buckets cannot drift
between services and a dashboard written once works for all of them:

| metric | type | labels | updated by |
|---|---|---|---|
| ``harnessrl_http_request_duration_seconds`` | histogram | service, route, method, status, provider | ``instrument_app`` middleware (api, gateway) |
| ``harnessrl_calls_captured_total`` | counter | provider, finish_reason | gateway, after a call row is written |
| ``harnessrl_call_ttfb_seconds`` | histogram | provider | gateway, first byte of a streamed reply |
| ``harnessrl_forks_total`` | counter | harness, reason | gateway, when a call starts a new chain with a reason |
| ``harnessrl_capture_write_seconds`` | histogram | | gateway writer, one batch transaction (rows + objects) |
| ``harnessrl_capture_batch_records`` | histogram | | gateway writer, records written per transaction |
| ``harnessrl_capture_lost_total`` | counter | | gateway writer, records it gave up on (their rollouts are retried) |
| ``harnessrl_rollouts_total`` | counter | harness, status | runner/grader on each terminal or phase transition |
| ``harnessrl_rollout_duration_seconds`` | histogram | harness, outcome | runner, harness wall time |
| ``harnessrl_grading_duration_seconds`` | histogram | reward_fn, outcome | grader, per graded rollout |
| ``harnessrl_groups_completed_total`` | counter | run_id | grader, group appended to the stream |
| ``harnessrl_learner_steps_total`` | counter | run_id | learner, per committed step |
| ``harnessrl_learner_step_duration_seconds`` | histogram | run_id | learner |
| ``harnessrl_learner_step_metric`` | gauge | run_id, metric | learner: loss, clip_fraction, kl, reward_mean, reward_std, ... |
| ``harnessrl_learner_tokens_total`` | counter | run_id | learner, tokens trained |
| ``harnessrl_learner_groups_total`` | counter | run_id, outcome | learner: trained, stale, zero_variance, set_aside |
| ``harnessrl_policy_lag_versions`` | histogram | run_id | learner, per consumed group (current version - sampling version) |
| ``harnessrl_policy_version`` | gauge | service | inference updater (served) and learner (published) |
| ``harnessrl_weight_swap_duration_seconds`` | histogram | outcome | inference updater, pause -> resume |
| ``harnessrl_runs_created_total`` | counter | harness | api |
| ``harnessrl_rollouts_enqueued_total`` | counter | harness | api scheduler |

Labels hold bounded values only: the request histogram uses the route *pattern* (``/v1/runs/{run_id}``),
never the path, so ids cannot explode the series count.

Multi-process services (Celery prefork workers) set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory
before anything imports ``prometheus_client``; ``render_metrics()`` then aggregates every child's values.
Processes without an HTTP app (workers, learner) expose the same output with ``serve_metrics(port)``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)

# Request handlers that serve a provider API put its name here (``request[PROVIDER_KEY] = "openai_chat"``)
# so the request histogram carries it; everything else records provider="".
PROVIDER_KEY = web.RequestKey("harnessrl_metrics_provider", str)
SERVICE_KEY = web.AppKey("harnessrl_metrics_service", str)

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
LONG_BUCKETS_S = (1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600)
LAG_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16)

HTTP_REQUEST_SECONDS = Histogram(
    "harnessrl_http_request_duration_seconds",
    "HTTP request latency by service, route pattern, method, status and provider API.",
    ["service", "route", "method", "status", "provider"],
    buckets=LATENCY_BUCKETS_S,
)
CALLS_CAPTURED = Counter(
    "harnessrl_calls_captured_total",
    "Model calls recorded by the gateway.",
    ["provider", "finish_reason"],
)
CALL_TTFB_SECONDS = Histogram(
    "harnessrl_call_ttfb_seconds",
    "Time to first byte of a gateway reply.",
    ["provider"],
    buckets=LATENCY_BUCKETS_S,
)
FORKS = Counter("harnessrl_forks_total", "Chains started with a fork reason.", ["harness", "reason"])
CAPTURE_WRITE_SECONDS = Histogram(
    "harnessrl_capture_write_seconds",
    "One write-behind transaction of the gateway (call rows, chain rows, token and raw objects).",
    buckets=LATENCY_BUCKETS_S,
)
CAPTURE_BATCH_RECORDS = Histogram(
    "harnessrl_capture_batch_records",
    "Calls written per write-behind transaction.",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
CAPTURE_LOST = Counter("harnessrl_capture_lost_total", "Call records the gateway gave up writing.")
ROLLOUTS = Counter(
    "harnessrl_rollouts_total",
    "Rollouts reaching a status (one increment per transition).",
    ["harness", "status"],
)
ROLLOUT_SECONDS = Histogram(
    "harnessrl_rollout_duration_seconds",
    "Harness wall time of one rollout.",
    ["harness", "outcome"],
    buckets=LONG_BUCKETS_S,
)
GRADING_SECONDS = Histogram(
    "harnessrl_grading_duration_seconds",
    "Wall time of grading one rollout.",
    ["reward_fn", "outcome"],
    buckets=LONG_BUCKETS_S,
)
GROUPS_COMPLETED = Counter("harnessrl_groups_completed_total", "Groups appended to the stream.", ["run_id"])
LEARNER_STEPS = Counter("harnessrl_learner_steps_total", "Committed learner steps.", ["run_id"])
LEARNER_STEP_SECONDS = Histogram(
    "harnessrl_learner_step_duration_seconds",
    "Wall time of one learner step.",
    ["run_id"],
    buckets=LONG_BUCKETS_S,
)
LEARNER_STEP_METRIC = Gauge(
    "harnessrl_learner_step_metric",
    "Latest value of a learner step metric (loss, clip_fraction, kl, reward_mean, reward_std, ...).",
    ["run_id", "metric"],
    multiprocess_mode="mostrecent",
)
LEARNER_TOKENS = Counter("harnessrl_learner_tokens_total", "Tokens trained on.", ["run_id"])
LEARNER_GROUPS = Counter(
    "harnessrl_learner_groups_total",
    "Groups the learner consumed, by outcome (trained, stale, zero_variance, set_aside).",
    ["run_id", "outcome"],
)
POLICY_LAG_VERSIONS = Histogram(
    "harnessrl_policy_lag_versions",
    "Versions between the policy that sampled a group and the policy that trains on it.",
    ["run_id"],
    buckets=LAG_BUCKETS,
)
POLICY_VERSION = Gauge(
    "harnessrl_policy_version",
    "Policy version published (learner) or served (inference).",
    ["service"],
    multiprocess_mode="mostrecent",
)
WEIGHT_SWAP_SECONDS = Histogram(
    "harnessrl_weight_swap_duration_seconds",
    "Weight hot-swap latency in the inference service, pause to resume.",
    ["outcome"],
    buckets=LATENCY_BUCKETS_S,
)
RUNS_CREATED = Counter("harnessrl_runs_created_total", "Runs created through the api.", ["harness"])
ROLLOUTS_ENQUEUED = Counter("harnessrl_rollouts_enqueued_total", "Rollouts sent to the queue.", ["harness"])


def render_metrics() -> tuple[bytes, str]:
    """The exposition text of this process (or of all processes in multiprocess mode) and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


async def metrics_handler(request: web.Request) -> web.Response:
    body, content_type = render_metrics()
    # aiohttp refuses a content_type that carries parameters; pass the full header instead.
    return web.Response(body=body, headers={"Content-Type": content_type})


def _route_pattern(request: web.Request) -> str:
    resource = request.match_info.route.resource
    # Unmatched paths (404s) all share one label so a scanner cannot create a series per URL.
    return resource.canonical if resource is not None else "unmatched"


def request_metrics_middleware(service: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    """aiohttp middleware: observe every request in ``HTTP_REQUEST_SECONDS``."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            HTTP_REQUEST_SECONDS.labels(
                service=service,
                route=_route_pattern(request),
                method=request.method,
                status=str(status),
                provider=request.get(PROVIDER_KEY, ""),
            ).observe(time.perf_counter() - started)

    return middleware


def instrument_app(app: web.Application, service: str) -> None:
    """Add ``GET /metrics`` and the request-latency middleware to an aiohttp app (call before it starts).

    The middleware goes first so it also times the app's own middlewares (auth, validation).
    """
    app[SERVICE_KEY] = service
    app.middlewares.insert(0, request_metrics_middleware(service))
    app.router.add_get("/metrics", metrics_handler)


def serve_metrics(port: int, addr: str = "127.0.0.1") -> None:
    """Expose ``/metrics`` from a process without an HTTP app (Celery worker, learner) on a daemon thread."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        start_http_server(port, addr=addr, registry=registry)
    else:
        start_http_server(port, addr=addr)
