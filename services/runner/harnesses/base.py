"""The harness adapter contract: what the runner needs to launch one agent CLI and judge how it ended.

An adapter is pure data in, data out. ``launch(request)`` returns the argv, the environment, the config files to
write into the throwaway HOME and the host paths the sandbox must expose read-only; the runner writes the files,
starts the process in the sandbox (stdin from /dev/null, always: Codex and Pi block forever on an open pipe) and
hands the finished process back to ``classify``. Keeping adapters free of process handling makes each one a
handful of lines that a test can check without starting anything.

Every harness gets the same two things from the gateway: a base URL whose path starts with
``/r/<rollout_key>`` (all four CLIs keep a path prefix) and the rollout key as its API key, so a call is bound to
its rollout whichever way the CLI authenticates.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

HarnessOutcome = Literal["completed", "harness_error", "timeout"]

DEFAULT_NPM_PREFIX = Path("/opt/harnessrl/npm")


class HarnessNotInstalled(RuntimeError):
    """The harness CLI is missing; the message says how to install it."""


def npm_prefix() -> Path:
    """Where ``scripts/install-harnesses.sh`` put the CLIs (``HARNESSRL_NPM_PREFIX`` overrides)."""
    return Path(os.environ.get("HARNESSRL_NPM_PREFIX", str(DEFAULT_NPM_PREFIX)))


def require_npm_binary(name: str) -> Path:
    """The installed CLI ``name`` under the npm prefix, or ``HarnessNotInstalled`` with the fix."""
    path = npm_prefix() / "bin" / name
    if not path.exists() or not os.access(path, os.X_OK):
        raise HarnessNotInstalled(
            f"{name} is not installed under {npm_prefix()}; run scripts/install-harnesses.sh"
        )
    if shutil.which("node") is None and path.read_bytes()[:2] == b"#!":
        raise HarnessNotInstalled(f"{name} needs Node.js on PATH (apt-get install nodejs)")
    return path


@dataclass(frozen=True)
class HarnessRequest:
    """One harness run, as the harness will see it from inside the sandbox."""

    instruction: str
    model: str
    base_url: str  # http://127.0.0.1:<forwarder port>/r/<rollout_key>, no trailing slash, no /v1
    rollout_key: str
    home: Path  # throwaway HOME
    workspace: Path  # task checkout, the harness's cwd


@dataclass(frozen=True)
class HarnessLaunch:
    argv: list[str]
    env: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)  # path relative to HOME -> text
    ro_paths: list[Path] = field(default_factory=list)  # host paths the sandbox must bind read-only
    home_template: Path | None = None  # a host directory copied into HOME before ``files`` are written
    # Address space the CLI needs at least (RLIMIT_AS counts reservations, not use); None: the sandbox default.
    min_address_space_bytes: int | None = None


@dataclass(frozen=True)
class HarnessRunResult:
    """How the harness process ended (filled in by the runner from the sandbox result)."""

    exit_code: int | None
    timed_out: bool
    stdout: str
    stderr: str


@dataclass(frozen=True)
class HarnessVerdict:
    outcome: HarnessOutcome
    reason: str | None = None


class HarnessAdapter(Protocol):
    name: str

    def check_installed(self) -> None:
        """Raise ``HarnessNotInstalled`` when the CLI cannot run here."""

    def launch(self, request: HarnessRequest) -> HarnessLaunch: ...

    def classify(self, result: HarnessRunResult) -> HarnessVerdict: ...


def base_env(request: HarnessRequest) -> dict[str, str]:
    """Environment every harness starts from: its own HOME, a private TMPDIR, no colour, no update checks."""
    return {
        "HOME": str(request.home),
        "TMPDIR": str(request.home / "tmp"),
        "PATH": f"{npm_prefix() / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CI": "1",
        "NO_UPDATE_NOTIFIER": "1",
        "npm_config_update_notifier": "false",
        # V8 reserves ~10 GiB of address space per WebAssembly memory for its trap-handler guard regions, which
        # the sandbox's RLIMIT_AS refuses (undici's HTTP parser and Qwen's tree-sitter are WASM); bounds checks
        # instead of guard regions keep the reservation to the memory actually used.
        "NODE_OPTIONS": "--disable-wasm-trap-handler",
    }


def generic_failure(result: HarnessRunResult, reported_error: str | None = None) -> HarnessVerdict | None:
    """The verdict for a run that timed out, reported an error in its output, or exited non-zero; ``None`` when
    nothing went wrong. The CLI's own error message beats its exit code as the reason (stderr often holds only
    noise such as Codex's "Reading additional input from stdin...")."""
    if result.timed_out:
        return HarnessVerdict("timeout", "the harness ran past the rollout time limit and was killed")
    if reported_error:
        return HarnessVerdict("harness_error", reported_error)
    if result.exit_code != 0:
        return HarnessVerdict(
            "harness_error", f"exit code {result.exit_code}: {tail(result.stderr or result.stdout)}"
        )
    return None


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL (or single-JSON) output; lines that are not JSON objects are skipped."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]
