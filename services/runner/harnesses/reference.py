"""The ``reference`` harness: the built-in Python agent (``reference_agent.py``), no Node needed.

Options: ``shared.harnesses.ReferenceOptions``. The agent's source is written into the throwaway HOME and run with
the sandbox's Python, so the sandbox never needs to see the repository.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from services.runner.harnesses import reference_agent
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
from shared.harnesses import ReferenceOptions

AGENT_FILE = "reference_agent.py"
TURN_BUDGET_EXIT_CODE = 3


class ReferenceAdapter:
    name = "reference"

    def __init__(self, options: ReferenceOptions | None = None) -> None:
        options = options or ReferenceOptions()
        self.python = options.python or os.environ.get("HARNESSRL_REFERENCE_PYTHON", "/usr/bin/python3")
        self.max_turns = options.max_turns
        self.max_tokens = options.max_tokens

    def check_installed(self) -> None:
        if shutil.which(self.python) is None:
            raise HarnessNotInstalled(f"the reference agent needs a Python at {self.python}")

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        argv = [
            self.python, str(request.home / AGENT_FILE),
            "--base-url", f"{request.base_url}/v1", "--api-key", request.rollout_key, "--model", request.model,
            "--max-turns", str(self.max_turns), "--max-tokens", str(self.max_tokens),
            request.instruction,
        ]  # fmt: skip
        source = Path(reference_agent.__file__).read_text()
        python_root = Path(self.python).resolve().parent.parent
        ro_paths = [] if python_root == Path("/usr") else [python_root]
        return HarnessLaunch(argv, base_env(request), {AGENT_FILE: source}, ro_paths)

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        if result.exit_code == TURN_BUDGET_EXIT_CODE and not result.timed_out:
            return HarnessVerdict("completed", f"turn budget of {self.max_turns} spent")
        if failure := generic_failure(result):
            return failure
        if '"finish": "stop"' not in result.stdout:
            return HarnessVerdict("harness_error", f"no final summary: {tail(result.stdout)}")
        return HarnessVerdict("completed")
