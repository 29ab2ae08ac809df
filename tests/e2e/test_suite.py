"""The whole running suite, end to end (issue 7's must-shows).

- ``harnessrl demo`` as a user runs it (a subprocess on settings of its own) completes a real GRPO run: at
  least three learner steps, each publishing a new policy version that inference serves and later calls carry,
  every rollout graded, the reward-curve PNG written.
- Under ``harnessrl up`` (in-process ``running_suite``), SIGKILLing the runner, the gateway, the api, the
  grader, the learner and inference one at a time, while a run is in flight, is reported as
  ``SERVICE DOWN: <name> ...`` (the learner by the learner controller: ``LEARNER DOWN: ...``) and restarts;
  the run still completes with every rollout accounted for, nothing duplicated or lost, and the restarted
  inference serves the run's current policy again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from shared.db import make_engine
from shared.events import connect
from shared.models import Call, Chain, Group, Reward, Rollout, Run, Step, Weight
from shared.pool import get_policy_version
from tests.fixtures.services import REPO_ROOT
from tests.fixtures.suite import isolated_suite_settings, suite_env, suite_leftovers

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DEMO_STEPS, DEMO_GROUP_SIZE, DEMO_TASKS = 3, 2, 1


# --- checks shared by both tests ----------------------------------------------------------------------------
def run_accounting_problems(engine: Engine, run_id: str, steps: int, rollouts_per_step: int) -> list[str]:
    """Nothing lost, nothing duplicated: every step sampled its rollouts, each rollout is graded (one reward) or
    failed for good with a reason, each attempt's calls were recorded once, learner steps are contiguous.
    Returns what is wrong (empty when all holds), so a failing test names every problem at once."""
    with engine.connect() as conn:
        groups = conn.execute(select(Group.step, Group.status).where(Group.run_id == run_id)).all()
        rollouts = conn.execute(
            select(Rollout.id, Rollout.status, Rollout.error, Group.step)
            .join(Group, Group.id == Rollout.group_id)
            .where(Rollout.run_id == run_id)
        ).all()
        rewards = conn.execute(
            select(Reward.rollout_id)
            .join(Rollout, Rollout.id == Reward.rollout_id)
            .where(Rollout.run_id == run_id)
        ).scalars()
        reward_ids = list(rewards)
        root_chains = dict(
            conn.execute(
                select(Chain.rollout_id, func.count())
                .join(Rollout, Rollout.id == Chain.rollout_id)
                .where(Rollout.run_id == run_id, Chain.parent_chain_id.is_(None), Chain.fork_reason.is_(None))
                .group_by(Chain.rollout_id)
            ).all()
        )
        step_numbers = list(
            conn.execute(select(Step.step).where(Step.run_id == run_id).order_by(Step.step)).scalars()
        )

    problems = []
    if sorted({g.step for g in groups}) != list(range(steps)):
        problems.append(f"sampling steps: {groups}")
    if any(g.status not in ("consumed", "failed") for g in groups):
        problems.append(f"unfinished groups: {groups}")
    per_step = {k: sum(1 for r in rollouts if r.step == k) for k in range(steps)}
    if per_step != dict.fromkeys(range(steps), rollouts_per_step):
        problems.append(f"rollouts per step: {per_step}")
    if len(reward_ids) != len(set(reward_ids)):
        problems.append("a rollout was rewarded twice")
    graded = {r.id for r in rollouts if r.status == "graded"}
    if set(reward_ids) != graded:
        problems.append(f"graded rollouts {sorted(graded)} and rewards rows {sorted(reward_ids)} differ")
    unaccounted = [r for r in rollouts if r.status not in ("graded", "failed")]
    if unaccounted:
        problems.append(f"rollouts neither graded nor failed: {unaccounted}")
    silent_failures = [r for r in rollouts if r.status == "failed" and not r.error]
    if silent_failures:
        problems.append(f"rollouts failed without a reason: {silent_failures}")
    # A redelivered rollout deletes the dead attempt's calls: a rollout never keeps two unforked root chains.
    duplicated = {rid: n for rid, n in root_chains.items() if n > 1}
    if duplicated:
        problems.append(f"rollouts holding calls of more than one attempt: {duplicated}")
    # Learner step k (numbered from 1) trains sampling step k - 1.
    if step_numbers != list(range(1, steps + 1)):
        problems.append(f"learner steps are {step_numbers}, expected {list(range(1, steps + 1))}")
    return problems


def policy_advance_problems(engine: Engine, run_id: str, steps: int) -> list[str]:
    """Each learner step published exactly one new version, inference served it, and the next sampling step's
    calls were sampled by it. Returns what is wrong (empty when all holds)."""
    with engine.connect() as conn:
        published = conn.execute(
            select(Step.step, Step.policy_version).where(Step.run_id == run_id).order_by(Step.step)
        ).all()
        weights = dict(
            conn.execute(select(Weight.version, Weight.status).where(Weight.run_id == run_id)).all()
        )
        run_version = conn.execute(select(Run.policy_version).where(Run.id == run_id)).scalar_one()
        call_versions = conn.execute(
            select(Group.step, Call.policy_version)
            .join(Rollout, Rollout.id == Call.rollout_id)
            .join(Group, Group.id == Rollout.group_id)
            .where(Rollout.run_id == run_id)
        ).all()

    problems = []
    if [(s.step, s.policy_version) for s in published] != [(k, k) for k in range(1, steps + 1)]:
        problems.append(f"learner steps and the versions they published: {published}")
    if run_version != steps:
        problems.append(f"the run's policy version is {run_version}, expected {steps}")
    if weights != dict.fromkeys(range(1, steps + 1), "served"):
        problems.append(f"weights rows (version: status): {weights}")
    by_step: dict[int, set[int]] = {}
    for step, version in call_versions:
        by_step.setdefault(step, set()).add(version)
    # Sampling step k starts only once version k (trained on step k-1) is served, so all its calls carry k.
    if by_step != {k: {k} for k in range(steps)}:
        problems.append(f"policy versions of the calls by sampling step: {by_step}")
    return problems


# --- 1. the demo command ------------------------------------------------------------------------------------
# Slow (minutes): `harnessrl demo` as a user runs it, a suite of its own and a real GRPO run; what the README
# promises for `make demo` is shown nowhere else.
def test_demo_command_completes(tiny_model_dir: Path) -> None:
    with isolated_suite_settings(tiny_model_dir) as settings:
        started = time.monotonic()
        demo = subprocess.run(
            [
                sys.executable,
                "-m",
                "services.cli.main",
                "demo",
                "--quick",
                "--steps",
                str(DEMO_STEPS),
                "--group-size",
                str(DEMO_GROUP_SIZE),
                "--tasks",
                str(DEMO_TASKS),
                "--timeout-min",
                "12",
            ],
            env=suite_env(settings) | {"COLUMNS": "250"},  # rich wraps at 80 columns when not on a terminal
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=15 * 60,
        )
        elapsed = time.monotonic() - started
        leftovers = suite_leftovers(settings.data_dir)
        up_log = settings.data_dir / "logs" / "up.log"
        context = (
            f"demo exited {demo.returncode} after {elapsed:.0f}s\n--- stdout\n{demo.stdout[-6000:]}\n"
            f"--- stderr\n{demo.stderr[-3000:]}\n--- up.log\n"
            + (up_log.read_text(errors="replace")[-6000:] if up_log.exists() else "(none)")
        )
        assert demo.returncode == 0, context

        engine = make_engine(settings.database_url)
        try:
            with engine.connect() as conn:
                runs = conn.execute(select(Run.id, Run.status)).all()
            assert len(runs) == 1 and runs[0].status == "completed", f"runs: {runs}\n{context}"
            run_id = runs[0].id
            problems = run_accounting_problems(engine, run_id, DEMO_STEPS, DEMO_TASKS * DEMO_GROUP_SIZE)
            problems += policy_advance_problems(engine, run_id, DEMO_STEPS)
            with engine.connect() as conn:
                statuses = (
                    conn.execute(select(Rollout.status).where(Rollout.run_id == run_id)).scalars().all()
                )
        finally:
            engine.dispose()
        if set(statuses) != {"graded"}:
            problems.append(f"every demo rollout is graded, but their statuses are {statuses}")

        png = settings.data_dir / "demo" / f"{run_id}-reward.png"
        if not png.exists() or not png.read_bytes().startswith(PNG_MAGIC):
            problems.append(f"no reward-curve PNG at {png}")
        if str(png) not in demo.stdout:
            problems.append("the demo does not print the reward-curve path")
        if leftovers:
            problems.append(f"processes outlived the demo (killed now): {leftovers}")
        assert not problems, "\n".join(problems) + "\n" + context


# --- 1b. stopping a background `harnessrl up` with a signal ------------------------------------------------
def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, theirs, ...), from the process table's parent links."""
    children: dict[int, list[int]] = {}
    for proc_dir in Path("/proc").iterdir():
        if proc_dir.name.isdigit():
            try:
                stat = (proc_dir / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(proc_dir.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "?"


# One whole `up` (minutes on 2 cores) for SIGTERM; a background job's SIGINT, ignored by the shell, is handled the
# same way by stop_on_signals, shown in a real process by tests/unit/test_up_signals.py (what up does on the
# Shutdown it raises does not depend on the signal).
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM], ids=["SIGTERM"])
def test_a_stop_signal_to_a_background_up_leaves_no_process_of_the_suite(
    tiny_model_dir: Path, stop_signal: signal.Signals
) -> None:
    """``harnessrl up`` started as a shell starts a background job (SIGINT ignored, its own process group), then
    signalled: it stops every service it started (inference with vLLM, gateway, api, runner and grader workers)
    and exits 0 within the grace period, and no process of the suite is left in the process table."""
    with isolated_suite_settings(tiny_model_dir) as settings:
        console = settings.data_dir / "up-console.log"
        with console.open("w") as out:
            up = subprocess.Popen(
                [sys.executable, "-m", "services.cli.main", "up", "--quiet"],
                env=suite_env(settings),
                cwd=REPO_ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509 - as a shell does
            )
        suite: set[int] = set()
        try:
            deadline = time.monotonic() + 10 * 60
            while "harnessrl is up" not in console.read_text(errors="replace"):
                assert up.poll() is None, f"up exited {up.returncode}:\n{console.read_text()[-4000:]}"
                assert time.monotonic() < deadline, f"up not ready:\n{console.read_text()[-4000:]}"
                time.sleep(1)
            suite = descendants(up.pid)
            assert len(suite) >= 6, (
                f"the suite's processes: {suite}"
            )  # inference, vLLM, gateway, api, workers

            os.kill(up.pid, stop_signal)
            try:
                code = up.wait(timeout=150)  # each service gets 15 s after SIGTERM, then SIGKILL
            except subprocess.TimeoutExpired:
                still = {pid: _cmdline(pid) for pid in sorted(suite) if alive(pid)}
                raise AssertionError(
                    f"up still running 150 s after {stop_signal.name}; suite processes alive: {still}\n"
                    + console.read_text(errors="replace")[-4000:]
                ) from None
            text = console.read_text(errors="replace")
            left = sorted(pid for pid in suite if alive(pid))
        finally:
            if up.poll() is None:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait(10)
            leftovers = suite_leftovers(settings.data_dir)  # kills any, so the machine is clean either way
            for pid in suite:  # Celery's process titles hide the environment it reads
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        assert code == 0, text[-4000:]
        assert f"stopped on {stop_signal.name}" in text, text[-4000:]
        assert not left and not leftovers, f"alive after up exited: {left}; {leftovers}\n{text[-3000:]}"


# --- 2. killing services under `harnessrl up` ---------------------------------------------------------------
def follow(suite: Any, until: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 1.0) -> None:
    """Supervise (``suite.tick()``, about once a second) until ``until()`` holds, asked every ``poll_s``; fail
    naming ``what`` and the events so far."""
    deadline = time.monotonic() + timeout_s
    ticked = 0.0
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout_s:.0f}s waiting for {what}; events:\n"
                + "\n".join(suite.supervisor.events)
            )
        if time.monotonic() - ticked >= 1.0:
            suite.tick()
            ticked = time.monotonic()
        time.sleep(poll_s)


def kill_and_recover(
    suite: Any, name: str, down_until: Callable[[], bool] | None = None, down_timeout_s: float = 180.0
) -> None:
    """SIGKILL service ``name`` (its whole process group, as a crash would leave it) and let the supervisor
    notice and restart it; assert the death was reported and the new process is a different one. With
    ``down_until``, the service stays down (no supervision) until that holds, so what needed it meets the outage
    whatever the machine's speed (a fast machine restarted vLLM before a harness's next call)."""
    running = suite.supervisor.running[name]
    old_pid = running.proc.pid
    os.killpg(old_pid, signal.SIGKILL)
    running.proc.wait(30)
    if down_until is not None:
        deadline = time.monotonic() + down_timeout_s
        while not down_until():
            assert time.monotonic() < deadline, (
                f"{name} stayed down {down_timeout_s:.0f}s; nothing met the outage"
            )
            time.sleep(1)
    seen = len(suite.supervisor.events)
    suite.tick()
    events = suite.supervisor.events[seen:]
    assert any(
        e.startswith(f"SERVICE DOWN: {name} exited with signal {signal.SIGKILL.value}") for e in events
    ), events
    assert f"{name} restarted; work in flight resumes from Postgres and the queues" in events, events
    assert suite.supervisor.running[name].proc.pid != old_pid
    assert suite.supervisor.running[name].proc.poll() is None


# Slow (minutes): every service of the shared suite is SIGKILLed in turn during a 3-step run, vLLM included (its
# restart is most of the time); recovery of each, with the run completing and every rollout accounted for.
def test_killed_services_are_reported_and_the_run_resumes(suite: Any) -> None:
    from services.api.client import ApiClient, default_api_url

    settings = suite.settings
    steps, group_size = 3, 2
    engine = make_engine(settings.database_url, pool_size=1)
    client = ApiClient(default_api_url(settings), settings.api_token, timeout_s=60)
    try:
        run = client.create_run(
            {
                "name": "kill-test",
                "model": settings.served_model_name,
                "harness": "reference",
                "dataset": "swe_mini",
                "instance_ids": ["textkit-1"],
                "groups_per_step": 1,
                "group_size": group_size,
                "steps": steps,
                "grpo": {"learning_rate": 1e-4},
                "sampling": {"temperature": 1.0, "max_tokens": 128},
            }
        )
        run_id = run["id"]
        # The run's learner is the learner controller's child (the supervised service `learners`), not a service.
        started = f"started the learner of run {run_id}, pid "

        def learners_log() -> str:
            return "\n".join(suite.supervisor.running["learners"].tail)

        def rollouts_in(*statuses: str) -> int:
            with engine.connect() as conn:
                return conn.execute(
                    select(func.count()).where(Rollout.run_id == run_id, Rollout.status.in_(statuses))
                ).scalar_one()

        def run_policy_version() -> int:
            with engine.connect() as conn:
                return conn.execute(select(Run.policy_version).where(Run.id == run_id)).scalar_one()

        def served_policy_version() -> int | None:
            with closing(connect(settings.redis_url)) as r:
                return get_policy_version(r)

        def run_status() -> str:
            with engine.connect() as conn:
                return conn.execute(select(Run.status).where(Run.id == run_id)).scalar_one()

        follow(suite, lambda: started in learners_log(), 240, "the run's learner to start")
        # The runner dies while a rollout is running: its task is redelivered and the rollout re-run.
        # Asked often: on a fast machine a tiny-model rollout runs for well under a second.
        follow(suite, lambda: rollouts_in("running") > 0, 120, "a rollout to be running", poll_s=0.05)
        with engine.connect() as conn:
            interrupted = set(
                conn.execute(
                    select(Rollout.id).where(Rollout.run_id == run_id, Rollout.status == "running")
                ).scalars()
            )
        killed_at = datetime.now(UTC)
        kill_and_recover(suite, "runner")
        kill_and_recover(suite, "gateway")
        kill_and_recover(suite, "api")
        follow(
            suite, lambda: rollouts_in("finished", "grading", "graded") > 0, 300, "a rollout to reach grading"
        )
        kill_and_recover(suite, "grader")
        learner_pid = int(learners_log().rsplit(started, 1)[1].split()[0])
        os.killpg(learner_pid, signal.SIGKILL)
        died = f"the learner of run {run_id} died (signal 9)"
        follow(
            suite,
            lambda: died in learners_log() and started in learners_log().rsplit(died, 1)[1],
            120,
            "the learner controller to restart the killed learner",
        )
        # A restarted vLLM starts from the base weights; its updater must bring back the run's current policy.
        kill_and_recover(suite, "inference")
        follow(
            suite,
            lambda: served_policy_version() == run_policy_version(),
            180,
            "the restarted inference to serve the run's current policy version",
        )
        follow(
            suite,
            lambda: run_status() in ("completed", "failed", "stopped"),
            600,
            f"run {run_id} to finish",
        )

        detail = client.get_run(run_id)
        assert detail["status"] == "completed", detail
        problems = run_accounting_problems(engine, run_id, steps, group_size)
        problems += policy_advance_problems(engine, run_id, steps)
        if (detail["progress"]["rollouts_done"], detail["progress"]["steps_done"]) != (
            steps * group_size,
            steps,
        ):
            problems.append(f"the api's progress: {detail['progress']}")
        with engine.connect() as conn:
            rerun = conn.execute(
                select(Rollout.id, Rollout.attempt, Rollout.finished_at).where(Rollout.id.in_(interrupted))
            ).all()
        # A rollout the runner died in was either done just before the kill or ran again (a new attempt).
        lost = [r for r in rerun if r.attempt < 2 and (r.finished_at is None or r.finished_at > killed_at)]
        if lost:
            problems.append(f"rollouts running when the runner died were not run again: {lost}")
        log = (settings.data_dir / "logs" / "up.log").read_text(errors="replace")
        for name in ("runner", "gateway", "api", "grader", "inference"):
            if f"SERVICE DOWN: {name} exited with signal 9 (SIGKILL)" not in log:
                problems.append(f"{name}'s death is not in the combined log")
        if f"LEARNER DOWN: {died}" not in log:
            problems.append("the learner's death is not in the combined log")
        with engine.connect() as conn:
            failed = conn.execute(
                select(Rollout.id, Group.step, Rollout.error)
                .join(Group, Group.id == Rollout.group_id)
                .where(Rollout.run_id == run_id, Rollout.status == "failed")
            ).all()
        context = "\nfailed rollouts (allowed, each with its reason):\n" + "\n".join(map(str, failed))
        context += "\nevents:\n" + "\n".join(suite.supervisor.events)
        assert not problems, "\n".join(problems) + context
    finally:
        client.close()
        engine.dispose()
