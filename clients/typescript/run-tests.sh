#!/usr/bin/env bash
# Tests of @reqstate/codec (clients/typescript) and of the examples that use
# it. Needs only node (>= 20) and npm: build.sh installs the package's pinned
# packages from package-lock.json and compiles dist/; this script installs the
# test toolchain, a separate project (test/package.json, test/package-lock.json:
# the MCP SDKs, the Deno, Bun and workerd runtimes as the npm packages `deno`,
# `bun`, `miniflare`, esbuild, gRPC, fast-check) into test/node_modules. Then:
#   test/vectors.test.js   tests/vectors/v1.json both directions + call_context.json (Node)
#   test/runtimes.test.js  the same suite on Deno, Bun and workerd (with and without nodejs_compat), each on
#                          the primitives it must take (cryptoBackend()); no Node-only import in the library
#   test/backends.test.js  node:crypto and pure primitives: Node native, Node without getBuiltinModule pure (the
#                          vector suite there), the same bytes primitive by primitive and token by token
#   test/entries.test.js   @reqstate/codec and @reqstate/codec/compact bundled with esbuild: TOML only in the main one
#   test/cross.test.js     Rust CLI x sidecar x this package, every pair, both algorithms
#   test/property.test.js  fast-check: TypeScript mint -> Rust verify and back
#   test/api.test.js       keyrings, policy, rotation, reasons, the MCP SDK drop-in, the CLI
#   test/mcp.test.js       the MCP drop-in on the real SDK 2.4.0: bind on McpServer and Server, concurrent
#                          calls, asking again, refusal reasons (onRefusal, onerror, never the wire), the step of a round
#   test/pack.test.js      npm pack of a clean copy (git ls-files) installed into an empty project with only
#                          the SDK runs the README's quick start (server.mjs, stdio.mjs, http.mjs, the keyring
#                          from `npx reqstate-ts keys new`) with the SDK's clients: default, 'auto', pinned, over
#                          stdio and HTTP, and a server connected by hand; the same through a file: dependency
#   test/keys-new.test.js  reqstate-ts keys new: a fresh compact keyring the codec and the Rust CLI use; usage errors
#   test/schedule.test.js  keys on a schedule: the compact form's ;mint_from/;retire_at, toCompact, the minting key and retirement at an injected clock, the policy check in Codec, the MCP drop-in and reqstate-ts
#   test/singleuse.test.js single-use tokens: memory store, store failures, Rust CLI x this
#                          package, the Redis store against a redis-server it starts (needs
#                          /usr/bin/redis-server: scripts/test.sh installs it)
#   test/redisrule.test.js the shared Redis rule (default prefix, SET NX GET PX with a relative
#                          lifetime, clock-skew refusal, retries of unknown outcomes) against a
#                          real redis-server (>= 7.0), clocks offset, leeways mixed, CLIENT PAUSE
#   test/cli-replay.test.js reqstate-ts verify --consume --replay-store (a redis-server on a TCP port
#                          with a password), its usage errors, and passwords kept out of messages
#   test/callcontext.test.js callContext's value form: what JSON cannot represent is refused, by path
#   test/statejson.test.js tests/vectors/state_json.json: the one JSON -> CBOR mapping, --state-cbor-hex, the JSON form
#   examples/cloudflare-worker (its test/, also run alone by its run-tests.sh): the increase-counter Worker in workerd, SDK v2 client over HTTP
#   examples/node-whoami   the whoami handler on plain Node
# Does not build Rust: the binary comes from $REQSTATE_BIN, default
# <repo>/target/debug/reqstate (`cargo build --bin reqstate`). A missing
# binary or runtime is an error, and a run with a skipped test fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
if [[ ! -x "$REQSTATE_BIN" ]]; then
    echo "run-tests.sh: no reqstate binary at $REQSTATE_BIN; run \`cargo build --bin reqstate\` or set REQSTATE_BIN" >&2
    exit 2
fi
"$here/build.sh"

# node --test, failing the run if any test was skipped or left todo.
run_node_tests() {
    local out
    out="$(mktemp)"
    local status
    set +e
    node --test --test-reporter=tap "$@" > "$out"
    status=$?
    set -e
    grep -E '^(not ok|ok|# (tests|pass|fail|skipped|todo))' "$out" || true
    if [[ $status -ne 0 ]]; then
        cat "$out" >&2
        rm -f "$out"
        return "$status"
    fi
    if ! grep -q '^# skipped 0$' "$out" || ! grep -q '^# todo 0$' "$out" || grep -q '^# tests 0$' "$out"; then
        echo "run-tests.sh: a test was skipped, left todo, or none ran" >&2
        rm -f "$out"
        return 1
    fi
    rm -f "$out"
}

# npm ci unless node_modules already matches the lockfile (as build.sh does).
install() {
    local stamp=node_modules/.package-lock.json
    if [[ ! -f "$stamp" || package-lock.json -nt "$stamp" || package.json -nt "$stamp" ]]; then
        echo "run-tests.sh: npm ci in $PWD" >&2
        npm ci --no-audit --no-fund --loglevel=error
    fi
}

cd "$here/test"
install
cd "$here"
run_node_tests test/*.test.js

cd "$repo/examples/cloudflare-worker"
install
npx --no-install tsc -p .
run_node_tests test/*.test.js

cd "$repo/examples/node-whoami"
install
run_node_tests test/*.test.js
