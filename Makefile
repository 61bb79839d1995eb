# Two commands do all the set-up on a fresh machine:
#   make demo   run the main job on its embedded default (installs only what it needs)
#   make test   format check, lint, mypy --strict and the test suite (adds the dev tools)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test check clean chromium

# The runtime: pyattacker and its few dependencies, enough for the demo and `run`.
$(BIN)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pyattacker needs Python >= 3.11; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e .
	@touch $@

# The dev tools on top (pytest, mypy, ruff, and the extras the tests exercise), and the ray
# extra, so the Ray tests (`pytest -m ray`: a local Ray cluster) run in CI too. Ray is one
# wheel of about 80 MB: about 30 s more of pip on a fresh machine.
$(BIN)/.installed-dev: $(BIN)/.installed
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,ray]'
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
