"""Chain tips in Redis: loaded per call, advanced by compare-and-set, shared by every gateway process.

Layout and invariants shared with the runner: ``shared/capture_state.py``. Per chain the rollout's hash holds

- ``t:<chain>``: the tip (``ChainTip`` without its ids) as compact JSON: position, call id, prompt and chain lengths,
  end-of-turn count, whether the last reply closed its turn, and the digests of the call's messages and our reply
  (role letter + 16-byte raw + 16-byte meaning digest each, base64) — a few KB however long the prompt;
- ``v:<chain>``: the tip's version (its position), what the commit script compares;
- ``s:<chain>``: the commit order (newest tip first when planning);
- ``rt:<chain>``: where the next from-scratch render resumes (``RetemplateCut``) for the tip at some position,
  written when the drift check finishes (often after the reply).

The ids themselves are one append-only string per chain (int32). A process keeps the ids it has seen in a bounded
local cache (with their JSON text, ``PromptIds``), so a chain served by one process never reads its ids back, and a
chain that moves between processes reads only the part it has not seen (``GETRANGE``).

``commit`` is one Lua script: refuse if the rollout is closed (the runner's flush barrier), compare the version
(and the ids length) with the tip the call was planned on, append the new ids, store the tip, bump the rollout's
commit counter and register the call as pending under this process's lease — all or nothing. A lost race raises
``TipMoved``; the caller records the call as a ``retry`` fork instead (splice rule 4).

``load`` is one Lua script too, and it is where a rollout's calls in flight are counted: a call is marked as being
served (``~<token>`` in the pending hash) only while fewer than ``max_in_flight`` marks of live gateway processes
(their lease key exists) are there, so the limit holds across every worker and host sharing the Redis, costs no
round trip of its own, and a crashed process's marks stop counting once its lease expires (``LEASE_TTL_S``). A
call whose client hung up keeps its mark until its generation ends (aiohttp does not cancel the handler), so
hanging up does not free a slot early.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
from array import array
from collections import OrderedDict
from dataclasses import dataclass

import redis.asyncio as aioredis

from services.gateway.splice import DIGEST_BYTES, ChainTip, MessageDigest, RetemplateCut
from shared import capture_state as cs
from shared.inference_client import PromptIds
from shared.pool import SERVED_KEY, Served

log = logging.getLogger("harnessrl.gateway")

ROLES = {"system": "s", "user": "u", "assistant": "a", "tool": "t"}
ROLE_NAMES = {v: k for k, v in ROLES.items()}
RECORD_BYTES = 1 + 2 * DIGEST_BYTES
BIG_ENDIAN = sys.byteorder == "big"  # ids are stored little-endian
CACHE_TOKENS = 8_000_000  # ~80 MB of ids + JSON text per process
CUTS_KEPT = 1024

COMMIT_SCRIPT = """
-- KEYS: rollout hash, chain ids, pending hash
-- ARGV: chain, expected version ('' = new chain), expected ids bytes, appended ids, tip JSON, call id, owner,
--       ttl seconds, new version, retemplate cut ('' = none), the call's serving mark ('' = none)
if redis.call('HEXISTS', KEYS[1], 'closed') == 1 then return -2 end
local vfield = 'v:' .. ARGV[1]
local current = redis.call('HGET', KEYS[1], vfield)
if ARGV[2] == '' then
  if current or redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
else
  if current ~= ARGV[2] then return -1 end
  if redis.call('STRLEN', KEYS[2]) ~= tonumber(ARGV[3]) then return -1 end
end
redis.call('APPEND', KEYS[2], ARGV[4])
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[1], vfield, ARGV[9], 't:' .. ARGV[1], ARGV[5], 's:' .. ARGV[1], seq)
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'rt:' .. ARGV[1], ARGV[10]) end
redis.call('HSET', KEYS[3], ARGV[6], ARGV[7])
if ARGV[11] ~= '' then redis.call('HDEL', KEYS[3], ARGV[11]) end
local ttl = tonumber(ARGV[8])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
return seq
"""


LOAD_SCRIPT = """
-- KEYS: rollout hash, pending hash, the pool's served hash; ARGV: serving mark ('' = none), owner, ttl seconds,
-- calls in flight a rollout may have (0 = no limit), the lease keys' prefix
-- The rollout's state and what the pool serves; a call of a known, open rollout is marked as being served by
-- this process, unless the rollout already has the limit's number of calls being served by live processes
-- (marks of a dead process do not count): then nothing is marked and the third value is that number.
local busy = 0
if ARGV[1] ~= '' and redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HEXISTS', KEYS[1], 'closed') == 0 then
  local limit = tonumber(ARGV[4])
  if limit > 0 then
    local entries = redis.call('HGETALL', KEYS[2])
    local live, alive = 0, {}
    for i = 1, #entries, 2 do
      if string.sub(entries[i], 1, 1) == '~' then
        local owner = entries[i + 1]
        if alive[owner] == nil then alive[owner] = redis.call('EXISTS', ARGV[5] .. owner) end
        live = live + alive[owner]
      end
    end
    if live >= limit then busy = live end
  end
  if busy == 0 then
    redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
    redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3]))
  end
end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[3]), busy}
"""


class TipMoved(Exception):
    """Another call advanced the tip first (or the chain's ids are gone): the call cannot extend it."""


class RolloutClosed(Exception):
    """The runner closed this rollout key (flush barrier): it takes no more calls."""


@dataclass(kw_only=True)
class RolloutState:
    """One read of a rollout's hash: binding, closed flag and chain tips (oldest commit first)."""

    binding: cs.Binding | None
    closed: bool
    tips: list[ChainTip]
    calls: int = 0
    """Calls the rollout committed so far (the hash's ``seq``): the index of the next call, for its seed."""
    served: Served | None = None
    """What the inference pool served when the call arrived (``shared/pool.py``; None: nobody manages it)."""
    busy: int = 0
    """> 0: the call was not marked as served because the rollout already had this many calls in flight (its
    limit, ``TipStore.max_in_flight``); the caller refuses it (429)."""


def encode_history(history: list[MessageDigest]) -> str:
    packed = b"".join(ROLES.get(d.role, "u").encode() + d.raw + d.meaning for d in history)
    return base64.b64encode(packed).decode()


def decode_history(text: str) -> list[MessageDigest]:
    packed = base64.b64decode(text)
    out = []
    for offset in range(0, len(packed), RECORD_BYTES):
        record = packed[offset : offset + RECORD_BYTES]
        out.append(
            MessageDigest(
                ROLE_NAMES[chr(record[0])], record[1 : 1 + DIGEST_BYTES], record[1 + DIGEST_BYTES :]
            )
        )
    return out


def encode_tip(tip: ChainTip) -> str:
    return json.dumps(
        {
            "p": tip.position,
            "c": tip.call_id,
            "n": tip.ids_len,
            "pl": tip.prompt_len,
            "e": tip.end_of_turns,
            "x": int(tip.closed),
            "tl": base64.b64encode(tip.tools).decode(),
            "h": encode_history(tip.history),
        },
        separators=(",", ":"),
    )


def decode_tip(chain_id: int, text: bytes | str, seq: int) -> ChainTip:
    data = json.loads(text)
    return ChainTip(
        chain_id=chain_id,
        position=int(data["p"]),
        call_id=int(data["c"]),
        history=decode_history(data["h"]),
        tools=base64.b64decode(data["tl"]),
        ids_len=int(data["n"]),
        prompt_len=int(data["pl"]),
        end_of_turns=int(data["e"]),
        closed=bool(data["x"]),
        seq=seq,
    )


def encode_cut(position: int, cut: RetemplateCut) -> str:
    """``position:chars:count:digest:own`` (own = 1: the ids are the chain's; 0: only this process has them)."""
    return f"{position}:{cut.chars}:{cut.count}:{cut.text.hex()}:{int(cut.ids is None)}"


def decode_cut(text: bytes | str) -> tuple[int, RetemplateCut, bool]:
    raw = text.decode() if isinstance(text, bytes) else text
    position, chars, count, digest, own = raw.split(":")
    return (
        int(position),
        RetemplateCut(chars=int(chars), text=bytes.fromhex(digest), count=int(count)),
        own == "1",
    )


class TipStore:
    """A process's view of every rollout's chain tips (Redis + a local cache of ids)."""

    def __init__(
        self,
        redis_client: aioredis.Redis,
        owner: str,
        cache_tokens: int = CACHE_TOKENS,
        max_in_flight: int = 0,
    ) -> None:
        self.redis = redis_client  # decode_responses=False: ids are bytes
        self.owner = owner
        self.max_in_flight = max_in_flight
        """Calls one rollout may have being served at once, by all gateway processes together (0: no limit)."""
        self.cache_tokens = cache_tokens
        self._cache: OrderedDict[tuple[str, int], PromptIds] = OrderedDict()
        self._cached_tokens = 0
        # Render ids of cuts that disagree with their chain (rare), by (rollout key, chain, position).
        self._cut_ids: OrderedDict[tuple[str, int, int], array[int]] = OrderedDict()
        self._commit = self.redis.register_script(COMMIT_SCRIPT)
        self._load = self.redis.register_script(LOAD_SCRIPT)
        self._lease: asyncio.Task[None] | None = None

    # --- lease: this process is alive ---------------------------------------------------------------------
    async def start_lease(self) -> None:
        await self._renew()
        self._lease = asyncio.create_task(self._keep_lease())

    async def _renew(self) -> None:
        await self.redis.set(cs.lease_key(self.owner), b"1", px=int(cs.LEASE_TTL_S * 1000))

    async def _keep_lease(self) -> None:
        while True:
            await asyncio.sleep(cs.LEASE_REFRESH_S)
            try:
                await self._renew()
            except Exception:  # Redis down for a moment: the next renewal may succeed before expiry
                log.warning("could not renew the gateway lease %s", self.owner, exc_info=True)

    async def stop_lease(self) -> None:
        """Drop the lease (a clean exit, after the writer has drained)."""
        if self._lease is not None:
            self._lease.cancel()
        await self.redis.delete(cs.lease_key(self.owner))

    # --- reading -------------------------------------------------------------------------------------------
    async def load(self, rollout_key: str, serving: str | None = None) -> RolloutState:
        """The rollout's state; with ``serving`` (a call's mark) the call is registered as being served here."""
        flat, pool, busy = await self._load(
            keys=[cs.state_key(rollout_key), cs.pending_key(rollout_key), SERVED_KEY],
            args=[serving or "", self.owner, cs.ROLLOUT_TTL_S, self.max_in_flight, cs.lease_key("")],
        )
        fields = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
        served = Served.from_hash({pool[i].decode(): pool[i + 1].decode() for i in range(0, len(pool), 2)})
        raw = fields.get(cs.FIELD_BIND)
        binding = cs.Binding.from_json(raw) if raw is not None else None
        tips = []
        for name, value in fields.items():
            chain_id = cs.chain_of_tip_field(name)
            if chain_id is None:
                continue
            tip = decode_tip(chain_id, value, int(fields.get(f"s:{chain_id}", b"0")))
            if (cut := fields.get(f"rt:{chain_id}")) is not None:
                position, retemplate, own = decode_cut(cut)
                if position == tip.position:
                    if own:
                        tip.retemplate = retemplate
                    elif (ids := self._cut_ids.get((rollout_key, chain_id, position))) is not None:
                        tip.retemplate = RetemplateCut(
                            chars=retemplate.chars, text=retemplate.text, count=retemplate.count, ids=ids
                        )
            tips.append(tip)
        tips.sort(key=lambda t: t.seq)
        return RolloutState(
            binding=binding,
            closed=cs.FIELD_CLOSED in fields,
            tips=tips,
            calls=int(fields.get(cs.FIELD_SEQ, b"0")),
            served=served,
            busy=int(busy),
        )

    async def ids(self, rollout_key: str, tip: ChainTip) -> PromptIds:
        """The chain's ids as of ``tip`` (prompt + sampled), from the local cache where this process has them."""
        cache_key = (rollout_key, tip.chain_id)
        cached = self._cache.get(cache_key)
        if cached is not None:
            self._cache.move_to_end(cache_key)
            if len(cached) == tip.ids_len:
                return cached
            if len(cached) > tip.ids_len:  # a stale read of the tip: the commit will fail its compare anyway
                return PromptIds.of(cached.ids[: tip.ids_len])
        start = len(cached) if cached is not None else 0
        data = await self.redis.getrange(
            cs.ids_key(rollout_key, tip.chain_id), start * 4, tip.ids_len * 4 - 1
        )
        if len(data) != (tip.ids_len - start) * 4:
            raise TipMoved(f"chain {tip.chain_id}'s ids are gone from Redis")
        piece = array("i")
        piece.frombytes(data)
        if BIG_ENDIAN:
            piece.byteswap()
        ids = cached + piece if cached is not None else PromptIds(piece)
        self._remember(cache_key, ids)
        return ids

    def _remember(self, cache_key: tuple[str, int], ids: PromptIds) -> None:
        old = self._cache.pop(cache_key, None)
        if old is not None:
            self._cached_tokens -= len(old)
        self._cache[cache_key] = ids
        self._cached_tokens += len(ids)
        while self._cached_tokens > self.cache_tokens and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cached_tokens -= len(dropped)

    # --- writing -------------------------------------------------------------------------------------------
    async def commit(
        self,
        rollout_key: str,
        tip: ChainTip,
        expected: ChainTip | None,
        ids: PromptIds,
        appended: int,
        serving: str | None = None,
    ) -> ChainTip:
        """Make ``tip`` the chain's tip if ``expected`` (None: a new chain) still is; register ``tip.call_id`` as
        pending under this process (in place of the call's ``serving`` mark). ``ids`` are the chain's whole ids,
        of which the last ``appended`` are new."""
        delta = ids.ids[len(ids) - appended :]
        if BIG_ENDIAN:
            delta = array("i", delta)
            delta.byteswap()
        result = await self._commit(
            keys=[
                cs.state_key(rollout_key),
                cs.ids_key(rollout_key, tip.chain_id),
                cs.pending_key(rollout_key),
            ],
            args=[
                str(tip.chain_id),
                "" if expected is None else str(expected.position),
                0 if expected is None else expected.ids_len * 4,
                delta.tobytes(),
                encode_tip(tip),
                str(tip.call_id),
                self.owner,
                cs.ROLLOUT_TTL_S,
                str(tip.position),
                "" if tip.retemplate is None else encode_cut(tip.position, tip.retemplate),
                serving or "",
            ],
        )
        if result == -2:
            raise RolloutClosed("this rollout is over; it takes no more model calls")
        if result == -1:
            raise TipMoved(f"chain {tip.chain_id} moved on since this call was planned")
        tip.seq = int(result)
        self._remember((rollout_key, tip.chain_id), ids)
        if tip.retemplate is not None:
            self._remember_cut(rollout_key, tip.chain_id, tip.position, tip.retemplate)
        return tip

    def _remember_cut(self, rollout_key: str, chain_id: int, position: int, cut: RetemplateCut) -> None:
        if cut.ids is not None:
            self._cut_ids[(rollout_key, chain_id, position)] = cut.ids
            while len(self._cut_ids) > CUTS_KEPT:
                self._cut_ids.popitem(last=False)

    async def set_retemplate(
        self, rollout_key: str, chain_id: int, position: int, cut: RetemplateCut
    ) -> None:
        """Where the next drift check of the chain can resume (used while its tip is at ``position``)."""
        self._remember_cut(rollout_key, chain_id, position, cut)
        await self.redis.hset(  # type: ignore[misc]
            cs.state_key(rollout_key), f"rt:{chain_id}", encode_cut(position, cut)
        )

    async def served(self, rollout_key: str, serving: str) -> None:
        """The call marked ``serving`` ended without a commit (an error, its client gone)."""
        await self.redis.hdel(cs.pending_key(rollout_key), serving)  # type: ignore[misc]

    async def bind(self, rollout_key: str, binding: cs.Binding) -> None:
        await self.redis.hset(cs.state_key(rollout_key), cs.FIELD_BIND, binding.to_json())  # type: ignore[misc]
