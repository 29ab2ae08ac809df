"""chains.prompt_tokens is renamed suffix_tokens (what it counts: the suffix ids of the chain's segments)

``calls.prompt_tokens`` is a call's whole prompt, while the chain column summed only the ids each call added
(``shared/trajectory.py``: ``suffix_ids``); one name per thing. Token segments written before keep their npz field
``prompt_ids``, which ``Segment.from_bytes`` reads as ``suffix_ids``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-14 12:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.alter_column("chains", "prompt_tokens", new_column_name="suffix_tokens")


def downgrade() -> None:
    op.alter_column("chains", "suffix_tokens", new_column_name="prompt_tokens")
