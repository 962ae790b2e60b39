#!/usr/bin/env bash
# Stock gRPC libraries against the real sidecar over its Unix socket, with no
# reqstate package and no channel options: grpcio (gRPC's C core, the
# library of Python, Ruby, PHP and C++ users) and @grpc/grpc-js. The tonic
# case is tests/conformance/stock_clients.rs (cargo test).
#
#   bash tests/stock_clients/run.sh
#
# Installs pinned versions into tests/stock_clients/.venv and node_modules/
# (git-ignored); needs python3, node and npm, and $REQSTATE_BIN (default:
# target/debug/reqstate, which `cargo test` builds).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
[ -x "$REQSTATE_BIN" ] || { echo "run.sh: no reqstate binary at $REQSTATE_BIN" >&2; exit 1; }

venv="$here/.venv"
# shellcheck source=../../scripts/lib/python-venv.sh
source "$repo/scripts/lib/python-venv.sh"
ensure_venv "$venv" "$here/requirements.txt"
(cd "$here" && npm ci --no-audit --no-fund --silent)

echo "grpcio (C core), no channel options, over the Unix socket:"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/test_grpcio.py"
echo "@grpc/grpc-js, no channel options, over the Unix socket:"
(cd "$here" && node --test grpc_js.test.mjs)
