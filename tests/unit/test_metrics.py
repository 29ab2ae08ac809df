"""``shared.metrics``: the request middleware labels by route pattern and provider; ``/metrics`` serves it."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from shared import metrics

pytestmark = [pytest.mark.unit, pytest.mark.asyncio(loop_scope="session")]


def _count(**labels: str) -> float:
    value = REGISTRY.get_sample_value("harnessrl_http_request_duration_seconds_count", labels)
    return value or 0.0


async def _item(request: web.Request) -> web.Response:
    request[metrics.PROVIDER_KEY] = "openai_chat"
    return web.json_response({"id": request.match_info["item_id"]})


async def _boom(request: web.Request) -> web.Response:
    raise web.HTTPConflict(text="taken")


@pytest.fixture
async def client():
    app = web.Application()
    app.router.add_get("/items/{item_id}", _item)
    app.router.add_post("/items", _boom)
    metrics.instrument_app(app, "metrics-test")
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_requests_are_labelled_by_route_pattern_and_provider(client: TestClient) -> None:
    labels = {"service": "metrics-test", "route": "/items/{item_id}", "method": "GET", "status": "200"}
    before = _count(**labels, provider="openai_chat")
    for item in ("a", "b", "c"):
        assert (await client.get(f"/items/{item}")).status == 200
    assert _count(**labels, provider="openai_chat") == before + 3


async def test_http_errors_and_unmatched_paths_are_counted_without_path_labels(client: TestClient) -> None:
    conflict = {
        "service": "metrics-test",
        "route": "/items",
        "method": "POST",
        "status": "409",
        "provider": "",
    }
    missing = {
        "service": "metrics-test",
        "route": "unmatched",
        "method": "GET",
        "status": "404",
        "provider": "",
    }
    before_conflict, before_missing = _count(**conflict), _count(**missing)
    assert (await client.post("/items")).status == 409
    assert (await client.get("/no/such/path/123")).status == 404
    assert _count(**conflict) == before_conflict + 1
    assert _count(**missing) == before_missing + 1


async def test_metrics_endpoint_serves_every_defined_metric(client: TestClient) -> None:
    metrics.FORKS.labels(harness="codex", reason="compaction").inc()
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    names = {family.name for family in text_string_to_metric_families(await response.text())}
    for expected in (
        "harnessrl_http_request_duration_seconds",
        "harnessrl_calls_captured",
        "harnessrl_forks",
        "harnessrl_rollouts",
        "harnessrl_grading_duration_seconds",
        "harnessrl_learner_step_metric",
        "harnessrl_policy_lag_versions",
        "harnessrl_weight_swap_duration_seconds",
        "harnessrl_policy_version",
    ):
        assert expected in names, expected
