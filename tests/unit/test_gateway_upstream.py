"""Replica routing: every call of a rollout goes to one replica, and rollouts spread over the replicas."""

from __future__ import annotations

from collections import Counter

import pytest

from services.gateway.upstream import replica_for
from shared.inference_client import InferenceUnavailable

pytestmark = pytest.mark.unit

URLS = ["http://a:8000", "http://b:8000", "http://c:8000"]


def test_a_rollout_always_goes_to_the_same_replica() -> None:
    assert len({replica_for("ro_123", URLS) for _ in range(20)}) == 1


def test_rollouts_spread_over_replicas() -> None:
    counts = Counter(replica_for(f"ro_{i}", URLS) for i in range(3000))
    assert set(counts) == set(URLS)
    assert min(counts.values()) > 800


def test_no_replicas_is_a_clear_error() -> None:
    with pytest.raises(InferenceUnavailable, match="HARNESSRL_INFERENCE_URLS"):
        replica_for("ro_1", [])
