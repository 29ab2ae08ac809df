"""Build the tiny policy model used by tests and the offline demo, with no download.

``build_tiny_model(out_dir, tied=False)`` writes a directory that transformers and vLLM both load:

- a byte-level BPE tokenizer (vocab 4096, never UNK) trained on the Python standard library's top-level
  ``*.py`` files, with ChatML special tokens and the hermes tool-call tokens as normal added tokens (so
  ``<tool_call>`` stays in decoded text for vLLM's hermes parser);
- a ChatML chat template with tools (``chat_template.jinja`` next to this module);
- a small Qwen3 config (4 layers, hidden 256, head_dim 64, the safe size for vLLM's CPU attention kernels)
  with weights drawn from a fixed seed, saved as fp32 safetensors.

Building twice gives byte-identical files: the corpus is read in sorted order, the BPE trainer is
deterministic, the weights come from ``torch.manual_seed(SEED)`` and every JSON file is written with sorted
keys. The stdlib differs between Python versions, so the tokenizer (and hence the files) does too.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

SEED = 0
VOCAB_SIZE = 4096
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
# Ids 4087.. in this order; the first three are special (skipped in decoded text), the rest are normal added
# tokens like Qwen's, so tool-call markup survives decoding.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
# Qwen2's pre-tokenizer split: contractions, letters, single digits, punctuation runs, newlines, spaces.
QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
CHAT_TEMPLATE_PATH = Path(__file__).with_name("chat_template.jinja")
MODEL_CONFIG = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "rope_theta": 1e6,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
}


def stdlib_corpus_files() -> list[Path]:
    """The training text: the stdlib's top-level modules, in a fixed order."""
    return sorted(Path(os.path.dirname(os.__file__)).glob("*.py"))


def train_tokenizer() -> object:
    """A byte-level BPE ``tokenizers.Tokenizer`` with every id of the 4096-token vocabulary assigned."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS) - len(ADDED_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    files = [str(p) for p in stdlib_corpus_files()]
    if not files:
        raise RuntimeError(f"no *.py files under {os.path.dirname(os.__file__)} to train the tokenizer on")
    tokenizer.train(files, trainer)
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    tokenizer.add_tokens(ADDED_TOKENS)
    if tokenizer.get_vocab_size() != VOCAB_SIZE:
        raise RuntimeError(f"tokenizer has {tokenizer.get_vocab_size()} tokens, expected {VOCAB_SIZE}")
    return tokenizer


def make_portable(tokenizer_config_path: Path) -> None:
    """transformers 5.x writes a tokenizer class and key that 4.x cannot load; use the names both know."""
    config = json.loads(tokenizer_config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    if "extra_special_tokens" in config:
        config["additional_special_tokens"] = config.pop("extra_special_tokens")
    tokenizer_config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def sort_json_keys(path: Path) -> None:
    path.write_text(json.dumps(json.loads(path.read_text()), indent=2, sort_keys=True) + "\n")


def save_tokenizer(out_dir: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(),
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=None,
        additional_special_tokens=SPECIAL_TOKENS[1:],
        clean_up_tokenization_spaces=False,
    )
    wrapped.chat_template = CHAT_TEMPLATE_PATH.read_text()
    wrapped.save_pretrained(str(out_dir))
    make_portable(out_dir / "tokenizer_config.json")


def save_model(out_dir: Path, tied: bool) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    eos_id = VOCAB_SIZE - len(ADDED_TOKENS) - 1  # <|im_end|>
    pad_id = eos_id - 2  # <|endoftext|>
    config = AutoConfig.for_model(
        "qwen3",
        **MODEL_CONFIG,
        tie_word_embeddings=tied,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=pad_id,
        dtype="float32",
    )
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = [eos_id, pad_id]
    model.generation_config.pad_token_id = pad_id
    model.save_pretrained(str(out_dir), safe_serialization=True)


def build_tiny_model(out_dir: Path, tied: bool = False) -> Path:
    """Write the tiny model to ``out_dir`` (created; an existing model there is replaced) and return it.

    The files are assembled in a sibling temporary directory and moved into place, so a reader never sees a
    half-written model and two concurrent builders cannot interleave.
    """
    out_dir = Path(out_dir).resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        save_tokenizer(staging)
        save_model(staging, tied)
        for name in ("config.json", "generation_config.json", "special_tokens_map.json"):
            if (staging / name).exists():
                sort_json_keys(staging / name)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out_dir
