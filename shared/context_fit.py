"""Context fit: does a harness's first prompt fit the model's context, before a run and during it?

Big harnesses meet small models: Claude Code, Qwen Code and Gemini CLI send 15-30k tokens before the first turn,
more than a 4k or 8k model holds. Two checks use this module:

- **Before the run** (``run create``): ``first_prompt_tokens(name, model_dir, instruction)`` is the exact size
  of a harness's first model call for this model: the call's conversation (system prompt, tool schemas, the
  harness's own first messages, as the gateway parses them) rendered by the model's chat template and tokenized,
  as the gateway renders a chain's first call. The conversations are data: ``shared/harness_prompts/<name>
  .json.zst``, captured from the pinned CLI by the real-CLI chain test
  (``HARNESSRL_FIRST_PROMPT_DIR=shared/harness_prompts pytest tests/e2e/test_harness_cli_chain.py``), with the
  task instruction replaced by ``INSTRUCTION_MARK`` so the run's own instructions are counted. ``name`` is the
  run's ``HarnessOptions.first_call_name``: the harness's name, or a variant's where an option changes the first
  call (``claude-code-bare`` for ``{"name": "claude-code", "bare": true}``). Rendering takes a second or two (the
  tokenizer loads once per process); results are cached per (capture, model files, instruction). Compared with
  ``model_context_length``: the gateway's limit capped by the model's positions.
- **During the run**: when the gateway refuses a prompt that does not fit, it records a ``ContextOverflow`` (both
  numbers) for the rollout in Redis; the runner takes it when the attempt ends, and a harness that then failed
  (or made no call) ends with outcome ``harness_error`` and reason ``context`` (``CONTEXT_REASON``; the outcome
  table is ``shared/statuses.py``), its error and ``RolloutMeta.context`` (``shared/rollout_records.py``)
  carrying both numbers. A run whose step ends that way for every rollout fails, and its error says so
  (``services/api/scheduler.py``).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
import zstandard

from shared.harnesses import HarnessOptions

PROMPTS_DIR = Path(__file__).resolve().parent / "harness_prompts"
INSTRUCTION_MARK = "\u27e6instruction\u27e7"  # ⟦instruction⟧: no harness writes it
CONTEXT_REASON = "context"
OVERFLOW_TTL_S = 7 * 24 * 3600


class FirstPromptUnknown(LookupError):
    """No captured first call under this name (a ``shell`` agent, or a harness not captured yet)."""


# --- the model's context length -------------------------------------------------------------------------


def model_context_length(model_dir: Path, max_model_len: int) -> int:
    """Tokens a prompt plus its completion may hold: ``max_model_len`` (the gateway's limit), capped at the
    model's positions (``max_position_embeddings``; vLLM refuses a longer ``--max-model-len``)."""
    config_path = Path(model_dir) / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError):
        return max_model_len
    positions = config.get("max_position_embeddings") or config.get("text_config", {}).get(
        "max_position_embeddings"
    )
    return min(max_model_len, int(positions)) if positions else max_model_len


# --- the first prompt of a harness ----------------------------------------------------------------------


@dataclass(frozen=True)
class FirstCall:
    """A harness's first model call, template-shaped (the messages and tools ``apply_chat_template`` takes)."""

    harness: str  # the capture's name: the harness's, or its variant's (``HarnessOptions.first_call_name``)
    version: str  # the CLI version it was captured from
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]

    def encode(self) -> bytes:
        return zstandard.ZstdCompressor(level=19).compress(json.dumps(asdict(self), indent=1).encode())

    @classmethod
    def decode(cls, data: bytes) -> FirstCall:
        raw = json.loads(zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 26))
        return cls(str(raw["harness"]), str(raw["version"]), list(raw["messages"]), list(raw["tools"]))

    def with_instruction(self, instruction: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The messages and tools with the task instruction where the captured one was."""
        text = json.dumps(self.messages, ensure_ascii=False)
        escaped = json.dumps(instruction, ensure_ascii=False)[1:-1]
        return json.loads(text.replace(INSTRUCTION_MARK, escaped)), self.tools


def first_call_path(name: str) -> Path:
    return PROMPTS_DIR / f"{name}.json.zst"


@functools.lru_cache(maxsize=32)
def load_first_call(name: str) -> FirstCall:
    """The captured first call ``name`` (a ``HarnessOptions.first_call_name``)."""
    path = first_call_path(name)
    if not path.is_file():
        raise FirstPromptUnknown(f"no captured first call for harness {name!r} ({path})")
    return FirstCall.decode(path.read_bytes())


def _model_fingerprint(model_dir: Path) -> str:
    """Changes when the tokenizer or its chat template changes (the files' names, sizes and mtimes)."""
    digest = hashlib.sha256(str(Path(model_dir).resolve()).encode())
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"):
        path = Path(model_dir) / name
        if path.is_file():
            stat = path.stat()
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def _tokenizer(model_dir: str, fingerprint: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@functools.lru_cache(maxsize=256)
def _count(name: str, version: str, model_dir: str, fingerprint: str, instruction: str) -> int:
    messages, tools = load_first_call(name).with_instruction(instruction)
    tokenizer = _tokenizer(model_dir, fingerprint)
    text = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=True
    )
    return len(tokenizer.encode(str(text), add_special_tokens=False))


def first_prompt_tokens(name: str, model_dir: Path, instruction: str) -> int:
    """Tokens of the first model call captured as ``name`` (a ``HarnessOptions.first_call_name``) for the model
    in ``model_dir`` on a task with ``instruction`` (exact for the captured CLI version; ``FirstPromptUnknown``
    when none was captured)."""
    first = load_first_call(name)
    return _count(name, first.version, str(model_dir), _model_fingerprint(model_dir), instruction)


# --- a prompt the gateway refused because it does not fit -----------------------------------------------


@dataclass(frozen=True)
class ContextOverflow:
    prompt_tokens: int
    context_length: int
    at_least: bool = False  # ``prompt_tokens`` is a lower bound: the gateway refused before tokenizing

    def describe(self) -> str:
        size = f"at least {self.prompt_tokens}" if self.at_least else str(self.prompt_tokens)
        return (
            f"{CONTEXT_REASON}: the prompt is {size} tokens, over the model's context length of "
            f"{self.context_length}"
        )


def overflow_key(rollout_id: str) -> str:
    return f"harnessrl:context_overflow:{rollout_id}"


async def record_overflow_async(r: aioredis.Redis, rollout_id: str, overflow: ContextOverflow) -> None:
    """The gateway's record of the rollout's first refused prompt (later ones of the attempt are the same
    story and keep the first)."""
    await r.set(overflow_key(rollout_id), json.dumps(asdict(overflow)), nx=True, ex=OVERFLOW_TTL_S)


def take_overflow(r: redis.Redis, rollout_id: str) -> ContextOverflow | None:
    """The rollout's recorded overflow, removed from Redis (the runner reads it once per attempt)."""
    pipe = r.pipeline()
    pipe.get(overflow_key(rollout_id))
    pipe.delete(overflow_key(rollout_id))
    raw, _ = pipe.execute()
    if not raw:
        return None
    try:
        data = json.loads(raw)
        return ContextOverflow(
            int(data["prompt_tokens"]), int(data["context_length"]), bool(data.get("at_least", False))
        )
    except (ValueError, KeyError, TypeError):
        return None


# --- the check at run create ----------------------------------------------------------------------------


def first_prompt_warning(
    harness: HarnessOptions, model_dir: Path, max_model_len: int, instructions: list[str]
) -> str | None:
    """One line when the first prompt of ``harness`` (with its options), on the run's longest task instruction,
    does not fit the model's context (every rollout would then end with reason ``context`` before its first
    answer); None when it fits or the harness's first call is unknown (a ``shell`` agent)."""
    try:
        load_first_call(harness.first_call_name)
    except FirstPromptUnknown:
        return None
    context = model_context_length(model_dir, max_model_len)
    instruction = max(instructions, key=len, default="")
    tokens = first_prompt_tokens(harness.first_call_name, model_dir, instruction)
    if tokens < context:
        return None
    options = harness.model_dump(mode="json", exclude_defaults=True, exclude={"name"})
    described = ", ".join(f"{key}={json.dumps(value)}" for key, value in options.items())
    return (
        f"harness {harness.name!r}{f' ({described})' if described else ''} sends a first prompt of {tokens} "
        "tokens (system prompt, tool schemas and the task) "
        f"but the model's context length is {context}: every rollout would end with reason 'context' before its "
        "first answer. Use a model with a longer context, a smaller harness (mini-swe-agent, pi, reference, claude-code with "
        "bare=true), or a shell agent."
    )
