"""rollouts.rollout_key is NULL until the runner's first claim issues one

The scheduler used to create a key with each rollout, which the claim then replaced before anything could use it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-14 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.alter_column("rollouts", "rollout_key", existing_type=sa.Text(), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE rollouts SET rollout_key = 'rk_unclaimed_' || id WHERE rollout_key IS NULL")
    op.alter_column("rollouts", "rollout_key", existing_type=sa.Text(), nullable=False)
