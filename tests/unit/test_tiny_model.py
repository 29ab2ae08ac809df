"""The tiny model builder: deterministic, loadable by transformers, tokenizer and chat template as vLLM needs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from services.cli.main import cli
from services.inference.tiny_model import VOCAB_SIZE

pytestmark = pytest.mark.unit


def _digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_cli_build_is_deterministic_and_matches_the_fixture(tmp_path: Path, tiny_model_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["model", "init-tiny", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert _digests(tmp_path / "m") == _digests(tiny_model_dir)
    assert "model.safetensors" in _digests(tiny_model_dir)


def test_tied_and_untied_differ_only_where_they_should(
    tiny_model_dir: Path, tiny_model_dir_tied: Path
) -> None:
    from safetensors import safe_open

    untied = json.loads((tiny_model_dir / "config.json").read_text())
    tied = json.loads((tiny_model_dir_tied / "config.json").read_text())
    assert (untied["tie_word_embeddings"], tied["tie_word_embeddings"]) == (False, True)
    with safe_open(str(tiny_model_dir / "model.safetensors"), "pt") as f:
        untied_names = set(f.keys())
    with safe_open(str(tiny_model_dir_tied / "model.safetensors"), "pt") as f:
        tied_names = set(f.keys())
    assert untied_names - tied_names == {"lm_head.weight"}
    assert (tiny_model_dir / "tokenizer.json").read_bytes() == (
        tiny_model_dir_tied / "tokenizer.json"
    ).read_bytes()


def test_tokenizer_round_trips_and_has_the_chatml_and_tool_tokens(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    assert len(tok) == VOCAB_SIZE
    ids = tok.convert_tokens_to_ids(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>"]
    )
    assert ids == [4087, 4088, 4089, 4090, 4091, 4092]
    assert tok.eos_token_id == 4089 and tok.pad_token_id == 4087
    text = "def f(x):\n    return 'héllo 🙂\\t' # ünïcode\r\n\n"
    assert tok.decode(tok.encode(text)) == text
    # Tool markup is not "special": it survives skip_special_tokens, so vLLM's hermes parser sees it.
    sampled = tok.encode('<tool_call>\n{"name": "f"}\n</tool_call><|im_end|>')
    assert tok.decode(sampled, skip_special_tokens=True) == '<tool_call>\n{"name": "f"}\n</tool_call>'
    config = json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert "extra_special_tokens" not in config


def test_chat_template_renders_tools_calls_and_responses(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "content": "sunny"},
        {"role": "tool", "content": "warm"},
    ]
    text = tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
        in text
    )
    assert (
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nwarm\n</tool_response><|im_end|>\n"
        in text
    )
    assert text.endswith("<|im_start|>assistant\n")
    plain = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert plain == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_model_loads_in_transformers_with_the_expected_shape(tiny_model_dir_tied: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir_tied), dtype=torch.float32)
    assert model.config.model_type == "qwen3" and model.config.vocab_size == VOCAB_SIZE
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    logits = model(torch.tensor([[4088, 10, 20]])).logits
    assert logits.shape == (1, 3, VOCAB_SIZE) and torch.isfinite(logits).all()


def test_cli_rejects_a_file_as_target(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = CliRunner().invoke(cli, ["model", "init-tiny", str(target)])
    assert result.exit_code != 0
    assert target.read_text() == "x"
