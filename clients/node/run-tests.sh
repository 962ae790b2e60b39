#!/usr/bin/env bash
# Tests of the Node client (@reqstate/client) against a real reqstate sidecar.
# Needs only node (>= 20) and npm; installs the pinned dependencies from
# package-lock.json into clients/node/node_modules, type-checks (tsc, see
# tsconfig.json), then runs the tests. Does not build Rust: the sidecar binary
# comes from $REQSTATE_BIN, default <repo>/target/debug/reqstate (build it
# with `cargo build --bin reqstate`).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
if [[ ! -x "$REQSTATE_BIN" ]]; then
    echo "run-tests.sh: no reqstate binary at $REQSTATE_BIN; run \`cargo build --bin reqstate\` or set REQSTATE_BIN" >&2
    exit 2
fi
cd "$here"
npm ci --no-audit --no-fund
# The hand-written src/index.d.ts against its consumers (examples/, test/) and
# src/index.js's JSDoc (tsconfig.json): a drifted type fails here, before the tests.
npx --no-install tsc --noEmit -p .
exec node --test test/*.test.js
