"""runs.config becomes a RunConfig (shared/run_config.py)

Before this revision ``runs.config`` was a loose dict: the harness name lived only in ``runs.harness`` and the
shell command in ``harness_command`` (which the runner never read: it looked for ``harness_options.command``),
``groups_per_step`` was stored twice (top level and inside ``grpo``), limits were named ``rollout_timeout_s`` and
``max_calls``, and ``model``/``group_size`` were columns only. This revision rewrites every row into the shape of
``RunConfig`` (the transform is frozen here, not imported: later model changes must not change what this
revision did). Keys it does not know are left in place, so nothing is lost; ``read_run_config`` then names them.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-14 10:00:00
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

OLD_LIMIT_NAMES = {"rollout_timeout_s": "wall_clock_s", "max_calls": "calls"}


def upgrade_config(config: dict[str, Any], model: str, harness: str, group_size: int) -> dict[str, Any]:
    """One row's old config (and its columns) in the RunConfig shape of this revision."""
    old = dict(config or {})
    harness_section: dict[str, Any] = {"name": harness, **(old.pop("harness_options", None) or {})}
    command = old.pop("harness_command", None)
    if harness == "shell" and command:
        harness_section["command"] = command
    old.pop("harness_model", None)  # read by the runner, written by nothing
    grpo = dict(old.pop("grpo", None) or {})
    grpo_groups = grpo.pop("groups_per_step", None)
    task_ids = list(old.pop("task_ids", None) or [])
    limits = {
        OLD_LIMIT_NAMES.get(name, name): value
        for name, value in (old.pop("limits", None) or {}).items()
        if value is not None
    }
    new: dict[str, Any] = {
        "model": model,
        "harness": harness_section,
        "group_size": group_size,
        "steps": old.pop("steps", 1),
        "dataset": old.pop("dataset", ""),
        "task_ids": task_ids,
        "groups_per_step": old.pop("groups_per_step", None) or grpo_groups or max(len(task_ids), 1),
        "sampling": old.pop("sampling", None) or {},
        "limits": limits,
        "grpo": grpo,
    }
    return {**new, **old}  # reward_fn, model_dir, request_sha256 keep their names; unknown keys stay visible


def downgrade_config(config: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``upgrade_config`` (the columns already hold model, harness and group_size)."""
    new = dict(config or {})
    for column in ("model", "group_size"):
        new.pop(column, None)
    harness = dict(new.pop("harness", None) or {})
    name = harness.pop("name", None)
    if name == "shell" and "command" in harness:
        new["harness_command"] = harness.pop("command")
    if harness:
        new["harness_options"] = harness
    old_limit_names = {v: k for k, v in OLD_LIMIT_NAMES.items()}
    new["limits"] = {old_limit_names.get(k, k): v for k, v in (new.get("limits") or {}).items()}
    new["grpo"] = {**(new.get("grpo") or {}), "groups_per_step": new.get("groups_per_step", 1)}
    return new


def _rewrite(transform: Any) -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.text("SELECT id, config, model, harness, group_size FROM runs")).all()
    for row in rows:
        connection.execute(
            sa.text("UPDATE runs SET config = CAST(:config AS jsonb) WHERE id = :id"),
            {"id": row.id, "config": json.dumps(transform(row))},
        )


def upgrade() -> None:
    _rewrite(lambda row: upgrade_config(row.config, row.model, row.harness, row.group_size))


def downgrade() -> None:
    _rewrite(lambda row: downgrade_config(row.config))
