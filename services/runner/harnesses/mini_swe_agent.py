"""mini-swe-agent (PyPI ``mini-swe-agent`` 2.4.6): OpenAI Chat API through LiteLLM, ``mini`` with a config it ships.

It lives in its own virtual environment, ``$HARNESSRL_RECIPES_DIR/mini-swe-agent`` (``scripts/install-recipe-agents.sh``,
part of ``make install``; the venv's interpreter is the system Python the sandbox shows), bound read-only. The
shipped config is named by its absolute path (a relative name is looked up in the working directory first, which
is the task's checkout) and only the settings a sandboxed, offline run needs are layered on top with ``-c
key=value``: the step limit, cost tracking that tolerates a model LiteLLM has no price for, and no retries. Its
answers are not streamed; it ends when a command prints ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` and, like at
its step limit or after three malformed answers in a row, exits 0; an API error ends it with exit code 1 and
LiteLLM's exception as the last line of a plain traceback on stderr, which names the HTTP status only by the
exception's class. docs/harnesses.md#mini-swe-agent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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
from shared.harnesses import MiniSweAgentOptions

DEFAULT_RECIPES_DIR = Path("/opt/harnessrl/recipes")
MODEL_CLASSES = {"mini_textbased": "litellm_textbased", "mini": "litellm"}
"""Each shipped config with the LiteLLM model class it is written for (the configs do not name one, and the
default class offers a ``bash`` tool that the text-based prompt never mentions)."""
UNGRADED_EXITS = {
    "LimitsExceeded": "step limit of {step_limit} reached",
    "RepeatedFormatError": "stopped after repeated answers without exactly one action",
}
"""Exit statuses other than ``Submitted`` that end a run cleanly, with the verdict's reason."""
LITELLM_STATUS = {
    "BadRequestError": 400,
    "ContextWindowExceededError": 400,
    "AuthenticationError": 401,
    "PermissionDeniedError": 403,
    "NotFoundError": 404,
    "RateLimitError": 429,
    "InternalServerError": 500,
    "BadGatewayError": 502,
    "ServiceUnavailableError": 503,
}
"""The HTTP status each LiteLLM exception stands for (``litellm/exceptions.py``)."""
LITELLM_EXCEPTION = re.compile(r"^litellm\.exceptions\.(\w+): ", re.MULTILINE)


def mini_swe_agent_venv() -> Path:
    """The agent's virtual environment (``HARNESSRL_RECIPES_DIR`` overrides the folder that holds it)."""
    return Path(os.environ.get("HARNESSRL_RECIPES_DIR", str(DEFAULT_RECIPES_DIR))) / "mini-swe-agent"


def shipped_config(venv: Path, config: str) -> Path:
    """The absolute path of the config ``config`` that the installed package ships, or ``HarnessNotInstalled``."""
    found = sorted(venv.glob(f"lib/python3*/site-packages/minisweagent/config/{config}.yaml"))
    if not (venv / "bin" / "mini").exists() or not found:
        raise HarnessNotInstalled(
            f"mini-swe-agent is not installed in {venv}; run scripts/install-recipe-agents.sh (make install does)"
        )
    return found[-1]


class MiniSweAgentAdapter:
    name = "mini-swe-agent"

    def __init__(self, options: MiniSweAgentOptions | None = None) -> None:
        self.options = options or MiniSweAgentOptions()

    def check_installed(self) -> None:
        shipped_config(mini_swe_agent_venv(), self.options.config)

    def launch(self, request: HarnessRequest) -> HarnessLaunch:
        venv = mini_swe_agent_venv()
        config = shipped_config(venv, self.options.config)
        env = base_env(request) | {
            "OPENAI_BASE_URL": f"{request.base_url}/v1",  # LiteLLM's openai/ provider reads both
            "OPENAI_API_KEY": request.rollout_key,
            "MSWEA_CONFIGURED": "true",  # else its first-run wizard prompts for a model and a key
            "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",  # default 10 with backoff up to 60 s
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # the price list bundled with LiteLLM, not fetched
            "TYPER_STANDARD_TRACEBACK": "1",  # a plain traceback, not a boxed one 80 columns wide
        }
        argv = [
            str(venv / "bin" / "mini"), "-c", str(config),
            "-c", f"agent.step_limit={self.options.step_limit}",
            "-c", "model.cost_tracking=ignore_errors",  # no price for our model: cost 0, not an error
            "-c", "model.model_kwargs.max_retries=0",  # the OpenAI client's own retries (default 2)
            "--model-class", MODEL_CLASSES[self.options.config], "--model", f"openai/{request.model}",
            "--cost-limit", "0", "--yolo", "--exit-immediately", "--task", request.instruction,
        ]  # fmt: skip
        return HarnessLaunch(argv, env, ro_paths=[venv])

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        if failure := generic_failure(result, None if result.timed_out else api_error(result.stderr)):
            return failure
        reason = UNGRADED_EXITS.get(exit_status(result.stdout) or "")
        return HarnessVerdict(
            "completed", reason.format(step_limit=self.options.step_limit) if reason else None
        )


def exit_status(stdout: str) -> str | None:
    """The first line of the agent's last ``Exit:`` message, as it prints it: the status for a run that did not
    submit (``LimitsExceeded``, ...), the submission's first line otherwise."""
    _, found, after = stdout.rpartition("\nExit:\n")
    return after.splitlines()[0].strip() if found and after.strip() else None


def api_error(stderr: str) -> str | None:
    """The reason for a run that LiteLLM's exception ended: ``mini-swe-agent 503: <its message>``."""
    matches = list(LITELLM_EXCEPTION.finditer(stderr))
    if not matches:
        return None
    name, message = matches[-1].group(1), stderr[matches[-1].end() :]  # the last one: a chain ends with it
    status = LITELLM_STATUS.get(name)
    return f"mini-swe-agent{f' {status}' if status else ''}: {name}: {tail(' '.join(message.split()))}"
