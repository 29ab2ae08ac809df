"""The recorded trajectory, defined once: token segments, their object keys, and chains of calls.

Written by the gateway's capture (``services/gateway/capture.py``: one ``Segment`` per model call), read by the
learner (``services/learner/loader.py``: ``fetch_segments`` + ``chains_from_rows``), the API's rollout view, the
gateway and learner benchmarks and the tests. Nothing else builds a key, writes an ``.npz`` or parses one.

Segment (one per call): ``tokens/<run>/<rollout>/<chain>/<position>.npz`` holds
- ``suffix_ids`` (int32): the prompt tokens new to the chain — the whole prompt at position 0; later, the closing
  token of a reply cut by ``max_tokens`` (if any) and the new turn (tool results, user text, template glue). Loss
  mask 0. The ``calls`` row counts them in ``suffix_tokens``; a chain row sums them in ``chains.suffix_tokens``.
- ``sampled_ids`` (int32) and ``sampled_logprobs`` (float32, <= 0): what the policy sampled. Loss mask 1.
- ``policy_version`` (int64 scalar): the version of the weights that sampled ``sampled_ids``.
- ``source`` (a string scalar, written only when not ``policy``): who produced ``sampled_ids`` — ``policy`` (the run's
  policy sampled them) or ``teacher`` (a teacher upstream answered the call: ``shared/run_config.py:
  TeacherConfig``). A teacher's reply is recorded as the student would have produced it: the ids of its text in the
  student's chat format, in the same layout (suffix ids with loss mask 0, sampled ids with loss mask 1), so
  supervised fine-tuning reads teacher and policy segments alike. A teacher's ``sampled_logprobs`` are NaN, one
  per sampled id: no behaviour policy sampled them, so there is no logprob to record, and NaN makes any use of one
  visible. ``policy_version`` of a teacher segment is the version the run's policy was at (what the student would
  have been), never a version that sampled it. The ``calls`` row carries the same ``source`` (SQL selects teacher
  data by it), and GRPO refuses teacher segments (``services/learner/loader.py``): an importance ratio needs the
  behaviour logprob.
Segments are written and read through one ``SegmentCodec`` (``FAST_NPZ``, the hand-built zip of ``npz_bytes``; the
plain ``np.savez`` path, ``PLAIN_NPZ``, beside it writes the same format and reads the same way).
A chain's token sequence is the concatenation of ``suffix_ids + sampled_ids`` over its calls in position order
(the gateway's splice guarantees each call's prompt is the previous prompt + the previous sampled ids + the new
suffix), so call ``k``'s full prompt (``calls.prompt_tokens`` long) is everything before its sampled ids.

Policy version of prompt tokens (the one rule): a suffix token carries the version of the call whose prompt it
entered — the same as that call's sampled tokens. (The learner's staleness check uses the oldest call version of
a group; no token is "unversioned".)

Raw request and response bodies: ``raw/<run>/<rollout>/<call>.json.zst``. The rollout's other objects have their
key functions here too: its patch (``patches/<run>/<rollout>.diff``) and its logs (``logs/<run>/<rollout>/...``).

Reading is checked: ``Chain.from_rows`` refuses (``InconsistentTrajectory``, naming the call) a missing or
unreadable segment, arrays that disagree with their ``calls`` row (lengths, version, source), positions that are
not 0..n-1, a prompt length that does not add up, a policy segment's logprobs that are not finite and <= 0, a
teacher segment's that are not all NaN, or a version newer than the reader allows.
"""

from __future__ import annotations

import functools
import io
import struct
import zlib
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from shared.objectstore import ObjectNotFound, ObjectStore

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]

TOKENS_PREFIX = "tokens/"
RAW_PREFIX = "raw/"
PATCHES_PREFIX = "patches/"
LOGS_PREFIX = "logs/"
FETCH_CONCURRENCY = 16

FinishReason = Literal["stop", "length", "tool_calls"]
"""Why a recorded call's sampling ended (``calls.finish_reason``): ``stop`` (an end-of-turn or stop token),
``length`` (cut by the request's token limit, no tool call parsed), ``tool_calls`` (it called tools)."""
CUT_BY_LENGTH: FinishReason = "length"

CallSource = Literal["policy", "teacher"]
"""Who produced a recorded call's sampled ids (``calls.source``, a segment's ``source``; the module docstring)."""
CALL_SOURCES: tuple[CallSource, ...] = ("policy", "teacher")
POLICY: CallSource = "policy"
TEACHER: CallSource = "teacher"


# --- object keys -------------------------------------------------------------------------------------------------


def rollout_tokens_prefix(run_id: str, rollout_id: str) -> str:
    return f"{TOKENS_PREFIX}{run_id}/{rollout_id}/"


def chain_tokens_prefix(run_id: str, rollout_id: str, chain_id: int | str) -> str:
    return f"{rollout_tokens_prefix(run_id, rollout_id)}{chain_id}/"


def tokens_key(run_id: str, rollout_id: str, chain_id: int | str, position: int) -> str:
    return f"{chain_tokens_prefix(run_id, rollout_id, chain_id)}{position}.npz"


def rollout_raw_prefix(run_id: str, rollout_id: str) -> str:
    return f"{RAW_PREFIX}{run_id}/{rollout_id}/"


def raw_key(run_id: str, rollout_id: str, call_id: int) -> str:
    return f"{rollout_raw_prefix(run_id, rollout_id)}{call_id}.json.zst"


# A rollout's other objects: its patch (runner), its logs (runner per attempt, grader), listed by the API.


def patch_key(run_id: str, rollout_id: str) -> str:
    return f"{PATCHES_PREFIX}{run_id}/{rollout_id}.diff"


def rollout_logs_prefix(run_id: str, rollout_id: str) -> str:
    return f"{LOGS_PREFIX}{run_id}/{rollout_id}/"


def attempt_logs_prefix(run_id: str, rollout_id: str, attempt: int) -> str:
    """Folder of one runner attempt's logs (``harness.stdout``, ``harness.stderr``, ``report.json``)."""
    return f"{rollout_logs_prefix(run_id, rollout_id)}attempt-{attempt}"


def grading_log_key(run_id: str, rollout_id: str) -> str:
    return f"{rollout_logs_prefix(run_id, rollout_id)}grading.log"


# --- one call's tokens -------------------------------------------------------------------------------------------


class InconsistentTrajectory(ValueError):
    """Token arrays that cannot be used as recorded (missing, lengths, masks, versions); the message says which."""


SEGMENT_FIELDS = ("suffix_ids", "sampled_ids", "sampled_logprobs", "policy_version")
_LEGACY_FIELD_NAMES = {"prompt_ids": "suffix_ids"}  # segments written before the rename


_DOS_DATE = 0x21  # 1980-01-01: members carry no time (np.savez stamps the time of writing)


@functools.lru_cache(maxsize=4096)
def _npy_header(descr: str, shape: tuple[int, ...]) -> bytes:
    """The ``.npy`` header numpy writes for a C-ordered array of ``descr`` and ``shape`` (numpy's own writer;
    building it is most of ``write_array``'s cost, and a gateway's segments repeat few shapes)."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False, "shape": shape})
    return out.getvalue()


def _npy_member(value: np.ndarray) -> bytes:
    if value.dtype.hasobject:
        raise ValueError("object arrays are not stored")
    array = value if value.flags.c_contiguous else value.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
    return _npy_header(np.lib.format.dtype_to_descr(array.dtype), array.shape) + array.tobytes()


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """What ``np.savez`` writes for ``arrays`` — the same ``.npy`` members, stored uncompressed in a zip that
    ``np.load`` reads — without ``zipfile``'s per-member machinery and with each member's header built once per
    dtype and shape: a call's segment in ~12 µs instead of ~57 (the gateway writes one per model call)."""
    out = bytearray()
    central = bytearray()
    for name, value in arrays.items():
        data = _npy_member(np.asanyarray(value))
        filename = f"{name}.npy".encode()
        crc, offset = zlib.crc32(data), len(out)
        out += struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, _DOS_DATE, crc, len(data), len(data), len(filename), 0
        )
        out += filename + data
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50, 20, 20, 0, 0, 0, _DOS_DATE, crc, len(data), len(data), len(filename), 0, 0, 0, 0, 0, offset,
        )  # fmt: skip
        central += filename
    directory_at = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(arrays), len(arrays), len(central), directory_at, 0)
    return bytes(out)


class SegmentCodec(Protocol):
    """The segment codec seam: how a segment's arrays become bytes and back. Both implementations write an ``.npz``
    the other reads, so a reader never needs to know which one wrote a segment."""

    def encode(self, arrays: dict[str, np.ndarray]) -> bytes: ...

    def decode(self, data: bytes) -> dict[str, np.ndarray]: ...


class NumpyNpz:
    """The plain path: ``np.savez`` and ``np.load``."""

    def encode(self, arrays: dict[str, np.ndarray]) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub matches **arrays to allow_pickle
        return buffer.getvalue()

    def decode(self, data: bytes) -> dict[str, np.ndarray]:
        with np.load(io.BytesIO(data)) as npz:
            return {name: npz[name] for name in npz.files}


class FastNpz(NumpyNpz):
    """The fast path, the one segments are written with (the gateway writes one per model call): ``npz_bytes``
    writes what ``np.savez`` does (no time stamps) in ~12 µs instead of ~57; reading is the plain path's."""

    def encode(self, arrays: dict[str, np.ndarray]) -> bytes:
        return npz_bytes(arrays)


PLAIN_NPZ: SegmentCodec = NumpyNpz()
FAST_NPZ: SegmentCodec = FastNpz()


@dataclass(frozen=True)
class Segment:
    """One model call's tokens: the new prompt suffix and what the policy sampled after it (module docstring)."""

    suffix_ids: IntArray
    sampled_ids: IntArray
    sampled_logprobs: FloatArray
    policy_version: int
    source: CallSource = POLICY

    @classmethod
    def of(
        cls,
        suffix_ids: Any,
        sampled_ids: Any,
        sampled_logprobs: Any,
        policy_version: int,
        source: CallSource = POLICY,
    ) -> Segment:
        """A segment from any sequences (lists, arrays), in the canonical dtypes."""
        return cls(
            np.asarray(suffix_ids, np.int64),
            np.asarray(sampled_ids, np.int64),
            np.asarray(sampled_logprobs, np.float32),
            int(policy_version),
            source,
        )

    @classmethod
    def of_teacher(cls, suffix_ids: Any, sampled_ids: Any, policy_version: int) -> Segment:
        """A teacher's segment: its reply's ids, a NaN logprob for each (the module docstring)."""
        sampled = np.asarray(sampled_ids, np.int64)
        return cls.of(suffix_ids, sampled, np.full(len(sampled), np.nan, np.float32), policy_version, TEACHER)

    def check(self) -> None:
        if self.suffix_ids.ndim != 1 or self.sampled_ids.ndim != 1 or self.sampled_logprobs.ndim != 1:
            raise InconsistentTrajectory("token arrays must be one-dimensional")
        if len(self.sampled_ids) != len(self.sampled_logprobs):
            raise InconsistentTrajectory(
                f"{len(self.sampled_ids)} sampled ids but {len(self.sampled_logprobs)} sampled logprobs"
            )
        if self.source == TEACHER:
            if not np.all(np.isnan(self.sampled_logprobs)):
                raise InconsistentTrajectory(
                    "a teacher's sampled ids carry no logprobs (NaN), but some are numbers"
                )
        elif self.source != POLICY:
            raise InconsistentTrajectory(
                f"unknown segment source {self.source!r}; known: {', '.join(CALL_SOURCES)}"
            )
        elif not np.all(np.isfinite(self.sampled_logprobs)) or np.any(self.sampled_logprobs > 1e-4):
            raise InconsistentTrajectory("sampled logprobs must be finite and <= 0")
        if self.policy_version < 0:
            raise InconsistentTrajectory(f"negative policy version {self.policy_version}")

    def to_bytes(self, codec: SegmentCodec = FAST_NPZ) -> bytes:
        arrays: dict[str, np.ndarray] = {
            "suffix_ids": self.suffix_ids.astype(np.int32),
            "sampled_ids": self.sampled_ids.astype(np.int32),
            "sampled_logprobs": self.sampled_logprobs.astype(np.float32),
            "policy_version": np.asarray(self.policy_version, np.int64),
        }
        if self.source != POLICY:  # absent = policy: a policy segment's bytes are what they always were
            arrays["source"] = np.asarray(self.source)
        return codec.encode(arrays)

    @classmethod
    def from_bytes(cls, data: bytes, codec: SegmentCodec = FAST_NPZ) -> Segment:
        try:
            arrays = {
                _LEGACY_FIELD_NAMES.get(name, name): array for name, array in codec.decode(data).items()
            }
        except Exception as exc:  # noqa: BLE001 - a truncated or foreign blob: numpy raises several types
            raise InconsistentTrajectory(f"not a token segment: {exc}") from None
        missing = [name for name in SEGMENT_FIELDS if name not in arrays]
        if missing:
            raise InconsistentTrajectory(f"the segment lacks {', '.join(missing)}")
        source = str(arrays["source"]) if "source" in arrays else POLICY  # segments written before sources
        if source not in CALL_SOURCES:
            raise InconsistentTrajectory(
                f"unknown segment source {source!r}; known: {', '.join(CALL_SOURCES)}"
            )
        return cls.of(
            arrays["suffix_ids"],
            arrays["sampled_ids"],
            arrays["sampled_logprobs"],
            int(arrays["policy_version"]),
            source,  # type: ignore[arg-type]  # checked against CALL_SOURCES above
        )


def put_segment(store: ObjectStore, key: str, segment: Segment) -> None:
    store.put_bytes(key, segment.to_bytes())


def load_segment(store: ObjectStore, key: str) -> Segment:
    """The segment at ``key`` (``ObjectNotFound`` if absent, ``InconsistentTrajectory`` if unreadable)."""
    return Segment.from_bytes(store.get_bytes(key))


def fetch_segments(store: ObjectStore, keys: Iterable[str]) -> dict[str, Segment | Exception]:
    """Every key's segment, read concurrently (against S3 each GET is a round trip); a key that fails maps to its
    exception, and the caller decides what a missing or unreadable segment means."""

    def one(key: str) -> Segment | Exception:
        try:
            return load_segment(store, key)
        except Exception as exc:  # noqa: BLE001 - returned to the caller, which names the call it belongs to
            return exc

    unique = list(dict.fromkeys(keys))
    if len(unique) <= 1:
        return {key: one(key) for key in unique}
    with ThreadPoolExecutor(min(FETCH_CONCURRENCY, len(unique)), thread_name_prefix="segments") as pool:
        return dict(zip(unique, pool.map(one, unique), strict=True))


# --- chains ------------------------------------------------------------------------------------------------------


class CallRow(Protocol):
    """What a chain needs of a ``calls`` row (``shared.models.Call``, or ``CallFacts``)."""

    @property
    def id(self) -> int: ...
    @property
    def chain_id(self) -> int | str: ...
    @property
    def position(self) -> int: ...
    @property
    def tokens_key(self) -> str: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def suffix_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def policy_version(self) -> int: ...
    @property
    def source(self) -> str: ...


@dataclass(frozen=True)
class CallFacts:
    """The facts a ``calls`` row records about its segment: what ``Chain.call_facts`` gives code that records a
    chain without the gateway (benchmarks, test fixtures) to store next to the segments."""

    id: int
    chain_id: int | str
    position: int
    tokens_key: str
    prompt_tokens: int
    suffix_tokens: int
    completion_tokens: int
    policy_version: int
    source: CallSource = POLICY


def _segment_of_row(
    fetched: Mapping[str, Segment | Exception], call: CallRow, prompt_so_far: int, newest_version: int | None
) -> Segment:
    segment = fetched.get(call.tokens_key)
    if segment is None or isinstance(segment, ObjectNotFound):
        raise InconsistentTrajectory(f"token arrays {call.tokens_key} of call {call.id} are missing")
    if isinstance(segment, Exception):
        raise InconsistentTrajectory(f"token arrays {call.tokens_key} are unreadable: {segment}")
    if len(segment.suffix_ids) != call.suffix_tokens or len(segment.sampled_ids) != call.completion_tokens:
        raise InconsistentTrajectory(
            f"call {call.id}: arrays hold {len(segment.suffix_ids)} suffix / {len(segment.sampled_ids)} sampled "
            f"ids, the row says {call.suffix_tokens} / {call.completion_tokens}"
        )
    if call.prompt_tokens != prompt_so_far + len(segment.suffix_ids):
        raise InconsistentTrajectory(
            f"call {call.id}: prompt of {call.prompt_tokens} tokens, but the chain so far plus its suffix is "
            f"{prompt_so_far + len(segment.suffix_ids)}"
        )
    if segment.policy_version != call.policy_version:
        raise InconsistentTrajectory(
            f"call {call.id}: arrays say policy version {segment.policy_version}, the row says "
            f"{call.policy_version}"
        )
    if segment.source != call.source:
        raise InconsistentTrajectory(
            f"call {call.id}: arrays say source {segment.source}, the row says {call.source}"
        )
    if newest_version is not None and segment.policy_version > newest_version:
        raise InconsistentTrajectory(
            f"call {call.id}: policy version {segment.policy_version} is newer than {newest_version}"
        )
    segment.check()
    return segment


@dataclass(frozen=True)
class Chain:
    """Calls that extend each other (one recorded conversation branch): their segments in position order."""

    chain_id: str
    rollout_id: str
    group_id: str
    calls: tuple[Segment, ...]

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[CallRow],
        segments: Mapping[str, Segment | Exception],
        *,
        rollout_id: str,
        group_id: str = "",
        newest_version: int | None = None,
        vocab_size: int | None = None,
    ) -> Chain:
        """The chain of one chain's ``calls`` rows, from their fetched segments, checked (module docstring)."""
        ordered = sorted(rows, key=lambda row: row.position)
        if not ordered:
            raise InconsistentTrajectory("a chain needs at least one call")
        chain_ids = {row.chain_id for row in ordered}
        if len(chain_ids) != 1:
            raise InconsistentTrajectory(f"calls of several chains given as one: {sorted(chain_ids)}")
        positions = [row.position for row in ordered]
        if positions != list(range(len(ordered))):
            raise InconsistentTrajectory(
                f"chain {ordered[0].chain_id}: call positions {positions} are not 0..n-1"
            )
        calls = []
        length = 0
        for row in ordered:
            segment = _segment_of_row(segments, row, length, newest_version)
            calls.append(segment)
            length += len(segment.suffix_ids) + len(segment.sampled_ids)
        chain = cls(str(ordered[0].chain_id), rollout_id, group_id, tuple(calls))
        chain.check(vocab_size)
        return chain

    def _per_token(self, on_suffix, on_sampled, dtype: type) -> np.ndarray:  # type: ignore[no-untyped-def]
        """Concatenate, call by call, ``on_suffix(call)`` for its suffix and ``on_sampled(call)`` for its sample."""
        parts: list[np.ndarray] = [
            np.asarray(f(c), dtype) for c in self.calls for f in (on_suffix, on_sampled)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    @cached_property
    def ids(self) -> IntArray:
        return self._per_token(lambda c: c.suffix_ids, lambda c: c.sampled_ids, np.int64)

    @cached_property
    def loss_mask(self) -> npt.NDArray[np.bool_]:
        return self._per_token(
            lambda c: np.zeros(len(c.suffix_ids)), lambda c: np.ones(len(c.sampled_ids)), np.bool_
        )

    @cached_property
    def behavior_logprobs(self) -> FloatArray:
        """Per token; 0.0 where the loss mask is 0 (never read there), NaN on a teacher's ids (``teacher_mask``)."""
        return self._per_token(
            lambda c: np.zeros(len(c.suffix_ids)), lambda c: c.sampled_logprobs, np.float32
        )

    @cached_property
    def policy_versions(self) -> IntArray:
        """Per token, by the module's rule: a suffix token carries the version of the call it entered."""
        return self._per_token(
            lambda c: np.full(len(c.suffix_ids), c.policy_version),
            lambda c: np.full(len(c.sampled_ids), c.policy_version),
            np.int64,
        )

    @cached_property
    def teacher_mask(self) -> npt.NDArray[np.bool_]:
        """Per token: True on ids a teacher produced (``source = teacher``; their behaviour logprobs are NaN)."""
        return self._per_token(
            lambda c: np.zeros(len(c.suffix_ids)),
            lambda c: np.full(len(c.sampled_ids), c.source == TEACHER),
            np.bool_,
        )

    @property
    def teacher_calls(self) -> int:
        """Calls of the chain a teacher answered."""
        return sum(c.source == TEACHER for c in self.calls)

    @property
    def n_sampled(self) -> int:
        return sum(len(c.sampled_ids) for c in self.calls)

    def prompt_length(self, position: int) -> int:
        """How many ids of ``ids`` form the prompt of the call at ``position``."""
        if not 0 <= position < len(self.calls):
            raise InconsistentTrajectory(f"chain {self.chain_id} has no call at position {position}")
        before = sum(len(c.suffix_ids) + len(c.sampled_ids) for c in self.calls[:position])
        return before + len(self.calls[position].suffix_ids)

    def call_facts(self, run_id: str, first_call_id: int = 0) -> list[CallFacts]:
        """Each call's row facts, its segment stored at ``tokens_key(run_id, rollout_id, chain_id, position)``."""
        facts = []
        for position, call in enumerate(self.calls):
            facts.append(
                CallFacts(
                    id=first_call_id + position,
                    chain_id=self.chain_id,
                    position=position,
                    tokens_key=tokens_key(run_id, self.rollout_id, self.chain_id, position),
                    prompt_tokens=self.prompt_length(position),
                    suffix_tokens=len(call.suffix_ids),
                    completion_tokens=len(call.sampled_ids),
                    policy_version=call.policy_version,
                    source=call.source,
                )
            )
        return facts

    def check(self, vocab_size: int | None = None) -> None:
        if not self.calls:
            raise InconsistentTrajectory(f"chain {self.chain_id} has no calls")
        for call in self.calls:
            call.check()
        if len(self.calls[0].suffix_ids) == 0:
            raise InconsistentTrajectory(f"chain {self.chain_id} starts without a prompt")
        if vocab_size is not None and len(self.ids) and (self.ids.min() < 0 or self.ids.max() >= vocab_size):
            raise InconsistentTrajectory(f"chain {self.chain_id} has token ids outside the vocabulary")


Row = TypeVar("Row", bound=CallRow)


def rows_by_chain(rows: Iterable[Row]) -> dict[int | str, list[Row]]:
    """A rollout's ``calls`` rows grouped by chain (chains in id order, calls in position order)."""
    by_chain: dict[int | str, list[Row]] = {}
    for row in sorted(rows, key=lambda r: (r.chain_id, r.position)):
        by_chain.setdefault(row.chain_id, []).append(row)
    return by_chain


def chains_from_rows(
    rows: Iterable[CallRow],
    segments: Mapping[str, Segment | Exception],
    *,
    rollout_id: str,
    group_id: str = "",
    newest_version: int | None = None,
    vocab_size: int | None = None,
) -> tuple[Chain, ...]:
    """Every chain of a rollout's ``calls`` rows, in chain id order (``Chain.from_rows`` each)."""
    return tuple(
        Chain.from_rows(
            chain_rows,
            segments,
            rollout_id=rollout_id,
            group_id=group_id,
            newest_version=newest_version,
            vocab_size=vocab_size,
        )
        for chain_rows in rows_by_chain(rows).values()
    )


def load_chain(
    store: ObjectStore, rows: Iterable[CallRow], *, rollout_id: str = "", group_id: str = ""
) -> Chain:
    """One chain's ``calls`` rows with their segments, fetched and checked (``fetch_segments`` + ``from_rows``)."""
    rows = list(rows)
    return Chain.from_rows(
        rows,
        fetch_segments(store, (row.tokens_key for row in rows)),
        rollout_id=rollout_id,
        group_id=group_id,
    )
