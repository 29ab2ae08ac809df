"""Run one rollout: claim it, materialize the task, run the harness in the sandbox, store patch and logs, and
hand it to grading. Plain functions; ``services/runner/tasks.py`` is the thin Celery wrapper and tests call
``run_rollout`` directly.

Statuses (``shared/statuses.py``): ``queued`` → ``running`` → ``finished`` (graded next) or ``failed`` (final).
How the attempt ended is classified (``outcome.py``): a harness that failed under an infrastructure failure (the
gateway's incidents, a gateway or inference restart: ``infrastructure.py``) goes back to ``queued`` while the
retry budget lasts — the api's scheduler re-enqueues it after ``RETRY_DELAY_S`` — and ends ``failed`` with outcome
``infrastructure_error`` when it is spent, which sets its group aside; it is never graded. A rollout is not
started at all while the gateway does not answer or the inference pool is not ready: it waits ``queued``
(``defer``) without spending an attempt. Every other closed rollout is sent to the grader: a finished one to be
graded, a failed one so the grader can see whether its group is now complete.

Exactly-once under at-least-once delivery (Celery redelivers a task whose worker died; docs/design.md#at-least-once-delivery):
- The claim runs under a row lock. A rollout found ``running`` was left by a worker that died mid-run (the
  visibility timeout exceeds the longest rollout, so it is not a live duplicate). The new attempt deletes that
  attempt's calls, chains and token objects, and issues a **new rollout key**, so nothing the dead attempt
  recorded survives and a straggler still holding the old key gets 401 from the gateway. After
  ``1 + settings.rollout_retries`` attempts the rollout fails for good instead.
- The attempt number is a fencing token: results are written only if the row still carries this attempt.
- The gateway replies before it records. The new key is registered with the gateway's state in Redis (the old one
  closed); when the harness has exited, the attempt waits at the gateway's **flush barrier**
  (``shared/capture_state.flush``) until every call of its key is recorded. If a gateway process died with records
  unwritten, the attempt is an infrastructure error (``capture_lost``), retried like any other — a rollout is
  never finished, nor graded, on a trajectory with a missing call. A gateway process that died while serving one
  of the harness's calls is an incident (``gateway_died``): it makes a failed harness the gateway's failure.
- A redelivered task for a terminal rollout changes nothing; it re-sends the grading message (the grader is
  idempotent), which closes the window between our commit and the send.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import redis
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from services.runner import guard
from services.runner.harnesses import make_adapter
from services.runner.harnesses.base import HarnessAdapter, HarnessRequest, HarnessRunResult, HarnessVerdict
from services.runner.infrastructure import REDIS_ERRORS, Watch, preflight
from services.runner.outcome import AttemptFacts, Classified, classify_attempt
from services.runner.patch import PatchRefused, snapshot_base, workspace_patch
from shared import capture_state
from shared.context_fit import ContextOverflow, take_overflow
from shared.db import session_scope
from shared.events import connect
from shared.harnesses import HarnessOptions
from shared.host_paths import (
    TEMPLATE_MAX_BYTES,
    TEMPLATE_MAX_FILES,
    TEMPLATE_RESERVED,
    check_shell_paths,
    copy_readable_tree,
    write_below,
)
from shared.ids import new_rollout_key
from shared.incidents import Incident, new_incident
from shared.models import Call, Chain, Rollout, Run
from shared.models import Task as TaskRow
from shared.objectstore import ObjectStore
from shared.ports import free_port
from shared.rollout_records import AttemptReport, add_attempt, retry_later
from shared.run_config import LimitsConfig, RunConfigError, read_run_config
from shared.sandbox import HOME_INSIDE, Sandbox, SandboxLimits, SandboxResult
from shared.settings import Settings
from shared.statuses import (
    KILLED_RUN_STOPPED,
    ROLLOUT_CLOSED,
    RUN_STOPPED_REASON,
    Outcome,
    RolloutStatus,
    RunStatus,
)
from shared.tasks import Task, hide_future_history, materialize
from shared.trajectory import attempt_logs_prefix, rollout_raw_prefix, rollout_tokens_prefix
from shared.trajectory import patch_key as patch_object_key

log = logging.getLogger(__name__)

# Seconds before the scheduler re-enqueues a rollout that waits for the infrastructure or is retried after an
# infrastructure failure (a restarting vLLM takes tens of seconds; each check costs one Celery round trip).
RETRY_DELAY_S = 5.0
# Port the in-sandbox forwarder serves the gateway on; each sandbox has its own network namespace.
SANDBOX_GATEWAY_PORT = 8301


class RolloutNotFound(LookupError):
    pass


@dataclass(frozen=True)
class Attempt:
    """What a claimed attempt needs, read under the claim's lock."""

    rollout_id: str
    run_id: str
    attempt: int
    rollout_key: str
    harness: HarnessOptions
    limits: LimitsConfig
    model: str
    task: Task
    binding: capture_state.Binding | None = None
    """What the gateway needs to bind the new key (registered in Redis before the harness starts)."""
    previous_key: str | None = None
    """The key the rollout had before this attempt: closed in the gateway's state."""


@dataclass(frozen=True)
class RolloutOutcome:
    """What ``run_rollout`` did; ``action`` says whether this delivery ran the harness."""

    rollout_id: str
    action: Literal["ran", "already_done", "gave_up", "stale", "deferred", "retry", "cancelled"]
    status: str
    attempt: int
    error: str | None = None
    send_to_grading: bool = True


def _now() -> datetime:
    return datetime.now(UTC)


# --- claim -----------------------------------------------------------------------------------------------


def _forget_attempt(session: Session, store: ObjectStore, rollout: Rollout) -> int:
    """Delete what a previous attempt recorded: calls, chains and their token/raw objects."""
    removed = session.scalar(select(func.count()).select_from(Call).where(Call.rollout_id == rollout.id)) or 0
    session.execute(delete(Call).where(Call.rollout_id == rollout.id))
    session.execute(delete(Chain).where(Chain.rollout_id == rollout.id))
    for prefix in (
        rollout_tokens_prefix(rollout.run_id, rollout.id),
        rollout_raw_prefix(rollout.run_id, rollout.id),
    ):
        for key in list(store.list(prefix)):
            store.delete(key)
    return int(removed)


def claim(
    settings: Settings, db: sessionmaker[Session], store: ObjectStore, rollout_id: str
) -> Attempt | RolloutOutcome:
    """Start a new attempt of the rollout, or say why this delivery has nothing to run."""
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id, with_for_update=True)
        if rollout is None:
            raise RolloutNotFound(f"no rollout {rollout_id!r}")
        if rollout.status in ROLLOUT_CLOSED:
            return RolloutOutcome(rollout_id, "already_done", rollout.status, rollout.attempt, rollout.error)
        run_status = session.scalar(select(Run.status).where(Run.id == rollout.run_id))
        if run_status in (RunStatus.STOPPING, RunStatus.STOPPED):
            return _cancel_for_stopped_run(session, store, rollout)
        max_attempts = 1 + settings.rollout_retries
        if rollout.status == RolloutStatus.RUNNING:
            removed = _forget_attempt(session, store, rollout)
            log.warning(
                "rollout %s: attempt %d died mid-run; removed its %d calls",
                rollout_id,
                rollout.attempt,
                removed,
            )
            if rollout.attempt >= max_attempts:
                rollout.status = RolloutStatus.FAILED
                rollout.outcome, rollout.outcome_reason = Outcome.INFRASTRUCTURE_ERROR, "runner_died"
                rollout.error = f"the runner died during each of {rollout.attempt} attempts"
                rollout.finished_at = _now()
                return RolloutOutcome(
                    rollout_id, "gave_up", RolloutStatus.FAILED, rollout.attempt, rollout.error
                )
        run = session.get(Run, rollout.run_id)
        task_row = session.get(TaskRow, rollout.task_id)
        assert run is not None and task_row is not None  # foreign keys
        try:
            config = read_run_config(run)
        except RunConfigError as exc:
            rollout.status, rollout.error, rollout.finished_at = RolloutStatus.FAILED, str(exc), _now()
            rollout.outcome, rollout.outcome_reason = Outcome.INFRASTRUCTURE_ERROR, "invalid_run_config"
            return RolloutOutcome(rollout_id, "gave_up", RolloutStatus.FAILED, rollout.attempt, rollout.error)
        previous_key = rollout.rollout_key
        rollout.attempt += 1
        rollout.rollout_key = new_rollout_key()
        rollout.status = RolloutStatus.RUNNING
        rollout.started_at = _now()
        rollout.finished_at = None
        rollout.error = None
        rollout.outcome = rollout.outcome_reason = None
        rollout.policy_version_start = run.policy_version
        return Attempt(
            rollout_id=rollout.id,
            run_id=rollout.run_id,
            attempt=rollout.attempt,
            rollout_key=rollout.rollout_key,
            harness=config.harness,
            limits=config.limits,
            model=config.model,
            task=Task.model_validate(
                task_row.spec | {"problem_statement": config.instruction(task_row.spec["problem_statement"])}
            ),
            binding=capture_state.Binding(
                rollout.id,
                rollout.run_id,
                rollout.harness,
                config.sampling.model_dump(mode="json"),
                time.time(),
                config.lora is not None,
                rollout.sampling_seed,
                teacher=config.teacher.model_dump(mode="json") if config.teacher is not None else None,
            ),
            previous_key=previous_key,
        )


def _cancel_for_stopped_run(session: Session, store: ObjectStore, rollout: Rollout) -> RolloutOutcome:
    """A delivery for a run being stopped (a redelivery after the runner died, a message sent before the stop) runs
    nothing: what a dead attempt recorded is removed and the rollout ends ``cancelled``. It is still sent to the
    grader, which only completes its group."""
    if rollout.status == RolloutStatus.RUNNING:
        _forget_attempt(session, store, rollout)
    rollout.status = RolloutStatus.CANCELLED
    rollout.outcome, rollout.outcome_reason = Outcome.CANCELLED, RUN_STOPPED_REASON
    rollout.error = "the run was stopped before this delivery of the rollout ran"
    rollout.finished_at = _now()
    log.info("rollout %s: its run is stopping; cancelled without running", rollout.id)
    return RolloutOutcome(rollout.id, "cancelled", RolloutStatus.CANCELLED, rollout.attempt, rollout.error)


def _retry_later(rollout: Rollout, why: str) -> None:
    """Back to the queue: the scheduler's outbox sends it again once ``retry_at`` has passed."""
    retry_later(rollout, delay_s=RETRY_DELAY_S, why=why)
    rollout.status = RolloutStatus.QUEUED


def defer(db: sessionmaker[Session], rollout_id: str, why: str) -> RolloutOutcome:
    """Leave a queued rollout queued for ``RETRY_DELAY_S`` (no attempt spent): the infrastructure is not ready."""
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id, with_for_update=True)
        if rollout is None:
            raise RolloutNotFound(f"no rollout {rollout_id!r}")
        if rollout.status != RolloutStatus.QUEUED:
            return RolloutOutcome(
                rollout_id, "already_done", rollout.status, rollout.attempt, send_to_grading=False
            )
        _retry_later(rollout, why)
        log.info("rollout %s waits: %s", rollout_id, why)
        return RolloutOutcome(
            rollout_id, "deferred", rollout.status, rollout.attempt, why, send_to_grading=False
        )


# --- run -------------------------------------------------------------------------------------------------


def _write_home_files(home: Path, files: dict[str, str], template: Path | None = None) -> None:
    """The harness's home template, then its config files. Root copies the template for the sandbox user
    (``shared/host_paths.py: copy_readable_tree``): symlinks kept as links (never a host file's content through a
    link), and a file that user could not read refuses the attempt before its content is read. The config files
    are written without following a link the template put on their way."""
    if template is not None:
        copy_readable_tree(
            template, home, field="harness.home_template", what="home template", reserved=TEMPLATE_RESERVED,
            max_entries=TEMPLATE_MAX_FILES, max_bytes=TEMPLATE_MAX_BYTES,
        )  # fmt: skip
    for relative, text in files.items():
        write_below(home, relative, text)


def run_harness(
    sandbox: Sandbox,
    settings: Settings,
    adapter: HarnessAdapter,
    attempt: Attempt,
    workspace: Path,
    home: Path,
    timeout_s: float,
    guard_bin: Path | None = None,
    db: sessionmaker[Session] | None = None,
) -> tuple[HarnessVerdict, SandboxResult]:
    """Configure the harness in ``home`` and run it in the sandbox against the gateway's Unix socket, under the
    run's per-rollout limits (``sandbox_limits``; with ``db``, also its call and token limits).
    ``guard_bin``: the ``git`` wrapper's folder (``guard.py``), put first on the harness's PATH."""
    port = SANDBOX_GATEWAY_PORT if sandbox.confined else free_port()
    request = HarnessRequest(
        instruction=attempt.task.problem_statement,
        model=attempt.model,
        base_url=f"http://127.0.0.1:{port}/r/{attempt.rollout_key}",
        rollout_key=attempt.rollout_key,
        home=Path(HOME_INSIDE) if sandbox.confined else home,
        workspace=Path(sandbox.workspace_path(workspace)),
    )
    launch = adapter.launch(request)
    _write_home_files(home, launch.files, launch.home_template)
    (home / "tmp").mkdir(exist_ok=True)
    env, ro_binds = dict(launch.env), list(launch.ro_paths)
    if guard_bin is not None:
        (home / guard.AUDIT_FILE).parent.mkdir(exist_ok=True)
        env["PATH"] = f"{guard_bin}:{env.get('PATH', '/usr/bin:/bin')}"
        env[guard.GIT_AUDIT_ENV] = str(request.home / guard.AUDIT_FILE)
        ro_binds.append(guard_bin.parent)
    limits = sandbox_limits(sandbox, attempt.limits, timeout_s, launch.min_address_space_bytes)
    result = sandbox.run(
        launch.argv,
        workspace,
        limits=limits,
        env=env,
        home=home,
        gateway_socket=settings.resolved_gateway_socket,
        gateway_port=port,
        ro_binds=ro_binds,
        stop_check=stop_check(db, attempt.run_id, attempt.rollout_id, attempt.limits)
        if db is not None
        else None,
    )
    exit_code = None if result.killed_reason else result.exit_code
    verdict = adapter.classify(HarnessRunResult(exit_code, result.timed_out, result.stdout, result.stderr))
    if result.killed_reason in KILLED_BECAUSE:
        verdict = HarnessVerdict("harness_error", KILLED_BECAUSE[result.killed_reason].format(limits=limits))
    elif result.killed_reason in ("calls", "tokens"):
        value = getattr(attempt.limits, result.killed_reason)
        verdict = HarnessVerdict(
            "harness_error", f"the rollout reached its limit of {value} {result.killed_reason}"
        )
    return verdict, result


# What the sandbox's kill reasons mean, for the rollout's error (the outcome is limit:<name>, outcome.py).
KILLED_BECAUSE = {
    "disk": "the harness filled the disk quota and was killed",
    "memory": "the harness used more than its {limits.resident_memory_bytes} bytes of memory and was killed",
    "processes": "the harness reached its limit of {limits.max_processes} processes and was killed",
}


def rollout_timeout_s(settings: Settings, limits: LimitsConfig, task: Task) -> float:
    """The harness's wall clock: the run's limit, else the task's, else the service's. A run's limit never exceeds
    the service's: the queue's redelivery window (``Settings.resolved_visibility_timeout_s``) is sized by it."""
    if limits.wall_clock_s is not None:
        return min(limits.wall_clock_s, settings.rollout_timeout_s)
    return task.agent_timeout_s or settings.rollout_timeout_s


def sandbox_limits(
    sandbox: Sandbox, limits: LimitsConfig, timeout_s: float, min_address_space_bytes: int | None = None
) -> SandboxLimits:
    """The sandbox limits of one attempt: the service's, with the run's per-rollout limits applied.

    A run's memory limit caps resident memory (the sandbox's memory cgroup, which reports an OOM kill as
    ``memory``), leaving the address space at least the service's: runtimes reserve far more than they touch.
    Without per-sandbox cgroups it can only cap the address space (a failed allocation, not a reported kill).

    A run's limits only lower the service's: a client asking for more memory or processes than the operator set
    gets the operator's (the wall clock is clamped the same way, ``rollout_timeout_s``)."""
    out = sandbox.limits(timeout_s)
    if limits.memory_bytes is not None:
        resident = min(limits.memory_bytes, out.memory_bytes)
        address_space = max(out.memory_bytes, resident) if sandbox.cgroups else resident
        out = out.with_(memory_bytes=address_space, resident_memory_bytes=resident)
    if limits.processes is not None:
        out = out.with_(max_processes=min(limits.processes, out.max_processes))
    if min_address_space_bytes and min_address_space_bytes > out.memory_bytes:
        out = out.with_(memory_bytes=min_address_space_bytes)  # a run's resident-memory cap stays as it is
    return out


def stop_check(
    db: sessionmaker[Session], run_id: str, rollout_id: str, limits: LimitsConfig
) -> Callable[[], str | None]:
    """The sandbox's ``stop_check`` (polled about once a second): ``run_stopped`` once the run is being stopped
    (``POST /v1/runs/{id}/stop``: the harness is killed and the rollout ends ``cancelled``), else the run's call
    and token limits (``usage_check``)."""
    usage = usage_check(db, rollout_id, limits)

    def check() -> str | None:
        with session_scope(db) as session:
            status = session.scalar(select(Run.status).where(Run.id == run_id))
        if status in (RunStatus.STOPPING, RunStatus.STOPPED):
            return KILLED_RUN_STOPPED
        return usage() if usage is not None else None

    return check


def usage_check(
    db: sessionmaker[Session], rollout_id: str, limits: LimitsConfig
) -> Callable[[], str | None] | None:
    """A run's call and token limits: ``calls`` once the rollout has made ``limits.calls`` model calls, ``tokens``
    once they sampled ``limits.tokens`` tokens; None when neither is set."""
    if limits.calls is None and limits.tokens is None:
        return None

    def check() -> str | None:
        with session_scope(db) as session:
            calls, tokens = session.execute(
                select(func.count(), func.coalesce(func.sum(Call.completion_tokens), 0)).where(
                    Call.rollout_id == rollout_id
                )
            ).one()
        if limits.calls is not None and calls >= limits.calls:
            return "calls"
        if limits.tokens is not None and tokens >= limits.tokens:
            return "tokens"
        return None

    return check


def _store_logs(
    store: ObjectStore, attempt: Attempt, result: SandboxResult | None, report: AttemptReport
) -> str:
    prefix = attempt_logs_prefix(attempt.run_id, attempt.rollout_id, attempt.attempt)
    if result is not None:
        store.put_bytes(f"{prefix}/harness.stdout", result.stdout.encode(), "text/plain")
        store.put_bytes(f"{prefix}/harness.stderr", result.stderr.encode(), "text/plain")
    store.put_bytes(
        f"{prefix}/report.json",
        json.dumps(report.model_dump(mode="json"), indent=2).encode(),
        "application/json",
    )
    return prefix


def _finish(
    db: sessionmaker[Session],
    attempt: Attempt,
    report: AttemptReport,
    *,
    patch_key: str | None,
    logs_key: str,
    incidents: list[Incident] | None = None,
    max_attempts: int = 1,
    store: ObjectStore | None = None,
    context_overflow: ContextOverflow | None = None,
    capture_lost: str | None = None,
) -> RolloutOutcome:
    """Classify the attempt and write its result if the row still carries this attempt (fencing)."""
    with session_scope(db) as session:
        rollout = session.get(Rollout, attempt.rollout_id, with_for_update=True)
        assert rollout is not None
        if rollout.attempt != attempt.attempt or rollout.status != RolloutStatus.RUNNING:
            log.warning("rollout %s: attempt %d superseded; result dropped", rollout.id, attempt.attempt)
            return RolloutOutcome(rollout.id, "stale", rollout.status, rollout.attempt, send_to_grading=False)
        calls = (
            session.scalar(select(func.count()).select_from(Call).where(Call.rollout_id == rollout.id)) or 0
        )
        report = report.replace(calls=int(calls))
        verdict = classify_attempt(
            AttemptFacts(
                harness_outcome=report.outcome,
                harness_reason=report.reason,
                killed_reason=report.killed_reason,
                calls=report.calls,
                runner_error=report.runner_error,
                incidents=list(incidents or []),
                context_overflow=context_overflow,
                capture_lost=capture_lost,
                patch_refused=report.patch_refused,
            )
        )
        report = report.replace(classified=verdict.outcome)
        rollout.harness_outcome = report.outcome
        rollout.harness_exit_code = report.exit_code
        rollout.isolation = report.isolation
        rollout.patch_key = patch_key
        rollout.logs_key = logs_key
        rollout.touched_protected_paths = list(report.touched_protected_paths)
        rollout.git_history_commands = list(report.git_history_commands)
        add_attempt(rollout, report)
        if verdict.infrastructure and rollout.attempt < max_attempts:
            return _retry(session, store, rollout, verdict)
        if verdict.outcome == Outcome.CANCELLED:
            rollout.status = RolloutStatus.CANCELLED
        else:
            rollout.status = RolloutStatus.FINISHED if verdict.graded else RolloutStatus.FAILED
        rollout.outcome, rollout.outcome_reason, rollout.error = (
            verdict.outcome,
            verdict.reason,
            verdict.error,
        )
        rollout.finished_at = _now()
        if verdict.infrastructure:
            rollout.error = f"{verdict.error} (no attempt of {rollout.attempt} got through)"
        return RolloutOutcome(rollout.id, "ran", rollout.status, attempt.attempt, rollout.error)


def _retry(
    session: Session, store: ObjectStore | None, rollout: Rollout, verdict: Classified
) -> RolloutOutcome:
    """An infrastructure failure with budget left: forget what the attempt recorded, queue the rollout again."""
    if store is not None:
        removed = _forget_attempt(session, store, rollout)
    else:  # the token objects stay behind; the next attempt's chains have new ids
        removed = (
            session.scalar(select(func.count()).select_from(Call).where(Call.rollout_id == rollout.id)) or 0
        )
        session.execute(delete(Call).where(Call.rollout_id == rollout.id))
        session.execute(delete(Chain).where(Chain.rollout_id == rollout.id))
    _retry_later(rollout, f"a retry after {verdict.reason}")
    rollout.error = verdict.error
    log.warning(
        "rollout %s: attempt %d failed for an infrastructure reason (%s); retrying, %d calls discarded",
        rollout.id, rollout.attempt, verdict.error, removed,
    )  # fmt: skip
    return RolloutOutcome(
        rollout.id, "retry", rollout.status, rollout.attempt, verdict.error, send_to_grading=False
    )


def execute_attempt(
    settings: Settings,
    db: sessionmaker[Session],
    store: ObjectStore,
    sandbox: Sandbox,
    attempt: Attempt,
    redis_client: redis.Redis | None = None,
) -> RolloutOutcome:
    """Materialize, run, collect, classify; a failure of our own is an infrastructure error of the attempt."""
    r = redis_client or connect(settings.redis_url)
    _register_key(r, attempt)
    watch = Watch.start(r, attempt.rollout_id, settings.resolved_gateway_socket)
    _take_context_overflow(r, attempt.rollout_id)  # a dead attempt's, if any
    attempt_dir = settings.data_dir / "rollouts" / attempt.rollout_id
    shutil.rmtree(attempt_dir, ignore_errors=True)  # a dead attempt's leftovers
    workspace, home = attempt_dir / "workspace", attempt_dir / "home"
    report = AttemptReport(
        attempt=attempt.attempt, outcome="harness_error", reason=None, exit_code=None, isolation=sandbox.isolation,
        materialize_s=0.0, harness_s=0.0, patch_bytes=0, calls=0,
    )  # fmt: skip
    result: SandboxResult | None = None
    patch_key: str | None = None
    try:
        adapter = make_adapter(attempt.harness)
        adapter.check_installed()
        check_shell_paths(attempt.harness, settings)  # this host's copy of the paths the run was created with
        started = time.monotonic()
        attempt_dir.mkdir(parents=True)
        attempt_dir.chmod(0o755)
        materialize(attempt.task, workspace, store)
        hide_future_history(workspace, attempt.task.base_commit)
        # The base's objects, copied before the agent can touch them, into a git directory the sandbox never sees:
        # the patch is taken with it, never with the workspace's .git (the agent's to rewrite).
        base_git = snapshot_base(workspace, attempt_dir / "base.git")
        home.mkdir()
        guard_bin = guard.install(attempt_dir / "guard")
        report = report.replace(materialize_s=time.monotonic() - started)
        timeout_s = rollout_timeout_s(settings, attempt.limits, attempt.task)
        verdict, result = run_harness(
            sandbox, settings, adapter, attempt, workspace, home, timeout_s, guard_bin, db
        )
        report = report.replace(
            harness_s=result.duration_s, exit_code=result.exit_code, outcome=verdict.outcome,
            reason=verdict.reason, killed_reason=result.killed_reason,
            git_history_commands=guard.history_commands(home),
        )  # fmt: skip
        try:
            patch = workspace_patch(workspace, attempt.task.base_commit, base_git)
        except PatchRefused as exc:
            # What the agent left is its own outcome (an empty patch, reward 0), never retried.
            log.warning("rollout %s: patch refused: %s", attempt.rollout_id, exc.reason)
            report, patch = report.replace(patch_refused=exc.reason), b""
        report = report.replace(touched_protected_paths=guard.protected_paths_touched(attempt.task, patch))
        patch_key = patch_object_key(attempt.run_id, attempt.rollout_id)
        store.put_bytes(patch_key, patch, "text/x-diff")
        report = report.replace(patch_bytes=len(patch))
    except Exception as exc:  # noqa: BLE001 - any failure of this attempt is recorded on the rollout
        log.exception("rollout %s attempt %d failed", attempt.rollout_id, attempt.attempt)
        why = f"{type(exc).__name__}: {exc}"
        report = report.replace(outcome="harness_error", reason=why, runner_error=why)
    finally:
        shutil.rmtree(attempt_dir, ignore_errors=True)
    flushed = flush_capture(settings, r, attempt)
    incidents = watch.evidence(r)
    incidents += [new_incident("gateway_died", why) for why in sorted(set(flushed.interrupted.values()))]
    overflow = _take_context_overflow(r, attempt.rollout_id)
    report = report.replace(
        capture_lost=None if flushed.complete else flushed.error,
        incidents=[asdict(i) for i in incidents],
        context=asdict(overflow) if overflow else None,
    )
    logs_key = _store_logs(store, attempt, result, report)
    outcome = _finish(
        db,
        attempt,
        report,
        patch_key=patch_key,
        logs_key=logs_key,
        incidents=incidents,
        max_attempts=1 + settings.rollout_retries,
        store=store,
        context_overflow=overflow,
        capture_lost=report.capture_lost,
    )
    _release_key(r, attempt.rollout_key)
    return outcome


def _register_key(r: redis.Redis, attempt: Attempt) -> None:
    """The gateway binds the attempt's key from Redis without a database query; the previous key takes no more
    calls. Redis down: the gateway falls back to the database (and the attempt meets it at the barrier)."""
    try:
        if attempt.binding is not None:
            capture_state.open_rollout(r, attempt.rollout_key, attempt.binding)
        if attempt.previous_key:
            capture_state.release(r, attempt.previous_key)
    except REDIS_ERRORS as exc:
        log.warning("rollout %s: could not register its key with the gateway: %s", attempt.rollout_id, exc)


def _release_key(r: redis.Redis, rollout_key: str) -> None:
    try:
        capture_state.release(r, rollout_key)
    except REDIS_ERRORS as exc:  # the key expires on its own; stragglers' rows are fenced by the writer
        log.warning("could not release rollout key %s… in Redis: %s", rollout_key[:8], exc)


def flush_capture(settings: Settings, r: redis.Redis, attempt: Attempt) -> capture_state.FlushResult:
    """The gateway's flush barrier for this attempt's key: every call it replied to is recorded, or some is lost.
    Redis unreachable counts as lost: the records cannot be confirmed."""
    try:
        return capture_state.flush(r, attempt.rollout_key, settings.capture_flush_timeout_s)
    except REDIS_ERRORS as exc:
        return capture_state.FlushResult({"*": f"the flush barrier could not reach Redis: {exc}"}, 0.0)


def _take_context_overflow(r: redis.Redis, rollout_id: str) -> ContextOverflow | None:
    try:
        return take_overflow(r, rollout_id)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        log.warning("rollout %s: no context-overflow record from Redis: %s", rollout_id, exc)
        return None


def run_rollout(
    settings: Settings,
    db: sessionmaker[Session],
    store: ObjectStore,
    sandbox: Sandbox,
    rollout_id: str,
    redis_client: redis.Redis | None = None,
) -> RolloutOutcome:
    """One delivery of the ``run_rollout`` task. Safe to call any number of times for the same rollout."""
    r = redis_client or connect(settings.redis_url)
    with session_scope(db) as session:
        status = session.scalar(select(Rollout.status).where(Rollout.id == rollout_id))
    if status == RolloutStatus.QUEUED and (why := preflight(settings.resolved_gateway_socket, r)):
        return defer(db, rollout_id, why)
    claimed = claim(settings, db, store, rollout_id)
    if isinstance(claimed, RolloutOutcome):
        return claimed
    return execute_attempt(settings, db, store, sandbox, claimed, r)
