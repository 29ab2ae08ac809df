"""The ``codeblock`` harness: the built-in one-call agent for small models (``codeblock_agent.py``).

Like ``reference``, the agent's source is written into the throwaway HOME and run with a plain Python inside the
sandbox; its model call goes through the gateway, recorded like any harness's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from services.runner.harnesses import codeblock_agent
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
from shared.harnesses import CodeblockOptions

AGENT_FILE = "codeblock_agent.py"


class CodeblockAdapter:
    name = "codeblock"

    def __init__(self, options: CodeblockOptions | None = None) -> None:
        options = options or CodeblockOptions()
        self.python = options.python or os.environ.get("HARNESSRL_REFERENCE_PYTHON", "/usr/bin/python3")
        self.max_tokens = options.max_tokens

    def check_installed(self) -> None:
        if shutil.which(self.python) is None:
            raise HarnessNotInstalled(f"the codeblock agent needs a Python at {self.python}")

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        argv = [
            self.python, str(request.home / AGENT_FILE),
            "--base-url", f"{request.base_url}/v1", "--api-key", request.rollout_key, "--model", request.model,
            "--max-tokens", str(self.max_tokens),
            request.instruction,
        ]  # fmt: skip
        source = Path(codeblock_agent.__file__).read_text()
        python_root = Path(self.python).resolve().parent.parent
        ro_paths = [] if python_root == Path("/usr") else [python_root]
        return HarnessLaunch(argv, base_env(request), {AGENT_FILE: source}, ro_paths)

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        if failure := generic_failure(result):
            return failure
        if '"finish": "stop"' not in result.stdout:
            return HarnessVerdict("harness_error", f"no final summary: {tail(result.stdout)}")
        return HarnessVerdict("completed")
