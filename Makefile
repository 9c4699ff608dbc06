# statestore-admin: `make run` (embedded demo) and `make test` are the two commands the README promises;
# `make serve` is the production server (README, "Production").
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install install-dev run serve test test-postgres test-compat test-image lint schema clean-demo image messages

# Runtime requirements only (what `make run` and `make serve` need); reinstalled when requirements.txt changes.
$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

# Tests and development tools on top (requirements-dev.txt includes requirements.txt).
$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

# The OpenID provider the single sign-on browser tests start (tests/oidc_provider/, pinned by its package-lock.json);
# without npm those tests are skipped, saying so (in CI they fail).
OIDC_PROVIDER := tests/oidc_provider
$(OIDC_PROVIDER)/node_modules/.package-lock.json: $(OIDC_PROVIDER)/package-lock.json
	@if command -v npm >/dev/null; then cd $(OIDC_PROVIDER) && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm is missing: tests/browser/shell/test_oidc_sign_in.py will be skipped (apt-get install -y nodejs npm)"; fi

# checkov, the static security check of deploy/k8s (tests/deploy/test_k8s_manifests.py), in a virtualenv of its
# own (it requires a packaging older than the dashboard's), built once per version like the Airflow ones.
CHECKOV_VENV := $(HOME)/.cache/statestore-admin/checkov-$(shell sed -n 's/^checkov==//p' requirements-checkov.txt)
# Its own interpreter, python3, whatever PYTHON is: its pins need Python 3.11.5 or newer. A fresh clone's
# requirements-checkov.txt is newer than the venv: it is refreshed in place, or made anew where another
# interpreter made it (venv over it leaves a python that cannot import ssl).
CHECKOV_PYTHON ?= python3
$(CHECKOV_VENV)/bin/checkov: requirements-checkov.txt
	[ "$$($(CHECKOV_VENV)/bin/python -c 'import ssl, sys; print(sys.base_prefix)' 2>/dev/null)" = \
	  "$$($(CHECKOV_PYTHON) -c 'import sys; print(sys.base_prefix)')" ] || rm -rf $(CHECKOV_VENV)
	$(CHECKOV_PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet -r requirements-checkov.txt
	touch $@

install-dev: $(VENV)/.installed-dev $(OIDC_PROVIDER)/node_modules/.package-lock.json $(CHECKOV_VENV)/bin/checkov

# The embedded demo: both databases are SQLite files in var/demo/, whatever the environment says; nothing of it
# (its users, their password) is in var/dashboard.sqlite3, the database of a dashboard on a real Airflow.
run: export STATESTORE_DEMO = 1
run: install
	$(PY) manage.py migrate --noinput --verbosity 0
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py demo_setup --url http://$(HOST):$(PORT)/
	$(PY) manage.py runserver $(HOST):$(PORT)

# Production: gunicorn (gunicorn.conf.py) on $(HOST):$(PORT), configured by the environment (README, "Production").
serve: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	HOST=$(HOST) PORT=$(PORT) exec $(VENV)/bin/gunicorn --config gunicorn.conf.py

# SQLite by default; STATESTORE_TEST_DB=postgres runs the same suite on PostgreSQL (127.0.0.1:5432).
# PYTEST_ARGS: more arguments for pytest (.ci/run leaves the browser tests to one of its stages).
# TEST_WORKERS: pytest-xdist's worker processes. Four on two cores: much of a test's time is waiting (on a live
# server, a browser, a subprocess, a database), and worksteal hands a worker that is done the queue of a busy
# one, so one slow file does not hold the run's end. TEST_WORKERS=0 runs in one process (a debugger, -x).
PYTEST_ARGS ?=
TEST_WORKERS ?= 4
# The suite starts some hundreds of Python processes of the same code (manage.py, servers, fresh clones, Airflow's
# commands): with PYTHONDONTWRITEBYTECODE set (some machines set it for every process), each compiled the project's
# modules again and pytest rewrote every test module again. Empty is Python's default, caching bytecode.
test test-compat test-image: export PYTHONDONTWRITEBYTECODE =
test: install-dev
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

test-postgres:
	STATESTORE_TEST_DB=postgres $(MAKE) test

# Ruff, then the import contracts of pyproject.toml: the layers of docs/architecture.md, no cycles.
lint: install-dev
	$(VENV)/bin/ruff check statestore_admin tests bench scripts manage.py
	$(VENV)/bin/ruff format --check statestore_admin tests bench scripts manage.py
	$(VENV)/bin/lint-imports --no-logo

# Real Airflow beside the dashboard, on PostgreSQL, for each version pinned in scripts/airflow_versions (3.3.2
# and 3.4.0b2), each in its own virtualenv (built once, cached in ~/.cache/statestore-admin): docs/compat.md.
test-compat: install-dev
	while read -r version; do bash scripts/airflow_venv.sh "$$version" >/dev/null; done <scripts/airflow_versions
	$(PY) -m pytest -m compat tests/compat

# The container image (Containerfile, docs/container.md). IMAGE: its name; IMAGE_BASE: the base of both stages (any
# Debian bookworm image with python3 3.11 and python3-venv); CONTAINER_ENGINE: docker where its engine answers, else
# podman (a command with options works: CONTAINER_ENGINE="podman --runtime runc"); IMAGE_BUILD_FLAGS: more options
# for the build (podman needs --format docker to keep the HEALTHCHECK, which docker's format has).
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE ?= statestore-admin:$(IMAGE_VERSION)
IMAGE_BASE ?= docker.io/library/python:3.11-slim-bookworm
CONTAINER_ENGINE ?= $(shell docker info >/dev/null 2>&1 && echo docker || echo podman)
IMAGE_BUILD_FLAGS ?= $(if $(findstring podman,$(CONTAINER_ENGINE)),--format docker)
image:
	$(CONTAINER_ENGINE) build $(IMAGE_BUILD_FLAGS) -f Containerfile -t $(IMAGE) \
	  --build-arg IMAGE_BASE=$(IMAGE_BASE) --build-arg VERSION=$(IMAGE_VERSION) \
	  --build-arg REVISION=$(shell git rev-parse HEAD 2>/dev/null || echo unknown) .

# The image as users run it (tests/deploy/test_image.py): built with podman on a Debian bookworm base made
# with debootstrap (scripts/container_base.sh, cached in ~/.cache/statestore-admin), then run against PostgreSQL.
test-image: install-dev
	$(PY) -m pytest -m image tests/deploy/test_image.py

# Regenerate the schema fixtures of each pinned Airflow version (scripts/airflow_versions) from a real
# `airflow db migrate` (needs PostgreSQL).
schema:
	bash scripts/make_airflow_schema.sh

# The demo's files only: var/dashboard.sqlite3 belongs to a dashboard on a real Airflow database.
clean-demo:
	rm -rf var/demo

# The translation catalogues (docs/languages.md): extract every marked string into locale/<lang>/LC_MESSAGES/*.po
# (pages and Python: django; static/js: djangojs), then compile the .mo files, which are committed so that a fresh
# clone needs no gettext tools. Needs GNU gettext (apt-get install -y gettext). New strings arrive untranslated:
# tests/contracts/test_catalogues.py fails until every language has them.
LOCALES := ko ja zh_Hans de fr es
MESSAGES_FLAGS := --no-location --no-obsolete --ignore=.venv --ignore=var --ignore=tests --ignore=bench --ignore=scripts
messages: install-dev
	$(PY) manage.py makemessages $(addprefix -l ,$(LOCALES)) $(MESSAGES_FLAGS) --ignore=static/js/htmx*
	$(PY) manage.py makemessages -d djangojs $(addprefix -l ,$(LOCALES)) $(MESSAGES_FLAGS) --ignore=static/js/htmx* \
		--ignore=staticfiles
	$(PY) scripts/catalogue_headers.py locale
	$(PY) manage.py compilemessages --ignore=.venv
