"""Identifiers: short, prefixed, random ids for rows people read (``run_…``, ``ro_…``) and rollout keys."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    """``<prefix>_<20 hex chars>``: 80 random bits, readable in SQL and logs."""
    return f"{prefix}_{secrets.token_hex(10)}"


def new_rollout_key() -> str:
    """An unguessable per-rollout secret the harness presents to the gateway as its API key."""
    return "rk_" + secrets.token_urlsafe(24)
