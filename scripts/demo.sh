#!/usr/bin/env bash
# `make demo`: the example project's admin console and a worker, together, until Ctrl-C.
#
#   scripts/demo.sh
#
# PORT           the admin's port on 127.0.0.1 (default 8000)
# DATABASE_URL   the database (default: SQLite at example_project/db.sqlite3, wiped and re-seeded
#                on every run); when you set it, the demo data is added without wiping anything,
#                e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/backwave_demo
# BACKWAVE_VENV  the virtualenv to run in (default .venv)
# DEMO_ORDERS    orders in the seeded two-hour history (default 1100, about 3,000 jobs in all)
#
# It migrates, seeds demo data (manage.py backwave_demo), starts `runserver` and `backwave_worker`,
# and prints the admin's URL and credentials. Ctrl-C (SIGINT), SIGTERM or SIGHUP stops both and
# exits 0, also when the signal arrives twice (a process group's signal plus make passing its own
# on) and when the script was started with SIGINT ignored (nohup, `&` in a script).
set -euo pipefail
# Job control: each child gets its own process group, so the terminal's Ctrl-C reaches only this
# script, which then sends each child exactly one signal. (A worker that received the terminal's
# SIGINT and then our SIGTERM would take the second signal as "exit now".)
set -m

root=$(cd "$(dirname "$0")/.." && pwd)
venv=${BACKWAVE_VENV:-.venv}
[[ $venv == /* ]] || venv="$root/$venv"
python="$venv/bin/python"
port=${PORT:-8000}
queues=billing,emails,integrations,reports,catalogue,maintenance,exports,default
# Long enough for short jobs to finish; the long index rebuild is released instead and retried
# by the next run.
shutdown_timeout=5

if [[ ! -x $python ]]; then
    echo "error: $python not found; run 'make demo' (it creates the virtualenv)." >&2
    exit 2
fi
if [[ ! $port =~ ^[0-9]+$ ]]; then
    echo "error: PORT must be a port number, got '$port'." >&2
    exit 2
fi
# A shell started with SIGINT ignored (by nohup, or as `cmd &` from a script) can neither trap nor
# restore it, and its children would ignore it too: Ctrl-C or `kill -INT` would then stop nothing.
# Start again with SIGINT at its default, once.
if [[ $(trap -p INT) == "trap -- '' SIGINT" && -z ${BACKWAVE_DEMO_SIGINT_RESET:-} ]]; then
    export BACKWAVE_DEMO_SIGINT_RESET=1
    exec "$python" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp("bash", ["bash", *sys.argv[1:]])' "$0" "$@"
fi

cd "$root/example_project"
# runserver serves the admin's CSS and JavaScript only with DEBUG on.
export DEBUG=${DEBUG:-true}
seed_args=(--orders "${DEMO_ORDERS:-1100}")
if [[ -z ${DATABASE_URL:-} ]]; then
    seed_args+=(--reset)  # the demo's own SQLite file: start from a clean slate every time
    echo "Database: SQLite at example_project/db.sqlite3 (set DATABASE_URL to use another)"
else
    echo "Database: from DATABASE_URL (nothing is wiped; the demo data is added)"
fi

"$python" manage.py migrate --verbosity 0
seed_output=$("$python" manage.py backwave_demo "${seed_args[@]}")
echo "$seed_output"
password=$(sed -n 's/^Admin user: admin  password: //p' <<<"$seed_output")

server=""
worker=""

# One signal each: SIGINT makes runserver exit cleanly (it has no SIGTERM handler), SIGTERM makes
# the worker stop claiming and drain for up to its shutdown timeout.
stop_children() {
    local pid
    [[ -z $server ]] || kill -INT -- "-$server" 2>/dev/null || kill -INT "$server" 2>/dev/null || true
    [[ -z $worker ]] || kill -TERM -- "-$worker" 2>/dev/null || kill -TERM "$worker" 2>/dev/null || true
    # Wait for both; a child still there well after the worker's shutdown timeout is killed.
    local deadline=$((SECONDS + shutdown_timeout + 10))
    for pid in $server $worker; do
        while kill -0 "$pid" 2>/dev/null; do
            if ((SECONDS >= deadline)); then
                echo "demo: process $pid did not stop; killing it." >&2
                kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
            fi
            sleep 0.1
        done
        wait "$pid" 2>/dev/null || true
    done
}

on_signal() {
    # Ignore further signals until both children are gone: a second SIGTERM (make forwards the one
    # its process group already got) must not end this cleanup half-way and leave runserver serving.
    trap '' INT TERM HUP
    echo
    echo "demo: stopping the admin and the worker ..."
    stop_children
    echo "demo: stopped."
    exit 0
}
trap on_signal INT TERM HUP

"$python" manage.py runserver "127.0.0.1:$port" --noreload &
server=$!
"$python" manage.py backwave_worker --queues "$queues" --name demo --shutdown-timeout "$shutdown_timeout" &
worker=$!

admin_url="http://127.0.0.1:$port/admin/"
answered=false
for _ in $(seq 1 100); do
    kill -0 "$server" 2>/dev/null || break
    if "$python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
        "${admin_url}login/" 2>/dev/null; then
        answered=true
        break
    fi
    sleep 0.2 &
    wait $! || true
done
if [[ $answered != true ]]; then
    echo "demo: the admin did not come up on port $port (is the port in use? set PORT=...)." >&2
    stop_children
    exit 1
fi

echo
echo "================================================================================"
echo "  Admin: ${admin_url}  user: admin  password: ${password:-unchanged}"
echo "  Worker: queues $queues (its log follows)"
echo "  Ctrl-C stops both."
echo "================================================================================"
echo

# Sleep in the background and wait for it, so that a signal runs the trap at once.
while kill -0 "$server" 2>/dev/null && kill -0 "$worker" 2>/dev/null; do
    sleep 1 &
    wait $! || true
done
echo "demo: the admin or the worker stopped unexpectedly; stopping the other." >&2
stop_children
exit 1
