"""Identifiers: short, prefixed, random ids for rows people read (``run_…``, ``ro_…``) and rollout keys."""

from __future__ import annotations

import random
import secrets


def new_id(prefix: str) -> str:
    """``<prefix>_<20 hex chars>``: 80 random bits, readable in SQL and logs."""
    return f"{prefix}_{secrets.token_hex(10)}"


def new_rollout_key() -> str:
    """An unguessable per-rollout secret the harness presents to the gateway as its API key."""
    return "rk_" + secrets.token_urlsafe(24)


def unique_hex(chars: int) -> str:
    """``chars`` random hex digits for ids that must not repeat but need not be unguessable (completion and tool-call
    ids, a call's serving mark): from the process's own generator (seeded from the kernel, reseeded in a forked
    child), so a model call's few ids cost no system call each, as ``secrets`` does."""
    return f"{random.getrandbits(chars * 4):0{chars}x}"
