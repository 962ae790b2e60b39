#!/usr/bin/env bash
# Tests of the Node client (@reqstate/client) against a real reqstate sidecar.
# Needs only node (>= 20) and npm. Steps:
#   1. builds @reqstate/codec (clients/typescript/build.sh), which this package
#      depends on by version (0.1.0) for everything the format defines;
#   2. `npm ci` from package-lock.json into clients/node/node_modules; the lock
#      links @reqstate/codec to ../typescript (as `npm install ../typescript`
#      records it; .npmrc sends @reqstate/* to no registry), so the tests run
#      against the codec of this checkout. Checked here: the versions agree
#      and the link is in place;
#   3. builds src/*.ts into dist/ (tsc -p tsconfig.build.json: the .js and the
#      published .d.ts, generated from the code);
#   4. type-checks the examples and tests as consumers of dist/*.d.ts
#      (tsc --noEmit -p ., see tsconfig.json);
#   5. runs the tests, test/packaging.test.js among them: both packages
#      `npm pack`ed and installed from their tarballs into an empty project
#      outside the repository, then used there.
# Does not build Rust: the sidecar binary comes from $REQSTATE_BIN, default
# <repo>/target/debug/reqstate (build it with `cargo build --bin reqstate`).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
if [[ ! -x "$REQSTATE_BIN" ]]; then
    echo "run-tests.sh: no reqstate binary at $REQSTATE_BIN; run \`cargo build --bin reqstate\` or set REQSTATE_BIN" >&2
    exit 2
fi
bash "$repo/clients/typescript/build.sh"
cd "$here"
wanted="$(node -p 'require("./package.json").dependencies["@reqstate/codec"]')"
local_version="$(node -p 'require("../typescript/package.json").version')"
if [[ "$wanted" != "$local_version" ]]; then
    echo "run-tests.sh: package.json wants @reqstate/codec $wanted but clients/typescript is $local_version: update the dependency (and package-lock.json: npm install)" >&2
    exit 1
fi
npm ci --no-audit --no-fund
linked="$(node -p 'require("fs").realpathSync("node_modules/@reqstate/codec")')"
if [[ "$linked" != "$(cd ../typescript && pwd -P)" ]]; then
    echo "run-tests.sh: node_modules/@reqstate/codec is $linked, not ../typescript: package-lock.json must link it (npm install ../typescript, then put the version back in package.json)" >&2
    exit 1
fi
rm -rf dist
npx --no-install tsc -p tsconfig.build.json
npx --no-install tsc --noEmit -p .
exec node --test test/*.test.js
