"""eval runs: runs.kind, the evals table (an eval's target and figures), rollouts.sampling_seed; the
trajectories view gains run_kind (its current text is here)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-15 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

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
    r.outcome,
    r.outcome_reason,
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
    r.error{run_kind}
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
) ch ON ch.rollout_id = r.id{runs_join}
"""


def upgrade() -> None:
    op.add_column("runs", sa.Column("kind", sa.Text(), server_default="train", nullable=False))
    op.create_check_constraint(op.f("ck_runs_kind"), "runs", "kind IN ('train', 'eval')")
    op.add_column("rollouts", sa.Column("sampling_seed", sa.BigInteger(), nullable=True))
    op.create_table(
        "evals",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("source_run_id", sa.Text(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("model_dir", sa.Text(), nullable=True),
        sa.Column("at_step", sa.Integer(), nullable=True),
        sa.Column("dataset", sa.Text(), nullable=False),
        sa.Column("split", sa.Text(), nullable=True),
        sa.Column("harness", sa.Text(), nullable=False),
        sa.Column("samples_per_task", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("tasks", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=True),
        sa.Column("failed", sa.Integer(), nullable=True),
        sa.Column("passed", sa.Integer(), nullable=True),
        sa.Column("pass_at_1", sa.Double(), nullable=True),
        sa.Column("pass_at_1_low", sa.Double(), nullable=True),
        sa.Column("pass_at_1_high", sa.Double(), nullable=True),
        sa.Column("pass_at_k", sa.Double(), nullable=True),
        sa.Column("pass_at_k_low", sa.Double(), nullable=True),
        sa.Column("pass_at_k_high", sa.Double(), nullable=True),
        sa.Column("reward_mean", sa.Double(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "source IN ('base', 'weights', 'adapter', 'model_dir')", name=op.f("ck_evals_source")
        ),
        sa.CheckConstraint("samples_per_task > 0", name=op.f("ck_evals_samples_per_task_positive")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_evals_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["source_run_id"], ["runs.id"], name=op.f("fk_evals_source_run_id_runs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_evals")),
    )
    op.create_index(op.f("ix_evals_source_run_id"), "evals", ["source_run_id"])
    op.execute("DROP VIEW IF EXISTS trajectories")
    op.execute(
        TRAJECTORIES.format(
            run_kind=",\n    ru.kind AS run_kind", runs_join="\nJOIN runs ru ON ru.id = r.run_id"
        )
    )


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS trajectories")
    op.execute(TRAJECTORIES.format(run_kind="", runs_join=""))
    op.drop_index(op.f("ix_evals_source_run_id"), table_name="evals")
    op.drop_table("evals")
    op.drop_column("rollouts", "sampling_seed")
    op.drop_constraint(op.f("ck_runs_kind"), "runs", type_="check")
    op.drop_column("runs", "kind")
