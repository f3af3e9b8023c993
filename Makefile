# The README's first two commands: `make train` and `make test`.
# Both create .venv (Python >= 3.11) on first use and are quick the second time.

PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { command -v $$p; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# torch is pinned in the set-up path only (the package metadata says torch>=2.2):
# 2.13.0 is the CPU build available offline on the development machines.
TORCH_PIN ?= torch==2.13.0
GAME ?= microrts
ARGS ?=
TEST_ARGS ?=

.PHONY: train test install install-dev bench lint clean-venv

$(PY):
	@test -n "$(PYTHON)" || { echo "error: Python >= 3.11 not found; install python3.11 or set PYTHON=/path/to/python" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel

$(VENV)/.stamp-train: pyproject.toml | $(PY)
	$(PIP) install "$(TORCH_PIN)"
	$(PIP) install -e ".[microrts,league,video]"
	$(VENV)/bin/selfplay setup microrts
	@touch $@

$(VENV)/.stamp-dev: pyproject.toml $(VENV)/.stamp-train
	$(PIP) install -e ".[all]"
	@# headless Chromium renders the league report in a test (Debian package; skipped without,
	@# failed without when SELFPLAY_REQUIRE_CHROMIUM=1, as in .ci/run)
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq chromium >/dev/null) ; } || \
		echo "warning: chromium not installed; the report render test will be skipped" \
			"(or fail, with SELFPLAY_REQUIRE_CHROMIUM=1)"
	@touch $@

install: $(VENV)/.stamp-train
install-dev: $(VENV)/.stamp-dev

train: install
	$(VENV)/bin/selfplay train --game $(GAME) $(ARGS)

test: install-dev
	$(PY) -m pytest -q $(TEST_ARGS)

bench: install-dev
	$(PY) -m pytest -q -m slow $(TEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check selfplay games league tools tests
	$(VENV)/bin/mypy selfplay games league

clean-venv:
	rm -rf $(VENV)
