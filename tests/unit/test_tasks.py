"""Task format, JSONL loader and repository materialization from all three sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.objectstore import LocalObjectStore
from shared.tasks import (
    GitSource,
    StoreSource,
    Task,
    TaskFileError,
    TaskRepoError,
    base_commit_of_dir,
    commit_tree,
    dump_tasks,
    head_commit,
    load_tasks,
    materialize,
    patch_paths,
    publish_repo,
    run_git,
)

pytestmark = pytest.mark.unit


def _repo_dir(root: Path) -> Path:
    repo = root / "src"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_value.py").write_text(
        "from pkg import VALUE\n\ndef test_value():\n    assert VALUE == 2\n"
    )
    return repo


def _task_dict(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "instance_id": "pkg-1",
        "repo": "me/pkg",
        "source": {"kind": "dir", "path": "src"},
        "base_commit": "0" * 40,
        "problem_statement": "VALUE must be 2",
        "FAIL_TO_PASS": ["tests/test_value.py::test_value"],
    }
    data.update(overrides)
    return data


def _write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_loader_reads_tasks_and_resolves_relative_dir(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "t.jsonl", [_task_dict(), "", _task_dict(instance_id="pkg-2")])
    tasks = load_tasks(path)
    assert [t.instance_id for t in tasks] == ["pkg-1", "pkg-2"]
    assert tasks[0].source.path == str(tmp_path / "src")  # type: ignore[union-attr]
    assert tasks[0].PASS_TO_PASS == [] and "{junit_xml}" in tasks[0].test_command


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("{not json", ":2: not valid JSON"),
        ("[1, 2]", ":2: expected a JSON object"),
        (_task_dict(base_commit="abc"), ":2: field base_commit:"),
        (_task_dict(FAIL_TO_PASS=[]), ":2: field FAIL_TO_PASS:"),
        (_task_dict(source={"kind": "ftp", "path": "x"}), ":2: field source:"),
        (_task_dict(instance_id="../etc"), ":2: field instance_id:"),
        (_task_dict(test_command="pytest -q"), ":2: field test_command: must contain {junit_xml}"),
        (_task_dict(protected_paths=["/etc"]), ":2: field protected_paths:"),
        (_task_dict(colour="red"), ":2: field colour: Extra inputs are not permitted"),
        (
            _task_dict(PASS_TO_PASS=["tests/test_value.py::test_value"]),
            "in both FAIL_TO_PASS and PASS_TO_PASS",
        ),
        (_task_dict(instance_id="ok-1"), None),
    ],
)
def test_loader_names_the_line_and_field_at_fault(tmp_path: Path, row: object, expected: str | None) -> None:
    path = _write_jsonl(tmp_path / "t.jsonl", [_task_dict(), row])
    if expected is None:
        assert len(load_tasks(path)) == 2
        return
    with pytest.raises(TaskFileError) as err:
        load_tasks(path)
    assert str(err.value).startswith(str(path)) and expected in str(err.value)


def test_loader_rejects_duplicates_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match=r":3: field instance_id: 'pkg-1' already on line 1"):
        load_tasks(
            _write_jsonl(tmp_path / "dup.jsonl", [_task_dict(), _task_dict(instance_id="b"), _task_dict()])
        )
    with pytest.raises(TaskFileError, match="no tasks"):
        load_tasks(_write_jsonl(tmp_path / "empty.jsonl", [""]))
    with pytest.raises(TaskFileError, match="no such task file"):
        load_tasks(tmp_path / "absent.jsonl")


def test_swe_bench_json_encoded_test_lists_are_accepted() -> None:
    task = Task.model_validate(_task_dict(FAIL_TO_PASS='["a.py::t1"]', PASS_TO_PASS='["a.py::t2"]'))
    assert task.FAIL_TO_PASS == ["a.py::t1"] and task.PASS_TO_PASS == ["a.py::t2"]


def test_a_plain_swe_bench_row_loads_with_a_github_source() -> None:
    row = {
        "repo": "astropy/astropy",
        "instance_id": "astropy__astropy-12907",
        "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
        "patch": "diff --git a/x b/x\n",
        "test_patch": "diff --git a/t b/t\n",
        "problem_statement": "Modeling's separability_matrix does not compute separability correctly",
        "hints_text": "",
        "created_at": "2022-03-03T15:14:54Z",
        "version": "4.3",
        "FAIL_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]',
        "PASS_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_coord_matrix"]',
        "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
    }
    task = Task.model_validate(row)
    assert task.source == GitSource(kind="git", url="https://github.com/astropy/astropy.git")
    assert task.FAIL_TO_PASS == [
        "astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"
    ]
    assert task.test_patch_paths() == [] and task.patch.startswith("diff --git")


def test_dump_and_load_round_trip(tmp_path: Path) -> None:
    task = Task.model_validate(_task_dict(source={"kind": "git", "url": "file:///srv/x.git"}))
    path = tmp_path / "round.jsonl"
    path.write_text(dump_tasks([task]))
    assert load_tasks(path) == [task]


def test_dir_source_gives_a_stable_base_commit(tmp_path: Path) -> None:
    repo = _repo_dir(tmp_path)
    (repo / "pkg" / "__pycache__").mkdir()
    (repo / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"cache")  # caches never enter the commit
    first = base_commit_of_dir(repo)
    assert base_commit_of_dir(repo) == first
    task = Task.model_validate(_task_dict(source={"kind": "dir", "path": str(repo)}, base_commit=first))
    dest = materialize(task, tmp_path / "ws")
    assert head_commit(dest) == first
    assert (dest / "pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert not (dest / "pkg" / "__pycache__").exists()
    (repo / "pkg" / "__init__.py").write_text("VALUE = 3\n")
    assert base_commit_of_dir(repo) != first


def test_materialize_refuses_a_wrong_base_commit_and_a_used_destination(tmp_path: Path) -> None:
    repo = _repo_dir(tmp_path)
    task = Task.model_validate(_task_dict(source={"kind": "dir", "path": str(repo)}, base_commit="1" * 40))
    with pytest.raises(TaskRepoError, match="task says base_commit 1111"):
        materialize(task, tmp_path / "ws")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "file").write_text("x")
    with pytest.raises(TaskRepoError, match="not empty"):
        materialize(task, busy)


def test_git_source_checks_out_the_base_commit(tmp_path: Path) -> None:
    upstream = _repo_dir(tmp_path)
    base = commit_tree(upstream)
    (upstream / "pkg" / "__init__.py").write_text("VALUE = 2\n")
    run_git(upstream, "commit", "-qam", "later work")
    for url in (f"file://{upstream}", str(upstream)):
        task = Task.model_validate(_task_dict(source={"kind": "git", "url": url}, base_commit=base))
        dest = materialize(task, tmp_path / f"ws-{len(url)}")
        assert head_commit(dest) == base
        assert (dest / "pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    missing = Task.model_validate(
        _task_dict(source=GitSource(kind="git", url=str(tmp_path / "nope")), base_commit=base)
    )
    with pytest.raises(TaskRepoError, match="pkg-1: git clone"):
        materialize(missing, tmp_path / "ws-missing")


def test_store_source_round_trips_through_a_tarball(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    repo = _repo_dir(tmp_path)
    task = Task.model_validate(
        _task_dict(source={"kind": "dir", "path": str(repo)}, base_commit=base_commit_of_dir(repo))
    )
    published = publish_repo(task, "mini", store)
    assert published.source.kind == "store" and published.source.key == "tasks/mini/pkg-1.tar.gz"  # type: ignore[union-attr]
    dest = materialize(published, tmp_path / "ws", store)
    assert head_commit(dest) == task.base_commit and (dest / "tests" / "test_value.py").is_file()
    with pytest.raises(TaskRepoError, match="no store was given"):
        materialize(published, tmp_path / "ws2")
    gone = published.with_source(StoreSource(kind="store", key="tasks/mini/absent.tar.gz"))
    with pytest.raises(TaskRepoError, match="no object"):
        materialize(gone, tmp_path / "ws3", store)


def test_patch_paths_lists_every_touched_file() -> None:
    patch = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_a.py\n"
        "@@ -0,0 +1 @@\n+x = 1\n"
        "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n"
        "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n"
    )
    assert patch_paths(patch) == ["tests/test_a.py", "old.py", "new.py", "gone.py"]
