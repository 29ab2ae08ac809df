"""Every query of ``docs/sql-cookbook.md`` runs against a database populated through the SQLAlchemy models with
a realistic run (two harnesses, two steps, forks, a failed rollout, per-test outcomes, learner steps) and
returns what the same numbers computed in Python say.

The database is this module's own (created, migrated, dropped here), so rows other tests write cannot change
the answers.
"""

from __future__ import annotations

import os
import re
import secrets
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from shared import migrate
from shared.db import make_engine, session_factory
from shared.models import Call, Chain, Group, Reward, Rollout, Run, Step, Task
from tests.fixtures.services import PG_ADMIN_URL, REPO_ROOT, run_row

pytestmark = pytest.mark.integration

COOKBOOK = REPO_ROOT / "docs" / "sql-cookbook.md"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def cookbook_queries(path: Path = COOKBOOK) -> dict[str, str]:
    """``### name`` headings each followed by one ```sql block."""
    found = re.findall(r"^### ([\w-]+)\n.*?```sql\n(.*?)```", path.read_text(), flags=re.S | re.M)
    return {name: sql for name, sql in found}


@pytest.fixture(scope="module")
def cookbook_db() -> Iterator[Session]:
    name = f"harnessrl_cookbook_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    engine = make_engine(url)
    try:
        migrate.upgrade(url)
        with session_factory(engine)() as session:
            populate(session)
            session.commit()
            yield session
    finally:
        engine.dispose()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# What populate() wrote, kept for computing the expected answers.
ROLLOUTS: list[dict[str, Any]] = []
CALLS: list[dict[str, Any]] = []
FORKS: list[tuple[str, str]] = []
GROUP_LAGS: list[int] = []


def populate(session: Session) -> None:
    tasks = [
        Task(id=f"task_{i}", dataset="swe_mini", instance_id=f"calc-{i}", spec={"instance_id": f"calc-{i}"})
        for i in (1, 2)
    ]
    session.add_all(tasks)
    plan = [("run_codex", "codex", 2, [tasks[0], tasks[1]]), ("run_claude", "claude-code", 1, [tasks[0]])]
    call_ms = iter(range(100, 10_000, 137))
    for run_id, harness, n_steps, step_tasks in plan:
        session.add(run_row(run_id, harness, group_size=2, steps=n_steps))
        session.flush()
        for step in range(n_steps):
            for task in step_tasks:
                group_id = f"grp_{run_id}_{step}_{task.id}"
                consumed_at = T0 + timedelta(minutes=10 * step + 5)
                session.add(
                    Group(
                        id=group_id,
                        run_id=run_id,
                        task_id=task.id,
                        step=step,
                        size=2,
                        status="consumed",
                        policy_version=step,
                        consumed_at=consumed_at,
                    )
                )
                session.flush()
                versions = []
                for index in range(2):
                    rollout_id = f"ro_{group_id}_{index}"
                    failed = harness == "claude-code" and index == 1
                    reward = None if failed else float((index + step) % 2 == 0 or task.id == "task_2")
                    session.add(
                        Rollout(
                            id=rollout_id,
                            run_id=run_id,
                            group_id=group_id,
                            task_id=task.id,
                            index_in_group=index,
                            harness=harness,
                            rollout_key=f"rk_{rollout_id}",
                            status="failed" if failed else "graded",
                            harness_outcome="error" if failed else "success",
                            error="harness exited 1\ntraceback..." if failed else None,
                        )
                    )
                    session.flush()
                    record = {
                        "run_id": run_id,
                        "harness": harness,
                        "step": step,
                        "reward": reward,
                        "status": "failed" if failed else "graded",
                        "calls": 0,
                        "prompt": 0,
                        "completion": 0,
                        "trained": 0,
                        "error": "harness exited 1" if failed else None,
                        "outcome": "error" if failed else "success",
                    }
                    if reward is not None:
                        f2p = "passed" if reward == 1.0 else "failed"
                        p2p = "failed" if index == 1 and step == 1 else "passed"
                        session.add(
                            Reward(
                                rollout_id=rollout_id,
                                reward=reward,
                                resolved=reward == 1.0,
                                tests={
                                    "FAIL_TO_PASS": {"tests/test_calc.py::test_add": f2p},
                                    "PASS_TO_PASS": {"tests/test_calc.py::test_sub": p2p},
                                },
                            )
                        )
                        record["tests"] = (task.instance_id, f2p, p2p)
                    fork_reason = {("codex", 1): "compaction", ("claude-code", 0): "edited_history"}.get(
                        (harness, index)
                    )
                    chain_reasons = [None] + ([fork_reason] if fork_reason else [])
                    for chain_index, reason in enumerate(chain_reasons):
                        n_calls = 2 if reason is None else 1
                        prompt, sampled = 300 + 10 * chain_index, 40 * n_calls
                        chain = Chain(
                            rollout_id=rollout_id,
                            fork_reason=reason,
                            tokens_prefix="t",
                            n_calls=n_calls,
                            suffix_tokens=prompt,
                            sampled_tokens=sampled,
                        )
                        session.add(chain)
                        session.flush()
                        if reason:
                            FORKS.append((harness, reason))
                        record["trained"] += prompt + sampled
                        for position in range(n_calls):
                            # The second call of a step-1 rollout was sampled one version late (off-policy).
                            version = max(step - (position == 1 and step == 1), 0)
                            versions.append(version)
                            total = float(next(call_ms))
                            call = {
                                "harness": harness,
                                "total_ms": total,
                                "prompt": 300 + 50 * position,
                                "completion": 40,
                            }
                            session.add(
                                Call(
                                    rollout_id=rollout_id,
                                    chain_id=chain.id,
                                    position=position,
                                    fork_reason=reason if position == 0 else None,
                                    provider_api="openai_chat",
                                    prompt_tokens=call["prompt"],
                                    suffix_tokens=20,
                                    completion_tokens=call["completion"],
                                    finish_reason="stop",
                                    policy_version=version,
                                    tokens_key="k",
                                    queue_ms=1.0,
                                    inference_ms=total - 1.0,
                                    total_ms=total,
                                    ttfb_ms=5.0,
                                )
                            )
                            CALLS.append(call)
                            record["calls"] += 1
                            record["prompt"] += call["prompt"]
                            record["completion"] += call["completion"]
                    ROLLOUTS.append(record)
                # The learner step that consumed this group made version step+1, trained from version step.
                GROUP_LAGS.append(step - min(versions))
            session.add(
                Step(
                    run_id=run_id,
                    step=step,
                    policy_version=step + 1,
                    loss=0.1 * (step + 1),
                    clip_fraction=0.05,
                    kl=0.001,
                    reward_mean=0.5,
                    tokens=1000,
                    groups_trained=len(step_tasks),
                    created_at=T0 + timedelta(minutes=10 * step + 6),
                )
            )
    session.flush()


def _rows(session: Session, sql: str) -> list[tuple[Any, ...]]:
    return [
        tuple(float(v) if isinstance(v, Decimal) else v for v in row) for row in session.execute(text(sql))
    ]


def test_cookbook_has_the_promised_queries() -> None:
    assert {
        "reward-by-harness-and-step",
        "fork-rate-by-harness-and-reason",
        "slowest-calls",
        "policy-lag-histogram",
        "per-test-failure-counts",
        "tokens-per-rollout",
    } <= set(cookbook_queries())


def test_reward_by_harness_and_step(cookbook_db: Session) -> None:
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in ROLLOUTS:
        if r["reward"] is not None:
            groups[(r["harness"], r["step"])].append(r["reward"])
    expected = [
        (h, s, len(v), round(statistics.mean(v), 3), round(statistics.mean(v), 3))
        for (h, s), v in sorted(groups.items())
    ]
    assert _rows(cookbook_db, cookbook_queries()["reward-by-harness-and-step"]) == expected


def test_fork_rate_by_harness_and_reason(cookbook_db: Session) -> None:
    calls = Counter(c["harness"] for c in CALLS)
    expected = sorted(
        ((h, reason, n, calls[h], round(n / calls[h], 4)) for (h, reason), n in Counter(FORKS).items()),
        key=lambda row: (-row[4], row[0], row[1]),
    )
    assert len(expected) == 2
    assert _rows(cookbook_db, cookbook_queries()["fork-rate-by-harness-and-reason"]) == expected


def test_slowest_calls(cookbook_db: Session) -> None:
    rows = _rows(cookbook_db, cookbook_queries()["slowest-calls"])
    expected = sorted((c["total_ms"] for c in CALLS), reverse=True)[:10]
    assert [row[-1] for row in rows] == expected
    assert all(row[-2] == 5.0 for row in rows)  # ttfb column


def test_policy_lag_histogram(cookbook_db: Session) -> None:
    expected = sorted(Counter(GROUP_LAGS).items())
    assert expected == [(0, 3), (1, 2)]  # step-1 groups carry a call sampled one version late
    assert _rows(cookbook_db, cookbook_queries()["policy-lag-histogram"]) == expected


def test_per_test_failure_counts(cookbook_db: Session) -> None:
    failures: Counter[tuple[str, str, str]] = Counter()
    graded: Counter[tuple[str, str, str]] = Counter()
    for r in ROLLOUTS:
        if "tests" in r:
            instance, f2p, p2p = r["tests"]
            for kind, test_id, outcome in (
                ("FAIL_TO_PASS", "tests/test_calc.py::test_add", f2p),
                ("PASS_TO_PASS", "tests/test_calc.py::test_sub", p2p),
            ):
                graded[(instance, kind, test_id)] += 1
                failures[(instance, kind, test_id)] += outcome != "passed"
    expected = sorted(
        (("swe_mini", i, k, t, failures[(i, k, t)], n) for (i, k, t), n in graded.items()),
        key=lambda row: (-row[4], row[1], row[3]),
    )
    assert _rows(cookbook_db, cookbook_queries()["per-test-failure-counts"]) == expected


def test_tokens_per_rollout(cookbook_db: Session) -> None:
    by_run: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in ROLLOUTS:
        by_run[(r["run_id"], r["harness"])].append(r)
    expected = [
        (
            run_id,
            harness,
            len(rs),
            round(statistics.mean(r["calls"] for r in rs), 1),
            round(statistics.mean(r["prompt"] for r in rs), 1),
            round(statistics.mean(r["completion"] for r in rs), 1),
            round(statistics.mean(r["trained"] for r in rs), 1),
        )
        for (run_id, harness), rs in sorted(by_run.items())
    ]
    assert _rows(cookbook_db, cookbook_queries()["tokens-per-rollout"]) == expected


def test_rollouts_by_status_and_outcome(cookbook_db: Session) -> None:
    counts = Counter((r["harness"], r["status"], r["outcome"], r["error"] or "-") for r in ROLLOUTS)
    rows = _rows(cookbook_db, cookbook_queries()["rollouts-by-status-and-outcome"])
    assert {row[:4]: row[4] for row in rows} == counts
    assert ("claude-code", "failed", "error", "harness exited 1", 1) in rows


def test_learner_steps(cookbook_db: Session) -> None:
    rows = _rows(cookbook_db, cookbook_queries()["learner-steps"])
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("run_claude", 0, 1, 0.1),
        ("run_codex", 0, 1, 0.1),
        ("run_codex", 1, 2, 0.2),
    ]


def test_evals_by_policy_version_and_pass_rate_by_task(cookbook_db: Session) -> None:
    """Two evals of run_codex (version 0 and 2) with their rollouts, rewards and calls; both queries read them, and
    the reward curve leaves eval rollouts out (added in a transaction that is rolled back)."""
    from shared.models import Eval

    try:
        for version, passes in ((0, (True, False, False, False)), (2, (True, True, False, True))):
            eval_id = f"eval_v{version}"
            config = {"harness": "codex", "group_size": 2, "target": {"source": "base" if version == 0 else "weights",
                                                                      "run_id": "run_codex", "version": version}}  # fmt: skip
            cookbook_db.add(run_row(eval_id, **config))
            cookbook_db.flush()
            cookbook_db.get(Run, eval_id).status = "completed"  # type: ignore[union-attr]
            cookbook_db.add(Eval(
                run_id=eval_id, source_run_id="run_codex", version=version, source=config["target"]["source"],
                dataset="swe_mini", split="eval", harness="codex", samples_per_task=2, tasks=2, samples=4,
                passed=sum(passes), pass_at_1=sum(passes) / 4, pass_at_1_low=0.1, pass_at_1_high=0.9,
                pass_at_k=0.5 if version == 0 else 1.0, created_at=T0 + timedelta(hours=version),
            ))  # fmt: skip
            group_id = f"grp_{eval_id}"
            cookbook_db.add(
                Group(id=group_id, run_id=eval_id, task_id="task_1", step=0, size=4, status="complete")
            )
            cookbook_db.flush()
            for index, passed in enumerate(passes):
                rollout_id = f"ro_{eval_id}_{index}"
                task_id = "task_1" if index < 2 else "task_2"
                cookbook_db.add(Rollout(id=rollout_id, run_id=eval_id, group_id=group_id, task_id=task_id,
                                        index_in_group=index, harness="codex", status="graded"))  # fmt: skip
                cookbook_db.flush()
                cookbook_db.add(Reward(rollout_id=rollout_id, reward=float(passed), resolved=passed))
                chain = Chain(rollout_id=rollout_id, tokens_prefix="t", n_calls=1)
                cookbook_db.add(chain)
                cookbook_db.flush()
                cookbook_db.add(Call(rollout_id=rollout_id, chain_id=chain.id, position=0, provider_api="openai_chat",
                                     prompt_tokens=10, suffix_tokens=10, completion_tokens=5, finish_reason="stop",
                                     policy_version=version, tokens_key="k"))  # fmt: skip
        cookbook_db.flush()
        assert _rows(cookbook_db, cookbook_queries()["evals-by-policy-version"]) == [
            ("run_codex", 0, "base", "swe_mini/eval", "codex", 4, 1, 0.25, 0.1, 0.9, 2, 0.5, None, "eval_v0"),
            (
                "run_codex",
                2,
                "weights",
                "swe_mini/eval",
                "codex",
                4,
                3,
                0.75,
                0.1,
                0.9,
                2,
                1.0,
                None,
                "eval_v2",
            ),
        ]
        assert _rows(cookbook_db, cookbook_queries()["eval-pass-rate-by-task"]) == [
            (0, "calc-1", 2, 1, 0, 0),
            (0, "calc-2", 2, 0, 0, 0),
            (2, "calc-1", 2, 2, 2, 2),
            (2, "calc-2", 2, 1, 2, 2),
        ]
        train_only = _rows(cookbook_db, cookbook_queries()["reward-by-harness-and-step"])
        assert sum(graded for _, _, graded, _, _ in train_only) == sum(
            1 for r in ROLLOUTS if r["reward"] is not None
        )
    finally:
        cookbook_db.rollback()


def test_teacher_demonstrations(cookbook_db: Session) -> None:
    """A collection run with a teacher (two rollouts: 2 and 1 teacher calls, rewards 1 and 0) beside the populated
    policy runs, whose calls the query leaves out (added in a transaction that is rolled back)."""
    try:
        cookbook_db.add(run_row("run_teacher", "mini-swe-agent", group_size=2, teacher={"kind": "reference"}))
        cookbook_db.flush()
        cookbook_db.add(
            Group(id="grp_teacher", run_id="run_teacher", task_id="task_1", step=0, size=2, status="complete")
        )
        cookbook_db.flush()
        for index, (n_calls, reward) in enumerate(((2, 1.0), (1, 0.0))):
            rollout_id = f"ro_teacher_{index}"
            cookbook_db.add(Rollout(id=rollout_id, run_id="run_teacher", group_id="grp_teacher", task_id="task_1",
                                    index_in_group=index, harness="mini-swe-agent", status="graded"))  # fmt: skip
            cookbook_db.flush()
            cookbook_db.add(Reward(rollout_id=rollout_id, reward=reward, resolved=reward == 1.0))
            chain = Chain(rollout_id=rollout_id, tokens_prefix="t", n_calls=n_calls)
            cookbook_db.add(chain)
            cookbook_db.flush()
            for position in range(n_calls):
                cookbook_db.add(Call(rollout_id=rollout_id, chain_id=chain.id, position=position,
                                     provider_api="openai_chat", prompt_tokens=100, suffix_tokens=100,
                                     completion_tokens=30 + position, finish_reason="stop", policy_version=0,
                                     tokens_key="k", source="teacher"))  # fmt: skip
        cookbook_db.flush()
        assert _rows(cookbook_db, cookbook_queries()["teacher-demonstrations"]) == [
            ("run_teacher", "ro_teacher_0", "calc-1", 1.0, 2, 61),
            ("run_teacher", "ro_teacher_1", "calc-1", 0.0, 1, 30),
        ]
    finally:
        cookbook_db.rollback()
