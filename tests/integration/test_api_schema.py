"""The served ``/openapi.json`` against the real api: schemathesis finds no 500s and no response that breaks
the document; every documented (method, path, status) occurs; bearer auth guards every route but two.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from services.api.openapi import build_openapi, documented_statuses
from tests.fixtures import product
from tests.fixtures.product import ApiServer, task_spec

# The product area's fixtures (tests/fixtures/product.py), made visible to this module.
api_server, api = product.api_server, product.api

pytestmark = pytest.mark.integration

OBSERVED: set[tuple[str, str, int]] = set()
PUBLIC = {("GET", "/health"), ("GET", "/metrics")}


@pytest.fixture(scope="module")
def openapi_document(api_server: ApiServer) -> dict[str, Any]:
    with api_server.client() as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    return response.json()


@pytest.fixture(scope="module")
def api_schema(openapi_document: dict[str, Any]):  # type: ignore[no-untyped-def]
    return schemathesis.openapi.from_dict(openapi_document)


OPERATIONS = sorted({(method, path) for method, path, _status in documented_statuses(build_openapi())})


def test_served_document_is_the_generated_one(openapi_document: dict[str, Any]) -> None:
    assert openapi_document == json.loads(json.dumps(build_openapi()))


def _has_inputs(method: str, path: str) -> bool:
    operation = build_openapi()["paths"][path][method.lower()]
    return bool(operation.get("parameters") or operation.get("requestBody"))


CASES = [(m, p, GenerationMode.POSITIVE) for m, p in OPERATIONS] + [
    (m, p, GenerationMode.NEGATIVE)
    for m, p in OPERATIONS
    if _has_inputs(m, p)  # invalid data needs an input
]


@pytest.mark.parametrize(("method", "path", "mode"), CASES, ids=[f"{m} {p} {g.value}" for m, p, g in CASES])
def test_openapi_conformance(api_schema, api_server: ApiServer, method: str, path: str, mode) -> None:  # type: ignore[no-untyped-def]
    """Schemathesis cases for one operation: no 500, status/content type/body conform to the document."""
    operation = api_schema[path][method]
    auth = {"Authorization": f"Bearer {api_server.token}"}

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case) -> None:  # type: ignore[no-untyped-def]
        # Schema-valid values can still be refused on meaning (an unknown dataset name, a cursor this api never
        # issued, a file missing on the api host): a documented 422, so "valid data must be accepted" is off.
        response = case.call_and_validate(
            base_url=api_server.url, headers=auth, excluded_checks=[positive_data_acceptance]
        )
        assert response.status_code < 500
        OBSERVED.add((method, path, response.status_code))

    check()


def _routes(document: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for path, item in document["paths"].items():
        for method in item:
            yield method.upper(), _example(path)


def _example(path: str) -> str:
    return path.replace("{run_id}", "run_x").replace("{rollout_id}", "ro_x").replace("{eval_id}", "eval_x")


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Bearer", "Basic dev-token"])
def test_every_route_but_health_and_metrics_needs_the_token(
    api_server: ApiServer, openapi_document: dict[str, Any], authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path in _routes(openapi_document):
        response = httpx.request(method, api_server.url + path, headers=headers, json={})
        if (method, path) in PUBLIC:
            assert response.status_code == 200, path
        else:
            assert response.status_code == 401, (method, path, response.status_code)
            assert response.json()["error"] == "unauthorized"
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
    # A token in another scheme or with a suffix is refused too.
    for header in (f"Basic {api_server.token}", f"Bearer {api_server.token}x", api_server.token):
        assert httpx.get(api_server.url + "/v1/runs", headers={"Authorization": header}).status_code == 401


def _scenarios(api: httpx.Client) -> Iterator[tuple[str, str, httpx.Response]]:
    """Requests that reach each documented status on purpose (schemathesis's random data rarely does)."""
    body = {"model": "policy", "harness": "reference", "tasks": [task_spec("cov-a")], "group_size": 1}
    key = {"Idempotency-Key": f"cov-{id(api)}-{httpx.__version__}"}
    created = api.post("/v1/runs", json=body, headers=key)
    run_id = created.json()["id"]
    yield "POST", "/v1/runs", created
    yield "POST", "/v1/runs", api.post("/v1/runs", json=body, headers=key)
    yield "POST", "/v1/runs", api.post("/v1/runs", json={**body, "group_size": 2}, headers=key)
    yield "POST", "/v1/runs", api.post("/v1/runs", json={**body, "group_size": 0})
    yield "GET", "/v1/runs", api.get("/v1/runs")
    yield "GET", "/v1/runs", api.get("/v1/runs?limit=0")
    for template, path in (("/v1/runs/{run_id}", "/v1/runs/"), ("/v1/runs/{run_id}/plot", "/v1/runs/")):
        suffix = template.removeprefix("/v1/runs/{run_id}")
        yield "GET", template, api.get(f"{path}{run_id}{suffix}")
        yield "GET", template, api.get(f"{path}run_missing{suffix}")
    tasks = {"tasks": [task_spec("cov-b")]}
    yield "POST", "/v1/runs/{run_id}/tasks", api.post(f"/v1/runs/{run_id}/tasks", json=tasks)
    yield "POST", "/v1/runs/{run_id}/tasks", api.post("/v1/runs/run_missing/tasks", json=tasks)
    yield "POST", "/v1/runs/{run_id}/tasks", api.post(f"/v1/runs/{run_id}/tasks", json={"tasks": []})
    yield "POST", "/v1/runs/{run_id}/stop", api.post(f"/v1/runs/{run_id}/stop")
    yield "POST", "/v1/runs/{run_id}/stop", api.post("/v1/runs/run_missing/stop")
    yield "POST", "/v1/runs/{run_id}/tasks", api.post(f"/v1/runs/{run_id}/tasks", json=tasks)  # 409: stopping
    evaluate = {"harness": "reference", "tasks": [task_spec("cov-e")], "samples": 1}
    eval_created = api.post("/v1/evals", json=evaluate)
    yield "POST", "/v1/evals", eval_created
    yield "POST", "/v1/evals", api.post("/v1/evals", json={**evaluate, "run_id": "run_missing"})
    yield "GET", "/v1/evals/{eval_id}", api.get(f"/v1/evals/{eval_created.json()['id']}")
    yield "GET", "/v1/evals/{eval_id}", api.get("/v1/evals/eval_missing")
    yield "GET", "/v1/evals/{eval_id}/samples", api.get(f"/v1/evals/{eval_created.json()['id']}/samples")
    yield "GET", "/v1/evals/{eval_id}/samples", api.get("/v1/evals/eval_missing/samples")
    yield "POST", "/v1/sft", api.post("/v1/sft", json={"from_run": "run_missing"})
    yield "GET", "/openapi.json", api.get("/openapi.json")
    yield "GET", "/health", api.get("/health")
    yield "GET", "/metrics", api.get("/metrics")


def test_every_documented_status_occurs(
    api: httpx.Client, api_server: ApiServer, openapi_document, db
) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import select, update

    from shared.models import Call, Chain, Rollout, Run

    observed = set(OBSERVED)
    for method, template, response in _scenarios(api):
        assert response.status_code < 500
        observed.add((method, template, response.status_code))
    for method, path in _routes(openapi_document):
        template = next(p for p in openapi_document["paths"] if _example(p) == path)
        if (method, path) not in PUBLIC:
            observed.add((method, template, httpx.request(method, api_server.url + path).status_code))
    # A rollout that exists, and a run that already completed (stop is then a conflict).
    body = {"model": "policy", "harness": "reference", "tasks": [task_spec("cov-c")], "group_size": 1}
    run_id = api.post("/v1/runs", json=body).json()["id"]
    with db.begin() as session:
        rollout_id = session.scalars(select(Rollout.id).where(Rollout.run_id == run_id)).one()
        session.execute(update(Run).where(Run.id == run_id).values(status="completed"))
    observed.add(("GET", "/v1/rollouts/{rollout_id}", api.get(f"/v1/rollouts/{rollout_id}").status_code))
    observed.add(("GET", "/v1/rollouts/{rollout_id}", api.get("/v1/rollouts/ro_missing").status_code))
    observed.add(("POST", "/v1/runs/{run_id}/stop", api.post(f"/v1/runs/{run_id}/stop").status_code))
    # That rollout, closed with a recorded call, is data an SFT run can select.
    with db.begin() as session:
        session.execute(update(Rollout).where(Rollout.id == rollout_id).values(status="graded"))
        chain = Chain(rollout_id=rollout_id, tokens_prefix="")
        session.add(chain)
        session.flush()
        session.add(
            Call(rollout_id=rollout_id, chain_id=chain.id, position=0, provider_api="openai_chat", prompt_tokens=4,
                 suffix_tokens=4, completion_tokens=2, finish_reason="stop", policy_version=0, tokens_key="k")
        )  # fmt: skip
    observed.add(("POST", "/v1/sft", api.post("/v1/sft", json={"from_run": run_id}).status_code))

    missing = documented_statuses(openapi_document) - observed
    assert not missing, f"documented but never observed: {sorted(missing)}"
