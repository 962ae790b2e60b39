#!/usr/bin/env bash
# Runs the Python client's tests against the real reqstate sidecar.
#
#   bash clients/python/run-tests.sh [pytest args...]
#
# Creates clients/python/.venv when absent, installs the pinned
# requirements-dev.txt and the package itself into it, runs mypy and ruff,
# then pytest.
# Needs only python3 (3.10+) and access to PyPI. Never builds Rust: the tests
# use $REQSTATE_BIN, or <repo>/target/debug/reqstate by default.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"

export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
if [[ ! -x "$REQSTATE_BIN" ]]; then
    echo "run-tests.sh: no reqstate binary at $REQSTATE_BIN" >&2
    echo "  build it first (cargo build --bin reqstate) or set REQSTATE_BIN" >&2
    exit 1
fi

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "run-tests.sh: creating $venv" >&2
    rm -rf "$venv"
    if ! "$python" -m venv "$venv" >/dev/null 2>&1 || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        # No ensurepip (Debian's python3 without python3-venv): bootstrap a
        # project-local virtualenv from PyPI instead.
        rm -rf "$venv"
        boot="$here/.bootstrap"
        "$python" -m pip install --quiet --disable-pip-version-check --target "$boot" virtualenv==21.15.11
        PYTHONPATH="$boot" "$python" -m virtualenv --quiet "$venv"
    fi
fi

pip=("$venv/bin/python" -m pip --disable-pip-version-check)
stamp="$venv/.requirements-dev.txt"
if ! cmp -s "$here/requirements-dev.txt" "$stamp"; then
    "${pip[@]}" install --quiet -r "$here/requirements-dev.txt"
    cp "$here/requirements-dev.txt" "$stamp"
fi
# The package itself, rebuilt every run (it is small) from a clean build
# dir, with the pinned setuptools and no dependency resolution beyond the pins.
rm -rf "$here/build"
"${pip[@]}" install --quiet --no-deps --no-build-isolation --force-reinstall "$here"
"${pip[@]}" check

cd "$here"
# Static checks first (configured in pyproject.toml): mypy --strict on the
# package, tests, example and generate.py; ruff lint and format on the same.
"$venv/bin/python" -m mypy
"$venv/bin/ruff" check src tests examples generate.py
"$venv/bin/ruff" format --check src tests examples generate.py
exec "$venv/bin/python" -m pytest "$@"
