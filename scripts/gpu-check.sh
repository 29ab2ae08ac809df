#!/usr/bin/env bash
# The prepared GPU check (benchmarks/gpu_check.py): CUDA FlexAttention trie gradients vs per_request, FSDP2 on
# one GPU, and the learner bench on a random-weight Qwen3-4B-shaped model. Needs torch (CUDA), transformers and numpy;
# no vLLM, no network. Writes one JSON file (default gpu-check.json). Without CUDA it runs on CPU with a small config.
#   scripts/gpu-check.sh [OUT.json] [--layers N]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-check.json}"
shift || true
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
  timeout "${GPU_CHECK_TIMEOUT_S:-470}" "${PYTHON:-python3}" -m benchmarks.gpu_check --out "$out" "$@"
