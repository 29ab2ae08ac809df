"""calls.source: who produced a call's sampled ids, the run's policy or a teacher

A run or eval may name a teacher (``shared/run_config.py: TeacherConfig``): the gateway then records the teacher's
reply as the student would have produced it, with ``source = 'teacher'`` on the call and its token segment and no
logprobs (``shared/trajectory.py``). Every existing call was sampled by its run's policy, so the column's default
fills them. ``record_calls`` (migration 0008) inserts rows by column name, so it needs no change: the gateway sends
``source`` with every call.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("calls", sa.Column("source", sa.Text(), server_default="policy", nullable=False))
    op.create_check_constraint(op.f("ck_calls_source"), "calls", "source IN ('policy', 'teacher')")


def downgrade() -> None:
    op.drop_constraint(op.f("ck_calls_source"), "calls", type_="check")
    op.drop_column("calls", "source")
