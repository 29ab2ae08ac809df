"""reward-hack watch: protected paths touched and git history commands, per rollout

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for name in ("touched_protected_paths", "git_history_commands"):
        op.add_column(
            "rollouts",
            sa.Column(name, postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False),
        )


def downgrade() -> None:
    op.drop_column("rollouts", "git_history_commands")
    op.drop_column("rollouts", "touched_protected_paths")
