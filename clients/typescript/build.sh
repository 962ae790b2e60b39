#!/usr/bin/env bash
# Builds @reqstate/codec into dist/ (ESM + .d.ts, and dist/cli.js for
# `reqstate-ts`): `npm ci` from package-lock.json (the runtime dependencies,
# TypeScript and Node's types for the build, and `redis`, the optional peer
# that reqstate-ts --replay-store loads), then tsc. The test toolchain is a
# separate project (test/package.json), installed by run-tests.sh. Idempotent
# and fast when nothing changed: npm ci is skipped while node_modules matches
# the lockfile, tsc while dist/ is newer than every source and config file.
# Needs node (>= 20) and npm. scripts/test.sh runs it before `cargo test`
# (tests/conformance runs dist/cli.js). `npm pack` and git or file:
# dependencies build dist/ through the package's `prepare` script instead.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
stamp=node_modules/.package-lock.json
if [[ ! -f "$stamp" || package-lock.json -nt "$stamp" || package.json -nt "$stamp" ]]; then
    # --ignore-scripts: none of these dependencies has an install script, and
    # the package's own `prepare` (tsc) is run below, once.
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
fi
newest_src="$(find src tsconfig.json tsconfig.cli.json package-lock.json -type f -newer dist/.built 2>/dev/null | head -1 || true)"
if [[ ! -f dist/.built || -n "$newest_src" ]]; then
    # (no rm -rf dist: a running conformance test may be using dist/cli.js)
    npx --no-install tsc -p tsconfig.json
    npx --no-install tsc -p tsconfig.cli.json
    chmod +x dist/cli.js
    touch dist/.built
fi
