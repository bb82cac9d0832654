#!/usr/bin/env bash
# Run the whole test suite on PostgreSQL, then on SQLite and, beside it, on MariaDB when its driver and
# server are there, then the store, worker and console tests again through PgBouncer in transaction
# pooling mode.
#
#   scripts/run_tests.sh [pytest args...]
#
# BACKWAVE_VENV   the virtualenv to run in (default .venv; `make test-django52` uses .venv-dj52)
# CI=true         an unreachable PostgreSQL fails the run instead of being skipped loudly
# PGHOST, PGPORT, PGUSER, PGPASSWORD   where PostgreSQL is (as in tests/settings.py)
#
# Both runs always execute, even when the first fails; the exit status is non-zero when either
# failed. pytest's "no tests ran" (exit 5) counts as a failure: a suite that ran nothing passed nothing.
set -uo pipefail

cd "$(dirname "$0")/.."

venv=${BACKWAVE_VENV:-.venv}
python="$venv/bin/python"
pytest="$venv/bin/pytest"
if [[ ! -x $pytest ]]; then
    echo "error: $pytest not found; create the virtualenv first (make venv)." >&2
    exit 2
fi

pg_host=${PGHOST:-127.0.0.1}
pg_port=${PGPORT:-5432}
pg_user=${PGUSER:-postgres}

postgres_reachable() {
    "$python" - "$pg_host" "$pg_port" "$pg_user" <<'PY'
import sys

import psycopg

host, port, user = sys.argv[1:4]
try:
    psycopg.connect(host=host, port=port, user=user, dbname="postgres", connect_timeout=3).close()
except psycopg.Error as exc:
    print(f"    {type(exc).__name__}: {str(exc).strip()}", file=sys.stderr)
    sys.exit(1)
PY
}

# Run pytest on one database; returns 0 when it passed. Sets $verdict to a one-line result.
run_suite() {
    local database=$1
    shift
    echo
    echo "=== backwave: pytest on $database ($("$python" -c 'import django, sys; print(f"Django {django.get_version()}, Python {sys.version.split()[0]}")')) ==="
    BACKWAVE_TEST_DB=$database "$pytest" "$@"
    local status=$?
    case $status in
        0) verdict="passed" ;;
        5)
            echo "backwave: pytest on $database ran no tests (exit 5); counting that as a failure." >&2
            verdict="FAILED (no tests ran)"
            ;;
        *) verdict="FAILED (pytest exit $status)" ;;
    esac
    [[ $status -eq 0 ]]
}

banner() {
    local line="!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    echo
    echo "$line"
    for text in "$@"; do
        echo "!!!  $text"
    done
    echo "$line"
    echo
}

# Which tests each leg runs. PostgreSQL runs everything. SQLite runs all but what behaves the same
# on every database and the PostgreSQL leg already covers: the browser tests (the console's pages
# are the same HTML), the console's permission matrix, the command line's subprocess tests
# (processes and argument parsing over the operator and monitor calls the SQLite leg tests
# directly), the worker's metrics endpoint and the benchmark peers. MariaDB runs what depends on the
# database (the store, the worker, faults, bad input, checks, upgrades, the harness, the monitor's
# reads, whose ordering and matching must not follow the collation). With BACKWAVE_COMPAT_LEGS=1
# (make test-django52) the suite checks compatibility with the older Django on a chosen subset:
# what calls Django's APIs (the store's ORM paths, the admin, the worker's management command, the
# checks, settings, migrations and upgrades, the harness, the Tasks backend, the monitor's reads) on
# PostgreSQL, and the store, checks, migrations and the harness on SQLite. It leaves out what the main legs cover and Django's
# version does not change: the browser, torture, fault-injection and command-line tests, the
# store's state machine (the same rules as the store tests, drawn at random), the permission
# matrix, the worker's unit tests (threads and timers), bad input, metrics, tracing and the
# operations tests. Measured on the 2-core machine (all legs passing): PostgreSQL 13 minutes,
# SQLite 5.3, MariaDB 3.6, PgBouncer 4.3 before it was cut to the store, the worker and four
# console files; the compatibility legs 7 before this selection.
db_dependent=(tests/store tests/worker tests/faults tests/test_bad_input.py tests/test_checks.py
    tests/test_upgrade.py tests/test_migrations.py tests/testing tests/monitor)
postgres_args=()
sqlite_args=(-m "not browser" --ignore tests/cli --ignore tests/admin/test_security_matrix.py
    --ignore tests/metrics/test_worker_endpoint.py --ignore tests/test_bench_peers.py)
mariadb_args=("${db_dependent[@]}")
# PgBouncer (transaction pooling, started by the test session itself: tests/pgbouncer.py) between
# the tests and PostgreSQL: the store and the worker, whose transactions, cursors and connections
# are what a pooler can break, and the console pages that read the most (every page once, the job
# list and page, the dashboard). It leaves out the store's state machine and the rest of the
# console's tests, which add nothing about the connection that these do not.
pgbouncer_args=(tests/store tests/worker tests/admin/test_console_pages.py tests/admin/test_jobs.py
    tests/admin/test_job_page.py tests/admin/test_dashboard.py --ignore tests/store/test_state_machine.py)
if [[ ${BACKWAVE_COMPAT_LEGS:-} == 1 ]]; then
    compat_skips=(--ignore tests/store/test_state_machine.py --ignore tests/admin/test_security_matrix.py)
    postgres_args=(tests/store tests/admin tests/worker/test_worker_e2e.py tests/core tests/monitor
        tests/testing tests/tasks tests/test_checks.py tests/test_migrations.py tests/test_upgrade.py
        tests/test_conf.py tests/test_client.py tests/test_registry.py "${compat_skips[@]}")
    sqlite_args=(tests/store tests/test_checks.py tests/test_migrations.py tests/testing "${compat_skips[@]}")
fi
# Arguments given on the command line replace the per-leg selections.
if [[ $# -gt 0 ]]; then
    postgres_args=()
    sqlite_args=()
    mariadb_args=()
    pgbouncer_args=()
fi

postgres_result=""
sqlite_result=""
verdict=""
failed=0

echo "backwave: checking PostgreSQL at $pg_host:$pg_port (user $pg_user, database postgres) ..."
if postgres_reachable; then
    run_suite postgres "${postgres_args[@]}" "$@" || failed=1
    postgres_result=$verdict
elif [[ ${CI:-} == true ]]; then
    banner "PostgreSQL NOT REACHABLE at $pg_host:$pg_port (user $pg_user)." \
        "CI=true: an unreachable PostgreSQL FAILS the run." \
        "The SQLite half still runs below, for information."
    postgres_result="FAILED (PostgreSQL not reachable, CI=true)"
    failed=1
else
    banner "PostgreSQL NOT REACHABLE at $pg_host:$pg_port (user $pg_user)." \
        "The PostgreSQL half of the suite was SKIPPED, not passed." \
        "Locking and concurrency tests only run on PostgreSQL." \
        "Start PostgreSQL (or set PGHOST/PGPORT/PGUSER) and run 'make test' again."
    postgres_result="SKIPPED (PostgreSQL not reachable) -- NOT PASSED"
fi

# MariaDB: run when its driver is installed and the server answers; otherwise say so loudly. It
# runs beside the SQLite leg (its output is shown when both are done): the two share nothing (other
# databases, their own temporary folders), each keeps about one core busy, and together they take
# about two thirds of their time one after the other.
mariadb_result=""
mariadb_pid=""
mariadb_log=""
if ! "$python" -c 'import MySQLdb' 2>/dev/null; then
    mariadb_result="SKIPPED (mysqlclient not installed: apt-get install libmariadb-dev, then make venv) -- NOT PASSED"
elif ! "$python" -c 'import MySQLdb; MySQLdb.connect(host="127.0.0.1", user="root", connect_timeout=3).close()' 2>/dev/null; then
    mariadb_result="SKIPPED (MariaDB not reachable at 127.0.0.1:3306) -- NOT PASSED"
elif [[ ${BACKWAVE_COMPAT_LEGS:-} == 1 ]]; then
    mariadb_result="not run in the compatibility legs (the main legs run it)"
else
    mariadb_log=$(mktemp)
    (
        run_suite mariadb "${mariadb_args[@]}" "$@"
        status=$?
        echo "$verdict" >"$mariadb_log.verdict"
        exit $status
    ) >"$mariadb_log" 2>&1 &
    mariadb_pid=$!
fi

run_suite sqlite "${sqlite_args[@]}" "$@" || failed=1
sqlite_result=$verdict

if [[ -n $mariadb_pid ]]; then
    wait "$mariadb_pid" || failed=1
    cat "$mariadb_log"
    mariadb_result=$(cat "$mariadb_log.verdict" 2>/dev/null || echo "FAILED (no verdict)")
    rm -f "$mariadb_log" "$mariadb_log.verdict"
fi

# PgBouncer: run when the Debian package's binary is there and PostgreSQL answers; without the
# binary the leg is skipped loudly, and under CI=true that fails the run.
pgbouncer_result=""
if [[ $postgres_result == SKIPPED* || $postgres_result == *"not reachable"* ]]; then
    pgbouncer_result="SKIPPED (PostgreSQL not reachable) -- NOT PASSED"
elif [[ ${BACKWAVE_COMPAT_LEGS:-} == 1 ]]; then
    pgbouncer_result="not run in the compatibility legs (the main legs run it)"
elif ! command -v pgbouncer >/dev/null 2>&1 && [[ ! -x /usr/sbin/pgbouncer ]]; then
    if [[ ${CI:-} == true ]]; then
        pgbouncer_result="FAILED (pgbouncer not installed, CI=true: apt-get install pgbouncer)"
        failed=1
    else
        pgbouncer_result="SKIPPED (pgbouncer not installed: apt-get install pgbouncer) -- NOT PASSED"
    fi
else
    run_suite pgbouncer "${pgbouncer_args[@]}" "$@" || failed=1
    pgbouncer_result=$verdict
fi

# The example project has its own settings and suite (example_project/tests): SQLite, then
# PostgreSQL through DATABASE_URL. Skipped when pytest arguments were given (they select tests of
# the main suite).
example_result=""
run_example() {
    local database=$1 status
    echo
    echo "=== backwave: example project tests on $database ==="
    if [[ $database == postgres ]]; then
        local credentials=$pg_user
        [[ -n ${PGPASSWORD:-} ]] && credentials="$pg_user:$PGPASSWORD"
        # The demo script's tests run `make demo` on a SQLite file of their own: the SQLite run has them.
        (cd example_project && DATABASE_URL="postgres://$credentials@$pg_host:$pg_port/backwave_example" \
            "../$pytest" --ignore tests/test_demo_script.py)
    else
        (cd example_project && "../$pytest")
    fi
    status=$?
    [[ $status -eq 0 ]] || example_result+="$database FAILED (pytest exit $status); "
    [[ $status -eq 0 ]]
}
if [[ $# -gt 0 ]]; then
    example_result="not run (pytest arguments given)"
else
    run_example sqlite || failed=1
    # The compatibility legs run it on SQLite only: the main legs run it on PostgreSQL too, and its
    # code is the same on both.
    if [[ ${BACKWAVE_COMPAT_LEGS:-} == 1 ]]; then
        [[ -n $example_result ]] || example_result="passed (SQLite only in the compatibility legs)"
    elif [[ $postgres_result != SKIPPED* ]] && postgres_reachable 2>/dev/null; then
        run_example postgres || failed=1
    fi
    example_result=${example_result:-passed}
fi

echo
echo "backwave test summary ($venv):"
echo "    postgres:  $postgres_result"
echo "    sqlite:    $sqlite_result"
echo "    mariadb:   $mariadb_result"
echo "    pgbouncer: $pgbouncer_result"
echo "    example project: $example_result"
if [[ $mariadb_result == SKIPPED* ]]; then
    banner "MariaDB leg SKIPPED, not passed: ${mariadb_result%% -- *}"
fi
if [[ $pgbouncer_result == SKIPPED* ]]; then
    banner "PgBouncer leg SKIPPED, not passed: ${pgbouncer_result%% -- *}"
elif [[ $pgbouncer_result == "FAILED (pgbouncer not installed"* ]]; then
    banner "PgBouncer leg FAILED: pgbouncer is not installed and CI=true (apt-get install pgbouncer)"
fi
if [[ $postgres_result == SKIPPED* ]]; then
    banner "PostgreSQL NOT REACHABLE -- the PostgreSQL half of the suite was SKIPPED, not passed."
fi
exit $failed
