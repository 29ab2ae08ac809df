"""The built-in ``codeblock`` agent: one model call, the fixed function in a code block, written into the file.

Made for small models that cannot drive a tool-calling loop. It shows the model the issue and the repository's
source files (every ``*.py`` outside the tests), asks for the corrected function in one fenced Python code
block, and replaces each function or class of that block in the file that defines one of the same name. It
never runs the tests and never edits a test file. Standard library only, like the reference agent, so it runs
with any Python 3.9+ inside the sandbox; its one model call goes through the gateway like any harness's.

Run as a script: ``python3 codeblock_agent.py --base-url URL --api-key KEY --model M INSTRUCTION``.
Exit codes: 0 the model answered (whether or not its answer changed a file: that is for the grader to judge),
1 an API or protocol error (a harness error). The last stdout line is a JSON summary.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

SYSTEM_PROMPT = (
    "You are an expert Python programmer. You fix bugs. Answer with the complete corrected function in one "
    "```python code block and nothing else."
)
FILE_CHARS_LIMIT = 12_000
FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
SKIPPED_DIRS = {"tests", "test", ".git", "__pycache__", ".venv", "venv", "node_modules"}


class ApiError(RuntimeError):
    pass


def source_files(root: Path) -> list[Path]:
    """The repository's Python files an agent may change: not tests, not hidden or virtualenv folders."""
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in SKIPPED_DIRS or part.startswith(".") for part in rel.parts[:-1]):
            continue
        if rel.name.startswith("test_") or rel.name.endswith("_test.py") or rel.name == "conftest.py":
            continue
        files.append(rel)
    return files


def user_prompt(instruction: str, root: Path) -> str:
    parts = [f"Issue:\n{instruction.strip()}\n"]
    budget = FILE_CHARS_LIMIT
    for rel in source_files(root):
        text = (root / rel).read_text(errors="replace")
        if len(text) > budget:
            continue
        budget -= len(text)
        parts.append(f"File {rel}:\n```python\n{text.rstrip()}\n```\n")
    parts.append(
        "Copy the function, change only what the issue asks for, and reply with the whole fixed function in one "
        "```python code block."
    )
    return "\n".join(parts)


def code_candidates(reply: str) -> list[str]:
    """Python code in the reply: its fenced blocks (python or untagged) in order, else the whole reply."""
    blocks = [body for lang, body in FENCE.findall(reply) if lang.lower() in ("", "python", "py", "python3")]
    return blocks or [reply]


def top_level_defs(tree: ast.Module) -> dict[str, ast.stmt]:
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }


def _span(node: ast.stmt) -> tuple[int, int]:
    """First and last line (1-based) of a definition, decorators included."""
    decorators = getattr(node, "decorator_list", [])
    first = min([node.lineno] + [d.lineno for d in decorators])
    return first, int(node.end_lineno or node.lineno)


def replace_definitions(root: Path, code: str) -> list[str]:
    """Put every top-level def/class of ``code`` in place of the same-named one in a source file; names done."""
    try:
        new_defs = top_level_defs(ast.parse(code))
    except SyntaxError:
        return []
    code_lines = code.splitlines()
    replaced = []
    for rel in source_files(root):
        path = root / rel
        text = path.read_text(errors="replace")
        try:
            old_defs = top_level_defs(ast.parse(text))
        except SyntaxError:
            continue
        lines = text.splitlines()
        # Bottom-up, so earlier line numbers stay valid while later definitions are replaced.
        targets = sorted(
            (name for name in new_defs if name in old_defs), key=lambda n: _span(old_defs[n])[0], reverse=True
        )
        for name in targets:
            start, end = _span(old_defs[name])
            new_start, new_end = _span(new_defs[name])
            lines[start - 1 : end] = code_lines[new_start - 1 : new_end]
            replaced.append(f"{rel}:{name}")
        if targets:
            path.write_text("\n".join(lines) + "\n")
    return replaced


def apply_reply(root: Path, reply: str) -> list[str]:
    """Apply the first code candidate that replaces anything; the names replaced (empty if none did)."""
    for code in code_candidates(reply):
        replaced = replace_definitions(root, code)
        if replaced:
            return replaced
    return []


def chat(base_url: str, api_key: str, body: dict, timeout_s: float) -> dict:
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise ApiError(f"HTTP {exc.code}: {exc.read()[:500].decode(errors='replace')}") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ApiError(f"request failed: {exc}") from None


def run_agent(args: argparse.Namespace) -> int:
    root = Path.cwd()
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_prompt(args.instruction, root)},
    ]
    body = {"model": args.model, "messages": messages, "max_tokens": args.max_tokens}
    try:
        reply = chat(args.base_url, args.api_key, body, args.request_timeout_s)
        content = reply["choices"][0]["message"].get("content") or ""
    except ApiError as exc:
        print(f"codeblock agent: API error: {exc}", file=sys.stderr)
        return 1
    except (KeyError, IndexError, TypeError, AttributeError):
        print(f"codeblock agent: malformed reply: {json.dumps(reply)[:500]}", file=sys.stderr)
        return 1
    replaced = apply_reply(root, content)
    print(json.dumps({"finish": "stop", "replaced": replaced}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible base URL ending in /v1")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--request-timeout-s", type=float, default=600.0)
    parser.add_argument("instruction")
    return run_agent(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
