"""``shared/step_record.py``: a learner step's row written and read back, rows of the version-1 format still read."""

from __future__ import annotations

import pytest

from shared.step_record import (
    RECORD_VERSION,
    SetAside,
    StepRecord,
    StepRecordError,
    StepWindow,
    UpdateFigures,
)

pytestmark = pytest.mark.unit

# The columns and metrics of a steps row as the learner wrote them before the record existed (version 1).
V1_COLUMNS = {
    "step": 3, "policy_version": 3, "loss": -0.02, "clip_fraction": 0.1, "kl": 0.004, "reward_mean": 0.5,
    "reward_std": 0.5, "tokens": 900, "policy_lag_mean": 0.5, "step_time_s": 4.5, "groups_trained": 2,
    "groups_stale": 1, "groups_zero_variance": 1, "groups_set_aside": 1,
}  # fmt: skip
V1_METRICS = {
    "loss": -0.02, "clip_fraction": 0.1, "kl_behavior": 0.004, "kl": 0.0, "tis_fraction": 0.0,
    "peak_memory_bytes": 123, "peak_memory_step_bytes": 45, "grad_norm": 0.7, "reward_mean": 0.5,
    "reward_std": 0.5, "loss_tokens": 300.0, "tokens_computed": 900.0, "plan_s": 0.01, "step_time_s": 3.0,
    "kl_reference": 0.0, "groups_redelivered": 1, "set_aside": [{"group_id": "g9", "reason": "no tokens"}],
    "stale_group_ids": ["g7"], "strategy": "trie", "compute_dtype": "float32", "weights_sha256": "ab" * 32,
    "commit_prepare_s": 1.2, "load_s": 0.3, "load_last_group_s": 0.1, "publish_s": 0.9, "published_bytes": 1000,
    "trained_group_ids": ["g1", "g2"], "checkpoint_write_s_previous": None, "policy_lag_max": 1,
    "cut_fraction": 0.25, "window_start_unix": 100.0, "window_end_unix": 110.0, "wall_s": 10.0,
    "learner_busy_s": 4.5, "learner_busy_fraction": 0.45, "inference_busy_s": 6.0, "inference_busy_fraction": 0.6,
}  # fmt: skip


def test_a_version_1_row_reads_into_every_field() -> None:
    record = StepRecord.from_row({**V1_COLUMNS, "metrics": V1_METRICS})
    assert (record.step, record.policy_version, record.kl, record.step_time_s) == (3, 3, 0.004, 4.5)
    assert (
        record.update.update_s == 3.0
        and record.update.kl_behavior == 0.004
        and record.update.grad_norm == 0.7
    )
    assert record.trained_group_ids == ("g1", "g2") and record.stale_group_ids == ("g7",)
    assert record.set_aside == (SetAside(group_id="g9", reason="no tokens"),)
    assert (record.groups_stale, record.groups_redelivered, record.policy_lag_max) == (1, 1, 1)
    assert record.window is not None and record.window.inference_busy_fraction == 0.6
    assert record.trained


def test_writing_a_version_1_row_again_keeps_every_key_and_value() -> None:
    record = StepRecord.from_row({**V1_COLUMNS, "metrics": V1_METRICS})
    written = record.metrics_json()
    assert written.pop("record_version") == RECORD_VERSION
    assert written == V1_METRICS
    assert {k: v for k, v in record.columns().items() if k != "metrics"} == V1_COLUMNS
    assert StepRecord.from_row(record.columns()) == record


def test_a_row_older_than_the_window_and_the_group_ids_reads_with_defaults() -> None:
    old = {
        k: V1_METRICS[k] for k in ("loss", "clip_fraction", "kl", "kl_behavior", "reward_mean", "step_time_s")
    }
    record = StepRecord.from_row({**V1_COLUMNS, "metrics": old})
    assert record.window is None and record.trained_group_ids is None and record.set_aside == ()
    assert record.update.tokens_computed == 900.0  # from the column


def test_a_step_without_update_round_trips_and_marks_no_update() -> None:
    record = StepRecord(
        step=1, policy_version=1, update=UpdateFigures(reward_mean=0.0, no_update=True), kl=0.0, step_time_s=0.5,
        policy_lag_mean=0.0, trained_group_ids=(), window=StepWindow(
            window_start_unix=1.0, window_end_unix=2.0, wall_s=1.0, learner_busy_s=0.5, learner_busy_fraction=0.5
        ),
    )  # fmt: skip
    assert record.metrics_json()["no_update"] is True and "grad_norm" not in record.metrics_json()
    assert StepRecord.from_row(record.columns()) == record and not record.trained


def test_a_newer_record_version_is_refused_with_the_step_named() -> None:
    with pytest.raises(StepRecordError, match="step 3: metrics record_version 99"):
        StepRecord.from_row({**V1_COLUMNS, "metrics": {**V1_METRICS, "record_version": 99}})


def test_records_are_built_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        StepRecord(1, 1, UpdateFigures(), 0.0, 0.0, 0.0)  # type: ignore[misc]
