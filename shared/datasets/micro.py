"""Generate the ``swe_micro`` dataset (families x bug variations) deterministically from ``micro_families.py``.

The families (``ALL_FAMILIES``) are ``FAMILIES`` of ``micro_families.py`` followed by ``MORE_FAMILIES`` of
``micro_families_more.py`` (combined here: that file imports the records of the first); their related-family maps
``RELATED`` and ``MORE_RELATED`` merge into ``ALL_RELATED``. ``tests/unit/test_dataset_micro_rules.py`` tests the
rules below.

Each task is a tiny repository: one module holding one function with one bug, ``pytest.ini``, and
``tests/test_<function>.py`` with the behaviour cases the bug does not break. The hidden ``test_patch`` adds
``tests/test_<function>_spec.py``: the family's whole behaviour spec, every case. FAIL_TO_PASS are the spec's tests
that fail on the buggy source, PASS_TO_PASS the rest; the reference solution restores the correct function. Which
case falls where is decided by running every case against the buggy and the correct source here, in-process, so
the lists can never disagree with the code. The build refuses (``MicroBuildError``) a task that would be defective:

- a bug that breaks no case (a free reward), or a correct source that fails one of its own cases (impossible);
- hidden tests with fewer than ``MIN_HIDDEN_ASSERTS`` asserts (a case is one or more ``assert`` lines);
- no failing assert whose call of the function is absent from the issue text: every task has at least one
  FAIL_TO_PASS assert on an input the issue does not quote, so hard-coding the issue's example fails;
- a family with fewer than ``MIN_BUGS`` bugs or two bugs making the same source, a name, module or function two
  families share, or a module named like one of the standard library's.

``tests/integration/test_dataset_swe_micro.py`` checks free rewards and impossible tasks again through the real
grader (reward 0 unchanged, 1 with the solution).

Output (``shared/datasets/swe_micro/``): ``repos/<instance>/``, ``solutions/<instance>.patch``, ``tasks.jsonl``
and ``splits.json``, instance ids per split:

- ``train``/``eval`` hold out whole functions. Families related by idiom (``RELATED`` in ``micro_families.py``:
  ``max_value`` and ``min_value``, ``to_fahrenheit`` and ``to_celsius``, ...) form one group and stay on one side.
  Groups are numbered in the order their first family appears in ``ALL_FAMILIES`` and every third group (number
  ``% EVAL_EVERY == EVAL_OFFSET``) goes to ``eval`` with all its bugs — a rule blind to difficulty and to how a
  model does, and stable as families are appended (a new family never moves an old one across). The build
  refuses fewer than ``MIN_EVAL_FAMILIES`` eval families. ``tests/unit/test_dataset_split.py`` checks that eval
  shares no module, function, reference source or test with train.
- ``seen_train``/``seen_eval``: the "seen functions" diagnostic, the earlier bug split over the 16 functions of
  ``SEEN_SPLIT_FAMILIES``: ``seen_eval`` holds one bug of each (``held_out_variation``), ``seen_train`` the other
  three, so an eval task's function is trained on through its other bugs. Not a measure of generalisation.

    python -m shared.datasets.micro [--check]
"""

from __future__ import annotations

import ast
import json
import shutil
import sys
import tempfile
from pathlib import Path

from shared.datasets import DATASETS_DIR
from shared.datasets.build import PROTECTED_PATHS, TEST_TIMEOUT_S
from shared.datasets.micro_families import (
    FAMILIES,
    RELATED,
    SEEN_SPLIT_FAMILIES,
    Bug,
    Case,
    Family,
    held_out_variation,
)
from shared.datasets.micro_families_more import MORE_FAMILIES, MORE_RELATED
from shared.tasks import DirSource, Task, commit_tree, dump_tasks, run_git

NAME = "swe_micro"
ROOT = DATASETS_DIR / NAME
PYTEST_INI = "[pytest]\ntestpaths = tests\n"
ALL_FAMILIES: tuple[Family, ...] = (*FAMILIES, *MORE_FAMILIES)
ALL_RELATED: dict[str, str] = {**RELATED, **MORE_RELATED}
MIN_HIDDEN_ASSERTS = 5
MIN_BUGS = 3
MIN_EVAL_FAMILIES = 20
EVAL_EVERY = 3
EVAL_OFFSET = 1


class MicroBuildError(RuntimeError):
    """A family or variation would make a defective task (free reward, impossible, weak tests, ambiguous edit)."""


def buggy_source(family: Family, bug: Bug) -> str:
    if family.source.count(bug.old) != 1:
        raise MicroBuildError(f"{family.name}: bug text {bug.old!r} must occur exactly once in the source")
    return family.source.replace(bug.old, bug.new)


def case_passes(source: str, case: Case) -> bool:
    """Run one case against ``source`` in a fresh namespace (what its pytest test does)."""
    import pytest

    namespace: dict[str, object] = {"pytest": pytest}
    try:
        exec(compile(source, "<module>", "exec"), namespace)
        exec(compile(f"def _check():\n    {case.check}\n_check()\n", "<case>", "exec"), namespace)
    except Exception:  # an assertion or any crash: the test fails
        return False
    return True


def assert_lines(family: Family, case: Case) -> list[str]:
    """The asserts of a case, one per line; anything else in a case is refused."""
    lines = [line.strip() for line in case.check.split("\n") if line.strip()]
    if not lines or not all(line.startswith("assert ") for line in lines):
        raise MicroBuildError(f"{family.name}/{case.name}: a case is one or more assert lines")
    return lines


def calls_in(function: str, line: str) -> list[str]:
    """The source text of every call of ``function`` in one assert line."""
    tree = ast.parse(line)
    return [
        ast.get_source_segment(line, node) or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function
    ]


def quoted(call: str, statement: str) -> bool:
    """Whether the issue text quotes this call (whitespace ignored)."""
    return "".join(call.split()) in "".join(statement.split())


def check_variation(family: Family, bug: Bug, buggy: str) -> tuple[list[Case], list[Case]]:
    """The (broken, kept) cases of one variation; raises if its task would be defective (module docstring)."""
    broken = [c for c in family.cases if not case_passes(buggy, c)]
    kept = [c for c in family.cases if c not in broken]
    where = f"{family.name}: bug {bug.old!r} -> {bug.new!r}"
    if not broken:
        raise MicroBuildError(f"{where}: the bug breaks no case (the task would be a free reward)")
    asserts = [(case, line) for case in family.cases for line in assert_lines(family, case)]
    if len(asserts) < MIN_HIDDEN_ASSERTS:
        raise MicroBuildError(f"{where}: {len(asserts)} hidden asserts, fewer than {MIN_HIDDEN_ASSERTS}")
    unquoted_failures = [
        line
        for case, line in asserts
        if case in broken
        and not case_passes(buggy, Case(case.name, line))
        and any(not quoted(call, bug.statement) for call in calls_in(family.function, line))
    ]
    if not unquoted_failures:
        raise MicroBuildError(
            f"{where}: every failing assert calls {family.function} only as the issue quotes it "
            "(hard-coding the example would pass)"
        )
    return broken, kept


def test_file(family: Family, cases: list[Case]) -> str:
    uses_pytest = any("pytest." in c.check for c in cases)
    head = ("import pytest\n" if uses_pytest else "") + f"from {family.module} import {family.function}\n"
    return head + "".join(f"\n\ndef test_{c.name}():\n    {c.check}\n" for c in cases)


def instance_id(family: Family, index: int) -> str:
    return f"{family.name.replace('_', '-')}-{index}"


def group_of(name: str, related: dict[str, str]) -> str:
    """The group of a family: its ``RELATED`` entry, followed to the end of the chain."""
    seen = {name}
    while name in related:
        name = related[name]
        if name in seen:
            raise MicroBuildError(f"RELATED has a cycle through {name!r}")
        seen.add(name)
    return name


def eval_families(
    families: tuple[Family, ...] = ALL_FAMILIES, related: dict[str, str] | None = None
) -> set[str]:
    """The families ``eval`` holds out: every ``EVAL_EVERY``-th group of related families (module docstring)."""
    related = ALL_RELATED if related is None else related
    groups: list[str] = []
    for family in families:
        if group_of(family.name, related) not in groups:
            groups.append(group_of(family.name, related))
    held_out = {group for number, group in enumerate(groups) if number % EVAL_EVERY == EVAL_OFFSET}
    return {f.name for f in families if group_of(f.name, related) in held_out}


def splits_of(family: Family, variation: int, held_out: set[str]) -> tuple[str, ...]:
    """The splits a task belongs to: ``train`` or ``eval`` by family, and ``seen_train`` or ``seen_eval`` by bug
    if its family is one of ``SEEN_SPLIT_FAMILIES``."""
    by_family = "eval" if family.name in held_out else "train"
    if family.name not in SEEN_SPLIT_FAMILIES:
        return (by_family,)
    seen_index = SEEN_SPLIT_FAMILIES.index(family.name)
    return by_family, ("seen_eval" if variation == held_out_variation(seen_index) else "seen_train")


def _git_diff(repo: Path, base_commit: str) -> str:
    run_git(repo, "add", "-A")
    diff = run_git(repo, "diff", "--cached", "--no-color", "--no-ext-diff", base_commit).decode()
    run_git(repo, "reset", "-q", "--hard", base_commit)
    run_git(repo, "clean", "-q", "-fdx")
    return diff


def build_variation(family: Family, index: int, bug: Bug) -> tuple[Task, dict[str, str], str]:
    """The task, its repository files (relative path -> text) and its solution patch."""
    buggy = buggy_source(family, bug)
    broken, kept = check_variation(family, bug, buggy)
    iid = instance_id(family, index)
    module_file = f"{family.module}.py"
    visible = f"tests/test_{family.function}.py"
    hidden = f"tests/test_{family.function}_spec.py"
    files = {module_file: buggy, "pytest.ini": PYTEST_INI}
    if kept:
        files[visible] = test_file(family, kept)
    with tempfile.TemporaryDirectory(prefix="harnessrl-micro-") as tmp:
        repo = Path(tmp) / "repo"
        for rel, text in files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        base_commit = commit_tree(repo)
        (repo / hidden).parent.mkdir(exist_ok=True)
        (repo / hidden).write_text(test_file(family, list(family.cases)))
        test_patch = _git_diff(repo, base_commit)
        (repo / module_file).write_text(family.source)
        solution = _git_diff(repo, base_commit)
    task = Task(
        instance_id=iid,
        repo=f"harnessrl/micro-{family.module}",
        source=DirSource(kind="dir", path=f"repos/{iid}"),
        base_commit=base_commit,
        problem_statement=bug.statement,
        FAIL_TO_PASS=[f"{hidden}::test_{c.name}" for c in broken],
        PASS_TO_PASS=[f"{hidden}::test_{c.name}" for c in kept],
        test_patch=test_patch,
        protected_paths=list(PROTECTED_PATHS),
        test_timeout_s=TEST_TIMEOUT_S,
    )
    return task, files, solution


def check_family(family: Family) -> None:
    failing = [c.name for c in family.cases if not case_passes(family.source, c)]
    if failing:
        raise MicroBuildError(
            f"{family.name}: the correct source fails {failing} (tasks would be impossible)"
        )
    if len(family.bugs) < MIN_BUGS:
        raise MicroBuildError(f"{family.name}: {len(family.bugs)} bugs, fewer than {MIN_BUGS}")
    if len({buggy_source(family, bug) for bug in family.bugs}) < len(family.bugs):
        raise MicroBuildError(f"{family.name}: two bugs make the same buggy source (duplicate tasks)")


def check_families(families: tuple[Family, ...], related: dict[str, str] | None = None) -> set[str]:
    """Refuse shared or shadowing names and a too small eval side; the families ``eval`` holds out."""
    related = ALL_RELATED if related is None else related
    for attribute in ("name", "module", "function"):
        values = [getattr(f, attribute) for f in families]
        shared = sorted({v for v in values if values.count(v) > 1})
        if shared:
            raise MicroBuildError(f"families share a {attribute}: {shared}")
    shadowing = sorted({f.module for f in families} & set(sys.stdlib_module_names))
    if shadowing:
        raise MicroBuildError(f"modules named like the standard library's: {shadowing}")
    related_names = set(related) | set(related.values())
    unknown = sorted((set(SEEN_SPLIT_FAMILIES) | related_names) - {f.name for f in families})
    if unknown:
        raise MicroBuildError(f"SEEN_SPLIT_FAMILIES or RELATED name unknown families: {unknown}")
    held_out = eval_families(families, related)
    if len(held_out) < MIN_EVAL_FAMILIES:
        raise MicroBuildError(f"eval holds {len(held_out)} families, fewer than {MIN_EVAL_FAMILIES}")
    return held_out


def generate(families: tuple[Family, ...] = ALL_FAMILIES) -> dict[Path, str]:
    """Every generated file of ``swe_micro`` (absolute path -> text)."""
    held_out = check_families(families)
    out: dict[Path, str] = {}
    tasks: list[Task] = []
    splits: dict[str, list[str]] = {name: [] for name in ("train", "eval", "seen_train", "seen_eval")}
    for family in families:
        check_family(family)
        for index, bug in enumerate(family.bugs, start=1):
            task, files, solution = build_variation(family, index, bug)
            tasks.append(task)
            for split in splits_of(family, index, held_out):
                splits[split].append(task.instance_id)
            for rel, text in files.items():
                out[ROOT / "repos" / task.instance_id / rel] = text
            out[ROOT / "solutions" / f"{task.instance_id}.patch"] = solution
    out[ROOT / "tasks.jsonl"] = dump_tasks(tasks)
    out[ROOT / "splits.json"] = json.dumps(splits, indent=2) + "\n"
    return out


def stale_files(files: dict[Path, str]) -> list[str]:
    """Generated files that differ on disk, and files on disk the generator no longer makes."""
    stale = [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]
    for folder in ("repos", "solutions"):
        for path in sorted((ROOT / folder).rglob("*")) if (ROOT / folder).is_dir() else []:
            if path.is_file() and path not in files:
                stale.append(f"{path} (not generated)")
    return stale


def main(argv: list[str]) -> int:
    files = generate()
    if "--check" in argv:
        stale = stale_files(files)
        if stale:
            print("stale swe_micro files (run python -m shared.datasets.micro):\n  " + "\n  ".join(stale))
            return 1
        return 0
    for folder in ("repos", "solutions"):
        shutil.rmtree(ROOT / folder, ignore_errors=True)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(files)} files for dataset {NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
