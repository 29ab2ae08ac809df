"""record_calls(batch, running): the gateway's write-behind batch in one statement (one round trip)

The fence, order and write rules are ``services/gateway/capture.py``'s (its module docstring); this function is
where they run, so a batch costs the gateway one round trip instead of one per statement. A batch is a JSON array
of ``{"rollout_key": ..., "call": <calls row>, "chain": <chains row, for a call that starts a chain>}``; the rows
are keyed by column name (``jsonb_populate_record``), so a column added later needs no change here, only a value in
the rows the gateway sends (or a nullable column). Returns one outcome per element, in order: ``written``,
``deferred`` or ``stale``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-16 10:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

RECORD_CALLS = """
CREATE FUNCTION record_calls(batch jsonb, running text) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    item jsonb;
    call_row jsonb;
    chain_row jsonb;
    fence record;
    outcomes text[] := '{}';
BEGIN
    -- Fence: the batch's rollouts are held FOR SHARE until the statement's transaction ends, so the runner's status
    -- change (the flush barrier's end) waits for rows written under the old status, and none lands after it.
    PERFORM 1 FROM rollouts
     WHERE id IN (SELECT e->'call'->>'rollout_id' FROM jsonb_array_elements(batch) e)
     ORDER BY id
       FOR SHARE;
    FOR item IN SELECT value FROM jsonb_array_elements(batch) LOOP
        call_row := item->'call';
        chain_row := item->'chain';
        SELECT rollout_key, status INTO fence FROM rollouts WHERE id = call_row->>'rollout_id';
        IF NOT FOUND OR fence.rollout_key IS DISTINCT FROM item->>'rollout_key' OR fence.status <> running THEN
            outcomes := outcomes || 'stale'::text;
            CONTINUE;
        END IF;
        IF EXISTS (SELECT 1 FROM calls WHERE id = (call_row->>'id')::bigint) THEN
            outcomes := outcomes || 'written'::text;  -- a retried batch whose commit was not acknowledged
            CONTINUE;
        END IF;
        -- Order: the call's chain (or the new chain's parent) and its parent call exist, or came earlier in this
        -- batch (written by this loop already); otherwise another process has not written them yet.
        IF (CASE WHEN chain_row IS NULL
                 THEN NOT EXISTS (SELECT 1 FROM chains WHERE id = (call_row->>'chain_id')::bigint)
                 ELSE chain_row->>'parent_chain_id' IS NOT NULL
                      AND NOT EXISTS (SELECT 1 FROM chains WHERE id = (chain_row->>'parent_chain_id')::bigint)
            END)
           OR (call_row->>'parent_call_id' IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM calls WHERE id = (call_row->>'parent_call_id')::bigint))
        THEN
            outcomes := outcomes || 'deferred'::text;
            CONTINUE;
        END IF;
        IF chain_row IS NOT NULL THEN
            INSERT INTO chains
            SELECT * FROM jsonb_populate_record(
                NULL::chains,
                jsonb_build_object('created_at', now(), 'n_calls', 0, 'suffix_tokens', 0, 'sampled_tokens', 0)
                    || chain_row)
            ON CONFLICT (id) DO NOTHING;
        END IF;
        INSERT INTO calls
        SELECT * FROM jsonb_populate_record(NULL::calls, jsonb_build_object('created_at', now()) || call_row);
        UPDATE chains
           SET n_calls = n_calls + 1,
               suffix_tokens = suffix_tokens + (call_row->>'suffix_tokens')::int,
               sampled_tokens = sampled_tokens + (call_row->>'completion_tokens')::int
         WHERE id = (call_row->>'chain_id')::bigint;
        outcomes := outcomes || 'written'::text;
    END LOOP;
    RETURN outcomes;
END
$$
"""


def upgrade() -> None:
    op.execute(RECORD_CALLS)


def downgrade() -> None:
    op.execute("DROP FUNCTION record_calls(jsonb, text)")
