# The verbs humans and CI use. Each sets up what it needs on first use (a virtualenv from requirements.txt, the data).
# DATA=path/to/input.txt copies a local Tiny Shakespeare instead of downloading it (CI: DATA=../shared/data/input.txt).
# Every verb runs a module of the course package (course/): `python -m course.<package>.<module> --help` says more.
# Python 3.11 (any patch release from 3.11.2): the first one found, or PYTHON=/path/to/python3.11.
ifndef PYTHON
PYTHON := $(shell command -v python3.11 || command -v python3 || echo python3.11)
endif
DATA ?=
BENCH ?= --size 30 --size 60 --plain --step step4
VENV := .venv
BIN := $(VENV)/bin
JUPYTER_CONFIG := $(VENV)/etc/jupyter/jupyter_server_config.json
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test test-browser pictures build check data grade mutants bench system clean publish collect test-hub hub hub-system

demo: data build  ## build the release and solution, autograde a demo class, print its grades
	$(BIN)/python -m course.grader.grade --demo

test: data system  ## lint, generated files fresh, nbval, graded classes, sandbox, Colab, browser; as root, also as a plain user
	$(BIN)/ruff check course tests hub nbgrader_config.py source/*/instructor
	$(BIN)/python -m pytest

test-browser: data system  ## only the browser tests: the student and instructor journeys in JupyterLab, in headless Chromium
	$(BIN)/python -m pytest tests/test_browser.py

pictures: test-browser  ## the browser tests, then their screenshots copied into docs/pictures/ (commit them: make test fails on stale ones)
	$(BIN)/python tests/docpictures.py

# The class past one machine (tests/hub/, docs/gradebook.md, docs/hub.md): real Unix users, nbgrader's exchange, a
# PostgreSQL gradebook shared by two graders, a JupyterHub. As root (CI): Debian's postgresql installed when missing,
# and `make hub` (the proxy, the environment every account runs from at HUB_ENV). Everything the tests start is
# stopped, and the homes and folders they make removed, when they end. Not as root: the tests skip, saying why.
test-hub: data system $(if $(filter 0,$(shell id -u)),hub)  ## as root: the exchange loop, the gradebook on PostgreSQL, two graders at once, the load test, the hub
	HUB_ENV=$(HUB_ENV) $(BIN)/python -m pytest tests/hub

build: $(VENV)/.installed  ## regenerate release/ and notebooks/ from source/
	$(BIN)/python -m course.authoring.build

check: $(VENV)/.installed  ## fail if release/ or notebooks/ is stale
	$(BIN)/python -m course.authoring.build --check

# make collect LMS=canvas ZIP=submissions.zip [ROSTER=roster.csv] [DUE='2026-12-01 23:59+00:00'] [TIMES=times.csv] [STEP=step2]
collect: data  ## put an LMS bulk download (LMS=canvas|moodle ZIP=...) into submitted/ with nbgrader's zip_collect, the roster into the gradebook
	$(BIN)/python -m course.classroom.collect --lms "$(LMS)" --zip "$(ZIP)" $(if $(ROSTER),--roster "$(ROSTER)") \
	  $(if $(DUE),--due "$(DUE)") $(if $(TIMES),--times "$(TIMES)") $(if $(STEP),--step "$(STEP)")

grade: data  ## autograde everything in submitted/, write feedback/, results/, grades*.csv and reports/index.html, print the grade table
	$(BIN)/python -m course.grader.grade

mutants: data  ## grade the demo class and print each step's kill matrix: which test cells each known mistake loses points in
	$(BIN)/python -m course.grader.grade --demo --kill-matrix

bench: data  ## time grading classes of 30 and 60 (Step 4): plain serial nbgrader against make grade (a benchmark, not a test)
	$(BIN)/python -m course.grader.benchmark $(BENCH)

# NOW=2027-02-10T12:00:00+00:00 publishes as at that moment (to preview a release date); OUT=path writes elsewhere.
publish: $(VENV)/.installed  ## write the student repository (course.toml [publish] folder) by the release schedule, from fresh generated files
	$(BIN)/python -m course.authoring.build --check
	$(BIN)/python -m course.authoring.publish $(if $(NOW),--now $(NOW)) $(if $(OUT),--out $(OUT))

data: $(VENV)/.installed $(JUPYTER_CONFIG)  ## put a verified Tiny Shakespeare at input.txt
	$(BIN)/python -m course.authoring.data $(if $(DATA),--from $(DATA))

# What the tests need from the system: bubblewrap (the grading sandbox), Debian's chromium (the browser tests), and the
# system's python3.11 with its venv module (tests/test_nonroot.py builds the course with it as a plain account).
# As root with apt-get (CI), installed when missing; otherwise the tests that need them skip and say why.
SYSTEM_PACKAGES := $(if $(shell command -v bwrap),,bubblewrap) $(if $(wildcard /usr/bin/chromium),,chromium fonts-liberation) \
	$(if $(shell /usr/bin/python3.11 -c 'import ensurepip' 2>/dev/null && echo ok),,python3.11 python3.11-venv)
system:  ## install bubblewrap, chromium and python3.11-venv with apt-get when missing (as root; else a note)
ifneq ($(strip $(SYSTEM_PACKAGES)),)
	$(call apt_install,$(SYSTEM_PACKAGES))
endif

# $(call apt_install,PACKAGES): as root with apt-get, install them (apt-get update first only if the install fails; waits
# for another apt's lock); otherwise a note that the tests needing them will skip.
define apt_install
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; apt="apt-get -o DPkg::Lock::Timeout=900"; \
	  $$apt install -y -qq --no-install-recommends $(1) >/dev/null 2>&1 \
	  || { $$apt update -qq >/dev/null && $$apt install -y -qq --no-install-recommends $(1) >/dev/null; } \
	  || echo "warning: apt-get could not install $(1): the tests that need them will skip"; \
	else echo "note: $(1) missing and not root with apt-get: the tests that need them will skip"; fi
endef

# JupyterLab run from this venv (.venv/bin/jupyter lab) does not list the files SQLite keeps beside gradebook.db while
# make grade writes it, nor half-written downloads: such a file gone between jupyter_server's look at a folder and its
# look at the file makes the whole listing fail ("Directory not found" over the file browser). docs/grading.md.
$(JUPYTER_CONFIG): course/jupyter_server_config.json $(VENV)/.installed
	mkdir -p $(@D)
	cp $< $@

$(VENV)/.installed: requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: no $(PYTHON) on PATH: this course needs Python 3.11 (apt install python3.11 python3.11-venv, or uv python install 3.11), then make PYTHON=/path/to/python3.11 ..."; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info; sys.exit(None if v[:2] == (3, 11) else f"error: this course needs Python 3.11 (its lock pins torch 2.13.0 and is tested on 3.11 only); {sys.executable} is {v.major}.{v.minor}.{v.micro}: install python3.11 (apt install python3.11 python3.11-venv, or uv python install 3.11) and run make PYTHON=/path/to/python3.11 ...")'
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "error: $(PYTHON) -m venv failed: install the venv module (Debian/Ubuntu: apt install python3.11-venv), then run make again"; exit 1; }
	@# compiled after the install on every core, not by pip on one (a sandboxed kernel cannot write what it imports:
	@# it must find it compiled): 152 s -> 118 s on 2 idle cores. As pip does, a file that does not compile is left
	@# as it is (torch ships one in Python 3.12's syntax).
	$(BIN)/pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null || true
	touch $@

# The class's hub (hub/jupyterhub_config.py, docs/hub.md), as root: Debian's postgresql, nodejs and npm when missing, the proxy from
# npm into hub/node_modules (hub/package-lock.json, never global), and the environment every account's server runs
# from, at HUB_ENV: the system's python3.11 (readable by every account, unlike a Python in root's home) with
# requirements.txt, and hub/roles/ beside it. Rebuilt when requirements.txt changes.
HUB_ENV ?= /opt/transformer-hub
HUB_PYTHON ?= /usr/bin/python3.11
HUB_PACKAGES := $(if $(wildcard /usr/lib/postgresql/*/bin/initdb),,postgresql) $(if $(shell command -v npm),,nodejs npm)
hub: hub-system hub/node_modules/.installed $(HUB_ENV)/.installed  ## as root: install the hub (proxy, shared environment) for hub/jupyterhub_config.py
	rm -rf $(HUB_ENV)/share/course-hub/roles
	mkdir -p $(HUB_ENV)/share/course-hub
	cp -r hub/roles $(HUB_ENV)/share/course-hub/roles
	mkdir -p $(HUB_ENV)/share/jupyter/lab/settings
	cp hub/overrides.json $(HUB_ENV)/share/jupyter/lab/settings/overrides.json  # no news or update prompts in a class
	chmod -R a+rX $(HUB_ENV)

hub-system:  ## Debian's postgresql, nodejs and npm, when missing (as root)
ifneq ($(strip $(HUB_PACKAGES)),)
	$(call apt_install,$(HUB_PACKAGES))
endif

hub/node_modules/.installed: hub/package.json hub/package-lock.json
	@command -v npm >/dev/null || { echo "error: no npm: as root, make hub-system (apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix hub --no-audit --no-fund --loglevel=error
	touch $@

$(HUB_ENV)/.installed: requirements.txt
	@[ -x $(HUB_PYTHON) ] || { echo "error: no $(HUB_PYTHON): apt install python3.11 python3.11-venv (or HUB_PYTHON=...)"; exit 1; }
	mkdir -p $(HUB_ENV)
	$(HUB_PYTHON) -m venv $(HUB_ENV)
	$(HUB_ENV)/bin/pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt
	$(HUB_ENV)/bin/python -m compileall -q -j 0 $(HUB_ENV)/lib >/dev/null || true
	touch $@

clean:  ## remove everything generated that is not committed (keeps input.txt and .venv)
	rm -rf .build autograded/*/ feedback submitted repairs results gradebook.db grades*.csv reports test-artifacts lms
