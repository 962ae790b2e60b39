#!/usr/bin/env bash
# Runs every test of the project on a fresh machine, installing what it needs
# first: the README's test command, and what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "prerequisites"
# ring needs clang to build for wasm32; everything else comes from crates.io.
if ! command -v clang >/dev/null 2>&1; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq clang
fi
rustup component add rustfmt clippy >/dev/null
rustup target add x86_64-unknown-none wasm32-unknown-unknown >/dev/null

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "tests (unit, integration, doc)"
cargo test --workspace --locked

step "benchmark smoke run (each benchmark once; figures come from cargo bench)"
cargo bench --locked --bench tokens -- --test
cargo bench --locked --bench sidecar -- --test

step "no_std builds of the core crate"
(
    cd .ci/no-std-check
    export CARGO_TARGET_DIR=../../target/no-std
    cargo build --locked --target wasm32-unknown-unknown
    # x86_64-unknown-none is soft-float: ring's assembly needs SSE2 enabled,
    # and sha2's SHA-NI backend does not build there (an LLVM error in
    # sha2 0.11), so it takes the portable one.
    RUSTFLAGS="-C target-feature=+sse,+sse2 --cfg sha2_backend=\"soft\"" \
        cargo build --locked --target x86_64-unknown-none
)

step "independent Python verifier of the format (tests/vectors/verify_v1.py)"
# Written from docs/FORMAT.md alone: proves the spec and the vectors agree.
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r tests/vectors/requirements.txt
.venv/bin/python -m pytest -q -p no:cacheprovider tests/vectors/verify_v1.py

step "call context corpus against RFC 8785 (tests/vectors/test_call_context.py, the rfc8785 package)"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/vectors/test_call_context.py

step "mutation check: every rule of the Python verifier broken one at a time must fail the vectors"
.venv/bin/python tests/vectors/mutation/run.py

# The clients run against the debug binary that `cargo test` built above.
export REQSTATE_BIN="$PWD/target/debug/reqstate"

step "Node client (@grpc/grpc-js) and the TypeScript MCP SDK against the real sidecar"
bash clients/node/run-tests.sh

step "Python client (grpcio) and the official mcp SDK end to end against the real sidecar"
bash clients/python/run-tests.sh

step "fuzzing: every target for 20 s (cargo fuzz, nightly, AddressSanitizer)"
bash fuzz/run.sh 20

step "all tests passed"
