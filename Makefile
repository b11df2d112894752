# Mnemo: `make run` starts the app on the embedded PostgreSQL with demo data;
# `make test` runs the test suite. Both create .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test venv worker beat check lint format migrate bench smoke clean-db

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

migrate: venv
	$(PY) manage.py migrate --noinput

run: migrate
	$(PY) manage.py seed_demo
	MNEMO_DEBUG=$${MNEMO_DEBUG:-1} $(PY) manage.py runserver $(HOST):$(PORT)

test: venv
	$(PY) -m pytest $(PYTEST_ARGS)

worker: venv
	$(VENV)/bin/celery -A config worker --loglevel=INFO --concurrency=$${WORKER_CONCURRENCY:-1}

beat: venv
	$(VENV)/bin/celery -A config beat --loglevel=INFO --schedule=var/celerybeat-schedule

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

check: lint
	$(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/mypy accounts memory recall config
	$(PY) -m pytest $(PYTEST_ARGS)

clean-db:
	rm -rf var/pg

# Speed and scale benchmarks (docs/benchmarks.md): a database per size in var/bench-pg,
# reused by later runs. Not a test: start it by hand; BENCH_ARGS adds options.
bench: venv
	$(PY) manage.py bench run --sizes $${BENCH_SIZES:-10k,100k} $(BENCH_ARGS)
