# lattice_lgm — set-up, tests, demo and benchmarks.
# `make demo` and `make test` each do the whole set-up when something is missing:
# system libraries for CHOLMOD (apt-get, Debian), a .venv, and `pip install -e ".[gmrf,dev]"`.
# A second run skips what is there (stamp files below).
# LATTICE_LGM_NO_GMRF=1 skips the system libraries and scikit-sparse (the pip-only route).

PYTHON ?= python3
comma  := ,
VENV   := .venv
PY     := $(VENV)/bin/python
EXTRAS := $(if $(LATTICE_LGM_NO_GMRF),dev,gmrf,dev)
# stamps are keyed by route, so a pip-only set-up does not stop a later full one
SYSDEPS := $(if $(LATTICE_LGM_NO_GMRF),,$(VENV)/.sysdeps)
INSTALLED := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
# OMP_WAIT_POLICY is left alone: PASSIVE (DESIGN §8, for numba + FFTW pools competing) made
# FFTs of tori up to 512² 1.3-3x slower here while no numba pool runs (docs/architecture.md).

.PHONY: demo test test-slow test-all bench lint setup clean help

help:
	@echo "make demo       run the demo (sets everything up first)"
	@echo "make test       default test tier (< 15 min)"
	@echo "make test-slow  slow statistical tier"
	@echo "make bench      benchmarks -> benchmarks/results/"
	@echo "make lint       ruff"

setup: $(INSTALLED)

$(VENV)/.sysdeps:
	bash scripts/ensure_system_deps.sh
	@mkdir -p $(VENV) && touch $@

$(INSTALLED): pyproject.toml $(SYSDEPS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	@touch $@

# the demo writes demo_output/bei.zarr and demo_output/bei_maps; a previous demo run is replaced
# the library's thread budget (lattice_lgm.threads) shares the cores between Numba, OpenBLAS and
# FFTW: chains side by side, one thread each, nothing oversubscribed. In-process, not on Dask
# workers: two local Dask workers of two chains took 19.8 min for this run, 17 min of it system
# time (docs/convergence.md)
demo: setup
	rm -rf demo_output/bei.zarr demo_output/bei_maps
	$(VENV)/bin/lattice-lgm run examples/bei_demo.toml

test: setup
	$(PY) -m pytest -m "not slow" -q

test-slow: setup
	$(PY) -m pytest -m "slow" -q

test-all: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) benchmarks/perf/priors.py
	$(PY) benchmarks/perf/sampling.py
	$(PY) benchmarks/perf/dense.py
	$(PY) benchmarks/perf/mixing_lgcp.py
	$(PY) benchmarks/perf/threads.py
	$(PY) benchmarks/perf/threads.py --load 2
	$(PY) benchmarks/perf/startup.py

lint: setup
	$(VENV)/bin/ruff check lattice_lgm tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
