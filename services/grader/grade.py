"""Grading: turn a rollout's patch into a reward by running the task's tests in a clean sandbox.

Plain functions; the Celery task (``tasks.py``) and tests call them directly.

``grade_patch`` is the pure part (no database): a fresh checkout at ``base_commit``, the agent's patch, which is
screened before anything runs (``test_runner.screen_patch``: a patch that adds or changes test infrastructure —
``conftest.py``, ``.pth``, ``sitecustomize``, pytest configuration, a module shadowing the standard library or the
test runner — is refused, reward 0, outcome ``patch_refused``; one that reaches into the test framework is graded
and flagged ``reward_hack_suspected``), then the protected paths (and every file the test patch touches) put back
exactly as they were at ``base_commit`` — files the agent changed are restored, files it added there are deleted —
then ``test_patch``, setup commands and the test command in the sandbox (no network). A plain pytest command (the
default) runs through the grader's launcher (``pytest_launcher.py``: isolated interpreter, framework and standard
library never from the repository, the grader's configuration); every report is written outside the checkout, in
a HOME folder only the grader names, and read back without following symlinks, size-capped, and checked against the
tests that were collected (``report_untrusted`` otherwise). Per-test outcomes come from that junit XML; a reward
function named by ``reward_fn`` maps them to a number. A ``stop_check`` that kills the test run (the run was
stopped) raises ``GradingStopped``: no reward at all.

``grade_rollout`` is the database part, idempotent by rollout id: the ``rewards`` row is inserted with
``ON CONFLICT (rollout_id) DO NOTHING`` in the same transaction that marks the rollout ``graded``, so a
redelivered grading message never writes a second reward; then group completion is checked
(``group_completion.py``). A grading that fails for an infrastructure reason (or keeps crashing its worker) is
retried and then given up after ``max_attempts``: no reward, the rollout ``failed`` with outcome
``infrastructure_error``, so its group still completes and is set aside (``shared/statuses.py``).
"""

from __future__ import annotations

import logging
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session, sessionmaker

from services.grader.group_completion import complete_group_if_done
from services.grader.test_runner import (
    ReportError,
    base_inifile,
    parse_launcher_report,
    prepare_test_run,
    read_report,
    report_problem,
    screen_patch,
)
from shared.db import session_scope
from shared.metrics import GRADING_SECONDS, GROUPS_COMPLETED, ROLLOUTS
from shared.models import Reward, Rollout, Run
from shared.models import Task as TaskRow
from shared.objectstore import ObjectNotFound, ObjectStore
from shared.rollout_records import read_meta, record_grading, start_grading
from shared.run_config import RunConfigError, read_run_config
from shared.sandbox import HOME_INSIDE, Sandbox, SandboxError
from shared.scratch import scratch_prefix
from shared.statuses import PATCH_REFUSED_REASON, Outcome, RolloutStatus, graded_outcome
from shared.tasks import GitError, Task, TaskRepoError, materialize, run_git
from shared.trajectory import grading_log_key

log = logging.getLogger(__name__)

# Where the report used to be written, inside the checkout: a file the patch plants there is nothing to the grader.
JUNIT_FILE = ".harnessrl-junit.xml"
# Why the sandbox kills a command on its own; any other ``killed_reason`` came from the caller's ``stop_check``.
SANDBOX_KILL_REASONS = frozenset({"timeout", "disk", "memory", "processes"})
# Verdicts that are the grader's refusal to trust the patch or its report: the rollout's outcome_reason says so.
REFUSED_OUTCOMES = frozenset({"patch_refused", "report_untrusted"})
PASSED, FAILED, ERROR, SKIPPED, MISSING = "passed", "failed", "error", "skipped", "missing"

# --- per-test outcomes -----------------------------------------------------------------------------------


def junit_key(node_id: str) -> str:
    """A pytest node id (``tests/test_x.py::TestC::test_y[1]``) as junit reports it (``tests.test_x.TestC::test_y[1]``)."""
    path, _, rest = node_id.partition("::")
    parts = rest.split("::") if rest else []
    module = path.removesuffix(".py").replace("/", ".")
    classname = ".".join([module, *parts[:-1]])
    return f"{classname}::{parts[-1]}" if parts else classname


def junit_cases(xml_bytes: bytes) -> list[tuple[str, str]]:
    """Every test case of a junit XML report, in order, as ``(key like junit_key, status)``. A document type
    declaration (entities: the way to make a small file expand to gigabytes) is refused: pytest never writes one."""
    if b"<!DOCTYPE" in xml_bytes or b"<!ENTITY" in xml_bytes:
        raise ET.ParseError("junit report declares a document type")
    root = ET.fromstring(xml_bytes)
    cases: list[tuple[str, str]] = []
    for case in root.iter("testcase"):
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        tags = {child.tag for child in case}
        if "error" in tags:
            status = ERROR
        elif "failure" in tags:
            status = FAILED
        elif "skipped" in tags:
            status = SKIPPED
        else:
            status = PASSED
        cases.append((key, status))
    return cases


def parse_junit(xml_bytes: bytes) -> dict[str, str]:
    """Outcome of every test case in a junit XML report, keyed like ``junit_key``."""
    outcomes: dict[str, str] = {}
    for key, status in junit_cases(xml_bytes):
        # A test reported twice (a teardown error after a pass) keeps its worst outcome.
        if outcomes.get(key) not in (ERROR, FAILED):
            outcomes[key] = status
    return outcomes


def outcome_of(node_id: str, report: dict[str, str]) -> str:
    """The outcome of one listed test. A listed id without parameters covers all its parametrized cases:
    it passes only if every case passed."""
    key = junit_key(node_id)
    if key in report:
        return report[key]
    cases = [status for name, status in report.items() if name.startswith(key + "[")]
    if not cases:
        return MISSING
    for worst in (ERROR, FAILED, SKIPPED):
        if worst in cases:
            return worst
    return PASSED


@dataclass(frozen=True)
class ListedOutcomes:
    fail_to_pass: dict[str, str]
    pass_to_pass: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return {"FAIL_TO_PASS": self.fail_to_pass, "PASS_TO_PASS": self.pass_to_pass}

    @property
    def all_statuses(self) -> list[str]:
        return [*self.fail_to_pass.values(), *self.pass_to_pass.values()]


# --- reward functions ------------------------------------------------------------------------------------

RewardFn = Callable[[ListedOutcomes], float]
REWARD_FUNCTIONS: dict[str, RewardFn] = {}


def reward_function(name: str) -> Callable[[RewardFn], RewardFn]:
    """Register a reward function under ``name`` (what a run's config names as ``reward_fn``)."""

    def register(fn: RewardFn) -> RewardFn:
        REWARD_FUNCTIONS[name] = fn
        return fn

    return register


@reward_function("resolved")
def resolved_reward(outcomes: ListedOutcomes) -> float:
    """1.0 when every FAIL_TO_PASS and PASS_TO_PASS test passed (SWE-bench's "resolved"), else 0.0."""
    return 1.0 if all(s == PASSED for s in outcomes.all_statuses) else 0.0


@reward_function("fraction_passed")
def fraction_passed_reward(outcomes: ListedOutcomes) -> float:
    """The share of listed tests that passed."""
    statuses = outcomes.all_statuses
    return sum(s == PASSED for s in statuses) / len(statuses) if statuses else 0.0


@reward_function("resolved_partial")
def resolved_partial_reward(outcomes: ListedOutcomes) -> float:
    """1.0 when resolved, else half the share of listed tests that passed: a training reward that still pays mostly
    for the fix, and a little for keeping the behaviour the tests check. A binary reward gives a group whose answers
    all fail no signal; here an answer that keeps the function working (the issue's bug still there: its
    PASS_TO_PASS tests pass) outranks one that breaks it (syntax error, lost parameter: every test fails), and a
    fix outranks both by at least half the scale. Evals keep ``resolved``."""
    return 1.0 if resolved_reward(outcomes) == 1.0 else 0.5 * fraction_passed_reward(outcomes)


def get_reward_function(name: str) -> RewardFn:
    try:
        return REWARD_FUNCTIONS[name]
    except KeyError:
        known = ", ".join(sorted(REWARD_FUNCTIONS))
        raise ValueError(f"unknown reward function {name!r}; known: {known}") from None


# --- grading one patch -----------------------------------------------------------------------------------


class GradingStopped(Exception):
    """The test run was killed by the caller's ``stop_check`` (``reason``, e.g. ``run_stopped``): no verdict."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"test run stopped: {reason}")
        self.reason = reason


@dataclass
class GradeReport:
    """The verdict on one patch. ``outcome``: graded | patch_failed | patch_refused | test_patch_failed |
    setup_failed | tests_timed_out | no_test_report | report_untrusted. ``reward_hack_suspected``: the patch was
    refused, its report was not trusted, or it reaches into the test framework (``reward_hack_reason`` says how)."""

    reward: float
    resolved: bool
    reward_fn: str
    outcome: str
    tests: dict[str, Any]
    isolation: str
    grading_s: float
    log_lines: list[str] = field(default_factory=list)
    reward_hack_suspected: bool = False
    reward_hack_reason: str | None = None

    @property
    def log_text(self) -> str:
        return "\n".join(self.log_lines) + "\n"


def _apply(repo: Path, patch: bytes, what: str, log_lines: list[str]) -> bool:
    if not patch.strip():
        log_lines.append(f"{what}: empty")
        return True
    try:
        run_git(repo, "apply", "--whitespace=nowarn", "--binary", "-", input_bytes=patch)
    except GitError as exc:
        log_lines.append(f"{what}: does not apply: {exc}")
        return False
    log_lines.append(f"{what}: applied ({len(patch)} bytes)")
    return True


def restore_paths(repo: Path, base_commit: str, paths: list[str]) -> None:
    """Put ``paths`` back exactly as at ``base_commit``: tracked files restored, anything else there removed.

    Nothing after the checkout is staged, so every file the agent added is untracked and ``git clean`` finds it.
    """
    if not paths:
        return
    in_base = run_git(repo, "ls-tree", "-r", "--name-only", base_commit, "--", *paths).decode().splitlines()
    run_git(repo, "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *paths)
    run_git(repo, "clean", "-q", "-ffdx", "--", *paths)
    if in_base:
        run_git(repo, "checkout", base_commit, "--", *in_base)


def grade_patch(
    task: Task,
    patch: bytes,
    *,
    sandbox: Sandbox,
    store: ObjectStore | None = None,
    reward_fn: str = "resolved",
    timeout_s: float = 600.0,
    stop_check: Callable[[], str | None] | None = None,
    refused_by_runner: str | None = None,
) -> GradeReport:
    """Grade ``patch`` (a git diff against ``base_commit``) for ``task``; never raises for a bad patch.

    ``stop_check`` is passed to the sandbox for the test run: a reason it returns kills the tests and raises
    ``GradingStopped`` (nothing is graded). ``refused_by_runner``: why the runner refused to take the workspace's
    patch (``shared.statuses.PATCH_REFUSED_REASON``): the verdict is ``patch_refused``, reward 0, and no test runs —
    what the agent left is not graded as if it had done nothing (under ``fraction_passed`` that would earn the
    passing tests' share)."""
    reward_of = get_reward_function(reward_fn)
    started = time.monotonic()
    log_lines: list[str] = [f"task {task.instance_id} at {task.base_commit}"]
    suspected: list[str] = []

    def verdict(
        outcome: str, outcomes: ListedOutcomes | None, isolation: str = sandbox.isolation
    ) -> GradeReport:
        if outcomes is None:
            outcomes = ListedOutcomes(
                {t: MISSING for t in task.FAIL_TO_PASS}, {t: MISSING for t in task.PASS_TO_PASS}
            )
        reward = reward_of(outcomes) if outcome == "graded" else 0.0
        resolved = outcome == "graded" and resolved_reward(outcomes) == 1.0
        log_lines.append(f"outcome {outcome}, reward {reward} ({reward_fn})")
        if suspected:
            log_lines.append("reward hack suspected: " + "; ".join(suspected))
        return GradeReport(
            reward,
            resolved,
            reward_fn,
            outcome,
            outcomes.as_json(),
            isolation,
            time.monotonic() - started,
            log_lines,
            reward_hack_suspected=bool(suspected),
            reward_hack_reason="; ".join(suspected)[:4000] or None,
        )

    if refused_by_runner is not None:
        log_lines.append(f"the runner refused the workspace's patch: {refused_by_runner}")
        suspected.append(f"refused by the runner: {refused_by_runner}")
        return verdict("patch_refused", None)
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("grade")) as tmp:
        Path(tmp).chmod(0o755)  # the sandbox uid must reach the checkout inside
        repo = materialize(task, Path(tmp) / "repo", store)
        inifile = base_inifile(repo)  # the base commit's pytest configuration, judged before the patch
        if not _apply(repo, patch, "agent patch", log_lines):
            return verdict("patch_failed", None)
        screen = screen_patch(repo, task.base_commit, patch)
        suspected += screen.suspected
        if screen.refused is not None:
            log_lines.append(f"agent patch refused: {screen.refused}")
            return verdict("patch_refused", None)
        restore_paths(repo, task.base_commit, sorted({*task.protected_paths, *task.test_patch_paths()}))
        if not _apply(repo, task.test_patch.encode(), "test patch", log_lines):
            return verdict("test_patch_failed", None)
        home = Path(tmp) / "home"
        home.mkdir()
        run = prepare_test_run(
            test_command=task.test_command,
            setup_commands=task.setup_commands,
            runner_dir=Path(tmp) / "runner",
            home=home,
            home_inside=HOME_INSIDE if sandbox.confined else str(home),
            workspace_inside=sandbox.workspace_path(repo),
            inifile=inifile,
        )
        log_lines.append(
            "test runner: " + ("the grader's pytest launcher" if run.hardened else "the task's command")
        )
        result = sandbox.run(
            ["bash", "-c", run.script],
            repo,
            limits=sandbox.limits(task.test_timeout_s or timeout_s),
            home=home,
            ro_binds=[Path(tmp) / "runner"] if run.hardened else (),
            stop_check=stop_check,
        )
        log_lines += [
            f"test run: exit {result.exit_code}, {result.duration_s:.2f}s, isolation {result.isolation}",
            "--- stdout ---",
            result.stdout,
            "--- stderr ---",
            result.stderr,
        ]
        if result.killed_reason is not None and result.killed_reason not in SANDBOX_KILL_REASONS:
            raise GradingStopped(result.killed_reason)
        if result.timed_out:
            return verdict("tests_timed_out", None, result.isolation)
        try:
            data = read_report(home, run.report_name)
        except (ReportError, OSError) as exc:
            log_lines.append(f"test report: {exc}")
            setup_failed = bool(task.setup_commands) and result.exit_code != 0
            return verdict("setup_failed" if setup_failed else "no_test_report", None, result.isolation)
        try:
            if run.hardened:
                launched = parse_launcher_report(data)
                if launched.junit is None:
                    raise ReportError("pytest wrote no junit report")
                junit_bytes = launched.junit
                collected: set[str] | None = {junit_key(n) for n in launched.collected}
                runner_outcomes: dict[str, str] | None = {
                    junit_key(n): status for n, status in launched.outcomes.items()
                }
                reported_exit: int | None = launched.exit_code
            else:
                junit_bytes, collected, runner_outcomes, reported_exit = data, None, None, None
            cases = junit_cases(junit_bytes)
        except (ReportError, ET.ParseError) as exc:
            log_lines.append(f"test report unreadable: {exc}")
            return verdict("no_test_report", None, result.isolation)
        problem = report_problem(
            cases,
            listed_keys={junit_key(t) for t in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)},
            collected_keys=collected,
            runner_outcomes=runner_outcomes,
            reported_exit=reported_exit,
            process_exit=result.exit_code,
            passed=PASSED,
        )
        if problem is not None:
            log_lines.append(f"test report not trusted: {problem}")
            suspected.append(f"report not trusted: {problem}")
            return verdict("report_untrusted", None, result.isolation)
        report = parse_junit(junit_bytes)
    outcomes = ListedOutcomes(
        {t: outcome_of(t, report) for t in task.FAIL_TO_PASS},
        {t: outcome_of(t, report) for t in task.PASS_TO_PASS},
    )
    return verdict("graded", outcomes, result.isolation)


# --- grading one rollout (database) ----------------------------------------------------------------------


@dataclass(frozen=True)
class GradeOutcome:
    rollout_id: str
    action: str  # graded | already_graded | not_gradable | gave_up | cancelled
    reward: float | None
    group_entry_id: str | None


class GradingRetry(RuntimeError):
    """Grading failed for an infrastructure reason and attempts are left: the Celery task retries later."""


def _record_reward(
    db: sessionmaker[Session], rollout: Rollout, report: GradeReport, logs: str | None
) -> bool:
    """Insert the reward and mark the rollout graded in one transaction; False if a reward already existed.
    The outcome becomes resolved/unresolved unless the runner already named it (harness_error, limit)."""
    with session_scope(db) as session:
        inserted = session.execute(
            insert(Reward)
            .values(
                rollout_id=rollout.id,
                reward=report.reward,
                reward_fn=report.reward_fn,
                resolved=report.resolved,
                tests=report.tests,
                outcome=report.outcome,
                logs_key=logs,
                grading_s=report.grading_s,
                reward_hack_suspected=report.reward_hack_suspected,
                reward_hack_reason=report.reward_hack_reason,
            )
            .on_conflict_do_nothing(index_elements=["rollout_id"])
            .returning(Reward.id)
        ).first()
        row = session.get(Rollout, rollout.id, with_for_update=True)
        assert row is not None
        row.status = RolloutStatus.GRADED
        if row.outcome is None:
            row.outcome = graded_outcome(report.resolved)
            if report.outcome in REFUSED_OUTCOMES:
                row.outcome_reason = report.outcome
        record_grading(row, isolation=report.isolation)
        return inserted is not None


def _record_no_reward(
    db: sessionmaker[Session],
    rollout: Rollout,
    *,
    status: str,
    outcome: str,
    reason: str,
    error: str,
    logs: str,
) -> None:
    """End a rollout that is being graded without a reward (its status, outcome, reason and error say why), unless
    something else has already ended it."""
    with session_scope(db) as session:
        row = session.get(Rollout, rollout.id, with_for_update=True)
        assert row is not None
        if row.status not in (RolloutStatus.FINISHED, RolloutStatus.GRADING):
            return
        row.status = status
        row.outcome, row.outcome_reason, row.error = outcome, reason, error
        record_grading(row, logs_key=logs)


def _record_stopped(db: sessionmaker[Session], rollout: Rollout, reason: str, logs: str) -> None:
    """No reward: the test run was stopped (the run is being stopped); the rollout ends cancelled."""
    _record_no_reward(
        db, rollout, status=RolloutStatus.CANCELLED, outcome=Outcome.CANCELLED, reason=reason,
        error=f"grading stopped: {reason}", logs=logs,
    )  # fmt: skip


def _record_infrastructure_failure(
    db: sessionmaker[Session], rollout: Rollout, reason: str, error: str, logs: str
) -> None:
    """No reward: the rollout ends failed with an infrastructure outcome, and its group will be set aside."""
    _record_no_reward(
        db, rollout, status=RolloutStatus.FAILED, outcome=Outcome.INFRASTRUCTURE_ERROR, reason=reason,
        error=f"grading failed: {error}", logs=logs,
    )  # fmt: skip


def grade_rollout(
    rollout_id: str,
    *,
    db: sessionmaker[Session],
    store: ObjectStore,
    sandbox: Sandbox,
    redis_client: redis.Redis,
    timeout_s: float,
    max_attempts: int = 3,
    stop_check: Callable[[], str | None] | None = None,
) -> GradeOutcome:
    """Grade one rollout at most once, then complete its group if this was its last rollout.

    ``stop_check`` (e.g. ``stopping.run_stop_check``) is polled while the tests run; a reason it returns kills them
    and the rollout ends ``cancelled`` with that reason, no reward: the outcome's action is ``cancelled``.

    A grading that fails for a reason that is not the patch's (the repository cannot be fetched, the sandbox or
    git fails, the worker keeps crashing, an unknown reward function) is never a reward: while attempts are left
    it raises ``GradingRetry`` (the task retries), then the rollout ends ``failed`` with outcome
    ``infrastructure_error`` and its group is set aside by the learner.
    """
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id, with_for_update=True)
        if rollout is None:
            raise LookupError(f"no rollout {rollout_id}")
        already = session.scalar(select(Reward.reward).where(Reward.rollout_id == rollout_id))
        gradable = rollout.status in (RolloutStatus.FINISHED, RolloutStatus.GRADING)
        if already is None and gradable:
            attempts = start_grading(rollout)
            rollout.status = RolloutStatus.GRADING
        task_row = session.get(TaskRow, rollout.task_id)
        assert task_row is not None
        task = Task.model_validate(task_row.spec)
        run = session.get(Run, rollout.run_id)
        assert run is not None  # foreign key
        # The run's choice (RunConfig.reward_fn), unless this rollout names its own.
        config_error = None
        try:
            reward_fn = read_meta(rollout).reward_fn or read_run_config(run).reward_fn
        except RunConfigError as exc:
            reward_fn, config_error = "", str(exc)
        session.expunge(rollout)

    if already is not None or not gradable:
        # Redelivered after the reward committed, or a rollout that failed for good (no reward): only the
        # group may still need completing (a crash may have hit between the two).
        entry = _complete_group(db, redis_client, rollout)
        action = "already_graded" if already is not None else "not_gradable"
        return GradeOutcome(rollout_id, action, already, entry)

    key = grading_log_key(rollout.run_id, rollout_id)
    failure: tuple[str, str] | None = None  # (reason, message) of an infrastructure failure
    if config_error is not None:
        failure = ("invalid_run_config", config_error)
    elif reward_fn not in REWARD_FUNCTIONS:
        failure = (
            "unknown_reward_fn",
            f"unknown reward function {reward_fn!r}; known: {sorted(REWARD_FUNCTIONS)}",
        )
    elif attempts > max_attempts:
        failure = ("grading_crashed", f"grading crashed {attempts - 1} times; giving up")
    else:
        patch = b""
        if rollout.patch_key:
            try:
                patch = store.get_bytes(rollout.patch_key)
            except ObjectNotFound:
                log.warning(
                    "rollout %s: patch %s missing; grading the unchanged repo", rollout_id, rollout.patch_key
                )
        try:
            refused = _refused_by_runner(rollout)
            report = grade_patch(
                task, patch, sandbox=sandbox, store=store, reward_fn=reward_fn, timeout_s=timeout_s,
                stop_check=stop_check, refused_by_runner=refused,
            )  # fmt: skip
        except GradingStopped as exc:
            store.put_bytes(key, f"{exc}\n".encode(), content_type="text/plain")
            _record_stopped(db, rollout, exc.reason, key)
            log.info("rollout %s: grading stopped (%s)", rollout_id, exc.reason)
            return GradeOutcome(rollout_id, "cancelled", None, _complete_group(db, redis_client, rollout))
        except TaskRepoError as exc:
            failure = ("repo_unavailable", str(exc))
        except (GitError, SandboxError, OSError) as exc:
            log.exception("rollout %s: grading failed", rollout_id)
            failure = ("grading_failed", f"{type(exc).__name__}: {exc}")
        if failure is not None and attempts < max_attempts:
            raise GradingRetry(f"rollout {rollout_id}: {failure[1]} (attempt {attempts} of {max_attempts})")
    if failure is not None:
        reason, message = failure
        store.put_bytes(key, f"{reason}: {message}\n".encode(), content_type="text/plain")
        _record_infrastructure_failure(db, rollout, reason, message, key)
        log.warning("rollout %s: not graded (%s): %s", rollout_id, reason, message)
        return GradeOutcome(rollout_id, "gave_up", None, _complete_group(db, redis_client, rollout))

    action = "graded"
    store.put_bytes(key, report.log_text.encode(), content_type="text/plain")
    if not _record_reward(db, rollout, report, key):
        action = "already_graded"
    else:
        GRADING_SECONDS.labels(report.reward_fn, report.outcome).observe(report.grading_s)
        ROLLOUTS.labels(rollout.harness, "graded").inc()
    log.info("rollout %s: %s reward %.3f (%s) at %s", rollout_id, action, report.reward, report.outcome,
             datetime.now(UTC).isoformat())  # fmt: skip
    return GradeOutcome(rollout_id, action, report.reward, _complete_group(db, redis_client, rollout))


def _refused_by_runner(rollout: Rollout) -> str | None:
    """Why the runner refused the rollout's workspace patch (its last attempt's report), if it did."""
    last = read_meta(rollout).last_attempt
    refused = last.patch_refused if last is not None else None
    if refused is None and rollout.outcome_reason == PATCH_REFUSED_REASON:
        refused = rollout.error or PATCH_REFUSED_REASON
    return str(refused) if refused is not None else None


def _complete_group(db: sessionmaker[Session], redis_client: redis.Redis, rollout: Rollout) -> str | None:
    if rollout.group_id is None:
        return None
    entry = complete_group_if_done(db, redis_client, rollout.group_id)
    if entry is not None:
        GROUPS_COMPLETED.labels(rollout.run_id).inc()
    return entry
