"""The harnesses a run can use: one list of names, each with its options model (the harness registry).

``HarnessConfig`` is the ``harness`` section of a run's config (``shared/run_config.py``): an object tagged by
``name`` that carries that harness's options, e.g. ``{"name": "shell", "command": "my-agent {instruction}"}``.
A harness whose options all have defaults may be given by name alone (``"codex"``). Everything that names a
harness reads this module: the run config and the REST schema built from it, the CLI's ``--harness`` choices,
the demo, and the runner, which maps each name to its adapter (``services/runner/harnesses/__init__.py``; a
test checks that both lists agree).

To add a harness: a subclass of ``HarnessOptions`` with ``name: Literal["<name>"]`` and its options (with the
defaults the harness runs with), appended to ``HarnessConfig``; then its adapter in the runner's ``ADAPTERS``.
To add an option to a harness: a field on its model; the adapter receives the validated model. An option that
changes the harness's first model call (its tools, its system prompt) also gives ``first_call_name`` a name of its
own, and that first call is captured under it (``shared/context_fit.py``), so ``run create`` counts the right one.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, field_validator

INSTRUCTION_PLACEHOLDER = "{instruction}"


def _name_required(schema: dict[str, Any]) -> None:
    # ``name`` has a default so that ``ShellOptions(command=...)`` reads well, but the tagged union needs it on the
    # wire: the documented schema says so.
    schema["required"] = ["name", *(r for r in schema.get("required", []) if r != "name")]


class HarnessOptions(BaseModel):
    """Base of every harness's options: strict, unknown keys refused, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        use_attribute_docstrings=True,
        json_schema_extra=_name_required,
    )

    name: str
    """The harness (each subclass narrows it to its own name)."""

    @property
    def first_call_name(self) -> str:
        """The name of the harness's captured first model call with these options
        (``shared/harness_prompts/<name>.json.zst``, counted by ``shared/context_fit.py``): the harness's name,
        unless an option changes what the harness sends first."""
        return self.name


class CodexOptions(HarnessOptions):
    """OpenAI Codex CLI (Responses API)."""

    name: Literal["codex"] = "codex"


class ClaudeCodeOptions(HarnessOptions):
    """Anthropic Claude Code (Messages API)."""

    name: Literal["claude-code"] = "claude-code"
    bare: bool = False
    """Run ``claude -p --bare``: only the ``Bash``, ``Edit`` and ``Read`` tools and a ~100-character system prompt
    (identity, working directory, date), a first prompt that fits a small model (1.2k SmolLM2 tokens instead of
    12.5k); no hooks, plugins, CLAUDE.md discovery or auto-memory."""

    max_turns: int | None = Field(None, ge=1, le=10_000)
    """``claude -p --max-turns N``: the agent's turns before it stops (it exits with ``error_max_turns``: a
    completed rollout, like mini-swe-agent's step limit); null: no limit but the rollout's timeout. A small model that
    keeps calling tools needs one."""

    @property
    def first_call_name(self) -> str:
        return "claude-code-bare" if self.bare else self.name


class QwenCodeOptions(HarnessOptions):
    """Qwen Code (Chat Completions)."""

    name: Literal["qwen-code"] = "qwen-code"


class PiOptions(HarnessOptions):
    """Pi coding agent (Chat Completions)."""

    name: Literal["pi"] = "pi"


class GeminiOptions(HarnessOptions):
    """Google Gemini CLI (Gemini API)."""

    name: Literal["gemini"] = "gemini"


MiniSweAgentConfig = Literal["mini_textbased", "mini"]
"""The configs mini-swe-agent ships that the harness runs (``minisweagent/config/<name>.yaml``)."""


class MiniSweAgentOptions(HarnessOptions):
    """mini-swe-agent (Chat Completions through LiteLLM), from PyPI in its own virtual environment: ``mini`` with
    one of the configs it ships, unmodified."""

    name: Literal["mini-swe-agent"] = "mini-swe-agent"
    config: MiniSweAgentConfig = "mini_textbased"
    """``mini_textbased``: each answer holds one fenced ``mswea_bash_command`` block, no tools offered (a small
    model can follow it); ``mini``: each answer calls the one ``bash`` tool (its default config)."""
    step_limit: int = Field(30, ge=1, le=10_000)
    """Model calls before the agent stops (it exits 0 with status ``LimitsExceeded``: a completed rollout)."""

    @property
    def first_call_name(self) -> str:
        return self.name if self.config == "mini_textbased" else "mini-swe-agent-toolcall"


class ReferenceOptions(HarnessOptions):
    """The built-in Python agent (``services/runner/harnesses/reference_agent.py``); no Node needed."""

    name: Literal["reference"] = "reference"
    python: str | None = Field(None, min_length=1, max_length=4096)
    """Python interpreter on the runner host; null = ``$HARNESSRL_REFERENCE_PYTHON`` or ``/usr/bin/python3``."""
    max_turns: int = Field(30, ge=1, le=10_000)
    """Model calls before the agent stops (it exits 3: a completed rollout with its turn budget spent)."""
    max_tokens: int = Field(1024, ge=1, le=1_000_000)
    """``max_tokens`` of each of its requests."""


class CodeblockOptions(HarnessOptions):
    """The built-in one-call agent for small models (``services/runner/harnesses/codeblock_agent.py``): the model
    answers with the fixed function in a code block and the agent writes it into the file that defines it."""

    name: Literal["codeblock"] = "codeblock"
    python: str | None = Field(None, min_length=1, max_length=4096)
    """Python interpreter on the runner host; null = ``$HARNESSRL_REFERENCE_PYTHON`` or ``/usr/bin/python3``."""
    max_tokens: int = Field(512, ge=1, le=1_000_000)
    """``max_tokens`` of its one request (the run's ``sampling.max_tokens`` caps it)."""


ShellProviderApi = Literal["openai_chat", "openai_responses", "anthropic_messages", "gemini"]
"""The provider APIs the gateway serves (``shared/models.py: PROVIDER_APIS``), as a shell agent names the one it
speaks."""
SHELL_PLACEHOLDERS = ("{base_url}", "{api_key}", "{model}", INSTRUCTION_PLACEHOLDER)
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class ShellOptions(HarnessOptions):
    """Any installed agent, run by a command line. Besides every provider's usual base-URL and API-key variables
    it gets what its options give it: read-only mounts (its install prefix, its virtual environment), a home
    template (its config files), environment variables with placeholders, and the provider API it speaks. The
    paths are checked where the run is created and again where it runs (``shared/host_paths.py``)."""

    name: Literal["shell"] = "shell"
    command: str = Field(min_length=1, max_length=10_000)
    """Run with ``/bin/sh -c``; ``{instruction}`` is replaced by the task's problem statement, shell-quoted, and
    ``{base_url}``, ``{api_key}``, ``{model}`` by this rollout's values (also shell-quoted)."""
    mounts: list[str] = Field(default_factory=list, max_length=32)
    """Absolute host paths the agent needs (its install prefix, a virtual environment), bound read-only at the
    same path. Each must exist and not be writable by the sandbox user; ``/``, the host's home and the data
    directory (or a folder holding one of them) are refused."""
    home_template: str | None = Field(None, min_length=1, max_length=4096)
    """An absolute host directory copied into the sandbox's throwaway HOME before the agent starts (its config
    files: ``.config/<agent>/...``); symlinks are copied as links, never followed."""
    env: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Environment variables; values may hold ``{base_url}``, ``{api_key}``, ``{model}`` and ``{instruction}``."""
    provider_api: ShellProviderApi = "openai_chat"
    """The API the agent speaks; ``{base_url}`` is its base URL: ``.../v1`` for the OpenAI APIs, without
    ``/v1`` for Anthropic (the SDK appends ``/v1/messages``) and Gemini (``/v1beta/models/...``)."""

    @field_validator("command")
    @classmethod
    def _has_placeholder(cls, command: str) -> str:
        if INSTRUCTION_PLACEHOLDER not in command:
            raise ValueError(f"the shell command must contain {INSTRUCTION_PLACEHOLDER}")
        return command

    @field_validator("mounts")
    @classmethod
    def _absolute_mounts(cls, mounts: list[str]) -> list[str]:
        for path in mounts:
            if not path.startswith("/") or "\0" in path or len(path) > 4096:
                raise ValueError(f"a mount must be an absolute host path, got {path!r}")
        if len(set(mounts)) != len(mounts):
            raise ValueError("a path is mounted twice")
        return mounts

    @field_validator("home_template")
    @classmethod
    def _absolute_template(cls, path: str | None) -> str | None:
        if path is not None and (not path.startswith("/") or "\0" in path):
            raise ValueError(f"the home template must be an absolute host directory, got {path!r}")
        return path

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not re.match(ENV_NAME_PATTERN, name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if len(value) > 10_000 or "\0" in value:
                raise ValueError(f"the value of {name} is too long or holds a NUL byte")
        return env


_OPTION_MODELS = (
    CodexOptions
    | ClaudeCodeOptions
    | QwenCodeOptions
    | PiOptions
    | GeminiOptions
    | MiniSweAgentOptions
    | ShellOptions
    | ReferenceOptions
    | CodeblockOptions
)

HARNESS_OPTIONS: dict[str, type[HarnessOptions]] = {
    model.model_fields["name"].default: model for model in get_args(_OPTION_MODELS)
}
"""Harness name -> its options model, in the order harnesses are listed to users."""
HARNESS_NAMES: tuple[str, ...] = tuple(HARNESS_OPTIONS)
NAME_ALONE: tuple[str, ...] = tuple(
    name
    for name, model in HARNESS_OPTIONS.items()
    if not any(field.is_required() for field in model.model_fields.values())
)
"""The harnesses that run without options, so their name alone is a valid ``harness``."""


def _name_alone(value: Any) -> Any:
    """``"codex"`` is short for ``{"name": "codex"}``."""
    return {"name": value} if isinstance(value, str) else value


HarnessConfig = Annotated[
    _OPTION_MODELS,
    Field(discriminator="name"),
    BeforeValidator(
        _name_alone,
        json_schema_input_type=Literal[NAME_ALONE] | _OPTION_MODELS,  # type: ignore[valid-type]
    ),
]
"""A harness and its options, tagged by ``name``; see the module docstring."""

_HARNESS: TypeAdapter[HarnessOptions] = TypeAdapter(HarnessConfig)  # type: ignore[arg-type]


def harness_config(name: str, **options: Any) -> HarnessOptions:
    """The validated options of harness ``name`` (``pydantic.ValidationError`` when they are wrong)."""
    return _HARNESS.validate_python({"name": name, **options})
