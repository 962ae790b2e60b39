# Sourced by the test runners (scripts/test.sh, clients/python/run-tests.sh,
# crates/reqstate-python/run-tests.sh, deploy/run-tests.sh,
# tests/stock_clients/run.sh): one way to make a project-local Python
# environment with pinned requirements.
#
#   source "$repo/scripts/lib/python-venv.sh"
#   ensure_venv "$here/.venv" "$here/requirements.txt"
#
# ensure_venv VENV REQUIREMENTS makes VENV with $PYTHON (default python3)
# unless it already has a working pip, and installs REQUIREMENTS into it
# whenever that file differs from the copy kept in VENV (so a changed pin
# reinstalls, and an unchanged one costs nothing).

ensure_venv() {
    local venv=$1 requirements=$2
    local python=${PYTHON:-python3} who=${0##*/}
    if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        echo "$who: creating $venv" >&2
        rm -rf "$venv"
        if ! "$python" -m venv "$venv" >/dev/null 2>&1 || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
            # No ensurepip (Debian's python3 without python3-venv): bootstrap
            # a project-local virtualenv from PyPI instead.
            rm -rf "$venv"
            local boot
            boot="$(mktemp -d)"
            "$python" -m pip install --quiet --disable-pip-version-check --target "$boot" virtualenv==21.15.11
            PYTHONPATH="$boot" "$python" -m virtualenv --quiet "$venv"
            rm -rf "$boot"
        fi
    fi
    local stamp
    stamp="$venv/.$(basename "$requirements")"
    if ! cmp -s "$requirements" "$stamp"; then
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
        cp "$requirements" "$stamp"
    fi
}
