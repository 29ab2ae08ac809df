"""Generate a dataset's ``tasks.jsonl`` from its hand-written ``cases/`` and check its reference solutions.

A case ``cases/<instance_id>/`` has ``task.json`` (repo folder name, problem statement, FAIL_TO_PASS,
PASS_TO_PASS) and ``tests/`` (the files the hidden test patch adds or changes, at their repository paths). The
base commit and the test patch are computed, so they can never drift from the files. The reference solution is
``solutions/<instance_id>.patch``, a ``git diff`` written in a checkout of the base commit; the build checks that
it applies. (Solutions are kept as patches, not as fixed copies of files, so the dataset holds one module per
name and ``mypy shared`` stays meaningful.) ``--check`` fails if ``tasks.jsonl`` is stale.

    python -m shared.datasets.build swe_mini [--check]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from shared.datasets import DATASETS_DIR
from shared.tasks import (
    DirSource,
    Task,
    base_commit_of_dir,
    commit_tree,
    copy_source_files,
    dump_tasks,
    run_git,
)

TEST_TIMEOUT_S = 120.0
# The tests and the files that configure pytest: an agent must not make its tests pass by editing them.
PROTECTED_PATHS = ("tests", "pytest.ini", "conftest.py")


def _diff_after_copy(repo_dir: Path, base_commit: str, overlay: Path) -> str:
    """The git diff that copying ``overlay``'s files onto the checkout produces; the checkout is reset after."""
    shutil.copytree(overlay, repo_dir, dirs_exist_ok=True)
    run_git(repo_dir, "add", "-A")
    diff = run_git(repo_dir, "diff", "--cached", "--no-color", "--no-ext-diff", base_commit).decode()
    run_git(repo_dir, "reset", "-q", "--hard", base_commit)
    run_git(repo_dir, "clean", "-q", "-fdx")
    return diff


def build_case(dataset_root: Path, case_dir: Path) -> Task:
    """The task of one case; raises if its reference solution does not apply to the base commit."""
    spec = json.loads((case_dir / "task.json").read_text())
    repo_rel = f"repos/{spec['repo']}"
    repo_src = dataset_root / repo_rel
    base_commit = base_commit_of_dir(repo_src)
    solution = dataset_root / "solutions" / f"{case_dir.name}.patch"
    with tempfile.TemporaryDirectory(prefix="harnessrl-build-") as tmp:
        repo_dir = Path(tmp) / "repo"
        copy_source_files(repo_src, repo_dir)
        if commit_tree(repo_dir) != base_commit:
            raise RuntimeError(f"{case_dir.name}: base commit is not reproducible")
        test_patch = _diff_after_copy(repo_dir, base_commit, case_dir / "tests")
        run_git(repo_dir, "apply", "--check", str(solution))
    return Task(
        instance_id=case_dir.name,
        repo=f"harnessrl/{spec['repo']}",
        source=DirSource(kind="dir", path=repo_rel),
        base_commit=base_commit,
        problem_statement=spec["problem_statement"],
        FAIL_TO_PASS=spec["FAIL_TO_PASS"],
        PASS_TO_PASS=spec["PASS_TO_PASS"],
        test_patch=test_patch,
        protected_paths=list(PROTECTED_PATHS),
        test_timeout_s=TEST_TIMEOUT_S,
    )


def build_dataset(name: str) -> dict[Path, str]:
    """Every generated file of the dataset and its content."""
    root = DATASETS_DIR / name
    cases = sorted(p for p in (root / "cases").iterdir() if (p / "task.json").is_file())
    return {root / "tasks.jsonl": dump_tasks(build_case(root, case) for case in cases)}


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python -m shared.datasets.build DATASET [--check]", file=sys.stderr)
        return 2
    files = build_dataset(argv[0])
    if "--check" in argv:
        stale = [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]
        if stale:
            print("stale generated files (run python -m shared.datasets.build):\n  " + "\n  ".join(stale))
            return 1
        return 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(files)} files for dataset {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
