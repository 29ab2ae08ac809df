"""The Markdown report of ``scripts/check-harness-versions.sh``: one row per harness from the versions it looked
up and installed, the chain test's JUnit result and the facts the test recorded (``HARNESSRL_CHAIN_REPORT``).

Usage: ``python scripts/harness_versions_report.py VERSIONS.tsv JUNIT.xml CHAIN.jsonl``; exits 1 when a checked
harness did not pass on its newest version, or its package has a successor (``successor_note``).

VERSIONS.tsv has one row per harness: harness, package, pinned, newest, install result, npm's ``deprecated``
message of the newest version (empty when none), the successor ``scripts/install-harnesses.sh --successors``
names for the package (empty when none).
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.machine import describe_machine  # noqa: E402

TEST_NAME = "test_real_cli_multi_turn_task_forms_one_exact_chain"
VERSIONS_COLUMNS = ("harness", "package", "pinned", "newest", "install", "deprecated", "successor")
SCOPED_PACKAGE = re.compile(r"@[a-z0-9][\w.-]*/[a-z0-9][\w.-]*", re.IGNORECASE)
NAMED_PACKAGE = re.compile(
    r"\b(moved to|renamed to|replaced by|superseded by|in favou?r of|use)\s+[`'\"]?([@a-z0-9][\w./-]*)(?![\w:])"
    r"[`'\"]?(\s+instead)?",
    re.IGNORECASE,
)


def successor_note(package: str, deprecated: str, declared_successor: str) -> str | None:
    """What the report says of a package whose releases went elsewhere, or ``None``: ``moved to `X``` for a
    successor declared in ``scripts/install-harnesses.sh`` or named in npm's deprecation message (a scoped package
    name, or the name after "moved to", "renamed to", "replaced by", "superseded by", "in favor of", or in "use X
    instead"), and ``deprecated: MESSAGE`` for a deprecation that names none. Either fails the check: the pin
    should follow."""
    if declared_successor:
        return f"moved to `{declared_successor}`"
    if not deprecated.strip():
        return None
    named = [name for name in SCOPED_PACKAGE.findall(deprecated) if name != package]
    for phrase, name, instead in NAMED_PACKAGE.findall(deprecated):
        name = name.rstrip("./-")
        if name != package and (phrase.lower() != "use" or instead):
            named.append(name)
    if named:
        return f"moved to `{named[0]}`"
    return f"deprecated: {deprecated.strip()}"


def test_results(junit: Path) -> dict[str, tuple[str, str]]:
    """Harness -> (``pass``/``fail``/``skip``, first line of the failure message)."""
    if not junit.exists():
        return {}
    results: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        if not name.startswith(f"{TEST_NAME}["):
            continue
        harness = name[len(TEST_NAME) + 1 : -1]
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            message = (problem.get("message") or problem.text or "").strip().splitlines()
            results[harness] = ("fail", message[0][:300] if message else "")
        elif case.find("skipped") is not None:
            results[harness] = ("skip", (case.find("skipped").get("message") or "")[:300])  # type: ignore[union-attr]
        else:
            results[harness] = ("pass", "")
    return results


def chain_facts(report: Path) -> dict[str, dict[str, object]]:
    if not report.exists():
        return {}
    facts = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    return {str(f["harness"]): f for f in facts}


def chain_outcome(facts: dict[str, object] | None) -> str:
    if not facts:
        return "no run"
    forks = facts.get("forks") or []
    chains = f"{facts['chains']} chain{'s' if facts['chains'] != 1 else ''}"
    if forks:
        chains += f" (forks: {', '.join(map(str, forks))})"
    exact = "prefix exact" if facts.get("exact") else "prefix NOT exact"
    stream = "streamed" if facts.get("streamed") else "not streamed"
    file_note = "file written" if facts.get("file_written") else "file missing"
    return f"{chains}, {facts['calls']} calls / {facts['tool_calls']} actions, {exact}, {stream}, {file_note}"


def main() -> int:
    versions_tsv, junit, chain_report = (Path(a) for a in sys.argv[1:4])
    results, facts = test_results(junit), chain_facts(chain_report)
    lines = [
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {describe_machine()}.",
        "",
        "| harness | package | pinned | newest | install | chain test (newest) | chain/fork outcome | first prompt (tiny-tokenizer tokens) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    failures: list[str] = []
    all_passed = True
    for row in versions_tsv.read_text().splitlines():
        fields = row.split("\t")
        if len(fields) != len(VERSIONS_COLUMNS):
            raise SystemExit(
                f"{versions_tsv}: a row needs {len(VERSIONS_COLUMNS)} tab-separated fields "
                f"({', '.join(VERSIONS_COLUMNS)}), got {len(fields)}: {row!r}"
            )
        harness, package, pinned, newest, installed, deprecated, declared_successor = fields
        status, message = results.get(harness, ("not run", ""))
        if installed != "ok":
            status = "not run"
        passed = status == "pass"
        moved = successor_note(package, deprecated, declared_successor)
        all_passed &= passed and moved is None
        same = " (= pinned)" if newest == pinned else ""
        if moved:
            same += f", **{moved}**"
            failures.append(f"- **{harness}**: `{package}` {moved}; the pin should follow")
        tokens = (facts.get(harness) or {}).get("first_prompt_tokens")
        lines.append(
            f"| {harness} | `{package}` | {pinned} | {newest}{same} | {installed if installed != 'ok' else 'ok'} "
            f"| {'**PASS**' if passed else f'**{status.upper()}**'} | {chain_outcome(facts.get(harness))} "
            f"| {tokens if tokens is not None else '–'} |"
        )
        if not passed:
            detail = message or str((facts.get(harness) or {}).get("error") or installed)
            failures.append(f"- **{harness} {newest}**: {detail}")
    if failures:
        lines += ["", "Failures:", *failures]
    print("\n".join(lines))
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
