"""A step's window and busy figures, measured after its commit (``loop.Learner.train``).

A step's **window** is the wall time from the previous step's commit (for step 1: the creation of the run's first
groups, when its sampling began) to this step's commit (``window_start_unix``, ``window_end_unix``, Unix seconds;
``wall_s`` = their difference), so the windows of a run tile its training time and ``wall_s`` is the wall time per
step. In it:

- ``learner_busy_s``: this step's update, publishing and commit, the work a GPU learner would do; group loading
  (``load_s``) happens while rollouts run and is reported apart. ``learner_busy_fraction`` = ``learner_busy_s /
  wall_s``.
- ``inference_busy_s``: time with at least one of the run's calls in generation (``shared/busy_time.py``: from the
  request sent to the engine to its last token, as the gateway stamped them). ``inference_busy_fraction`` =
  ``inference_busy_s / wall_s``.

The gateway records a call after its reply, so calls still generating at a commit are missing from the figure
until recorded. Sampling runs at most ``sampling_lag`` steps ahead and a step's rollouts are all recorded before it
is trained, so every call that overlaps step j's window is recorded by the commit of step j + ``sampling_lag``:
each measurement measures its step's window and the previous ``sampling_lag`` windows again (on-policy, nothing
generates at a commit and the first figure is final). A crash between a commit and its measurement leaves that
step without a window (readers skip it); the next step's window starts at the row's creation.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from shared.busy_time import busy_seconds, generation_intervals
from shared.db import session_scope
from shared.models import Group, Step
from shared.step_record import StepRecord, StepWindow


def record_timing(
    sessions: sessionmaker[Session],
    record: StepRecord,
    *,
    run_id: str,
    window_end: float,
    learner_busy_s: float,
    sampling_lag: int,
) -> StepRecord:
    """Measure committed step ``record``'s window and re-measure the previous ``sampling_lag`` windows' inference
    figures; write them on the rows (one transaction). Returns ``record`` with its window."""
    step = record.step
    with session_scope(sessions) as session:
        rows = session.scalars(
            select(Step).where(
                Step.run_id == run_id, Step.step >= step - max(sampling_lag, 1), Step.step <= step
            )
        ).all()
        earlier = {r.step: (r, StepRecord.from_row(r)) for r in rows if r.step < step}
        previous = earlier.get(step - 1)
        if previous is None:
            first = session.scalar(select(func.min(Group.created_at)).where(Group.run_id == run_id))
            start = first.timestamp() if first is not None else window_end - learner_busy_s
        elif previous[1].window is not None:
            start = previous[1].window.window_end_unix
        else:
            start = previous[0].created_at.timestamp()
        wall = max(window_end - start, 1e-9)
        window = StepWindow(
            window_start_unix=start,
            window_end_unix=window_end,
            wall_s=window_end - start,
            learner_busy_s=learner_busy_s,
            learner_busy_fraction=min(1.0, learner_busy_s / wall),
        )
        again = {
            s: rec for s, (_, rec) in earlier.items() if rec.window is not None and s >= step - sampling_lag
        }
        windows = {s: rec.window for s, rec in again.items() if rec.window is not None} | {step: window}
        intervals = generation_intervals(
            session, run_id, min(w.window_start_unix for w in windows.values()), window_end
        )
        measured = {s: _with_inference(w, intervals) for s, w in windows.items()}
        for row in rows:
            if row.step == step:
                record = record.with_window(measured[step])
                row.metrics = record.metrics_json()
            elif row.step in again:
                row.metrics = again[row.step].with_window(measured[row.step]).metrics_json()
    return record


def _with_inference(window: StepWindow, intervals: list[tuple[float, float]]) -> StepWindow:
    a, b = window.window_start_unix, window.window_end_unix
    inference = busy_seconds(intervals, a, b)
    return replace(window, inference_busy_s=inference, inference_busy_fraction=inference / max(b - a, 1e-9))
