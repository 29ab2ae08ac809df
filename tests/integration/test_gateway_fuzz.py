"""Property tests over every provider route: random and mutated bodies never produce a 5xx, and a request the
gateway rejects never leaves a recorded call or chain behind."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from shared.db import session_scope
from shared.models import Call, Chain
from tests.fixtures.gateway import settle_gateways
from tests.integration.test_gateway_app import BODIES

pytestmark = pytest.mark.integration

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(
    ["model", "messages", "input", "contents", "tools", "role", "content", "parts", "type", "tool_calls", "function",
     "arguments", "name", "stream", "max_tokens", "system", "text", "functionCall", "tool_choice", "call_id"]
)  # fmt: skip


def mutate(body: Any, path: list[int | str], value: Any) -> Any:
    """``body`` with the node reached by following ``path`` (indexes modulo length) replaced by ``value``."""
    if not path or not isinstance(body, (dict, list)) or not body:
        return value
    keys = list(body) if isinstance(body, dict) else list(range(len(body)))
    step = path[0]
    key = keys[(step if isinstance(step, int) else sum(map(ord, step))) % len(keys)]
    copy = dict(body) if isinstance(body, dict) else list(body)
    copy[key] = mutate(body[key], path[1:], value)  # type: ignore[index]
    return copy


def counts(db) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    settle_gateways()
    with session_scope(db) as session:
        return (
            int(session.scalar(select(func.count()).select_from(Call)) or 0),
            int(session.scalar(select(func.count()).select_from(Chain)) or 0),
        )


@pytest.mark.parametrize("provider_api", sorted(BODIES))
def test_random_and_mutated_bodies_never_500_and_rejections_record_nothing(
    gateway_server, scripted_policy, make_rollout, db, provider_api
):  # type: ignore[no-untyped-def]
    path, valid = BODIES[provider_api]
    ref = make_rollout()
    headers = {"Authorization": f"Bearer {ref.rollout_key}", "x-goog-api-key": ref.rollout_key}
    client = httpx.Client(base_url=gateway_server.url, headers=headers, timeout=30)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.one_of(
            json_values.map(lambda v: json.dumps(v).encode()),
            st.tuples(st.lists(FIELD_NAMES | st.integers(0, 5), max_size=5), json_values).map(
                lambda pv: json.dumps(mutate(valid, pv[0], pv[1])).encode()
            ),
            st.binary(max_size=64),
        )
    )
    def check(payload: bytes) -> None:
        before = counts(db)
        response = client.post(path, content=payload, headers={"content-type": "application/json"})
        assert response.status_code < 500, (payload, response.status_code, response.text)
        if response.status_code != 200:
            assert counts(db) == before, payload
            response.json()  # an error body in the caller's shape, never an HTML page

    with client:
        check()
