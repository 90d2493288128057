# gradswitch: every command a user or CI runs goes through this file.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
GRADSWITCH := $(VENV)/bin/gradswitch
PYTEST_ARGS ?=
# Mininet needs root: commands that bring networks up go through sudo for a normal user.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -E)

.PHONY: help venv build sim test lint demo bench doctor clean

help:
	@echo "make venv       create $(VENV) with every Python dependency"
	@echo "make build      compile gradswitch/p4src/gradswitch.p4 with p4c-bm2-ss (warnings are errors)"
	@echo "make sim        install the ns-3 wheel into $(VENV) and build the simulator (build/ns3/gradswitch-sim)"
	@echo "make test       the test suite (tests needing BMv2/p4c/root skip where those are missing)"
	@echo "make lint       ruff, mypy and vermin (nothing newer than Python 3.10, the floor)"
	@echo "make demo       leafspine network, ping all pairs, tear down (needs root and BMv2)"
	@echo "make bench      benchmarks under bench/"
	@echo "make doctor     which tools are present and what fails without them"

# A stamp file marks the installed venv: $(PY) is a symlink to the system's interpreter, which `touch` would follow.
INSTALLED := $(VENV)/.installed

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(INSTALLED)

venv: $(INSTALLED)

build: $(INSTALLED)
	$(GRADSWITCH) build

sim: $(INSTALLED)
	$(PY) -m gradswitch.sim.build

test: $(INSTALLED)
	$(PY) -m pytest $(PYTEST_ARGS)

# Python 3.10 is the floor (requires-python; Ubuntu 22.04 in the Vagrant VM): mypy checks as 3.10
# (pyproject.toml), vermin finds any module, function or syntax newer than that.
LINTED := gradswitch tests bench

lint: $(INSTALLED)
	$(PY) -m ruff check $(LINTED)
	$(PY) -m mypy
	$(VENV)/bin/vermin -q --no-tips --violations --eval-annotations -t=3.10- $(LINTED)

demo: $(INSTALLED)
	$(SUDO) $(GRADSWITCH) net --topo leafspine --leaves 2 --spines 2 --hosts-per-leaf 2 --pingall

bench: $(INSTALLED)
	$(PY) -m bench.forwarding

doctor: $(INSTALLED)
	$(GRADSWITCH) doctor

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -prune -exec rm -rf {} +
