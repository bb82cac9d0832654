# backwave_django developer commands. `make demo` and `make test` are the two set-up commands:
# each creates the virtualenv it needs on first use.
#
#   make venv           .venv: Python >= 3.12, Django 6.1, the package in editable mode with [postgres,dev]
#   make test           the whole suite on PostgreSQL, SQLite, MariaDB, then a leg through PgBouncer (PYTEST_ARGS="-k fence" passes args on)
#   make test-django52  compatibility legs in .venv-dj52 (Python 3.11, Django 5.2 LTS): PostgreSQL, SQLite subset
#   make lint           ruff check and mypy
#   make demo           the example project: admin console and worker together on SQLite (PORT=8000)
#   make bench          the benchmark harness on PostgreSQL, with PgQueuer and Procrastinate side by side (ARGS=--quick for a short run); see docs/performance.md
#   make profile        the worker's hot path in one process under py-spy (flame graph in benchmarks/results)
#   make torture-short  the torture suite's ~1-2 minute run (CI); SEED=N replays a run
#   make torture        the 30-minute torture run with chaos and PostgreSQL restarts (DURATION=seconds)
#   make clean          remove the virtualenvs and caches

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
VENV_DJ52 := .venv-dj52
DJANGO_SPEC := Django>=6.1,<6.2
DJANGO52_SPEC := Django>=5.2,<5.3
PYTEST_ARGS ?=
# The MariaDB driver (mysqlclient) compiles against libmariadb-dev. Which stamp a virtualenv needs
# is decided when make starts: .mariadb-found once pkg-config finds the library (installing the
# driver), .mariadb-missing until then (saying the MariaDB test leg will be skipped). So after
# `apt-get install libmariadb-dev`, `make venv` (and `make test`) installs the driver, and `make demo`,
# which never needs it, says nothing about MariaDB.
MARIADB_LIB := $(shell { pkg-config --exists libmariadb || pkg-config --exists mysqlclient; } 2>/dev/null && echo found || echo missing)

.PHONY: help venv venv-dj52 test test-django52 lint demo clean

help:
	@sed -n 's/^#   //p' Makefile

venv: $(VENV)/.stamp $(VENV)/.mariadb-$(MARIADB_LIB)
venv-dj52: $(VENV_DJ52)/.stamp $(VENV_DJ52)/.mariadb-$(MARIADB_LIB)

# The stamp is rebuilt when pyproject.toml changes; a venv whose interpreter no longer runs
# (or is too old) is recreated from scratch.
$(VENV)/.stamp: pyproject.toml
	@python=$$(bash scripts/find_python.sh --min 3.12) || exit 1; \
	if ! $(VENV)/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
		echo "Creating $(VENV) with $$python"; \
		rm -rf $(VENV) && "$$python" -m venv $(VENV) || exit 1; \
	fi
	$(VENV)/bin/python -m pip install -qq --upgrade pip
	$(VENV)/bin/python -m pip install -qq -e '.[postgres,dev]' '$(DJANGO_SPEC)'
	@touch $@

$(VENV_DJ52)/.stamp: pyproject.toml
	@python=$$(bash scripts/find_python.sh --exact 3.11) || exit 1; \
	if ! $(VENV_DJ52)/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then \
		echo "Creating $(VENV_DJ52) with $$python"; \
		rm -rf $(VENV_DJ52) && "$$python" -m venv $(VENV_DJ52) || exit 1; \
	fi
	$(VENV_DJ52)/bin/python -m pip install -qq --upgrade pip
	$(VENV_DJ52)/bin/python -m pip install -qq -e '.[postgres,dev]' '$(DJANGO52_SPEC)'
	@touch $@

# The MariaDB stamps: the driver when libmariadb is there, else a note (shown once per virtualenv).
%/.mariadb-found: %/.stamp
	$*/bin/python -m pip install -qq 'mysqlclient>=2.2.1'
	@rm -f $*/.mariadb-missing
	@touch $@

%/.mariadb-missing: %/.stamp
	@echo "libmariadb-dev is not installed: the MariaDB test leg will be skipped (apt-get install libmariadb-dev pkg-config, then make venv)."
	@rm -f $*/.mariadb-found
	@touch $@

test: venv
	BACKWAVE_VENV=$(VENV) bash scripts/run_tests.sh $(PYTEST_ARGS)

test-django52: venv-dj52
	BACKWAVE_VENV=$(VENV_DJ52) BACKWAVE_COMPAT_LEGS=1 bash scripts/run_tests.sh $(PYTEST_ARGS)

# Formatting is not enforced; `ruff check`, strict mypy and the package layout (the rules of
# docs/architecture.md: no import cycles, private modules and room dependencies, Django's connection
# internals in one module, the clock, no module over 600 lines and no function over 80:
# scripts/check_layout.py) are. Each runs even when an earlier one fails.
lint: $(VENV)/.stamp
	@status=0; \
	echo "$(VENV)/bin/ruff check backwave_django tests benchmarks"; \
	$(VENV)/bin/ruff check backwave_django tests benchmarks || status=1; \
	echo "$(VENV)/bin/mypy backwave_django tests benchmarks"; \
	$(VENV)/bin/mypy backwave_django tests benchmarks || status=1; \
	echo "$(VENV)/bin/ruff check example_project; (cd example_project && ../$(VENV)/bin/mypy .)"; \
	$(VENV)/bin/ruff check example_project || status=1; \
	(cd example_project && ../$(VENV)/bin/mypy .) || status=1; \
	echo "$(VENV)/bin/python scripts/check_layout.py"; \
	$(VENV)/bin/python scripts/check_layout.py || status=1; \
	exit $$status

demo: $(VENV)/.stamp
	BACKWAVE_VENV=$(VENV) bash scripts/demo.sh

# The benchmark harness: creates its own scratch database (backwave_bench), prints a Markdown table
# and writes benchmarks/results/latest.json. Pass options with ARGS, e.g. ARGS="--quick" or
# ARGS="--only processing,latency --n 5000". The peer queues it compares against (PgQueuer,
# Procrastinate: the [bench] extra) are installed into the virtualenv on first use; a peer that
# cannot be imported is reported as skipped.
ARGS ?=
.PHONY: bench
bench: $(VENV)/.stamp $(VENV)/.bench-stamp
	$(VENV)/bin/python -m benchmarks.run $(ARGS)

# Without the index (offline), the run goes on and reports the peers as skipped; the next
# `make bench` tries again.
$(VENV)/.bench-stamp: $(VENV)/.stamp
	@if $(VENV)/bin/python -m pip install -qq -e '.[postgres,dev,bench]' '$(DJANGO_SPEC)'; then touch $@; \
	else echo "Could not install the [bench] extra (PgQueuer, Procrastinate): the peers will be reported as skipped."; fi

# The worker's hot path drained in one process under py-spy: prints batch sizes, wall times and
# CPU per job, and writes the flame graph to benchmarks/results/profile.svg. ARGS as for
# benchmarks/profile.py, e.g. ARGS="--n 50000 --concurrency 50".
.PHONY: profile
profile: $(VENV)/.stamp
	@mkdir -p benchmarks/results
	$(VENV)/bin/py-spy record --nonblocking --rate 250 --output benchmarks/results/profile.svg -- \
		$(VENV)/bin/python -m benchmarks.profile $(ARGS)

# The torture suite on PostgreSQL (see docs/reliability.md): real workers and clients under chaos,
# then an audit of the transition log and the client journals. Exit 0 clean, 1 violations, 2
# infrastructure. `make torture` is the long run (DURATION seconds, default 30 min, with PostgreSQL
# restarts on a private cluster); `make torture-short` the ~1-2 minute run CI uses. SEED=N replays.
DURATION ?= 1800
SEED ?=
.PHONY: torture torture-short
torture: $(VENV)/.stamp
	$(VENV)/bin/python -m tests.torture --mode long --duration $(DURATION) $(if $(SEED),--seed $(SEED))

torture-short: $(VENV)/.stamp
	$(VENV)/bin/python -m tests.torture --mode short $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(VENV) $(VENV_DJ52) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
