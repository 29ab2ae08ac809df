"""``shared.logging``: one JSON object per record, carrying ids bound in the current context only."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from shared.logging import bind, bound, configure_logging

pytestmark = pytest.mark.unit


@pytest.fixture
def log_stream():
    stream = io.StringIO()
    handler = configure_logging("test-service", "DEBUG", stream=stream)
    yield stream
    logging.getLogger().removeHandler(handler)


def _lines(stream: io.StringIO) -> list[dict]:
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [e for e in entries if e["logger"] == "harnessrl.test"]  # asyncio logs its selector at DEBUG


def test_records_are_json_with_bound_ids_and_extras(log_stream: io.StringIO) -> None:
    log = logging.getLogger("harnessrl.test")
    with bind(run_id="run_1", rollout_id="ro_1"):
        log.info("call %s captured", 7, extra={"call_id": 7})
    log.warning("outside")
    inside, outside = _lines(log_stream)
    assert inside["msg"] == "call 7 captured"
    assert inside["level"] == "info"
    assert inside["service"] == "test-service"
    assert inside["logger"] == "harnessrl.test"
    assert (inside["run_id"], inside["rollout_id"], inside["call_id"]) == ("run_1", "ro_1", 7)
    assert inside["ts"].endswith("Z")
    assert "run_id" not in outside and outside["level"] == "warning"


def test_bindings_nest_and_restore(log_stream: io.StringIO) -> None:
    with bind(run_id="run_a"):
        with bind(rollout_id="ro_b", run_id="run_override"):
            assert bound() == {"run_id": "run_override", "rollout_id": "ro_b"}
        assert bound() == {"run_id": "run_a"}
    assert bound() == {}


def test_exceptions_are_logged_with_traceback(log_stream: io.StringIO) -> None:
    try:
        raise ValueError("bad patch")
    except ValueError:
        logging.getLogger("harnessrl.test").exception("grading failed")
    (entry,) = _lines(log_stream)
    assert "ValueError: bad patch" in entry["exc"]


async def test_concurrent_tasks_do_not_see_each_others_ids(log_stream: io.StringIO) -> None:
    log = logging.getLogger("harnessrl.test")

    async def rollout(rollout_id: str) -> None:
        with bind(rollout_id=rollout_id):
            await asyncio.sleep(0.01)
            log.info("done")

    await asyncio.gather(*(rollout(f"ro_{i}") for i in range(5)))
    assert sorted(e["rollout_id"] for e in _lines(log_stream)) == [f"ro_{i}" for i in range(5)]


def test_configuring_twice_does_not_duplicate_lines(log_stream: io.StringIO) -> None:
    second = io.StringIO()
    handler = configure_logging("again", stream=second)
    try:
        logging.getLogger("harnessrl.test").info("once")
        assert log_stream.getvalue() == ""
        assert len(second.getvalue().splitlines()) == 1
    finally:
        logging.getLogger().removeHandler(handler)
