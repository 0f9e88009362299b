# The verbs humans and CI use. Each sets up what it needs on first use (a virtualenv from requirements.txt, the data).
# DATA=path/to/input.txt copies a local Tiny Shakespeare instead of downloading it (CI: DATA=../shared/data/input.txt).
# Every verb runs a module of the course package (course/): `python -m course.<package>.<module> --help` says more.
# Python 3.11 (any patch release from 3.11.2): the first one found, or PYTHON=/path/to/python3.11.
ifndef PYTHON
PYTHON := $(shell command -v python3.11 || command -v python3 || echo python3.11)
endif
DATA ?=
# make bench times Step 4: docs/performance.md's figures were measured on it, and a run is compared with them.
BENCH ?= --size 30 --size 60 --plain --step step4
VENV := .venv
BIN := $(VENV)/bin
JUPYTER_CONFIG := $(VENV)/etc/jupyter/jupyter_server_config.json
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help demo test test-browser pictures build check data grade report mutants bench system clean publish collect \
	backup restore clean-class test-hub hub hub-env hub-test-system hub-accounts hub-backup hub-restore passback roster lti-key
.DEFAULT_GOAL := help

help:  ## list every verb with what it does
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-z][a-z-]*:[^=]*## / {printf "  make %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

demo: data build  ## build the release and solution, autograde a demo class in demo/ (never a real class), print its grades
	$(BIN)/python -m course.grader.grade --demo

test: data system  ## lint, generated files fresh, nbval, graded classes, sandbox, Colab, browser; as root, also as a plain user
	$(BIN)/ruff check course tests hub nbgrader_config.py source/*/instructor
	$(BIN)/python -m pytest

test-browser: data system  ## only the browser tests: the student and instructor journeys in JupyterLab, in headless Chromium
	$(BIN)/python -m pytest tests/test_browser.py

pictures: test-browser  ## the browser tests, then their screenshots copied into docs/pictures/ (commit them: make test fails on stale ones)
	PYTHONPATH=tests $(BIN)/python -m support.docpictures

# The class past one machine (tests/hub/, docs/gradebook.md, docs/hub.md): real Unix users, nbgrader's exchange, a
# PostgreSQL gradebook shared by two graders, a JupyterHub installed by docs/hub.md's commands in a systemd machine of
# its own (tests/support/hub/machine.py). As root (CI): Debian's postgresql installed when missing, and `make hub-env` (the
# proxy, the environment every account runs from at HUB_ENV; nothing in /etc). Everything the tests start is stopped,
# and the accounts, homes and folders they make removed, when they end. Not as root: the tests skip, saying why.
test-hub: data system $(if $(filter 0,$(shell id -u)),hub-env hub-test-system)  ## as root: the exchange loop, the gradebook on PostgreSQL, two graders at once, the load test, the hub as docs/hub.md sets it up
	HUB_ENV=$(HUB_ENV) $(BIN)/python -m pytest tests/hub

# A solution whose source (and shipped files) did not change is not executed again: FORCE=1 executes every one.
build: $(VENV)/.installed  ## regenerate release/ and notebooks/ from source/ (executing the solutions whose source changed)
	$(BIN)/python -m course.authoring.build $(if $(FORCE),--force)

check: $(VENV)/.installed  ## fail if release/ or notebooks/ is stale
	$(BIN)/python -m course.authoring.build --check

# make collect LMS=canvas ZIP=submissions.zip [ROSTER=roster.csv] [DUE='2026-12-01 23:59+00:00'] [TIMES=times.csv] [STEP=step2]
collect: data  ## put an LMS bulk download (LMS=canvas|moodle ZIP=...) into submitted/ with nbgrader's zip_collect, the roster into the gradebook
	$(BIN)/python -m course.classroom.collect --lms "$(LMS)" --zip "$(ZIP)" $(if $(ROSTER),--roster "$(ROSTER)") \
	  $(if $(DUE),--due "$(DUE)") $(if $(TIMES),--times "$(TIMES)") $(if $(STEP),--step "$(STEP)")

# An LTI class (docs/lti.md): the platform in course.toml's [lti]; STEP=step4 posts only that step.
passback: data  ## LTI: the roster from the LMS, then every score that changed since the last run to it (LTI Advantage)
	$(BIN)/python -m course.reports.passback $(if $(STEP),--step "$(STEP)")

roster: data  ## LTI: the gradebook's students from the LMS (Names and Roles); who left is marked, never deleted
	$(BIN)/python -m course.reports.passback --roster

lti-key: $(VENV)/.installed  ## LTI: make the tool's key pair ([lti] private_key) and print the public JWK the LMS registers
	$(BIN)/python -m course.reports.passback --key

grade: data  ## autograde everything in submitted/, write feedback/, results/, grades*.csv and reports/index.html, print the grade table
	$(BIN)/python -m course.grader.grade

report: $(VENV)/.installed  ## rebuild the class report, reports/index.html, from the gradebook and results/ (after manual grading)
	$(BIN)/python -m course.reports.classreport

# The class's state (docs/grading.md): the gradebook and submitted/, autograded/, feedback/, results/, repairs/, reports/,
# lms/, grades*.csv. make clean never touches it; make clean-class removes it only after a backup.
backup: $(VENV)/.installed  ## back up the class into backups/<UTC time>/: the gradebook (SQLite's online backup, or pg_dump) and its folders
	$(BIN)/python -m course.classroom.backup

restore: $(VENV)/.installed  ## put a backup back (BACKUP=backups/<time>) into a course with no class
	@[ -n "$(BACKUP)" ] || { echo "error: say which backup: make restore BACKUP=backups/<time> (ls backups/)"; exit 1; }
	$(BIN)/python -m course.classroom.backup --restore "$(BACKUP)"

clean-class: $(VENV)/.installed  ## back up the class (as make backup), then remove it: the gradebook and its folders (a new term)
	$(BIN)/python -m course.classroom.backup --remove-class

mutants: data  ## grade the demo class and print each step's kill matrix: which test cells each known mistake loses points in
	$(BIN)/python -m course.grader.grade --demo --kill-matrix

bench: data  ## time grading classes of 30 and 60 (Step 4): plain serial nbgrader against make grade (a benchmark, not a test)
	$(BIN)/python -m course.grader.benchmark $(BENCH)

# NOW=2027-02-10T12:00:00+00:00 previews that moment, in student-preview/ ([publish] folder + -preview); OUT=path writes
# elsewhere. Refused while course.toml's [publish] github is the placeholder the course ships with.
publish: $(VENV)/.installed  ## write the student repository (course.toml [publish] folder) by the release schedule, from fresh generated files
	@$(BIN)/python -m course.settings --publish
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

# torch from PyTorch's own index of CPU builds (its 2.13.0+cpu satisfies requirements.txt's torch==2.13.0, and is taken
# over PyPI's 2.13.0, which on Linux is the multi-GB CUDA build), installed first, alone (--no-deps: its dependencies come
# with requirements.txt), so that only this one lookup asks that index: where it cannot be reached (CI, offline), pip
# warns and finds the pinned torch where it is configured to (--retries 1: a failed lookup costs a second, not 9).
# A CUDA build on purpose: make TORCH_INDEX=https://download.pytorch.org/whl/cu128 demo, on a fresh .venv (README.md).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIN := $(shell grep -m1 -o '^torch==[^ #]*' requirements.txt)
define install_torch
	$(1)/pip install --quiet --disable-pip-version-check --no-compile --no-deps --retries 1 \
	  --extra-index-url $(TORCH_INDEX) "$(TORCH_PIN)"
endef

$(VENV)/.installed: requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: no $(PYTHON) on PATH: this course needs Python 3.11 (apt install python3.11 python3.11-venv, or uv python install 3.11), then make PYTHON=/path/to/python3.11 ..."; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info; sys.exit(None if v[:2] == (3, 11) else f"error: this course needs Python 3.11 (its lock pins torch 2.13.0 and is tested on 3.11 only); {sys.executable} is {v.major}.{v.minor}.{v.micro}: install python3.11 (apt install python3.11 python3.11-venv, or uv python install 3.11) and run make PYTHON=/path/to/python3.11 ...")'
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "error: $(PYTHON) -m venv failed: install the venv module (Debian/Ubuntu: apt install python3.11-venv), then run make again"; exit 1; }
	@# compiled after the install on every core, not by pip on one (a sandboxed kernel cannot write what it imports:
	@# it must find it compiled): 152 s -> 118 s on 2 idle cores. As pip does, a file that does not compile is left
	@# as it is (torch ships one in Python 3.12's syntax).
	$(call install_torch,$(BIN))
	$(BIN)/pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null || true
	touch $@

# The class's hub (docs/hub.md), as root, from a checkout root has reviewed (root runs what it installs): hub/install.sh
# puts the environment every server runs from (the system's python3.11 with requirements.txt and hub/requirements.txt),
# the proxy, the per-role settings and a verified Tiny Shakespeare in HUB_ENV; the hub's configuration in /etc/transformer-hub;
# its systemd units; /etc/profile.d/transformer-hub.sh (a hub terminal finds the course's commands); the admin commands
# as /usr/local/sbin/transformer-hub. Debian packages only when missing, never an upgrade. What is current is kept.
HUB_ENV ?= /opt/transformer-hub
HUB_ADMIN := /usr/local/sbin/transformer-hub
hub:  ## as root: install the hub (environment, proxy, configuration in /etc/transformer-hub, systemd units); docs/hub.md
	HUB_ENV=$(HUB_ENV) DATA=$(DATA) TORCH_INDEX=$(TORCH_INDEX) bash hub/install.sh

hub-env:  ## as root: only the hub's environment at HUB_ENV (what make test-hub needs; nothing in /etc)
	HUB_ENV=$(HUB_ENV) DATA=$(DATA) TORCH_INDEX=$(TORCH_INDEX) HUB_ENV_ONLY=1 bash hub/install.sh

# What only the tests need beside the hub: Debian's postgresql (tests/hub's gradebook), when missing.
HUB_TEST_PACKAGES := $(if $(wildcard /usr/lib/postgresql/*/bin/initdb),,postgresql)
hub-test-system:  ## as root: what only make test-hub needs beside the hub (Debian's postgresql for the gradebook tests), when missing
ifneq ($(strip $(HUB_TEST_PACKAGES)),)
	$(call apt_install,$(HUB_TEST_PACKAGES))
endif

# make hub-accounts ROSTER=roster.csv: accounts, the course's groups, initial passwords (in a root-only file); safe to run again
hub-accounts:  ## as root: Unix accounts and groups of the hub's class from ROSTER (username,role,name), new ones with a password
	$(HUB_ADMIN) accounts "$(ROSTER)"

hub-backup:  ## as root: the gradebook, the hub's state and configuration into one archive (BACKUP_DIR, default /var/backups/transformer-hub)
	$(HUB_ADMIN) backup $(if $(BACKUP_DIR),--to "$(BACKUP_DIR)")

hub-restore:  ## as root: put back what BACKUP=<archive> holds (the hub stopped meanwhile)
	$(HUB_ADMIN) restore "$(BACKUP)"

# Never a class's state (make clean-class, after a backup), nor backups/, input.txt, .venv or the student repository.
clean:  ## remove build products, test artifacts and the demo's course (demo/); a real class is kept
	rm -rf demo test-artifacts $(wildcard *-preview) .pytest_cache .ruff_cache
	find .build -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} + 2>/dev/null || true
