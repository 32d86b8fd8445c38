# The lab's entry points (`make help`). The instructors' part at the end (the solved edition, the
# tests, the maintainers' benchmark and reliability suite) is left out of the class edition, what
# students receive (labstack/class_edition.py).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install -q -c requirements/constraints.txt
STAMP := $(VENV)/.installed

.PHONY: help setup artifacts artifacts-only ray-node up down restart status clean

help::
	@echo "make up / down  start / stop the local stack (FastAPI, Flask, Triton, JupyterLab)"
	@echo "make up RAY=1   the same and a local Ray cluster of two nodes (notebook 9)"
	@echo "make status     what runs, healthy or not, and where the logs are"
	@echo "make restart SERVICE=triton   bring one service back (same port, token, model configs)"
	@echo "make artifacts  set up the venv and build the model files (artifacts/)"
	@echo "make ray-node   a class node's Ray for notebook 9 on two nodes (notebook 2, section 5)"

# --- environment: system packages + one venv with every pin from requirements/constraints.txt
$(STAMP): requirements/constraints.txt requirements/lab.txt scripts/install_system_packages.sh
	bash scripts/install_system_packages.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_INSTALL) -r requirements/lab.txt
	@# triton-model-analyzer's wheel writes its own perf_analyzer (no version) over tritonclient's:
	@# the lab's is tritonclient's 2.51, the server's release, so it goes back on top
	$(PIP_INSTALL) --no-deps --force-reinstall tritonclient
	$(PY) -m pip install -q --no-deps -e .
	@# nbgrader only makes the student edition (make notebooks): its JupyterLab parts stay off
	$(VENV)/bin/jupyter labextension disable --level=sys_prefix @jupyter/nbgrader >/dev/null
	for part in formgrader validate_assignment assignment_list course_list; do \
	  $(VENV)/bin/jupyter server extension disable --sys-prefix \
	    nbgrader.server_extensions.$$part >/dev/null 2>&1; done
	touch $@

setup: $(STAMP)

artifacts: setup
	$(PY) -m labstack.artifacts

# The class node's build of the model files (notebook 2): a venv with only what labstack/artifacts.py
# needs, not the local-mode lab and its tests (JupyterLab, Triton, pytest, ...). TORCH_INDEX_URL
# (e.g. https://download.pytorch.org/whl/cpu) brings a CPU-only torch: the files are the same.
BUILD_VENV := .venv-build
$(BUILD_VENV)/.installed: requirements/constraints.txt requirements/artifacts.txt
	test -x $(BUILD_VENV)/bin/python || $(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install -q -c requirements/constraints.txt \
	  $(if $(TORCH_INDEX_URL),--extra-index-url $(TORCH_INDEX_URL),) -r requirements/artifacts.txt
	$(BUILD_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

artifacts-only: $(BUILD_VENV)/.installed
	$(BUILD_VENV)/bin/python -m labstack.artifacts

# A class node of notebook 9's two-node Ray cluster (notebook 2, its optional last section): the
# model files as artifacts-only builds them, and a venv with Ray Serve and what a replica runs
# (requirements/ray_node.txt; Ray's version pinned in requirements/constraints.txt, as for .venv).
RAY_VENV := .venv-ray
$(RAY_VENV)/.installed: requirements/constraints.txt requirements/ray_node.txt
	test -x $(RAY_VENV)/bin/python || $(PYTHON) -m venv $(RAY_VENV)
	$(RAY_VENV)/bin/python -m pip install -q -c requirements/constraints.txt -r requirements/ray_node.txt
	$(RAY_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

ray-node: artifacts-only $(RAY_VENV)/.installed

# RAY=1: also a local Ray cluster, a head and a second node (notebook 9; its first cell starts it
# too); `make down` stops it with the rest
up: artifacts
	$(PY) -m labstack.launcher up --jupyter $(if $(RAY),--ray,)

down:
	@if [ -x $(PY) ]; then $(PY) -m labstack.launcher down; else echo "nothing to stop (no $(VENV))"; fi

status: setup
	$(PY) -m labstack.launcher status

# one service back (e.g. after a crash), same port, token and model configs: make restart SERVICE=triton
SERVICE ?= triton
restart: setup
	$(PY) -m labstack.launcher restart $(SERVICE)

clean: down
	rm -rf .lab results model_repository solutions

# ==== instructors and maintainers: not in the class edition (labstack/class_edition.py cuts here)
# The solved edition, the tests, the maintainers' wing (maintainers/: the benchmark, the
# reliability suite, the lease plan and the figures), and the class edition itself.
.PHONY: lab test test-fast test-chameleon test-extended test-docker docker-images
.PHONY: notebooks solutions timing figures class-edition
.PHONY: bench reliability soak

help::
	@echo ""
	@echo "instructors and maintainers (not in the class edition):"
	@echo "make lab        the solved benchmark notebooks run headless on the local stack -> results/"
	@echo "make lab QUICK=1  the same with small counts (a few minutes)"
	@echo "make test-fast  the fast tier, pytest -m 'not slow' (no server; on every core)"
	@echo "make test       the fast tier, the core slow tests, notebooks 3-6 run, the journey (under 20 min)"
	@echo "make test-chameleon  the fake Chameleon's class scenarios (notebooks 1-2)"
	@echo "make test-extended   notebooks 7, 8 and 9 headless, the reliability suite (maintainers'; not CI)"
	@echo "make test-docker  every Docker Compose stack built, started and used (~25 min)"
	@echo "make bench      benchmark script: PyTorch vs ONNX, Python load generator vs wrk"
	@echo "make reliability  fuzzing, soak, faults, safe defaults, make up RAY=1's stack -> docs/reliability.md"
	@echo "make soak       longer soak of every service, SOAK_SECONDS each (default 300)"
	@echo "make notebooks  the student edition notebooks/*.ipynb from notebook_sources/"
	@echo "make solutions  the solved edition solutions/*.ipynb (make lab and make test run it)"
	@echo "make timing     the lease plan per pass (docs/timing_plan.md) and the minutes quoted"
	@echo "make figures    every figure the texts quote, from its page in docs/results/"
	@echo "make class-edition  what students receive, no answers -> dist/class_edition/ (git)"

# --- the main job
# QUICK=1: the same notebooks with small counts (a few minutes)
lab: artifacts solutions
	$(PY) -m labstack.lab $(if $(QUICK),--quick,)

# The tests in tiers, each with its time budget on a 2-core machine (README, "Tests"): a slow
# test belongs to one of test, test-chameleon, test-extended or test-docker, by its file's name
# (tests/conftest.py, TIERS). --tier=NAME, never `--tier NAME`: pytest would read NAME as a path.
# test-fast on every core (pytest-xdist; its tests share no files, start no server, last about a
# second at most: a longer one is marked slow, make test's)
test-fast: artifacts
	$(PY) -m pytest -m "not slow" -p xdist.plugin -n auto --dist worksteal

# lint-imports first: a broken layers contract (pyproject.toml) fails in seconds
test: artifacts solutions
	$(VENV)/bin/lint-imports
	$(PY) -m pytest --tier=core

# -x: a first failure ends the run, and the class's scenarios still under way with it
test-chameleon: setup
	$(PY) -m pytest --tier=chameleon -x

test-extended: artifacts solutions
	$(PY) -m pytest --tier=extended

# The classroom path: a Docker engine (installed and started if missing), the registry base images
# (pulled, or local stand-ins where no registry answers: docker/standins/), then every compose
# stack built, started and used for real (tests/docker/). LAB_DOCKER_KEEP_IMAGES=1 keeps the images.
test-docker: docker-images
	LAB_DOCKER_TESTS=1 $(PY) -m pytest --tier=docker -v -s

# What test-docker needs before its tests: the engine, the base images, every stack's images
# built (CI's .ci/run builds them while `make test` runs; a second build is all cache)
docker-images: artifacts solutions
	bash scripts/install_docker_engine.sh $(PY)
	$(PY) docker/standins/ensure_base_images.py
	$(PY) tests/docker/compose_stack.py

# --- the maintainers' checks of the lab's own tools and services (maintainers/; not for a class)
bench: artifacts
	$(PY) -m maintainers.experiments.bench_fastapi

# reliability (maintainers/reliability/): the report's command, and the long form of its soak
SOAK_SECONDS ?= 300

reliability: artifacts
	$(PY) -m maintainers.reliability

soak: artifacts
	$(PY) -m maintainers.reliability --only soak --soak-seconds $(SOAK_SECONDS) --out results/reliability_soak.md

# One source per notebook (notebook_sources/, with nbgrader's solution regions), two editions:
# the student edition (notebooks/, committed) and the solved one (solutions/, git-ignored)
notebooks: setup
	$(PY) -m labstack.editions student

solutions: setup
	$(PY) -m labstack.editions solved

# the lease plan per pass, counted from the notebooks and the GPU reference (maintainers/timing/),
# and the minutes notebook 0, docs/instructors.md and docs/class_edition/README.md quote
timing: setup
	$(PY) -m maintainers.timing

# the figures README.md, docs/ and the notebooks' prose quote from docs/results/ (maintainers/figures/)
figures: setup
	$(PY) -m maintainers.figures

# What Trovi publishes and the class's nodes clone (docs/instructors.md): the student edition and
# what it runs, without notebook_sources/, solutions/, the answer key or the tests.
# CLASS_EDITION=DIR builds elsewhere (a clone of the class's repository, say).
CLASS_EDITION ?= dist/class_edition
class-edition: setup
	$(PY) -m labstack.class_edition $(CLASS_EDITION)
