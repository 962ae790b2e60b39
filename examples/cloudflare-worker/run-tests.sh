#!/usr/bin/env bash
# Tests of the Cloudflare Worker example: the Worker bundled with esbuild and
# run in workerd (miniflare, loopback HTTP, no network), driven by the MCP SDK
# v2 client. Needs node (>= 20) and npm; @reqstate/codec is used from
# ../../clients/typescript, which must be built first (its build.sh; its
# run-tests.sh builds it and runs these same tests).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
if [[ ! -f ../../clients/typescript/dist/index.js ]]; then
    echo "run-tests.sh: @reqstate/codec is not built; run clients/typescript/build.sh" >&2
    exit 2
fi
npm ci --no-audit --no-fund --loglevel=error
npx --no-install tsc -p .
exec node --test test/*.test.js
