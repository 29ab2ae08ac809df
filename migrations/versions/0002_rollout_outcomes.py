"""rollout outcomes, cancelled rollouts, queued runs, group set-aside reasons

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 10:00:00

``rollouts.outcome`` / ``outcome_reason`` record what happened to a rollout (``shared/statuses.py``); rows that
exist already get the outcome their status and reward imply. Rollouts failed by a stop become ``cancelled``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Frozen copies of the constraint values and the view at this revision.
RUN_STATUSES = ("queued", "pending", "running", "stopping", "stopped", "completed", "failed")
ROLLOUT_STATUSES = ("queued", "running", "finished", "grading", "graded", "failed", "cancelled")
ROLLOUT_OUTCOMES = ("resolved", "unresolved", "harness_error", "infrastructure_error", "cancelled", "limit")
OLD_RUN_STATUSES = ("pending", "running", "stopping", "stopped", "completed", "failed")
OLD_ROLLOUT_STATUSES = ("queued", "running", "finished", "grading", "graded", "failed")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


TRAJECTORIES = """
CREATE VIEW trajectories AS
SELECT
    r.id                      AS rollout_id,
    r.run_id,
    r.group_id,
    g.step,
    r.index_in_group,
    r.harness,
    t.dataset,
    t.instance_id,
    r.status,
    r.isolation,
    r.harness_outcome,
    {outcome_columns}
    rw.reward,
    rw.resolved,
    coalesce(c.n_calls, 0)            AS n_calls,
    coalesce(c.prompt_tokens, 0)      AS prompt_tokens,
    coalesce(c.completion_tokens, 0)  AS completion_tokens,
    coalesce(ch.n_chains, 0)          AS n_chains,
    coalesce(ch.n_forks, 0)           AS n_forks,
    c.min_policy_version,
    c.max_policy_version,
    extract(epoch FROM (r.finished_at - r.started_at)) AS duration_s,
    r.created_at,
    r.error
FROM rollouts r
JOIN tasks t ON t.id = r.task_id
LEFT JOIN groups g ON g.id = r.group_id
LEFT JOIN rewards rw ON rw.rollout_id = r.id
LEFT JOIN (
    SELECT rollout_id, count(*) AS n_calls, sum(prompt_tokens) AS prompt_tokens,
           sum(completion_tokens) AS completion_tokens,
           min(policy_version) AS min_policy_version, max(policy_version) AS max_policy_version
    FROM calls GROUP BY rollout_id
) c ON c.rollout_id = r.id
LEFT JOIN (
    SELECT rollout_id, count(*) AS n_chains, count(fork_reason) AS n_forks
    FROM chains GROUP BY rollout_id
) ch ON ch.rollout_id = r.id
"""


def _replace_check(table: str, name: str, condition: str) -> None:
    op.drop_constraint(op.f(f"ck_{table}_{name}"), table, type_="check")
    op.create_check_constraint(op.f(f"ck_{table}_{name}"), table, condition)


def upgrade() -> None:
    op.add_column("rollouts", sa.Column("outcome", sa.Text(), nullable=True))
    op.add_column("rollouts", sa.Column("outcome_reason", sa.Text(), nullable=True))
    op.add_column("groups", sa.Column("error", sa.Text(), nullable=True))
    _replace_check("runs", "status", _in("status", RUN_STATUSES))
    _replace_check("rollouts", "status", _in("status", ROLLOUT_STATUSES))
    op.create_check_constraint(
        op.f("ck_rollouts_outcome"), "rollouts", f"outcome IS NULL OR {_in('outcome', ROLLOUT_OUTCOMES)}"
    )
    op.execute(
        """
        UPDATE rollouts r SET outcome = CASE WHEN rw.resolved THEN 'resolved' ELSE 'unresolved' END
        FROM rewards rw WHERE rw.rollout_id = r.id AND r.status = 'graded'
        """
    )
    op.execute(
        "UPDATE rollouts SET status = 'cancelled', outcome = 'cancelled', outcome_reason = 'run_stopped' "
        "WHERE status = 'failed' AND error LIKE 'run stopped%'"
    )
    op.execute(
        "UPDATE rollouts SET outcome = 'infrastructure_error', outcome_reason = 'runner_died' "
        "WHERE status = 'failed' AND error LIKE 'the runner died%'"
    )
    op.execute("UPDATE rollouts SET outcome = 'harness_error' WHERE status = 'failed' AND outcome IS NULL")
    op.execute("DROP VIEW IF EXISTS trajectories")
    op.execute(TRAJECTORIES.format(outcome_columns="r.outcome,\n    r.outcome_reason,"))


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS trajectories")
    op.execute(TRAJECTORIES.format(outcome_columns=""))
    op.execute("UPDATE rollouts SET status = 'failed' WHERE status = 'cancelled'")
    op.execute("UPDATE runs SET status = 'pending' WHERE status = 'queued'")
    op.drop_constraint(op.f("ck_rollouts_outcome"), "rollouts", type_="check")
    _replace_check("rollouts", "status", _in("status", OLD_ROLLOUT_STATUSES))
    _replace_check("runs", "status", _in("status", OLD_RUN_STATUSES))
    op.drop_column("groups", "error")
    op.drop_column("rollouts", "outcome_reason")
    op.drop_column("rollouts", "outcome")
