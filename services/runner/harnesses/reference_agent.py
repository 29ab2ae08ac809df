"""The built-in reference agent: a small coding agent on the OpenAI Chat Completions API with bash, read and
write tools. Standard library only, so it runs with any Python 3.9+ inside the sandbox and needs no Node.

Run as a script: ``python3 reference_agent.py --base-url URL --api-key KEY --model M INSTRUCTION``. It loops:
send the conversation, run every tool call the model makes, append the results, until the model answers
without tool calls or the turn budget is spent. The history it re-sends is exactly what it received (the
assistant message is echoed as returned), so the gateway's splice sees a pure extension every turn.

Exit codes: 0 the model finished, 3 the turn budget ran out (a model outcome, graded like any other),
1 an API or protocol error (a harness error). The last stdout line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SYSTEM_PROMPT = (
    "You are a coding agent working in a git repository (your current directory). Use the tools to inspect "
    "and change files and to run commands. When the task is done, reply with a short summary and no tool call."
)
TOOL_OUTPUT_LIMIT = 16_000
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the repository and return its exit code and output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The command to run."}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a text file and return its content.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "File path, relative or absolute."}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write",
            "description": "Write a text file (created or overwritten) with the given content.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative or absolute."},
                    "content": {"type": "string", "description": "The whole new content."},
                },
                "required": ["path", "content"],
            },
        },
    },
]


class ApiError(RuntimeError):
    pass


def clip(text: str) -> str:
    return text if len(text) <= TOOL_OUTPUT_LIMIT else text[:TOOL_OUTPUT_LIMIT] + "\n[output truncated]"


def run_bash(command: str, timeout_s: float) -> str:
    try:
        proc = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"exit code: timeout after {timeout_s:.0f}s"
    return clip(f"exit code: {proc.returncode}\n{proc.stdout}{proc.stderr}")


def run_tool(name: str, arguments: str, timeout_s: float) -> str:
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"error: arguments are not valid JSON ({exc})"
    if not isinstance(args, dict):
        return "error: arguments must be a JSON object"
    try:
        if name == "bash":
            return run_bash(str(args["command"]), timeout_s)
        if name == "read":
            return clip(Path(str(args["path"])).read_text(errors="replace"))
        if name == "write":
            path = Path(str(args["path"]))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(args["content"]))
            return f"wrote {len(str(args['content']))} characters to {path}"
    except KeyError as exc:
        return f"error: missing argument {exc}"
    except OSError as exc:
        return f"error: {exc}"
    return f"error: unknown tool {name!r}; available: bash, read, write"


def chat(base_url: str, api_key: str, body: dict, timeout_s: float, reconnect_s: float = 60.0) -> dict:
    """One chat call. A refused or reset connection (the gateway restarting) is retried with backoff for up to
    ``reconnect_s``; any HTTP answer, errors included, is final, so an upstream outage or a wrong key still
    fails fast."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
        method="POST",
    )
    deadline = time.monotonic() + reconnect_s
    delay_s = 0.5
    while True:
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise ApiError(f"HTTP {exc.code}: {exc.read()[:500].decode(errors='replace')}") from None
        except (urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            if not isinstance(reason, ConnectionError) or time.monotonic() + delay_s > deadline:
                raise ApiError(f"request failed: {exc}") from None
            print(f"reference agent: {exc}; retrying in {delay_s:.1f}s", file=sys.stderr)
            time.sleep(delay_s)
            delay_s = min(delay_s * 2, 5.0)
        except (OSError, json.JSONDecodeError) as exc:
            raise ApiError(f"request failed: {exc}") from None


def run_agent(args: argparse.Namespace) -> int:
    messages: list[dict] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": args.instruction},
    ]
    for turn in range(1, args.max_turns + 1):
        body = {"model": args.model, "messages": messages, "tools": TOOLS, "max_tokens": args.max_tokens}
        try:
            reply = chat(args.base_url, args.api_key, body, args.request_timeout_s, args.reconnect_s)
            message = reply["choices"][0]["message"]
        except ApiError as exc:
            print(f"reference agent: API error: {exc}", file=sys.stderr)
            return 1
        except (KeyError, IndexError, TypeError):
            print(f"reference agent: malformed reply: {json.dumps(reply)[:500]}", file=sys.stderr)
            return 1
        tool_calls = message.get("tool_calls") or []
        echoed = {"role": "assistant", "content": message.get("content")}
        if tool_calls:
            echoed["tool_calls"] = tool_calls
        messages.append(echoed)
        if not tool_calls:
            print(json.dumps({"finish": "stop", "turns": turn, "answer": message.get("content") or ""}))
            return 0
        for call in tool_calls:
            function = call.get("function") or {}
            output = run_tool(
                str(function.get("name")), str(function.get("arguments") or ""), args.tool_timeout_s
            )
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": output})
    print(json.dumps({"finish": "max_turns", "turns": args.max_turns}))
    return 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible base URL ending in /v1")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-turns", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--tool-timeout-s", type=float, default=120.0)
    parser.add_argument("--request-timeout-s", type=float, default=600.0)
    parser.add_argument(
        "--reconnect-s", type=float, default=60.0, help="How long to retry a refused/reset connection."
    )
    parser.add_argument("instruction")
    return run_agent(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
