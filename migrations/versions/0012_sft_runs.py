"""runs.kind may be 'sft': supervised fine-tuning runs on recorded rollouts (``shared/statuses.py: RunKind``)

The CHECK on ``runs.kind`` is widened; nothing else changes (an SFT run's data and schedule live in its config's
``sft`` section, its steps and versions in ``steps`` and ``weights`` like a training run's). The downgrade
narrows it again and fails while an SFT run exists (delete those runs first).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07 12:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint(op.f("ck_runs_kind"), "runs", type_="check")
    op.create_check_constraint(op.f("ck_runs_kind"), "runs", "kind IN ('train', 'eval', 'sft')")


def downgrade() -> None:
    op.drop_constraint(op.f("ck_runs_kind"), "runs", type_="check")
    op.create_check_constraint(op.f("ck_runs_kind"), "runs", "kind IN ('train', 'eval')")
