"""Run one rollout: claim it, materialize the task, run the harness in the sandbox, store patch and logs, and
hand it to grading. Plain functions; ``services/runner/tasks.py`` is the thin Celery wrapper and tests call
``run_rollout`` directly.

Statuses: ``queued`` → ``running`` → ``finished`` (graded next) or ``failed`` (final). Every terminal rollout is
sent to the grader: a finished one to be graded, a failed one so the grader can see whether its group is now
complete (a group completes when each rollout is graded or failed for good).

Exactly-once under at-least-once delivery (Celery redelivers a task whose worker died; reference/infra.md §3):
- The claim runs under a row lock. A rollout found ``running`` was left by a worker that died mid-run (the
  visibility timeout exceeds the longest rollout, so it is not a live duplicate). The new attempt deletes that
  attempt's calls, chains and token objects, and issues a **new rollout key**, so nothing the dead attempt
  recorded survives and a straggler still holding the old key gets 401 from the gateway. After
  ``1 + settings.rollout_retries`` attempts the rollout fails for good instead.
- The attempt number is a fencing token: results are written only if the row still carries this attempt.
- A redelivered task for a terminal rollout changes nothing; it re-sends the grading message (the grader is
  idempotent), which closes the window between our commit and the send.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from services.runner.harnesses import make_adapter
from services.runner.harnesses.base import HarnessAdapter, HarnessRequest, HarnessRunResult, HarnessVerdict
from services.runner.patch import workspace_patch
from shared.db import session_scope
from shared.ids import new_rollout_key
from shared.models import Call, Chain, Rollout, Run
from shared.models import Task as TaskRow
from shared.objectstore import ObjectStore
from shared.sandbox import HOME_INSIDE, Sandbox, SandboxResult, free_loopback_port
from shared.settings import Settings
from shared.tasks import Task, materialize

log = logging.getLogger(__name__)

TERMINAL_STATUSES = ("finished", "grading", "graded", "failed")
NO_CALLS_ERROR = (
    "the harness made no model calls through the gateway (it bypassed the gateway, used a wrong key, "
    "or failed before its first request)"
)
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
    harness: str
    harness_options: dict[str, Any]
    model: str
    task: Task


@dataclass(frozen=True)
class RolloutOutcome:
    """What ``run_rollout`` did; ``action`` says whether this delivery ran the harness."""

    rollout_id: str
    action: Literal["ran", "already_done", "gave_up", "stale"]
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
    for prefix in (f"tokens/{rollout.run_id}/{rollout.id}/", f"raw/{rollout.run_id}/{rollout.id}/"):
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
        if rollout.status in TERMINAL_STATUSES:
            return RolloutOutcome(rollout_id, "already_done", rollout.status, rollout.attempt, rollout.error)
        max_attempts = 1 + settings.rollout_retries
        if rollout.status == "running":
            removed = _forget_attempt(session, store, rollout)
            log.warning(
                "rollout %s: attempt %d died mid-run; removed its %d calls",
                rollout_id,
                rollout.attempt,
                removed,
            )
            if rollout.attempt >= max_attempts:
                rollout.status = "failed"
                rollout.error = f"the runner died during each of {rollout.attempt} attempts"
                rollout.finished_at = _now()
                return RolloutOutcome(rollout_id, "gave_up", "failed", rollout.attempt, rollout.error)
        run = session.get(Run, rollout.run_id)
        task_row = session.get(TaskRow, rollout.task_id)
        assert run is not None and task_row is not None  # foreign keys
        rollout.attempt += 1
        rollout.rollout_key = new_rollout_key()
        rollout.status = "running"
        rollout.started_at = _now()
        rollout.finished_at = None
        rollout.error = None
        rollout.policy_version_start = run.policy_version
        return Attempt(
            rollout_id=rollout.id,
            run_id=rollout.run_id,
            attempt=rollout.attempt,
            rollout_key=rollout.rollout_key,
            harness=rollout.harness,
            harness_options=dict(run.config.get("harness_options") or {}),
            model=str(run.config.get("harness_model") or run.model),
            task=Task.model_validate(task_row.spec),
        )


# --- run -------------------------------------------------------------------------------------------------


@dataclass
class AttemptReport:
    """Facts of one attempt, stored in ``rollouts.meta['attempts']`` and the logs."""

    attempt: int
    outcome: str
    reason: str | None
    exit_code: int | None
    isolation: str | None
    materialize_s: float
    harness_s: float
    patch_bytes: int
    calls: int


def _write_home_files(home: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def run_harness(
    sandbox: Sandbox,
    settings: Settings,
    adapter: HarnessAdapter,
    attempt: Attempt,
    workspace: Path,
    home: Path,
    timeout_s: float,
) -> tuple[HarnessVerdict, SandboxResult]:
    """Configure the harness in ``home`` and run it in the sandbox against the gateway's Unix socket."""
    port = SANDBOX_GATEWAY_PORT if sandbox.confined else free_loopback_port()
    request = HarnessRequest(
        instruction=attempt.task.problem_statement,
        model=attempt.model,
        base_url=f"http://127.0.0.1:{port}/r/{attempt.rollout_key}",
        rollout_key=attempt.rollout_key,
        home=Path(HOME_INSIDE) if sandbox.confined else home,
        workspace=Path(sandbox.workspace_path(workspace)),
    )
    launch = adapter.launch(request)
    _write_home_files(home, launch.files)
    (home / "tmp").mkdir(exist_ok=True)
    limits = sandbox.limits(timeout_s)
    if launch.min_address_space_bytes and launch.min_address_space_bytes > limits.memory_bytes:
        limits = limits.with_(memory_bytes=launch.min_address_space_bytes)
    result = sandbox.run(
        launch.argv,
        workspace,
        limits=limits,
        env=launch.env,
        home=home,
        gateway_socket=settings.resolved_gateway_socket,
        gateway_port=port,
        ro_binds=launch.ro_paths,
    )
    exit_code = None if result.killed_reason else result.exit_code
    verdict = adapter.classify(HarnessRunResult(exit_code, result.timed_out, result.stdout, result.stderr))
    if result.killed_reason == "disk":
        verdict = HarnessVerdict("harness_error", "the harness filled the disk quota and was killed")
    return verdict, result


def _store_logs(
    store: ObjectStore, attempt: Attempt, result: SandboxResult | None, report: AttemptReport
) -> str:
    prefix = f"logs/{attempt.run_id}/{attempt.rollout_id}/attempt-{attempt.attempt}"
    if result is not None:
        store.put_bytes(f"{prefix}/harness.stdout", result.stdout.encode(), "text/plain")
        store.put_bytes(f"{prefix}/harness.stderr", result.stderr.encode(), "text/plain")
    store.put_bytes(
        f"{prefix}/report.json", json.dumps(asdict(report), indent=2).encode(), "application/json"
    )
    return prefix


def _finish(
    db: sessionmaker[Session],
    attempt: Attempt,
    report: AttemptReport,
    *,
    patch_key: str | None,
    logs_key: str,
) -> RolloutOutcome:
    """Write the attempt's result if the row still carries this attempt (fencing)."""
    with session_scope(db) as session:
        rollout = session.get(Rollout, attempt.rollout_id, with_for_update=True)
        assert rollout is not None
        if rollout.attempt != attempt.attempt or rollout.status != "running":
            log.warning("rollout %s: attempt %d superseded; result dropped", rollout.id, attempt.attempt)
            return RolloutOutcome(rollout.id, "stale", rollout.status, rollout.attempt, send_to_grading=False)
        calls = (
            session.scalar(select(func.count()).select_from(Call).where(Call.rollout_id == rollout.id)) or 0
        )
        report.calls = int(calls)
        error = report.reason if report.outcome == "harness_error" else None
        if error is None and report.calls == 0:
            error = NO_CALLS_ERROR
        rollout.status = "failed" if error else "finished"
        rollout.error = error
        rollout.harness_outcome = report.outcome
        rollout.harness_exit_code = report.exit_code
        rollout.isolation = report.isolation
        rollout.patch_key = patch_key
        rollout.logs_key = logs_key
        rollout.finished_at = _now()
        rollout.meta = {**rollout.meta, "attempts": [*rollout.meta.get("attempts", []), asdict(report)]}
        return RolloutOutcome(rollout.id, "ran", rollout.status, attempt.attempt, error)


def execute_attempt(
    settings: Settings, db: sessionmaker[Session], store: ObjectStore, sandbox: Sandbox, attempt: Attempt
) -> RolloutOutcome:
    """Materialize, run, collect; any failure ends the rollout as ``failed`` with the reason."""
    attempt_dir = settings.data_dir / "rollouts" / attempt.rollout_id
    shutil.rmtree(attempt_dir, ignore_errors=True)  # a dead attempt's leftovers
    workspace, home = attempt_dir / "workspace", attempt_dir / "home"
    report = AttemptReport(attempt.attempt, "harness_error", None, None, sandbox.isolation, 0.0, 0.0, 0, 0)
    result: SandboxResult | None = None
    patch_key: str | None = None
    try:
        adapter = make_adapter(attempt.harness, attempt.harness_options)
        adapter.check_installed()
        started = time.monotonic()
        attempt_dir.mkdir(parents=True)
        attempt_dir.chmod(0o755)
        materialize(attempt.task, workspace, store)
        home.mkdir()
        report.materialize_s = time.monotonic() - started
        timeout_s = attempt.task.agent_timeout_s or settings.rollout_timeout_s
        verdict, result = run_harness(sandbox, settings, adapter, attempt, workspace, home, timeout_s)
        report.harness_s, report.exit_code = result.duration_s, result.exit_code
        report.outcome, report.reason = verdict.outcome, verdict.reason
        patch = workspace_patch(workspace, attempt.task.base_commit)
        patch_key = f"patches/{attempt.run_id}/{attempt.rollout_id}.diff"
        store.put_bytes(patch_key, patch, "text/x-diff")
        report.patch_bytes = len(patch)
    except Exception as exc:  # noqa: BLE001 - any failure of this attempt is recorded on the rollout
        log.exception("rollout %s attempt %d failed", attempt.rollout_id, attempt.attempt)
        report.outcome, report.reason = "harness_error", f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(attempt_dir, ignore_errors=True)
    logs_key = _store_logs(store, attempt, result, report)
    return _finish(db, attempt, report, patch_key=patch_key, logs_key=logs_key)


def run_rollout(
    settings: Settings, db: sessionmaker[Session], store: ObjectStore, sandbox: Sandbox, rollout_id: str
) -> RolloutOutcome:
    """One delivery of the ``run_rollout`` task. Safe to call any number of times for the same rollout."""
    claimed = claim(settings, db, store, rollout_id)
    if isinstance(claimed, RolloutOutcome):
        return claimed
    return execute_attempt(settings, db, store, sandbox, claimed)
