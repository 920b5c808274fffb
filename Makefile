# The two commands of the README: `make demo` and `make test`. Both create .venv from the pins first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ctrgen-installed
# The Triton server binary (2.51) and its python backend come from this wheel, installed without its dependencies
# (they conflict with the NVTabular pins; docs/environment.md §8.2).
PYTRITON := nvidia-pytriton==0.7.0

.PHONY: demo test test-fast test-busy lint check regen venv clean mutate hostile browser-check

venv: $(STAMP)

$(STAMP): requirements/constraints.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "ctrgen needs Python 3.11 (NVTabular 23.8 pins)"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check 'pip==25.2'
	$(BIN)/python -m pip install -q --disable-pip-version-check -c requirements/constraints.txt -e '.[nvt,triton,test,torch,tensorboard,vertex,onnx]'
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps '$(PYTRITON)'
	@touch $@

demo: $(STAMP)
	$(BIN)/ctrgen demo --serve

# Bytecode on for the suite even where the environment turns it off (PYTHONDONTWRITEBYTECODE, as container images
# set): its processes (xdist workers, ctrgen and trainer runs) then compile codegen/ and tests/ once, not each.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest

# The whole suite with two CPU-bound processes beside it (started and stopped by tools/busy.py): no test may depend on
# the machine's load (docs/testing.md, "A busy machine").
test-busy: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python tools/busy.py --burners 2 -- $(BIN)/python -m pytest

# The inner loop after a change to one renderer (about 45 s of CPU): every test not marked slow (no NVTabular build, Triton
# server, trainer run or other process of seconds; `ctrgen check` of generated/ in-process included). `make test`
# runs all of them.
test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m "not slow" -q

# The project's sources: ruff and mypy as configured in pyproject.toml (.ci/run runs this before the suite).
lint: $(STAMP)
	$(BIN)/ruff check --no-cache codegen tools bench tests
	$(BIN)/mypy

check: $(STAMP)
	$(BIN)/ctrgen check

# Change each fact the generator owns, one at a time, and report the changes no test notices (not part of `make test`;
# a few minutes; docs/testing.md).
mutate: $(STAMP)
	$(BIN)/python tools/mutate.py

# Every hostile input of tools/hostile_cases.py, each in its own process under time, memory and file-size limits,
# and the table of outcomes (not part of `make test`, which runs the quick cases; about 2 minutes; docs/testing.md).
hostile: $(STAMP)
	$(BIN)/python tools/hostile.py

# Regenerate every committed output (generated/ and the test goldens); review the diff before committing.
regen: $(STAMP)
	$(BIN)/ctrgen generate specs/*.yaml
	$(BIN)/python -m pytest tests --update-goldens -q

# `ctrgen report` pages checked in a real headless browser (not part of `make test`): Debian's chromium and
# chromium-driver (apt-get, as root, when missing), selenium in its own environment (requirements/browser.txt), two
# short CPU runs of the demo's MovieLens spec with `ctrgen train` (two learning rates), the first run's report and the
# two runs' comparison page, then tools/browser_check.py on each.
BROWSER_VENV := .browser-venv
BROWSER_RUN  := .demo/runs/browser-check
BROWSER_RUN2 := .demo/runs/browser-check-lr
BROWSER_FLAGS := --device cpu --max-iter 100 --force -- --batch-size 256 --display 10 --eval-interval 20 --snapshot 0

browser-check: $(STAMP)
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver; }
	test -x $(BROWSER_VENV)/bin/python || $(PYTHON) -m venv $(BROWSER_VENV)
	$(BROWSER_VENV)/bin/python -m pip install -q --disable-pip-version-check -r requirements/browser.txt
	$(BIN)/ctrgen demo --only movielens
	$(BIN)/ctrgen train .demo/specs/movielens.yaml --out $(BROWSER_RUN) $(BROWSER_FLAGS)
	$(BIN)/ctrgen train .demo/specs/movielens.yaml --out $(BROWSER_RUN2) $(BROWSER_FLAGS) --lr 0.01
	$(BIN)/ctrgen report $(BROWSER_RUN)
	$(BIN)/ctrgen report $(BROWSER_RUN) $(BROWSER_RUN2) --out .demo/runs/browser-compare.html
	$(BROWSER_VENV)/bin/python tools/browser_check.py $(BROWSER_RUN)/report.html
	$(BROWSER_VENV)/bin/python tools/browser_check.py .demo/runs/browser-compare.html $(BROWSER_RUN) $(BROWSER_RUN2)

clean:
	rm -rf $(VENV) $(BROWSER_VENV) .demo
