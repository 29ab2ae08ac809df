"""The vLLM launch line and the serve command's input checks (no server is started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from services.cli.main import cli
from services.inference.launch import VllmLaunch
from services.inference.serve import served_context_length

pytestmark = pytest.mark.unit


def test_cpu_launch_has_the_exactness_and_rl_flags(tmp_path: Path) -> None:
    launch = VllmLaunch(model_dir=tmp_path, port=1234, cpu=True, cache_dir=tmp_path / "c")
    args = launch.command()
    assert args[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    for flag, value in [
        ("--dtype", "float32"),
        ("--distributed-executor-backend", "uni"),
        ("--worker-extension-cls", "services.inference.worker_extension.WeightUpdateExtension"),
        ("--port", "1234"),
    ]:
        assert args[args.index(flag) + 1] == value
    assert json.loads(args[args.index("--weight-transfer-config") + 1]) == {"backend": "safetensors_file"}
    assert "--enforce-eager" in args and "--enable-scale-out" in args
    # prompts prefilled whole: a CPU generator cannot rewind after a partial prefill of a seeded request
    assert "--no-enable-chunked-prefill" in args
    assert args[args.index("--max-num-batched-tokens") + 1] == str(launch.max_model_len)
    env = launch.environment({"PYTHONPATH": "/x"})
    assert env["VLLM_SERVER_DEV_MODE"] == "1" and env["OMP_NUM_THREADS"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["VLLM_CACHE_ROOT"] == str(tmp_path / "c")
    assert env["PYTHONPATH"].endswith(":/x")


def test_the_server_keeps_idle_connections_longer_than_any_client() -> None:
    """uvicorn's default 5 s keep-alive, shorter than aiohttp's pool, let a client reuse a socket the server was
    closing ("Server disconnected"); the server must outlast the client's pool (tests/e2e/test_small_model.py)."""
    from shared.inference_client import KEEPALIVE_S

    env = VllmLaunch(model_dir=Path("/m"), port=1, cpu=True).environment({})
    assert int(env["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"]) > KEEPALIVE_S * 2


def test_gpu_launch_keeps_the_model_dtype_and_compiles(tmp_path: Path) -> None:
    args = VllmLaunch(model_dir=tmp_path, port=1, cpu=False).command()
    assert "--dtype" not in args and "--enforce-eager" not in args and "--enable-scale-out" in args
    assert "OMP_NUM_THREADS" not in VllmLaunch(model_dir=tmp_path, port=1, cpu=False).environment({})


def test_context_length_is_capped_by_the_model(tiny_model_dir: Path) -> None:
    assert served_context_length(tiny_model_dir, 8192) == 4096
    assert served_context_length(tiny_model_dir, 2048) == 2048


def test_serve_refuses_a_directory_without_a_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", "inference", "--model", str(tmp_path)])
    assert result.exit_code == 2 and "has no config.json" in result.output
    result = CliRunner().invoke(cli, ["serve", "inference", "--model", str(tmp_path / "absent")])
    assert result.exit_code == 2 and "does not exist" in result.output
