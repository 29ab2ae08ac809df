"""The teacher setting (``shared/run_config.py: TeacherConfig``) and the notions it leans on: which splits are eval
splits and what a task's reference fix is (``shared/datasets``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.datasets import is_eval_split, load_dataset, reference_fix
from shared.run_config import RunSpec, TeacherConfig

pytestmark = pytest.mark.unit


def test_teacher_parses_reference_or_a_url_and_refuses_what_it_cannot_use() -> None:
    assert TeacherConfig.parse("reference") == TeacherConfig(kind="reference")
    url = TeacherConfig.parse("https://api.example.com/v1")
    assert url.kind == "url" and url.base_url == "https://api.example.com/v1" and url.api_key_env is None
    for bad, says in (
        ("ftp://example.com/v1", r"must be an http\(s\) URL"),
        ("example.com/v1", r"must be an http\(s\) URL"),
        ("https://user:sk-123@example.com/v1", "must not hold credentials"),
        ("https://example.com/v1?key=sk-123", "without a query"),
        ("http://example.com:99999/v1", "not a URL"),
    ):
        with pytest.raises(ValidationError, match=says):
            TeacherConfig.parse(bad)
    with pytest.raises(ValidationError, match="needs base_url"):
        TeacherConfig(kind="url")
    with pytest.raises(ValidationError, match="takes no base_url"):
        TeacherConfig(kind="reference", base_url="https://example.com/v1")
    with pytest.raises(ValidationError, match="kind"):
        TeacherConfig.model_validate({"kind": "oracle"})
    with pytest.raises(ValidationError, match="api_key_env"):
        TeacherConfig(kind="url", base_url="https://example.com/v1", api_key_env="not a name")
    with pytest.raises(ValidationError, match="Extra inputs"):
        TeacherConfig.model_validate({"kind": "url", "base_url": "https://x/v1", "api_key": "sk-123"})


def test_a_run_spec_carries_its_teacher_and_none_by_default() -> None:
    spec = RunSpec.model_validate({"model": "m", "harness": "mini-swe-agent"})
    assert spec.teacher is None
    spec = RunSpec.model_validate(
        {"model": "m", "harness": "mini-swe-agent", "teacher": {"kind": "reference"}}
    )
    assert spec.teacher == TeacherConfig(kind="reference")
    assert RunSpec.model_validate(spec.model_dump(mode="json")) == spec


def test_eval_splits_are_named_eval_or_end_in_eval() -> None:
    assert is_eval_split("eval") and is_eval_split("seen_eval")
    assert not is_eval_split("train") and not is_eval_split("seen_train") and not is_eval_split(None)
    assert not is_eval_split("evaluation_data")


def test_a_reference_fix_is_the_tasks_patch_or_the_bundled_solution() -> None:
    (task,) = [t for t in load_dataset("swe_micro", "train") if t.instance_id == "clamp-1"]
    assert task.patch == ""
    fix = reference_fix("swe_micro", task)
    assert fix is not None and "+        return high" in fix
    assert (
        reference_fix("swe_micro", task.model_copy(update={"patch": "diff --git a/x b/x\n"}))
        == "diff --git a/x b/x\n"
    )
    assert reference_fix("my-tasks", task) is None
    assert reference_fix("swe_micro", task.model_copy(update={"instance_id": "no-such-task"})) is None
