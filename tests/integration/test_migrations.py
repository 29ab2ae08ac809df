"""The schema: one Alembic head, no drift, reversible, and the views return rows."""

import json
import secrets

import psycopg
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text

from shared import migrate
from shared.db import make_engine, session_factory, session_scope
from shared.models import Call, Chain, Group, Reward, Rollout, Run, Task
from tests.fixtures.services import PG_ADMIN_URL, run_row

pytestmark = pytest.mark.integration


@pytest.fixture
def scratch_db_url():  # type: ignore[no-untyped-def]
    name = f"harnessrl_mig_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _tables_and_views(url: str) -> set[str]:
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT table_name FROM information_schema.tables WHERE table_schema='public' "
                "AND table_name <> 'alembic_version'"
            )
        )
        names = {r[0] for r in rows}
    engine.dispose()
    return names


def test_single_head() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config("postgresql://x/y"))
    assert len(script.get_heads()) == 1


def test_upgrade_check_downgrade_upgrade(scratch_db_url: str) -> None:
    expected = {
        "runs",
        "tasks",
        "groups",
        "rollouts",
        "calls",
        "chains",
        "rewards",
        "steps",
        "weights",
        "evals",
        "trajectories",
        "call_log",
    }
    migrate.upgrade(scratch_db_url)
    assert _tables_and_views(scratch_db_url) == expected
    migrate.check(scratch_db_url)  # raises on drift between models and migrations
    migrate.downgrade(scratch_db_url)
    assert _tables_and_views(scratch_db_url) == set()
    migrate.upgrade(scratch_db_url)
    assert _tables_and_views(scratch_db_url) == expected
    migrate.check(scratch_db_url)


def test_views_return_rows(db) -> None:  # type: ignore[no-untyped-def]
    run_id, task_id, group_id, rollout_id = (
        f"{p}_{secrets.token_hex(6)}" for p in ("run", "task", "grp", "ro")
    )
    with session_scope(db) as s:
        s.add(run_row(run_id, "codex", model="tiny"))
        s.add(Task(id=task_id, dataset="d", instance_id=f"i-{task_id}", spec={"instance_id": "i"}))
        s.flush()
        s.add(Group(id=group_id, run_id=run_id, task_id=task_id, step=0, size=1))
        s.flush()
        s.add(
            Rollout(
                id=rollout_id,
                run_id=run_id,
                group_id=group_id,
                task_id=task_id,
                harness="codex",
                rollout_key=f"rk_{rollout_id}",
                status="graded",
            )
        )
        s.flush()
        chain = Chain(rollout_id=rollout_id, tokens_prefix=f"tokens/{run_id}/{rollout_id}")
        fork = Chain(
            rollout_id=rollout_id, tokens_prefix=f"tokens/{run_id}/{rollout_id}", fork_reason="compaction"
        )
        s.add_all([chain, fork])
        s.flush()
        for pos, (c, v) in enumerate([(chain, 0), (chain, 0), (fork, 1)]):
            s.add(
                Call(
                    rollout_id=rollout_id,
                    chain_id=c.id,
                    position=pos,
                    provider_api="openai_responses",
                    prompt_tokens=100 + pos,
                    suffix_tokens=10,
                    completion_tokens=20,
                    finish_reason="stop",
                    policy_version=v,
                    tokens_key=f"tokens/{run_id}/{rollout_id}/{c.id}/{pos}.npz",
                )
            )
        s.add(Reward(rollout_id=rollout_id, reward=1.0, resolved=True, tests={"t::a": "passed"}))
    with session_scope(db) as s:
        row = (
            s.execute(text("SELECT * FROM trajectories WHERE rollout_id = :r"), {"r": rollout_id})
            .mappings()
            .one()
        )
        assert row["reward"] == 1.0 and row["harness"] == "codex"
        assert row["n_calls"] == 3 and row["n_chains"] == 2 and row["n_forks"] == 1
        assert row["completion_tokens"] == 60
        assert (row["min_policy_version"], row["max_policy_version"]) == (0, 1)
        calls = (
            s.execute(
                text("SELECT * FROM call_log WHERE rollout_id = :r ORDER BY call_id"), {"r": rollout_id}
            )
            .mappings()
            .all()
        )
        assert [c["harness"] for c in calls] == ["codex"] * 3
        assert calls[2]["policy_version"] == 1


def test_constraints_reject_bad_rows(db) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError), session_scope(db) as s:
        s.add(Run(id=f"run_{secrets.token_hex(6)}", model="m", harness="h", group_size=1, status="exploded"))
    with pytest.raises(IntegrityError), session_scope(db) as s:
        s.add(Run(id=f"run_{secrets.token_hex(6)}", model="m", harness="h", group_size=0))


def test_scratch_database_is_migrated_and_dropped(pg_url: str) -> None:
    from shared.scratch_db import admin_url, scratch_database

    with scratch_database(pg_url, "harnessrl_scratch_test") as url:
        assert "trajectories" in _tables_and_views(url)
        name = url.rsplit("/", 1)[1]
    with psycopg.connect(admin_url(pg_url), autocommit=True) as admin:
        assert admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None


# Configs exactly as the api and the fixtures wrote them before revision 0004 (harness name only in the column,
# the shell command in ``harness_command``, ``groups_per_step`` twice, the old limit names, partial sections).
OLD_CONFIGS = {
    "api-shell": (
        "shell",
        {
            "dataset": "inline", "task_ids": ["task_a", "task_b"], "steps": 3, "groups_per_step": 2,
            "harness_command": "my-agent {instruction}", "grpo": {"clip_high": 0.3, "groups_per_step": 2},
            "sampling": {"temperature": 0.7, "top_p": 1.0, "max_tokens": None},
            "limits": {"rollout_timeout_s": 600.0, "max_calls": None}, "request_sha256": "ab" * 32,
        },
    ),
    "fixture-reference": ("reference", {"harness_options": {"max_turns": 4}, "model_dir": "/models/tiny"}),
    "fixture-learner": ("codex", {"grpo": {"groups_per_step": 5, "learning_rate": 0.001}, "reward_fn": "fraction_passed"}),
    "empty": ("pi", {}),
}  # fmt: skip


def test_0004_upgrades_stored_configs_to_run_configs_and_back(scratch_db_url: str) -> None:
    from shared.harnesses import ShellOptions
    from shared.run_config import read_run_config

    migrate.upgrade(scratch_db_url, "0003")
    engine = make_engine(scratch_db_url)
    with engine.begin() as conn:
        for run_id, (harness, config) in OLD_CONFIGS.items():
            conn.execute(
                text(
                    "INSERT INTO runs (id, name, status, model, harness, group_size, config, policy_version) "
                    "VALUES (:id, '', 'running', 'policy', :harness, 3, CAST(:config AS jsonb), 0)"
                ),
                {"id": run_id, "harness": harness, "config": json.dumps(config)},
            )
    migrate.upgrade(scratch_db_url)
    with session_scope(session_factory(engine)) as s:
        configs = {run_id: read_run_config(s.get(Run, run_id)) for run_id in OLD_CONFIGS}
    shell = configs["api-shell"]
    assert shell.harness == ShellOptions(command="my-agent {instruction}")
    assert (shell.model, shell.group_size, shell.steps, shell.groups_per_step) == ("policy", 3, 3, 2)
    assert (shell.grpo.clip_high, shell.sampling.temperature, shell.limits.wall_clock_s) == (0.3, 0.7, 600.0)
    assert shell.task_ids == ["task_a", "task_b"] and shell.request_sha256 == "ab" * 32
    reference = configs["fixture-reference"]
    assert reference.harness.model_dump() == {
        "name": "reference",
        "python": None,
        "max_turns": 4,
        "max_tokens": 1024,
    }
    assert reference.model_dir == "/models/tiny" and reference.groups_per_step == 1
    learner = configs["fixture-learner"]
    assert (learner.groups_per_step, learner.grpo.learning_rate, learner.reward_fn) == (
        5,
        0.001,
        "fraction_passed",
    )
    assert configs["empty"].harness.name == "pi"

    migrate.downgrade(scratch_db_url, "0003")
    with engine.connect() as conn:
        restored = {row.id: row.config for row in conn.execute(text("SELECT id, config FROM runs"))}
    engine.dispose()
    old_shell = restored["api-shell"]
    assert old_shell["harness_command"] == "my-agent {instruction}"
    assert old_shell["limits"]["rollout_timeout_s"] == 600.0 and old_shell["grpo"]["groups_per_step"] == 2
    assert restored["fixture-reference"]["harness_options"]["max_turns"] == 4


# Rollouts as the services wrote ``rollouts.meta`` at revision 0009 (git 7033c2e): the scheduler's outbox stamp, the
# runner's put-back (``enqueued_at`` removed, ``retry_at``/``waiting_for`` set) and attempt reports, the grader's
# and the learner's keys. Times as ``datetime.isoformat()`` wrote them.
_SENT = "2026-12-06T10:00:00.250000+00:00"
_ATTEMPT = {
    "attempt": 1,
    "outcome": "completed",
    "reason": None,
    "exit_code": 0,
    "isolation": "bwrap",
    "materialize_s": 0.4,
    "harness_s": 9.0,
    "patch_bytes": 120,
    "calls": 3,
    "killed_reason": None,
    "runner_error": None,
    "incidents": [],
    "classified": None,
    "context": None,
    "touched_protected_paths": [],
    "git_history_commands": [],
    "capture_lost": None,
    "patch_refused": None,
}
OLD_ROLLOUT_METAS = {
    "ro_unsent": {},
    "ro_sent": {"enqueued_at": _SENT},
    "ro_waiting": {"attempts": [{**_ATTEMPT, "classified": "infrastructure_error"}],
                   "retry_at": "2999-01-01T00:00:00+00:00", "waiting_for": "a retry after gateway_restarted"},
    "ro_due": {"retry_at": "2026-12-06T10:05:00+00:00", "waiting_for": "the inference pool is not ready"},
    "ro_graded": {"enqueued_at": _SENT, "attempts": [_ATTEMPT], "grade_attempts": 1, "grading_isolation": "bwrap",
                  "context": {"prompt_tokens": 9000, "context_length": 8192, "at_least": False}},
    "ro_aside": {"enqueued_at": _SENT, "attempts": [_ATTEMPT], "grade_attempts": 2, "grading_logs_key": "logs/g",
                 "learner_set_aside": "rollout ro_aside: missing segment", "reward_fn": "binary"},
}  # fmt: skip
_QUEUE_KEYS = ("enqueued_at", "retry_at", "waiting_for")


def _insert_0009_rollouts(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO runs (id, name, status, model, harness, group_size, config, policy_version) "
                "VALUES ('run_old', '', 'running', 'policy', 'reference', 1, "
                "CAST(:config AS jsonb), 0)"
            ),
            {"config": json.dumps(run_row("run_old").config)},
        )
        conn.execute(text("INSERT INTO tasks (id, dataset, instance_id, spec) VALUES ('t', 'd', 'i', '{}')"))
        conn.execute(
            text(
                "INSERT INTO groups (id, run_id, task_id, step, size, status, policy_version) "
                "VALUES ('g', 'run_old', 't', 0, 6, 'pending', 0)"
            )
        )
        for index, (rollout_id, meta) in enumerate(OLD_ROLLOUT_METAS.items()):
            status = "graded" if "grade_attempts" in meta else "queued"
            conn.execute(
                text(
                    "INSERT INTO rollouts (id, run_id, group_id, task_id, index_in_group, harness, status, attempt, "
                    "meta) VALUES (:id, 'run_old', 'g', 't', :index, 'reference', :status, 0, CAST(:meta AS jsonb))"
                ),
                {"id": rollout_id, "index": index, "status": status, "meta": json.dumps(meta)},
            )


def _check_0010_rows(url: str) -> None:
    """The queue keys are columns, ``meta`` is what the record layer reads, and the outbox sends what is due."""
    import asyncio
    from datetime import datetime

    from services.api.scheduler import enqueue_pending
    from shared.db import async_session_factory, make_async_engine
    from shared.rollout_records import queue_state, read_meta

    engine = make_engine(url)
    with session_scope(session_factory(engine)) as s:
        rows = {r.id: r for r in s.query(Rollout).filter(Rollout.run_id == "run_old")}
        for rollout_id, old in OLD_ROLLOUT_METAS.items():
            row = rows[rollout_id]
            queue = queue_state(row)
            for key in _QUEUE_KEYS:
                value = getattr(queue, key)
                expected = old.get(key)
                if key != "waiting_for" and expected is not None:
                    expected = datetime.fromisoformat(expected)
                assert value == expected, (rollout_id, key, value)
            assert row.meta == {k: v for k, v in old.items() if k not in _QUEUE_KEYS}
            meta = read_meta(row)  # validates as today's services wrote it
            assert meta.grade_attempts == old.get("grade_attempts", 0)
        assert read_meta(rows["ro_aside"]).learner_set_aside == "rollout ro_aside: missing segment"
        assert read_meta(rows["ro_graded"]).context is not None
    engine.dispose()

    sent: list[str] = []
    async_engine = make_async_engine(url)
    assert asyncio.run(enqueue_pending(async_session_factory(async_engine), sent.append, "run_old")) == 2
    asyncio.run(async_engine.dispose())
    assert sorted(sent) == ["ro_due", "ro_unsent"]  # never sent, and put back with its retry time passed


def _rollouts_at_head(url: str) -> dict[str, tuple[object, dict]]:
    from shared.rollout_records import queue_state

    engine = make_engine(url)
    with session_scope(session_factory(engine)) as s:
        rows = {r.id: (queue_state(r), r.meta) for r in s.query(Rollout).filter(Rollout.run_id == "run_old")}
    engine.dispose()
    return rows


def test_0010_moves_the_queue_state_out_of_meta_and_back(scratch_db_url: str) -> None:
    from datetime import datetime

    migrate.upgrade(scratch_db_url, "0009")
    engine = make_engine(scratch_db_url)
    _insert_0009_rollouts(engine)
    migrate.upgrade(scratch_db_url)
    _check_0010_rows(scratch_db_url)
    at_head = _rollouts_at_head(scratch_db_url)

    migrate.downgrade(scratch_db_url, "0009")
    with engine.connect() as conn:
        restored = {row.id: row.meta for row in conn.execute(text("SELECT id, meta FROM rollouts"))}
    for rollout_id, old in OLD_ROLLOUT_METAS.items():
        back = restored[rollout_id]
        assert back.keys() == (
            old.keys() | ({"enqueued_at"} if rollout_id in ("ro_unsent", "ro_due") else set())
        )
        for key, value in old.items():
            if key in ("enqueued_at", "retry_at"):
                assert datetime.fromisoformat(back[key]) == datetime.fromisoformat(value), (rollout_id, key)
            else:
                assert back[key] == value, (rollout_id, key)
    engine.dispose()
    migrate.upgrade(scratch_db_url)
    assert _rollouts_at_head(scratch_db_url) == at_head
