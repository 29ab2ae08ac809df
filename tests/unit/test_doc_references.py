"""Every document reference in the code and the docs resolves to a file and a heading in this repository.

The citation syntax (``docs/design.md``, "How code and docs cite this file"): a repository path to a Markdown
file, ``#`` and the GitHub anchor of one of its headings, e.g. ``docs/design.md#token-faithful-splice``. Checked
here, in ``services/``, ``shared/``, ``tests/``, ``scripts/``, ``compose/``, ``migrations/``, ``benchmarks/``,
the Makefile, the README and ``docs/``:

- every ``<path>.md#<anchor>`` citation names an existing file and one of its headings;
- every other repository path under ``docs/`` that is mentioned names an existing file;
- a ``README "Heading"`` or ``docs/<file>.md "Heading"`` citation names a heading of that file;
- no citation of a document outside the repository is left: the section-sign forms of the original design
  notes and ``reference/*.md`` paths;
- every relative Markdown link of the README and ``docs/`` resolves to a file (and its anchor to a heading).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("services", "shared", "tests", "scripts", "compose", "migrations", "benchmarks", "docs")
SCANNED_FILES = ("Makefile", "README.md", "pyproject.toml", ".ci/run")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".yml", ".yaml", ".toml", ".sql", ".cfg", ".ini", ".txt", ""}
README_MAX_LINES = 250

CITATION = re.compile(r"(?<![\w/.-])((?:docs/[\w./-]+|README)\.md)#([\w-]+)")
DOCS_PATH = re.compile(r"(?<![\w/.-])(docs/[\w./-]+\.(?:md|png|jsonl|json))(?![\w#])")
README_QUOTE = re.compile(r"README(?:\.md)?,? \"([^\"]+)\"")
DOCS_QUOTE = re.compile(r"(docs/[\w./-]+\.md)`*,? \"([^\"]+)\"")
OUTSIDE = (
    (re.compile(r"§\s*\d"), "a section-sign citation of a document outside the repository"),
    (re.compile(r"\bDESIGN(?:\.md)?\b"), "a citation of the design notes outside the repository"),
    (re.compile(r"(?<![\w/-])reference/[\w-]+\.md"), "a reference/*.md document outside the repository"),
)
MD_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation other than ``-``/``_`` dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def markdown_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a Markdown text outside fenced code blocks, numbered from 1."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in markdown_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        anchor = github_anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def scanned_files() -> list[Path]:
    files = [REPO / name for name in SCANNED_FILES if (REPO / name).is_file()]
    for folder in SCANNED_DIRS:
        for path in sorted((REPO / folder).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix not in TEXT_SUFFIXES:
                continue
            if path == Path(__file__).resolve():  # this file spells out the forms it refuses
                continue
            files.append(path)
    return files


def cited_problems(path: Path, text: str) -> Iterator[str]:
    """What is wrong with the citations and docs paths of one file's text."""
    where = path.relative_to(REPO)
    for number, line in enumerate(text.splitlines(), 1):
        for target, anchor in CITATION.findall(line):
            file = REPO / target
            if not file.is_file():
                yield f"{where}:{number}: {target}#{anchor}: no such file"
            elif anchor not in anchors(file):
                yield f"{where}:{number}: {target}#{anchor}: no such heading in {target}"
        for target in DOCS_PATH.findall(line):
            if not (REPO / target).is_file():
                yield f"{where}:{number}: {target}: no such file"
        for target, heading in DOCS_QUOTE.findall(line):
            file = REPO / target
            if file.is_file() and github_anchor(heading) not in anchors(file):
                yield f'{where}:{number}: {target} "{heading}": no such heading in {target}'
        for heading in README_QUOTE.findall(line):
            if github_anchor(heading) not in anchors(REPO / "README.md"):
                yield f'{where}:{number}: README "{heading}": no such heading in README.md'
        for pattern, what in OUTSIDE:
            if pattern.search(line):
                yield f"{where}:{number}: {what}: {line.strip()[:120]}"


def link_problems(path: Path) -> Iterator[str]:
    """What is wrong with the relative links of one Markdown file."""
    where = path.relative_to(REPO)
    for number, line in markdown_lines(path.read_text(encoding="utf-8")):
        for target in MD_LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            file = (path.parent / file_part).resolve() if file_part else path
            if not file.exists():
                yield f"{where}:{number}: link {target}: no such file"
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                yield f"{where}:{number}: link {target}: no such heading in {file.relative_to(REPO)}"


def test_every_citation_and_docs_path_resolves() -> None:
    problems = [p for path in scanned_files() for p in cited_problems(path, path.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_every_relative_markdown_link_resolves() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    problems = [p for page in pages for p in link_problems(page)]
    assert not problems, "\n".join(problems)


def test_the_readme_is_for_users_and_short() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines, more than {README_MAX_LINES}"


def test_design_documents_the_citation_syntax() -> None:
    intro = (REPO / "docs/design.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "docs/design.md#token-faithful-splice" in intro
    assert "tests/unit/test_doc_references.py" in intro


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Token-faithful splice", "token-faithful-splice"),
        ("Reply first, record behind", "reply-first-record-behind"),
        ("`codeblock` (built in, for small models)", "codeblock-built-in-for-small-models"),
        ("Claude Code (`@anthropic-ai/claude-code` 2.1.332)", "claude-code-anthropic-aiclaude-code-21332"),
        ("Several ranks (FSDP2)", "several-ranks-fsdp2"),
    ],
)
def test_github_anchor(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


def test_the_checker_finds_broken_citations() -> None:
    """Each kind of broken reference is reported, and a good one is not."""
    other = REPO / "services" / "example.py"
    good = "docs/design.md#token-faithful-splice and docs/design.md"
    assert list(cited_problems(other, good)) == []
    broken = [
        "see docs/design.md#no-such-heading",
        "see docs/no-such-file.md#token-faithful-splice",
        "see docs/no-such-file.md",
        'see README "No such heading"',
        'see docs/design.md "No such heading"',
        "see " + "DESIGN " + "\N{SECTION SIGN}2",
        "see " + "reference/" + "infra.md",
    ]
    for text in broken:
        assert list(cited_problems(other, text)), text
    assert Path(__file__).resolve() not in scanned_files()
