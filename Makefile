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
# jax likewise, in the test set-up only (the `lux` extra says jax>=0.4.30): the Lux golden
# trajectory (tests/games/lux) was measured with it, and XLA versions round ties differently
JAX_PIN ?= jax==0.10.2 jaxlib==0.10.2
GAME ?= microrts
# Lux (games/lux): Jux and the official engine, installed without their dependencies (the `lux`
# extra has them; juxai-s2 pins jax[cuda11]==0.4.7, which has no wheel for Python >= 3.11), and
# vec_noise, the C extension the official engine's map generator imports: it has no wheel and
# builds only with pip <= 25.2 (run from a temporary folder; the venv's pip stays) and two
# compiler flags. Without a C compiler it is skipped with a warning: Jux does not need it.
LUX_ENGINE := juxai-s2==3.0.0 luxai-s2==3.0.1
VEC_NOISE := vec-noise==1.1.4
VEC_NOISE_LOG := $(VENV)/vec_noise-build.log
ARGS ?=
TEST_ARGS ?=
# `make test` runs its files in this many pytest processes (pytest-xdist; a file's tests stay in
# one process, so its fixtures and JAX compilations are shared): 1 runs them in this process
TEST_WORKERS ?= 2

.PHONY: train test install install-dev install-lux bench lint clean-venv

$(PY):
	@test -n "$(PYTHON)" || { echo "error: Python >= 3.11 not found; install python3.11 or set PYTHON=/path/to/python" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel

$(VENV)/.stamp-train: pyproject.toml | $(PY)
	$(PIP) install "$(TORCH_PIN)"
	$(PIP) install -e ".[microrts,league,video]"
	$(VENV)/bin/selfplay setup microrts
	@touch $@

# after the `lux` extra: Jux, luxai_s2 and vec_noise (see LUX_ENGINE above)
define install_lux_engine
	$(PIP) install --no-deps $(LUX_ENGINE)
	@$(PY) -c "import vec_noise" 2>/dev/null || { \
	  cc=$$($(PY) -c "import os, sysconfig; print((os.environ.get('CC') or sysconfig.get_config_var('CC') or 'cc').split()[0])"); \
	  inc=$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['include'])"); \
	  skip="the official Lux engine cannot generate maps (Jux can)"; \
	  if ! command -v "$$cc" >/dev/null 2>&1; then \
	    echo "warning: vec_noise not built: no C compiler ($$cc) found; $$skip; install gcc and run make install-dev again"; \
	  elif [ ! -f "$$inc/Python.h" ]; then \
	    echo "warning: vec_noise not built: no Python headers ($$inc/Python.h; Debian: python3-dev); $$skip"; \
	  else \
	    tmp=$$(mktemp -d) && \
	    { $(PIP) install --target "$$tmp" "pip==25.2" && \
	      CFLAGS="-D_COMPLEX_H -fgnu89-inline" PYTHONPATH="$$tmp" $(PY) -m pip --disable-pip-version-check \
	        install --no-deps --no-build-isolation --no-use-pep517 --no-binary vec-noise $(VEC_NOISE); \
	    } >$(VEC_NOISE_LOG) 2>&1 && rm -f $(VEC_NOISE_LOG) || \
	      echo "warning: vec_noise did not build (see $(VEC_NOISE_LOG)); $$skip"; \
	    rm -rf "$$tmp"; \
	  fi; }
endef

$(VENV)/.stamp-dev: pyproject.toml $(VENV)/.stamp-train
	$(PIP) install -e ".[all]" $(JAX_PIN)
	$(install_lux_engine)
	@# headless Chromium renders the league report in a test (Debian package; skipped without,
	@# failed without when SELFPLAY_REQUIRE_CHROMIUM=1, as in .ci/run)
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq chromium >/dev/null) ; } || \
		echo "warning: chromium not installed; the report render test will be skipped" \
			"(or fail, with SELFPLAY_REQUIRE_CHROMIUM=1)"
	@touch $@

# `make train GAME=lux`: the lux extra, Jux and the official engine on top of the train set-up
$(VENV)/.stamp-lux: pyproject.toml $(VENV)/.stamp-train
	$(PIP) install -e ".[lux]"
	$(install_lux_engine)
	$(VENV)/bin/selfplay setup lux
	@touch $@

LUX_GAMES := lux luxai_s2 lux_ai_s2 luxai-s2 lux-s2
NEEDS_LUX := $(filter $(LUX_GAMES),$(shell echo '$(GAME)' | tr 'A-Z' 'a-z'))

install: $(VENV)/.stamp-train
install-dev: $(VENV)/.stamp-dev
install-lux: $(VENV)/.stamp-lux

train: install $(if $(NEEDS_LUX),$(VENV)/.stamp-lux)
	$(VENV)/bin/selfplay train --game $(GAME) $(ARGS)

test: install-dev
	$(PY) -m pytest -q $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(TEST_ARGS)

bench: install-dev
	$(PY) -m pytest -q -m slow $(TEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check selfplay games league tools tests
	$(VENV)/bin/mypy selfplay games league

clean-venv:
	rm -rf $(VENV)
