"""The rollout record layer (``shared/rollout_records.py``): nothing else reads or writes ``rollouts.meta`` keys,
and the records read today's rows, refuse garbled ones with a clear error, and write today's shapes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.rollout_records import AttemptReport, RolloutMeta, RolloutMetaError

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "shared", "benchmarks")
ROLLOUT_META_OWNER = {"shared/rollout_records.py"}
# Raw access to rollouts.meta: the ORM attribute (row.meta, Rollout.meta), a key read (meta["k"], meta.get("k")),
# a JSON operator in SQL (meta->>'k', meta ? 'k', meta || ...), or a dict literal written as meta.
RAW_META = re.compile(
    r"\.meta\b"
    r"|\bmeta\s*\[\s*['\"]"
    r"|\bmeta\s*\.\s*get\s*\("
    r"|\bmeta\s*(->>?|#>>?|\?[|&]?|@>|\|\|)"
    r"|\bmeta\s*=\s*\{"
)


def raw_meta_access(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every raw ``rollouts.meta`` access in a source text."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if RAW_META.search(line)]


def rollout_meta_offenders() -> list[str]:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in ROLLOUT_META_OWNER:
                continue
            found += [f"{relative}:{n}: {line}" for n, line in raw_meta_access(path.read_text())]
    return found


def test_only_the_record_layer_touches_rollouts_meta() -> None:
    offenders = rollout_meta_offenders()
    assert not offenders, "read and write rollouts.meta through shared/rollout_records.py:\n" + "\n".join(
        offenders
    )


@pytest.mark.parametrize(
    "line",
    [
        'rollout.meta = {**rollout.meta, "grade_attempts": 1}',
        'attempts = rollout.meta.get("attempts") or [{}]',
        "Rollout.meta['enqueued_at'].astext.is_(None)",
        "SELECT meta->>'learner_set_aside' FROM rollouts",
        "WHERE r.meta ? 'retry_at'",
        "UPDATE rollouts SET meta = meta || '{}'",
        'Rollout(id=rid, meta={"reward_fn": "binary"})',
        "row.meta",
    ],
)
def test_the_scan_finds_raw_access(line: str) -> None:
    assert raw_meta_access(f"x = 1\n{line}\n") == [(2, line)]


@pytest.mark.parametrize(
    "line",
    ["sys.meta_path.insert(0, guard)", "meta, _, path = record.partition(b'\\t')", "size = meta.split()[-1]"],
)
def test_the_scan_passes_other_uses_of_the_word(line: str) -> None:
    assert raw_meta_access(line) == []


# What the services wrote before the record layer (git 7033c2e): the runner's ``asdict(AttemptReport)``, the
# grader's and the learner's keys, and a report from before ``capture_lost``/``patch_refused`` existed.
TODAY = {
    "attempts": [
        {
            "attempt": 1, "outcome": "harness_error", "reason": "exit 1", "exit_code": 1, "isolation": "bwrap",
            "materialize_s": 0.4, "harness_s": 3.2, "patch_bytes": 0, "calls": 0, "killed_reason": None,
            "runner_error": None, "incidents": [{"cause": "inference_unavailable", "detail": "503", "at": 1.5}],
            "classified": "infrastructure_error", "context": None, "touched_protected_paths": [],
            "git_history_commands": [],
        },
        {
            "attempt": 2, "outcome": "completed", "reason": None, "exit_code": 0, "isolation": "bwrap",
            "materialize_s": 0.3, "harness_s": 9.0, "patch_bytes": 120, "calls": 3, "killed_reason": None,
            "runner_error": None, "incidents": [], "classified": None,
            "context": {"prompt_tokens": 9000, "context_length": 8192, "at_least": False},
            "touched_protected_paths": ["tests/test_a.py"], "git_history_commands": ["git log --all"],
            "capture_lost": None, "patch_refused": None,
        },
    ],
    "context": {"prompt_tokens": 9000, "context_length": 8192, "at_least": False},
    "grade_attempts": 2,
    "grading_isolation": "bwrap",
    "learner_set_aside": "rollout ro_1: missing segment",
}  # fmt: skip


def test_todays_rows_read_and_write_back_unchanged_apart_from_new_defaults() -> None:
    meta = RolloutMeta.from_json(TODAY, rollout_id="ro_1")
    first, second = meta.attempts
    assert first.incidents[0].cause == "inference_unavailable" and first.capture_lost is None
    assert second.context is not None and second.context.context_length == 8192
    assert (meta.grade_attempts, meta.learner_set_aside, meta.reward_fn) == (
        2,
        TODAY["learner_set_aside"],
        None,
    )
    stored = meta.to_json()
    assert stored["attempts"][1] == TODAY["attempts"][1]
    assert stored["attempts"][0] == {**TODAY["attempts"][0], "capture_lost": None, "patch_refused": None}
    assert {k: v for k, v in stored.items() if k != "attempts"} == {
        k: v for k, v in TODAY.items() if k != "attempts"
    }
    assert RolloutMeta.from_json({}).to_json() == {} and RolloutMeta.from_json(None) == RolloutMeta()


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"enqueued_at": "2026-12-06T00:00:00+00:00"}, "enqueued_at"),  # a queue key: a column since 0010
        ({"grade_attempts": "many"}, "grade_attempts"),
        ({"attempts": [{"attempt": 1}]}, "attempts.0.outcome"),
        ({"attempts": "x"}, "attempts"),
        (["not", "a", "mapping"], "(meta)"),
    ],
)
def test_garbled_rows_are_refused_naming_the_rollout_and_the_key(raw: object, named: str) -> None:
    with pytest.raises(
        RolloutMetaError, match=rf"rollout ro_9: rollouts\.meta does not validate: .*{re.escape(named)}"
    ):
        RolloutMeta.from_json(raw, rollout_id="ro_9")


def test_records_are_frozen_and_built_by_keyword() -> None:
    with pytest.raises(TypeError):
        AttemptReport(1, "completed", None, 0, "test", 0.0, 0.0, 0, 0)  # type: ignore[misc]
    report = AttemptReport(
        attempt=1, outcome="completed", reason=None, exit_code=0, isolation="test", materialize_s=0.0,
        harness_s=0.0, patch_bytes=0, calls=0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="frozen"):
        report.calls = 3  # type: ignore[misc]
    assert report.replace(calls=3).calls == 3 and report.calls == 0
    with pytest.raises(ValueError, match="colls"):
        report.replace(colls=3)
