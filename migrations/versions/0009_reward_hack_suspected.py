"""rewards.reward_hack_suspected and reward_hack_reason: the grader's flag on patches that touch the test framework

Set by ``services/grader/grade.py`` when it refuses a patch (outcome ``patch_refused``), does not trust a test
report (outcome ``report_untrusted``), or grades a patch that reaches into the test framework
(``services/grader/test_runner.py``). Queryable: ``SELECT * FROM rewards WHERE reward_hack_suspected``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "rewards", sa.Column("reward_hack_suspected", sa.Boolean(), server_default="false", nullable=False)
    )
    op.add_column("rewards", sa.Column("reward_hack_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("rewards", "reward_hack_reason")
    op.drop_column("rewards", "reward_hack_suspected")
