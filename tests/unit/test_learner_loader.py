"""Concurrent segment fetching: every key answered, failures handed back per key."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from services.learner.loader import fetch_segments
from shared.objectstore import LocalObjectStore, ObjectNotFound

pytestmark = pytest.mark.unit


def test_fetch_segments_returns_each_segment_or_its_error(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    keys = []
    for i in range(40):
        buffer = io.BytesIO()
        np.savez(buffer, prompt_ids=np.arange(i, dtype=np.int32), policy_version=np.asarray(i))
        store.put_bytes(f"tokens/r/{i}.npz", buffer.getvalue())
        keys.append(f"tokens/r/{i}.npz")
    store.put_bytes("tokens/r/bad.npz", b"not a zip archive")
    fetched = fetch_segments(store, [*keys, "tokens/r/absent.npz", "tokens/r/bad.npz", keys[0]])
    assert set(fetched) == {*keys, "tokens/r/absent.npz", "tokens/r/bad.npz"}
    for i, key in enumerate(keys):
        segment = fetched[key]
        assert isinstance(segment, dict)
        assert segment["prompt_ids"].tolist() == list(range(i))
        assert int(segment["policy_version"]) == i
    assert isinstance(fetched["tokens/r/absent.npz"], ObjectNotFound)
    assert isinstance(fetched["tokens/r/bad.npz"], Exception)
    assert fetch_segments(store, []) == {}
