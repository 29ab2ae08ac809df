# One entry point for set-up, checks and the demo. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export OMP_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install install-python install-system install-harnesses lint typecheck test test-fast demo clean

install: install-system install-python install-harnesses

# System packages (bubblewrap, the sandbox toolchain). Needs root; skipped where they are already present.
install-system:
	bash scripts/install-system.sh

# The virtual environment: the project, its dev tools, and vLLM (the CPU build here; CUDA vLLM on GPU hosts).
install-python: $(BIN)/harnessrl

$(BIN)/harnessrl: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	# vLLM first: it pins the torch build (CPU or CUDA) that everything else then shares.
	bash services/inference/install-vllm.sh --python $(BIN)/python
	$(BIN)/pip install -q -e ".[dev,embedded]"
	touch $(BIN)/harnessrl

# The real harness CLIs from npm, at pinned versions, outside root's home so sandboxed uids can run them.
install-harnesses:
	bash scripts/install-harnesses.sh

lint: install-python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install-python
	$(BIN)/mypy shared services/learner/grpo.py

test: install lint typecheck
	$(BIN)/pytest tests -q

test-fast: install-python
	$(BIN)/pytest tests -q -m "unit"

demo: install
	$(BIN)/harnessrl demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
