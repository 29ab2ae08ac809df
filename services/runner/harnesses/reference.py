"""The ``reference`` harness: the built-in tool-calling Python agent (``reference_agent.py``), no Node needed.

Options: ``shared.harnesses.ReferenceOptions``. How a bundled agent runs: ``bundled.py``.
"""

from __future__ import annotations

from services.runner.harnesses import reference_agent
from services.runner.harnesses.base import HarnessRunResult, HarnessVerdict
from services.runner.harnesses.bundled import BundledAgentAdapter
from shared.harnesses import ReferenceOptions

TURN_BUDGET_EXIT_CODE = 3


class ReferenceAdapter(BundledAgentAdapter):
    name = "reference"
    agent = reference_agent

    def __init__(self, options: ReferenceOptions | None = None) -> None:
        options = options or ReferenceOptions()
        super().__init__(options.python)
        self.max_turns = options.max_turns
        self.max_tokens = options.max_tokens

    def agent_args(self) -> list[str]:
        return ["--max-turns", str(self.max_turns), "--max-tokens", str(self.max_tokens)]

    def classify(self, result: HarnessRunResult) -> HarnessVerdict:
        if result.exit_code == TURN_BUDGET_EXIT_CODE and not result.timed_out:
            return HarnessVerdict("completed", f"turn budget of {self.max_turns} spent")
        return super().classify(result)
