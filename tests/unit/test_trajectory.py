"""The recorded-trajectory contract (``shared/trajectory.py``): segments round-trip, old segments still read,
chains rebuilt from rows are checked against them, keys have one shape, and concurrent fetching hands back each
segment or its error."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from shared.objectstore import LocalObjectStore, ObjectNotFound
from shared.trajectory import (
    FAST_NPZ,
    PLAIN_NPZ,
    Chain,
    InconsistentTrajectory,
    Segment,
    chains_from_rows,
    fetch_segments,
    load_segment,
    put_segment,
    raw_key,
    rollout_raw_prefix,
    rollout_tokens_prefix,
    tokens_key,
)

pytestmark = pytest.mark.unit


def _chain() -> Chain:
    first = Segment.of([1, 2, 3, 4], [5, 6], [-0.5, -0.25], 0)
    second = Segment.of([7, 8], [9], [-1.0], 1)
    return Chain("7", "ro_1", "grp_1", (first, second))


def test_segment_round_trips_and_reads_the_old_field_name() -> None:
    segment = Segment.of([1, 2], [3], [-0.5], 4)
    back = Segment.from_bytes(segment.to_bytes())
    assert (
        back.suffix_ids.tolist() == [1, 2] and back.sampled_ids.tolist() == [3] and back.policy_version == 4
    )
    buffer = io.BytesIO()  # a segment written before the rename: ``prompt_ids``
    np.savez(buffer, prompt_ids=np.asarray([1, 2], np.int32), sampled_ids=np.asarray([3], np.int32),
             sampled_logprobs=np.asarray([-0.5], np.float32), policy_version=np.asarray(4, np.int64))  # fmt: skip
    assert Segment.from_bytes(buffer.getvalue()).suffix_ids.tolist() == [1, 2]
    with pytest.raises(InconsistentTrajectory, match="not a token segment"):
        Segment.from_bytes(b"garbage")
    lacking = io.BytesIO()
    np.savez(lacking, suffix_ids=np.asarray([1]))
    with pytest.raises(InconsistentTrajectory, match="lacks sampled_ids"):
        Segment.from_bytes(lacking.getvalue())


def test_both_segment_codecs_round_trip_and_read_each_other() -> None:
    """The segment codec seam: the fast writer (``npz_bytes``) and the plain one (``np.savez``) write the same arrays,
    dtypes and shapes, and each codec reads what the other wrote."""
    segments = [Segment.of([1, 2, 70000], [3], [-0.5], 4), Segment.of([], [], [], 0)]
    for segment in segments:
        for writer in (FAST_NPZ, PLAIN_NPZ):
            data = segment.to_bytes(writer)
            for reader in (FAST_NPZ, PLAIN_NPZ):
                back = Segment.from_bytes(data, reader)
                assert back.suffix_ids.tolist() == segment.suffix_ids.tolist()
                assert back.sampled_ids.tolist() == segment.sampled_ids.tolist()
                assert back.sampled_logprobs.tolist() == segment.sampled_logprobs.tolist()
                assert back.policy_version == segment.policy_version
        fast, plain = (codec.decode(segment.to_bytes(codec)) for codec in (FAST_NPZ, PLAIN_NPZ))
        assert (
            list(fast) == list(plain) == ["suffix_ids", "sampled_ids", "sampled_logprobs", "policy_version"]
        )
        assert [(a.dtype, a.shape) for a in fast.values()] == [(a.dtype, a.shape) for a in plain.values()]
        assert segment.to_bytes() == segment.to_bytes(FAST_NPZ)  # the default
    with pytest.raises(InconsistentTrajectory, match="not a token segment"):
        Segment.from_bytes(b"garbage", PLAIN_NPZ)


def test_keys_share_one_shape() -> None:
    key = tokens_key("run_1", "ro_1", 7, 2)
    assert key == "tokens/run_1/ro_1/7/2.npz" and key.startswith(rollout_tokens_prefix("run_1", "ro_1"))
    assert raw_key("run_1", "ro_1", 9).startswith(rollout_raw_prefix("run_1", "ro_1"))


def test_chain_from_rows_rebuilds_the_chain_and_checks_every_row(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    chain = _chain()
    facts = chain.call_facts("run_1", first_call_id=100)
    for fact, segment in zip(facts, chain.calls, strict=True):
        put_segment(store, fact.tokens_key, segment)
    fetched = fetch_segments(store, [f.tokens_key for f in facts])
    back = Chain.from_rows(reversed(facts), fetched, rollout_id="ro_1", group_id="grp_1")
    assert back.ids.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert back.loss_mask.tolist() == [False] * 4 + [True] * 2 + [False] * 2 + [True]
    assert back.policy_versions.tolist() == [0] * 6 + [1] * 3  # prompt tokens: the version of their call
    assert [back.prompt_length(p) for p in (0, 1)] == [4, 8] == [f.prompt_tokens for f in facts]
    assert chains_from_rows(facts, fetched, rollout_id="ro_1")[0].ids.tolist() == back.ids.tolist()

    bad_rows = {
        "missing": [facts[0], replace(facts[1], tokens_key="tokens/run_1/ro_1/7/9.npz")],
        "suffix / 1 sampled": [facts[0], replace(facts[1], suffix_tokens=3)],
        "chain so far": [facts[0], replace(facts[1], prompt_tokens=9)],
        "row says 0": [facts[0], replace(facts[1], policy_version=0)],
        "not 0..n-1": [facts[1]],
    }
    fetched_more = {**fetched, "tokens/run_1/ro_1/7/9.npz": ObjectNotFound("tokens/run_1/ro_1/7/9.npz")}
    for message, rows in bad_rows.items():
        with pytest.raises(InconsistentTrajectory, match=message):
            Chain.from_rows(rows, fetched_more, rollout_id="ro_1")
    with pytest.raises(InconsistentTrajectory, match="newer than 0"):
        Chain.from_rows(facts, fetched, rollout_id="ro_1", newest_version=0)
    with pytest.raises(InconsistentTrajectory, match="outside the vocabulary"):
        Chain.from_rows(facts, fetched, rollout_id="ro_1", vocab_size=9)


def test_fetch_segments_returns_each_segment_or_its_error(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    keys = []
    for i in range(40):
        put_segment(store, f"tokens/r/{i}.npz", Segment.of(range(i), [], [], i))
        keys.append(f"tokens/r/{i}.npz")
    store.put_bytes("tokens/r/bad.npz", b"not a zip archive")
    fetched = fetch_segments(store, [*keys, "tokens/r/absent.npz", "tokens/r/bad.npz", keys[0]])
    assert set(fetched) == {*keys, "tokens/r/absent.npz", "tokens/r/bad.npz"}
    for i, key in enumerate(keys):
        segment = fetched[key]
        assert isinstance(segment, Segment)
        assert segment.suffix_ids.tolist() == list(range(i)) and segment.policy_version == i
    assert isinstance(fetched["tokens/r/absent.npz"], ObjectNotFound)
    assert isinstance(fetched["tokens/r/bad.npz"], InconsistentTrajectory)
    assert fetch_segments(store, []) == {}
    assert load_segment(store, keys[3]).suffix_ids.tolist() == [0, 1, 2]


def test_a_segment_is_an_npz_whose_members_are_what_np_savez_writes() -> None:
    import io
    import zipfile

    from shared.trajectory import npz_bytes

    arrays = {
        "suffix_ids": np.arange(2300, dtype=np.int32),
        "sampled_ids": np.array([7, 8, 9], np.int32),
        "sampled_logprobs": np.array([-0.5, -0.25, 0.0], np.float32),
        "policy_version": np.asarray(4, np.int64),
        "empty": np.zeros(0, np.int32),
        "strided": np.arange(40, dtype=np.int64)[::3],
        "same_shape_again": np.array([1, 2, 3], np.int32),  # a header from the cache
    }
    ours, theirs = io.BytesIO(npz_bytes(arrays)), io.BytesIO()
    np.savez(theirs, **arrays)
    with zipfile.ZipFile(ours) as mine, zipfile.ZipFile(theirs) as numpy_zip:
        assert mine.testzip() is None  # every member's CRC checks
        assert mine.namelist() == numpy_zip.namelist()
        assert all(mine.read(name) == numpy_zip.read(name) for name in mine.namelist())
    ours.seek(0)
    with np.load(ours) as loaded:
        for name, value in arrays.items():
            assert loaded[name].dtype == value.dtype and np.array_equal(loaded[name], value)
    segment = Segment.of([1, 2, 3], [4], [-0.1], 2)
    back = Segment.from_bytes(segment.to_bytes())
    assert back.suffix_ids.tolist() == [1, 2, 3] and back.sampled_ids.tolist() == [4]
    assert back.sampled_logprobs.tolist() == pytest.approx([-0.1]) and back.policy_version == 2


def test_a_teacher_segment_keeps_the_policy_layout_and_says_it_has_no_logprobs() -> None:
    """A teacher's segment (``source = teacher``): the same suffix/sampled layout and loss mask as a policy's, a
    NaN logprob per sampled id, its source stored (and absent from a policy segment's bytes), checked both ways."""
    teacher = Segment.of_teacher([1, 2, 3], [4, 5], 2)
    assert teacher.source == "teacher" and np.isnan(teacher.sampled_logprobs).all()
    for codec in (FAST_NPZ, PLAIN_NPZ):
        back = Segment.from_bytes(teacher.to_bytes(codec), codec)
        assert back.source == "teacher" and back.sampled_ids.tolist() == [4, 5]
        assert np.isnan(back.sampled_logprobs).all() and len(back.sampled_logprobs) == 2
    policy = Segment.of([1, 2], [3], [-0.5], 4)
    assert (
        "source" not in PLAIN_NPZ.decode(policy.to_bytes())
        and Segment.from_bytes(policy.to_bytes()).source == "policy"
    )
    chain = Chain("9", "ro_1", "grp_1", (policy, Segment.of_teacher([6], [7, 8], 4)))
    chain.check()
    assert chain.loss_mask.tolist() == [False, False, True, False, True, True]
    assert chain.teacher_mask.tolist() == [False, False, False, False, True, True]
    assert chain.teacher_calls == 1 and np.isnan(chain.behavior_logprobs[-2:]).all()
    with pytest.raises(InconsistentTrajectory, match="teacher's sampled ids carry no logprobs"):
        replace(teacher, sampled_logprobs=np.asarray([-0.1, -0.2], np.float32)).check()
    with pytest.raises(InconsistentTrajectory, match="finite"):
        replace(teacher, source="policy").check()  # a policy segment with NaN logprobs is still refused
    with pytest.raises(InconsistentTrajectory, match="unknown segment source"):
        Segment.from_bytes(
            FAST_NPZ.encode({**PLAIN_NPZ.decode(teacher.to_bytes()), "source": np.asarray("oracle")})
        )


def test_a_row_and_its_segment_must_agree_on_the_source() -> None:
    store_rows = _chain().call_facts("run_1")
    segments = {row.tokens_key: segment for row, segment in zip(store_rows, _chain().calls, strict=True)}
    teacher_row = replace(store_rows[1], source="teacher")
    with pytest.raises(InconsistentTrajectory, match="arrays say source policy, the row says teacher"):
        Chain.from_rows([store_rows[0], teacher_row], segments, rollout_id="ro_1")
