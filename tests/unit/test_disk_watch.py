"""The sandbox's disk watch: how soon the next walk of the writable dirs comes."""

from __future__ import annotations

import pytest

from shared.sandbox import DISK_CHECK_MAX_S, DISK_CHECK_MIN_S, DiskWatch

MiB = 1024**2


def test_walks_start_close_together_and_back_off_while_nothing_grows() -> None:
    watch = DiskWatch(32 * MiB, started=0.0)
    at, intervals = 0.0, []
    for _ in range(8):
        interval = watch.next_interval(usage=4096, at=at, cost_s=0.0001)
        intervals.append(interval)
        at += interval
    assert intervals[0] == pytest.approx(DISK_CHECK_MIN_S)
    assert intervals[1] > intervals[0]  # 4 KiB at the first walk, then no growth: back off
    assert all(b <= 2 * a + 1e-9 for a, b in zip(intervals, intervals[1:], strict=False))
    assert intervals[-1] == pytest.approx(DISK_CHECK_MAX_S)


def test_fast_growth_brings_the_next_walk_before_half_the_headroom_is_gone() -> None:
    watch = DiskWatch(32 * MiB, started=0.0)
    for _ in range(6):  # idle long enough to reach the steady interval
        watch.next_interval(usage=0, at=0.0, cost_s=0.0001)
    # 8 MiB appeared in 10 ms (800 MiB/s): 24 MiB of headroom lasts 30 ms at that rate.
    interval = watch.next_interval(usage=8 * MiB, at=0.01, cost_s=0.0001)
    assert interval == pytest.approx(0.015, rel=0.01)
    # Nearer the limit at the same rate, the next walk comes at the floor.
    assert watch.next_interval(usage=31 * MiB, at=0.04, cost_s=0.0001) == pytest.approx(DISK_CHECK_MIN_S)


def test_an_expensive_walk_is_not_repeated_more_often_than_its_cost_allows() -> None:
    watch = DiskWatch(32 * MiB, started=0.0)
    slow_walk = 0.05  # a big repository
    assert watch.next_interval(usage=16 * MiB, at=0.01, cost_s=slow_walk) == pytest.approx(2 * slow_walk)
    for _ in range(10):
        interval = watch.next_interval(usage=16 * MiB, at=1.0, cost_s=slow_walk)
    assert interval == pytest.approx(20 * slow_walk)  # steady state: about 5% of a core
