"""The ``groups`` stream: a consumer that dies before acking loses nothing, and nothing is processed twice."""

import subprocess
import sys
import time

import pytest

from shared.events import (
    GroupStreamConsumer,
    append_group,
    get_policy_version,
    groups_stream,
    publish_weights,
    set_policy_version,
    weights_channel,
)

pytestmark = pytest.mark.integration

DYING_CONSUMER = """
import os, sys
from shared.events import connect, GroupStreamConsumer
r = connect(sys.argv[1])
c = GroupStreamConsumer(r, sys.argv[2], "doomed")
entries = c.read(count=10, block_ms=2000)
print(len(entries), flush=True)
os.kill(os.getpid(), 9)   # die before acking
"""


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
    assert survivor.read(count=10, block_ms=10) == []  # still owned by the dead consumer: not yet idle enough
    time.sleep(0.3)
    for _ in range(5):
        entries = survivor.read(count=10, block_ms=50)
        processed.extend(e.group_id for e in entries)
        survivor.ack([e.entry_id for e in entries])
    assert sorted(processed) == ids
    assert redis_client.xpending(groups_stream(run_id), "learner")["pending"] == 0


def test_restarted_consumer_sees_its_own_unacked_entries_first(redis_client) -> None:
    run_id = f"run_stream_{time.time_ns()}"
    consumer = GroupStreamConsumer(redis_client, run_id, "learner-0")
    append_group(redis_client, run_id, "g1")
    first = consumer.read(block_ms=100)
    assert [e.group_id for e in first] == ["g1"]
    append_group(redis_client, run_id, "g2")
    again = GroupStreamConsumer(redis_client, run_id, "learner-0").read(block_ms=100)
    assert [e.group_id for e in again] == ["g1"]  # unacked work comes back before new work
    consumer.ack([first[0].entry_id])
    assert [e.group_id for e in consumer.read(block_ms=100)] == ["g2"]


def test_weights_channel_and_policy_version(redis_client) -> None:
    pubsub = redis_client.pubsub()
    pubsub.subscribe(weights_channel(redis_client))
    assert weights_channel(redis_client).startswith("harnessrl:11:")
    pubsub.get_message(timeout=1)
    assert publish_weights(redis_client, "run_x", 3, "weights/run_x/3/model.safetensors") >= 1
    msg = pubsub.get_message(timeout=2)
    assert msg and '"version": 3' in msg["data"]
    set_policy_version(redis_client, 3, served_by="replica-0")
    assert get_policy_version(redis_client) == 3
    pubsub.close()
