"""The ``groups`` stream: a consumer that dies before acking loses nothing, and nothing is processed twice."""

import subprocess
import sys
import time

import pytest

from shared.events import (
    GroupStreamConsumer,
    append_group,
    groups_stream,
    publish_weights,
    weights_channel,
)
from shared.pool import SERVED_KEY, get_policy_version, get_served, mark_starting, set_served

pytestmark = pytest.mark.integration

DYING_CONSUMER = """
import os, sys
from shared.events import connect, GroupStreamConsumer
r = connect(sys.argv[1])
c = GroupStreamConsumer(r, sys.argv[2], "doomed")
entries = c.read_new(count=10, block_ms=2000)
print(len(entries), flush=True)
os.kill(os.getpid(), 9)   # die before acking
"""


def next_entries(consumer: GroupStreamConsumer, block_ms: int) -> list:  # type: ignore[type-arg]
    """What a learner reads next: its own unacked entries, then a dead consumer's stale ones, then new ones."""
    return consumer.own_pending(10) or consumer.claim_stale(10) or consumer.read_new(10, block_ms=block_ms)


def test_dead_consumer_entries_are_claimed_and_processed_once(redis_client, redis_url: str) -> None:
    run_id = f"run_stream_{time.time_ns()}"
    ids = [f"grp_{i}" for i in range(5)]
    for gid in ids:
        append_group(redis_client, run_id, gid, step=0)
    GroupStreamConsumer(redis_client, run_id, "setup")  # creates the consumer group before the doomed read
    proc = subprocess.run(
        [sys.executable, "-c", DYING_CONSUMER, redis_url, run_id], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -9 and proc.stdout.strip() == "5", proc.stderr

    processed: list[str] = []
    survivor = GroupStreamConsumer(redis_client, run_id, "survivor", claim_idle_ms=200)
    assert next_entries(survivor, block_ms=10) == []  # still owned by the dead consumer: not yet idle enough
    time.sleep(0.3)
    for _ in range(5):
        entries = next_entries(survivor, block_ms=50)
        processed.extend(e.group_id for e in entries)
        survivor.ack([e.entry_id for e in entries])
    assert sorted(processed) == ids
    assert redis_client.xpending(groups_stream(run_id), "learner")["pending"] == 0


def test_restarted_consumer_sees_its_own_unacked_entries_first(redis_client) -> None:
    run_id = f"run_stream_{time.time_ns()}"
    consumer = GroupStreamConsumer(redis_client, run_id, "learner-0")
    append_group(redis_client, run_id, "g1")
    first = next_entries(consumer, block_ms=100)
    assert [e.group_id for e in first] == ["g1"]
    append_group(redis_client, run_id, "g2")
    again = next_entries(GroupStreamConsumer(redis_client, run_id, "learner-0"), block_ms=100)
    assert [e.group_id for e in again] == ["g1"]  # unacked work comes back before new work
    consumer.ack([first[0].entry_id])
    assert [e.group_id for e in next_entries(consumer, block_ms=100)] == ["g2"]
    assert consumer.read_new(block_ms=10) == []  # read_new never hands back what was read before


def test_a_lost_stream_is_recreated_on_read(redis_client) -> None:
    run_id = f"run_stream_{time.time_ns()}"
    consumer = GroupStreamConsumer(redis_client, run_id, "learner-0")
    redis_client.delete(groups_stream(run_id))  # Redis restarted without persistence
    assert consumer.read_new(block_ms=10) == []
    append_group(redis_client, run_id, "g1")
    assert [e.group_id for e in consumer.read_new(block_ms=100)] == ["g1"]


def test_weights_channel_and_policy_version(redis_client) -> None:
    pubsub = redis_client.pubsub()
    pubsub.subscribe(weights_channel(redis_client))
    db_index = redis_client.connection_pool.connection_kwargs["db"]
    assert weights_channel(redis_client) == f"harnessrl:{db_index}:weights"
    pubsub.get_message(timeout=1)
    assert publish_weights(redis_client, "run_x", 3, "weights/run_x/3/model.safetensors") >= 1
    msg = pubsub.get_message(timeout=2)
    assert msg and '"version": 3' in msg["data"]
    set_served(redis_client, "run_x", 3, served_by="replica-0")
    assert get_policy_version(redis_client) == 3
    served = get_served(redis_client)
    assert served is not None and served.ready and served.run_id == "run_x"
    # A restarting inference service: the engine holds base weights, so no version is served until it is ready.
    mark_starting(redis_client, served_by="replica-0")
    assert get_policy_version(redis_client) is None
    assert not get_served(redis_client).ready  # type: ignore[union-attr]
    redis_client.delete(SERVED_KEY)  # later tests' gateways would refuse calls while the pool is "starting"
    pubsub.close()
