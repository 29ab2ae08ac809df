"""``Settings.pin_cpus``: ``harnessrl up`` gives inference and the learners separate halves of the CPUs, and the
supervisor sets a service's affinity before it execs, so the processes it starts inherit it."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import click
import pytest

from services.cli.supervisor import ServiceSpec, Supervisor, log_ready
from services.cli.up import cpu_split, suite_specs
from shared.settings import Settings

pytestmark = pytest.mark.unit

# Prints its own CPUs and those of a child it starts (what vLLM's engine process or a torch worker would be).
REPORTS_AFFINITY = [
    sys.executable,
    "-u",
    "-c",
    "import os, subprocess, sys, time\n"
    "child = subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)))'],"
    " capture_output=True, text=True).stdout.strip()\n"
    "print('service', sorted(os.sched_getaffinity(0)), 'child', child, flush=True)\n"
    "print('ready.', flush=True); time.sleep(60)",
]


def _settings(**overrides: object) -> Settings:
    return Settings(_env_file=None, **overrides)  # type: ignore[call-arg, arg-type]


def test_a_pinned_service_and_the_processes_it_starts_run_on_its_cpus(tmp_path: Path) -> None:
    mine = min(os.sched_getaffinity(0))
    supervisor = Supervisor(tmp_path / "up.log", dict(os.environ), echo=False, out=io.StringIO())
    try:
        supervisor.start(ServiceSpec("pinned", REPORTS_AFFINITY, log_ready("ready."), cpus=frozenset({mine})))
        supervisor.start(ServiceSpec("free", REPORTS_AFFINITY, log_ready("ready.")))
        pinned, free = (supervisor.running[name].tail[0] for name in ("pinned", "free"))
    finally:
        supervisor.stop_all()
    assert pinned == f"service [{mine}] child [{mine}]"
    everything = sorted(os.sched_getaffinity(0))
    assert free == f"service {everything} child {everything}"
    assert os.sched_getaffinity(0) == set(everything)  # the supervisor itself is not pinned


def test_up_splits_the_cpus_between_inference_and_the_learners(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cpu_split(_settings()) is None
    assert all(spec.cpus is None for spec in suite_specs(_settings()))

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 4, 5})
    inference, learners = cpu_split(_settings(pin_cpus=True))  # type: ignore[misc]
    assert (inference, learners) == ({0, 1, 2}, {4, 5})
    specs = {spec.name: spec for spec in suite_specs(_settings(pin_cpus=True))}
    assert specs["inference"].cpus == inference
    assert specs["learners"].cpus == learners  # the learner controller, whose learners inherit its CPUs
    assert all(spec.cpus is None for name, spec in specs.items() if name not in ("inference", "learners"))

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {3})
    with pytest.raises(click.ClickException, match="at least 2 CPUs"):
        cpu_split(_settings(pin_cpus=True))
