# Two commands do all the set-up: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch==2.13.0 (CPU) lies on this kind of machine's disk; use it when present.
WHEELS := $(wildcard /opt/wheels)
PIP    := $(BIN)/python -m pip install -q $(if $(WHEELS),--find-links $(WHEELS))
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test bench install install-test chromium clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Debian's Chromium drives the browser tests; nothing is downloaded by Playwright.
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi; }

run: install
	$(BIN)/mha-explorer serve --host $(HOST) --port $(PORT)

test: install-test chromium
	$(BIN)/python -m pytest

bench: install-test chromium
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
