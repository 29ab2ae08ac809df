"""The Markdown report of ``scripts/check-harness-versions.sh``: one row per harness from the versions it looked
up and installed, the chain test's JUnit result and the facts the test recorded (``HARNESSRL_CHAIN_REPORT``).

Usage: ``python scripts/harness_versions_report.py VERSIONS.tsv JUNIT.xml CHAIN.jsonl``; exits 1 when a checked
harness did not pass on its newest version.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.machine import describe_machine  # noqa: E402

TEST_NAME = "test_real_cli_multi_turn_task_forms_one_exact_chain"


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
        harness, package, pinned, newest, installed = row.split("\t")
        status, message = results.get(harness, ("not run", ""))
        if installed != "ok":
            status = "not run"
        passed = status == "pass"
        all_passed &= passed
        same = " (= pinned)" if newest == pinned else ""
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
