"""Harnesses whose agent ships with harnessrl: one standard-library Python file of this package (``reference``,
``codeblock``).

The agent's source is written into the throwaway HOME and run with a plain Python inside the sandbox, so the
sandbox never needs to see the repository and no Node is needed. Its model calls go through the gateway like any
harness's. The agent prints a JSON summary holding ``"finish": "stop"`` as its last line when it ends normally.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType

from services.runner.harnesses.base import (
    HarnessLaunch,
    HarnessNotInstalled,
    HarnessRequest,
    HarnessRunResult,
    HarnessVerdict,
    base_env,
    generic_failure,
    tail,
)


class BundledAgentAdapter:
    """One bundled agent module run as a script: ``python AGENT --base-url URL --api-key KEY --model M ...``."""

    name: str
    agent: ModuleType
    """The agent's module; its file is what runs in the sandbox (standard library only, Python 3.9+)."""

    def __init__(self, python: str | None) -> None:
        self.python = python or os.environ.get("HARNESSRL_REFERENCE_PYTHON", "/usr/bin/python3")

    @property
    def agent_file(self) -> str:
        return Path(str(self.agent.__file__)).name

    def agent_args(self) -> list[str]:
        """The agent's own options, between the connection options and the instruction."""
        return []

    def check_installed(self) -> None:
        if shutil.which(self.python) is None:
            raise HarnessNotInstalled(f"the {self.name} agent needs a Python at {self.python}")

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        argv = [
            self.python, str(request.home / self.agent_file),
            "--base-url", f"{request.base_url}/v1", "--api-key", request.rollout_key, "--model", request.model,
            *self.agent_args(),
            request.instruction,
        ]  # fmt: skip
        source = Path(str(self.agent.__file__)).read_text()
        python_root = Path(self.python).resolve().parent.parent
        ro_paths = [] if python_root == Path("/usr") else [python_root]
        return HarnessLaunch(argv, base_env(request), {self.agent_file: source}, ro_paths)

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        if failure := generic_failure(result):
            return failure
        if '"finish": "stop"' not in result.stdout:
            return HarnessVerdict("harness_error", f"no final summary: {tail(result.stdout)}")
        return HarnessVerdict("completed")
