#!/usr/bin/env bash
# Print the path of a working Python interpreter, or fail with a message saying what to install.
#
#   scripts/find_python.sh --min 3.12     the newest interpreter that is 3.12 or later
#   scripts/find_python.sh --exact 3.11   an interpreter that is exactly 3.11.x
#
# Looks in pyenv's versions directory first (its shims only work for the selected version, so
# the real binaries are used), then on PATH. BACKWAVE_PYTHON overrides the search (it is still
# checked against the requested version).
set -euo pipefail

usage() { echo "usage: $0 --min X.Y | --exact X.Y" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
mode=$1 wanted=$2
[[ $mode == --min || $mode == --exact ]] || usage
want_major=${wanted%%.*} want_minor=${wanted#*.}

# Succeeds when "$1" runs and its version satisfies the request.
fits() {
    "$1" - "$mode" "$want_major" "$want_minor" >/dev/null 2>&1 <<'PY'
import sys
mode, major, minor = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
have = sys.version_info[:2]
ok = have == (major, minor) if mode == "--exact" else have >= (major, minor)
sys.exit(0 if ok else 1)
PY
}

candidates=()
if [[ -n ${BACKWAVE_PYTHON:-} ]]; then
    candidates+=("$BACKWAVE_PYTHON")
else
    pyenv_root=""
    if command -v pyenv >/dev/null 2>&1; then
        pyenv_root=$(pyenv root 2>/dev/null || true)
    fi
    [[ -n $pyenv_root ]] || pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
    if [[ -d $pyenv_root/versions ]]; then
        # Newest first (the paths differ only in the version directory, so a version sort works).
        while IFS= read -r binary; do
            if [[ -x $binary ]]; then candidates+=("$binary"); fi
        done < <(compgen -G "$pyenv_root/versions/3.*/bin/python3.*" | grep -E '/python3\.[0-9]+$' | sort -V -r)
    fi
    for minor in 14 13 12 11; do
        if command -v "python3.$minor" >/dev/null 2>&1; then candidates+=("$(command -v "python3.$minor")"); fi
    done
    if command -v python3 >/dev/null 2>&1; then candidates+=("$(command -v python3)"); fi
fi

for candidate in "${candidates[@]}"; do
    if fits "$candidate"; then
        echo "$candidate"
        exit 0
    fi
done

case $mode in
    --min) need="Python $wanted or newer" ;;
    --exact) need="Python $wanted" ;;
esac
echo "error: no $need found (looked in pyenv's versions and on PATH; tried: ${candidates[*]:-nothing})." >&2
echo "       Install $need, or point BACKWAVE_PYTHON at one." >&2
exit 1
