# Two commands do all the set-up on a fresh machine:
#   make demo   run the main job on its embedded default (installs only what it needs)
#   make test   format check, lint, mypy --strict and the test suite (adds the dev tools)
# bash: the compile step reads PIPESTATUS
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test check clean chromium

# The load path's modules, compiled to C by mypyc when a C compiler is at hand (setup.py,
# src/pyattacker/_native.py; "The compiled load path" in docs/architecture.md). Compiling
# type-checks them against what they import, so it runs in the venv, after the runtime
# packages (no build isolation); an edited one is compiled again.
COMPILED := $(shell $(PYTHON) -c 'import runpy; print(*("src/" + p for p in runpy.run_path("src/pyattacker/_native.py")["COMPILED"]))')
CC ?= cc

# The runtime: pyattacker and its few dependencies, enough for the demo and `run`, and the
# tools that compile it (setuptools, mypy).
$(BIN)/.installed: pyproject.toml constraints.txt setup.py src/pyattacker/_native.py $(COMPILED)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pyattacker needs Python >= 3.11; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e .
	@if command -v $(CC) >/dev/null; then \
	  echo "make: compiling the load path (mypyc, about a minute)" >&2; \
	  $(BIN)/python -m pip install -q -c constraints.txt setuptools wheel mypy && \
	  PYATTACKER_COMPILE=1 $(BIN)/python -m pip install -q --no-build-isolation --no-deps \
	    -c constraints.txt -e . 2>&1 | grep -v '^cc1: note' >&2; \
	  exit $${PIPESTATUS[0]}; \
	else \
	  echo "make: no C compiler ($(CC)): pyattacker runs as pure Python, slower" >&2; \
	fi
	@touch $@

# The dev tools on top (pytest, mypy, ruff, and the extras the tests exercise), and the ray
# extra, so the Ray tests (`pytest -m ray`: a local Ray cluster) run in CI too. Ray is one
# wheel of about 80 MB: about 30 s more of pip on a fresh machine. Installed as
# requirements, so that pip does not build the package again (pure) over the compiled one.
$(BIN)/.installed-dev: $(BIN)/.installed
	$(BIN)/python -c 'import tomllib; extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]; print("\n".join(extras["dev"] + extras["ray"]))' > $(VENV)/dev-requirements.txt
	$(BIN)/python -m pip install -q -c constraints.txt -r $(VENV)/dev-requirements.txt
	@touch $@

# The demo exits 1 when some pipelines failed, and a few fail on purpose (empty documents
# that no retry can fix); that is the demo working, so make does not call it an error.
demo: $(BIN)/.installed
	$(BIN)/pyattacker demo || test $$? -eq 1

# The browser tests open the HTML reports in Debian's chromium (never a browser Playwright
# downloads). Installed once, where it is missing; a machine without apt-get is told so and
# its browser tests skip, saying why.
chromium:
	@[ -x /usr/bin/chromium ] || command -v chromium >/dev/null || { \
	  if ! command -v apt-get >/dev/null; then \
	    echo "make: no apt-get here; install chromium for the browser tests" >&2; \
	  else \
	    sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	    echo "make: installing chromium for the browser tests (apt-get)" >&2; \
	    $$sudo apt-get update -qq && \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  fi; }

test: $(BIN)/.installed-dev chromium
	PATH="$(abspath $(BIN)):$$PATH" scripts/check

check: test

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
