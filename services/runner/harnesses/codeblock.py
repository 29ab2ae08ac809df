"""The ``codeblock`` harness: the built-in one-call agent for small models (``codeblock_agent.py``).

Options: ``shared.harnesses.CodeblockOptions``. Like ``reference``, a bundled agent (``bundled.py``): its one model
call goes through the gateway, recorded like any harness's.
"""

from __future__ import annotations

from services.runner.harnesses import codeblock_agent
from services.runner.harnesses.bundled import BundledAgentAdapter
from shared.harnesses import CodeblockOptions


class CodeblockAdapter(BundledAgentAdapter):
    name = "codeblock"
    agent = codeblock_agent

    def __init__(self, options: CodeblockOptions | None = None) -> None:
        options = options or CodeblockOptions()
        super().__init__(options.python)
        self.max_tokens = options.max_tokens

    def agent_args(self) -> list[str]:
        return ["--max-tokens", str(self.max_tokens)]
