"""TensorBoard event files of a run: its learner steps and its eval results, where RL engineers read curves.

Layout (one owner, this module): ``<data_dir>/tensorboard/<run>/`` holds the run's event files; when the object
store is remote (``s3://``) each file is also uploaded under ``tensorboard/<run>/<file name>`` after every write,
so a run whose learner ran on another machine can be read from the store. ``harnessrl run logdir RUN`` prints
both; ``tensorboard --logdir <data_dir>/tensorboard`` shows every run side by side.

Writers (each its own event file in the run's folder; TensorBoard merges the files of a folder):
- the learner, after each committed step (``services/learner/loop.py``): ``train/*`` scalars at the step number;
- the api's scheduler, when an eval ends (``services/api/evals.py``): ``eval/*`` scalars in the eval's own folder at
  the evaluated version and, for an eval a training run scheduled, in that run's folder at the step it ran before.

The writer is the ``tensorboard`` package's ``EventFileWriter`` with ``simple_value`` scalar summaries (no
TensorFlow, no torch). A failed write is logged and never fails the step or the eval that produced the figures.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path
from urllib.parse import urlparse

from shared.objectstore import ObjectStore
from shared.settings import Settings

log = logging.getLogger(__name__)

ROOT = "tensorboard"
OPEN_WRITERS = 32


def run_logdir(settings: Settings, run_id: str) -> Path:
    return settings.data_dir / ROOT / run_id


def object_prefix(run_id: str) -> str:
    return f"{ROOT}/{run_id}/"


def store_is_remote(settings: Settings) -> bool:
    return urlparse(settings.object_store_url).scheme == "s3"


def remote_logdir(settings: Settings, run_id: str) -> str | None:
    """The run's event files in the object store (``s3://bucket/tensorboard/<run>/``), or None when local."""
    if not store_is_remote(settings):
        return None
    return f"{settings.object_store_url.rstrip('/')}/{object_prefix(run_id)}"


class ScalarLog:
    """Scalar events of any number of runs from one process: one open ``EventFileWriter`` per run (the newest
    ``OPEN_WRITERS``), flushed after every write. Thread-safe."""

    def __init__(self, settings: Settings, store: ObjectStore | None = None, writer: str = "") -> None:
        self.settings = settings
        self.store = store if store_is_remote(settings) else None
        self.suffix = f".{writer}" if writer else ""
        self._writers: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()

    def _writer(self, run_id: str):  # type: ignore[no-untyped-def]
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        writer = self._writers.get(run_id)
        if writer is None:
            logdir = run_logdir(self.settings, run_id)
            logdir.mkdir(parents=True, exist_ok=True)
            writer = EventFileWriter(str(logdir), max_queue_size=1000, filename_suffix=self.suffix)
            self._writers[run_id] = writer
            while len(self._writers) > OPEN_WRITERS:
                self._writers.popitem(last=False)[1].close()  # type: ignore[attr-defined]
        self._writers.move_to_end(run_id)
        return writer

    def write(self, run_id: str, step: int, scalars: dict[str, float | int | None]) -> None:
        """Append ``scalars`` (None values skipped) at ``step``; never raises."""
        from tensorboard.compat.proto import event_pb2, summary_pb2

        values = [
            summary_pb2.Summary.Value(tag=tag, simple_value=float(value))
            for tag, value in scalars.items()
            if value is not None
        ]
        try:
            with self._lock:
                writer = self._writer(run_id)
                event = event_pb2.Event(
                    wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=values)
                )
                writer.add_event(event)
                writer.flush()
                if self.store is not None:
                    path = Path(writer._file_name)  # the writer names its file at creation; no public getter
                    self.store.put_file(object_prefix(run_id) + path.name, path)
        except Exception:
            log.warning("could not write TensorBoard scalars of run %s", run_id, exc_info=True)

    def close(self) -> None:
        with self._lock:
            for writer in self._writers.values():
                writer.close()  # type: ignore[attr-defined]
            self._writers.clear()


def read_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in a run's folder, by tag: (step, value) in step order (tests and ``harnessrl run logdir``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(path), size_guidance={"scalars": 0})
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in accumulator.Scalars(tag))
    return {tag: sorted(points) for tag, points in out.items()}
