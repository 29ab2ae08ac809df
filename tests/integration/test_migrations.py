"""The schema: one Alembic head, no drift, reversible, and the views return rows."""

import secrets

import psycopg
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text

from shared import migrate
from shared.db import make_engine, session_scope
from shared.models import Call, Chain, Group, Reward, Rollout, Run, Task
from tests.fixtures.services import PG_ADMIN_URL

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
        s.add(Run(id=run_id, model="tiny", harness="codex", group_size=1))
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
