"""Selecting recorded rollouts as training data: an SFT run's ``--from-run RUN --min-reward R`` or ``--where SQL``.

Who calls it: the api when it creates an SFT run (``services/api/sft.py``), before anything is written; the
selection is stored on the run (``SFTConfig.rollout_ids``), so the learner never runs it again.

A ``where`` condition is a person's SQL over the ``trajectories`` view (the view people already query with
``harnessrl sql``; ``docs/sql-cookbook.md``). It runs the way ``harnessrl sql`` runs a query: on a connection of
its own opened read-only, inside a ``READ ONLY`` transaction that is always rolled back, with a statement timeout,
sent as one prepared statement (Postgres refuses ``...; DROP TABLE runs`` whole). What the condition's query
returns is then filtered by a fixed second query against ``rollouts``, so whatever the condition says, what comes
back is ids of real rollouts — a condition that closes the parenthesis and unions another table's ids selects no
rollout with them.
Only rollouts the harness is done with and that made at least one model call are data: anything else has no
tokens to learn, or may still record some.
"""

from __future__ import annotations

from typing import Any

import psycopg

from shared.db import libpq_url
from shared.statuses import ROLLOUT_CLOSED

STATEMENT_TIMEOUT_MS = 10_000
READ_ONLY_OPTIONS = f"-c default_transaction_read_only=on -c statement_timeout={STATEMENT_TIMEOUT_MS}"


class SelectionError(ValueError):
    """A selection that cannot be used: bad SQL, a timeout, or no rollout selected; ``field`` names the input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _matching(condition: str) -> str:
    return "SELECT t.rollout_id FROM trajectories t WHERE (" + condition + ")"


USABLE = (
    "SELECT r.id FROM rollouts r WHERE r.id = ANY(%(ids)s) AND r.status = ANY(%(closed)s) "
    "AND EXISTS (SELECT 1 FROM calls c WHERE c.rollout_id = r.id) ORDER BY r.created_at, r.id"
)


def _run(database_url: str, condition: str, params: dict[str, Any], field: str) -> list[str]:
    """Run the condition's query, then keep the real, closed rollouts with calls among what it returned (a fixed
    query: whatever the condition's text does to the first statement's shape, it cannot reach the second)."""
    try:
        with psycopg.connect(libpq_url(database_url), options=READ_ONLY_OPTIONS, connect_timeout=10) as conn:
            conn.read_only = True
            try:
                with conn.cursor() as cursor:
                    cursor.execute(_matching(condition).encode(), params or None, prepare=True)
                    matched = [str(row[0]) for row in cursor.fetchall()]
                    cursor.execute(USABLE, {"ids": matched, "closed": [str(s) for s in ROLLOUT_CLOSED]})
                    return [str(row[0]) for row in cursor.fetchall()]
            finally:
                conn.rollback()
    except psycopg.errors.QueryCanceled:
        raise SelectionError(field, f"the selection ran over {STATEMENT_TIMEOUT_MS // 1000}s") from None
    except (
        psycopg.ProgrammingError,
        psycopg.DataError,
        psycopg.InternalError,
        psycopg.NotSupportedError,
    ) as exc:
        # Bad SQL, a bad value, or an attempt to write (refused by the read-only transaction): the user's to fix.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SelectionError(field, f"the condition does not run over trajectories: {first}") from None


def check_text(field: str, value: str | None) -> None:
    """Refuse text Postgres cannot take (a NUL byte, a lone surrogate) before it reaches a query."""
    if value is None:
        return
    try:
        value.encode()
    except UnicodeEncodeError:
        raise SelectionError(field, "holds text that is not UTF-8 (a lone surrogate)") from None
    if "\x00" in value:
        raise SelectionError(field, "holds a NUL byte")


def select_rollouts(
    database_url: str,
    *,
    from_run: str | None = None,
    min_reward: float | None = None,
    where: str | None = None,
) -> list[str]:
    """The ids of the selected rollouts (closed, with calls), oldest first; ``SelectionError`` when the selection
    is malformed or selects nothing."""
    if (from_run is None) == (where is None):
        raise SelectionError("body", "select the data with either 'from_run' or 'where'")
    check_text("body.from_run", from_run)
    check_text("body.where", where)
    if where is not None:
        ids = _run(database_url, where, {}, "body.where")
        if not ids:
            raise SelectionError("body.where", f"no finished rollout with model calls matches {where!r}")
        return ids
    condition = "t.run_id = %(run)s"
    params: dict[str, Any] = {"run": from_run}
    if min_reward is not None:
        condition += " AND t.reward >= %(min_reward)s"
        params["min_reward"] = min_reward
    ids = _run(database_url, condition, params, "body.from_run")
    if not ids:
        reward = f" rewarded at least {min_reward:g}" if min_reward is not None else ""
        raise SelectionError(
            "body.from_run", f"run {from_run!r} has no finished rollout with model calls{reward}"
        )
    return ids
