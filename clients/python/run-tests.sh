#!/usr/bin/env bash
# Runs the Python client's tests against the real reqstate sidecar.
#
#   bash clients/python/run-tests.sh [pytest args...]
#
# Creates clients/python/.venv when absent, installs the pinned
# requirements-dev.txt, the `reqstate` package (crates/reqstate-python: the
# call context is the core crate's, through it) and the package itself into
# it, runs mypy and ruff, then pytest.
# Needs python3 (3.10+), access to PyPI, and cargo unless target/wheels/
# already holds a `reqstate` wheel built from the current sources
# (crates/reqstate-python/build-wheel.sh reuses it, as after
# crates/reqstate-python/run-tests.sh; CARGO_TARGET_DIR moves target/).
# Never builds the sidecar: the tests use $REQSTATE_BIN, or
# <repo>/target/debug/reqstate by default.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$here/.venv"

export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
if [[ ! -x "$REQSTATE_BIN" ]]; then
    echo "run-tests.sh: no reqstate binary at $REQSTATE_BIN" >&2
    echo "  build it first (cargo build --bin reqstate) or set REQSTATE_BIN" >&2
    exit 1
fi

# shellcheck source=../../scripts/lib/python-venv.sh
source "$repo/scripts/lib/python-venv.sh"
ensure_venv "$venv" "$here/requirements-dev.txt"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
# The native package this one depends on (pyproject.toml), as its own runner
# builds it: one wheel for both.
wheel="$(bash "$repo/crates/reqstate-python/build-wheel.sh" "$venv/bin/python")"
"${pip[@]}" install --quiet --no-deps --force-reinstall "$wheel"
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
