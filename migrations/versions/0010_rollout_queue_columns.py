"""rollouts.enqueued_at, retry_at, waiting_for: the rollout's queue state as columns, out of rollouts.meta

The scheduler's outbox (``services/api/scheduler.py``) kept ``enqueued_at`` in ``rollouts.meta`` and the runner
``retry_at``/``waiting_for`` beside it; the outbox query read them with ``meta->>``. They are columns now
(``shared/rollout_records.py: QueueState``); what stays in ``meta`` is ``RolloutMeta``. The upgrade copies each
row's keys into the columns and removes them from ``meta``; the downgrade writes them back (ISO 8601, as the
services wrote them) and drops the columns.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07 01:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

QUEUE_KEYS = "ARRAY['enqueued_at', 'retry_at', 'waiting_for']"


def upgrade() -> None:
    op.add_column("rollouts", sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("rollouts", sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("rollouts", sa.Column("waiting_for", sa.Text(), nullable=True))
    op.execute(
        f"""
        UPDATE rollouts SET
            enqueued_at = (meta->>'enqueued_at')::timestamptz,
            retry_at = (meta->>'retry_at')::timestamptz,
            waiting_for = meta->>'waiting_for',
            meta = meta - {QUEUE_KEYS}::text[]
        WHERE meta ?| {QUEUE_KEYS}
        """
    )


def downgrade() -> None:
    op.execute(
        """
        UPDATE rollouts SET meta = meta || jsonb_strip_nulls(jsonb_build_object(
            'enqueued_at', to_char(enqueued_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
            'retry_at', to_char(retry_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
            'waiting_for', waiting_for))
        WHERE enqueued_at IS NOT NULL OR retry_at IS NOT NULL OR waiting_for IS NOT NULL
        """
    )
    op.drop_column("rollouts", "waiting_for")
    op.drop_column("rollouts", "retry_at")
    op.drop_column("rollouts", "enqueued_at")
