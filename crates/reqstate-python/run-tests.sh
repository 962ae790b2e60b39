#!/usr/bin/env bash
# Builds the `reqstate` Python package (PyO3, maturin) into a project-local
# virtualenv and tests it.
#
#   bash crates/reqstate-python/run-tests.sh                 # install, mypy --strict, pytest
#   bash crates/reqstate-python/run-tests.sh --install-only  # install only (for tests/conformance/)
#   bash crates/reqstate-python/run-tests.sh [pytest args...]
#
# Creates crates/reqstate-python/.venv when absent, installs the pinned
# requirements-dev.txt (maturin, mcp, redis-py for reqstate.redis and
# `python -m reqstate verify --consume --replay-store`, mypy, pytest, grpcio
# for the sidecar client), then installs this package's wheel from
# build-wheel.sh (built as `pip install <dir>` builds it, with maturin and
# the Rust toolchain, in the package's own target directory
# crates/reqstate-python/target, or $CARGO_TARGET_DIR; or reused from
# target/wheels/ when one built from the same sources is there:
# clients/python/run-tests.sh installs the same wheel). Idempotent: a second run reinstalls the package
# and nothing else. Needs python3 (3.10+), cargo and PyPI.
#
# The tests need the `reqstate` binary ($REQSTATE_BIN, default
# <repo>/target/debug/reqstate), the TypeScript command line
# (clients/typescript/dist/cli.js, from clients/typescript/build.sh) and
# redis-server >= 7.0 ($REDIS_SERVER, default the one on PATH: they start
# their own); they fail, never skip, when one is missing. tests/test_install.py
# also pip-installs this directory with its `mcp` extra into a fresh virtualenv
# (PyPI, and a release build of the native module into $CARGO_TARGET_DIR,
# default the package's own crates/reqstate-python/target: .cargo/config.toml)
# and the README's quick start with it. The interpreter with the package is
# .venv/bin/python: tests/conformance/ runs `python -m reqstate` with it
# (or with $REQSTATE_PYTHON).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$here/.venv"

install_only=false
if [[ "${1:-}" == "--install-only" ]]; then
    install_only=true
    shift
fi

# shellcheck source=../../scripts/lib/python-venv.sh
source "$repo/scripts/lib/python-venv.sh"
ensure_venv "$venv" "$here/requirements-dev.txt"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# The package itself, built from this directory as `pip install <dir>` does
# on a fresh machine, but with the pinned maturin (no build isolation), in
# the package's own target directory (.cargo/config.toml; CARGO_TARGET_DIR
# wins); a wheel already built from these sources is reused (build-wheel.sh).
wheel="$(bash "$here/build-wheel.sh" "$venv/bin/python")"
"${pip[@]}" install --quiet --no-deps --force-reinstall "$wheel"
"${pip[@]}" check
"$venv/bin/python" -c 'import reqstate, sys; sys.stderr.write(f"run-tests.sh: reqstate {reqstate.__version__} from {reqstate.__file__}\n")'

if $install_only; then
    exit 0
fi

cd "$here"
# mypy --strict (pyproject.toml) on the package and its .pyi stubs, the
# tests, the example and the benchmark script.
"$venv/bin/python" -m mypy --strict
export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
exec "$venv/bin/python" -m pytest "$@"
