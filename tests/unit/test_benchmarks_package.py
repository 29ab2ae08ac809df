"""Benchmarks, the demo and the learning recipe live in ``benchmarks/``; the services and ``shared/`` never import it.

The CLI is the one door: ``services/cli/main.py`` names each command's module as a lazy ``"module:function"``
string, so a service process never loads benchmark code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def benchmark_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
            for n in names
            if n.split(".")[0] == "benchmarks"
        ]
    return found


def test_services_and_shared_never_import_benchmarks() -> None:
    offenders = [
        hit
        for top in ("services", "shared")
        for path in sorted((ROOT / top).rglob("*.py"))
        for hit in benchmark_imports(path)
    ]
    assert offenders == []


def test_the_scan_sees_an_import(tmp_path: Path) -> None:
    planted = ROOT / "services" / "_planted_for_test.py"
    planted.write_text("from benchmarks.recipe import RECIPE\nimport benchmarks.demo\n")
    try:
        assert len(benchmark_imports(planted)) == 2
    finally:
        planted.unlink()


def test_no_benchmark_module_is_left_in_the_services() -> None:
    left = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "services").rglob("bench*.py"))
    assert left == []


@pytest.mark.parametrize(
    "module", ["gateway", "providers", "sandbox", "inference", "learner", "rollouts", "learning"]
)
def test_every_bench_command_names_a_benchmarks_module(module: str) -> None:
    main = (ROOT / "services" / "cli" / "main.py").read_text()
    assert f'"benchmarks.{module}:bench_' in main


@pytest.mark.parametrize("module", ["benchmarks.gateway", "benchmarks.rollouts"])
def test_benchmarks_find_the_repository_root(module: str) -> None:
    """The benchmarks that start subprocesses (``-m tests.fixtures...``) run them from the repository root."""
    import importlib

    root = importlib.import_module(module).REPO_ROOT
    assert (root / "pyproject.toml").is_file() and (root / "tests" / "fixtures").is_dir()
