"""``swe_micro``'s eval shares nothing with train: read from the generated files (what a run trains and evaluates on),
no eval task has a module, function name, reference fix, test (file or single test body) or issue text equal to a
training task's; nor a reference fix or whole test suite equal to one with the function renamed (and docstrings
dropped), so a clone under another name is caught. Single renamed test bodies may coincide (``FUNCTION([]) == []``
is an edge case of many functions), whole suites may not.
The seen-functions diagnostic (``seen_train``/``seen_eval``) does share functions, by design, and is left out."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from shared.datasets import dataset_dir, load_dataset, reference_patch
from shared.tasks import DirSource, Task

FUNCTION = "FUNCTION"


def shape(source: str, function: str) -> str:
    """Source with docstrings dropped and ``function`` renamed: equal for clones under another name."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return re.sub(rf"\b{re.escape(function)}\b", FUNCTION, ast.unparse(tree))


def bodies_of(text: str) -> list[str]:
    return [body.strip() for body in re.split(r"\n\n\ndef test_\w+\(\):\n", text)[1:]]


def fingerprints(task: Task) -> dict[str, set[str]]:
    """What a task teaches: its module, function, reference fix, tests and issue, each as comparable strings."""
    assert isinstance(task.source, DirSource)
    with tempfile.TemporaryDirectory(prefix="harnessrl-split-") as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(task.source.path, repo)
        (repo / "test.patch").write_text(task.test_patch)
        (repo / "fix.patch").write_text(reference_patch("swe_micro", task.instance_id))
        subprocess.run(["git", "apply", "test.patch", "fix.patch"], cwd=repo, check=True, capture_output=True)
        (module_file,) = [p for p in repo.glob("*.py")]
        fixed = module_file.read_text()
        tests = {p.name: p.read_text() for p in sorted((repo / "tests").glob("test_*.py"))}
    (function,) = re.findall(r"^def (\w+)\(", fixed, flags=re.MULTILINE)
    bodies = {body for text in tests.values() for body in bodies_of(text)}
    return {
        "module": {module_file.stem},
        "function": {function},
        "reference fix": {fixed.strip()},
        "reference fix, renamed": {shape(fixed, function)},
        "test file": {text.strip() for text in tests.values()},
        "test body": bodies,
        "test suite, renamed": {
            "\n".join(sorted(re.sub(rf"\b{function}\b", FUNCTION, body) for body in bodies))
        },
        "issue": {task.problem_statement.strip()},
    }


def union(tasks: list[Task]) -> dict[str, set[str]]:
    merged: dict[str, set[str]] = {}
    for task in tasks:
        for kind, values in fingerprints(task).items():
            merged.setdefault(kind, set()).update(values)
    return merged


@pytest.fixture(scope="module")
def sides() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    return union(load_dataset("swe_micro", "train")), union(load_dataset("swe_micro", "eval"))


@pytest.mark.parametrize(
    "kind",
    ["module", "function", "reference fix", "reference fix, renamed", "test file", "test body",
     "test suite, renamed", "issue"],
)  # fmt: skip
def test_eval_shares_nothing_with_train(
    kind: str, sides: tuple[dict[str, set[str]], dict[str, set[str]]]
) -> None:
    train, held_out = sides
    assert train[kind] and held_out[kind]
    assert not train[kind] & held_out[kind], f"eval shares a {kind} with train"


def test_the_fingerprints_catch_a_renamed_clone_and_a_seen_function() -> None:
    one = 'def twice(x):\n    """Twice x."""\n    return x * 2\n'
    other = 'def double(y):\n    """Double y."""\n    return y * 2\n'
    assert shape(one, "twice") != shape(other, "double")  # the argument name differs
    assert shape(one, "twice") == shape(one.replace("twice", "double").replace("Twice", "Two"), "double")
    # The seen-functions diagnostic shares functions with its train side: the same fingerprints flag it.
    seen_train, seen_eval = (union(load_dataset("swe_micro", s)[:8]) for s in ("seen_train", "seen_eval"))
    assert seen_train["function"] & seen_eval["function"]
    assert (dataset_dir("swe_micro") / "splits.json").is_file()
