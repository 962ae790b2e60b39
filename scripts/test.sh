#!/usr/bin/env bash
# Runs every test of the project on a fresh machine, installing what it needs
# first: the README's test command, and what .ci/run calls.
#
#   bash scripts/test.sh                the full run (CI)
#   bash scripts/test.sh --quick [REV]  the edit-test loop: format, the docs
#                                       check, then clippy and the tests of
#                                       only the packages the change touches
#                                       (files changed since REV, default the
#                                       branch's upstream or HEAD, uncommitted
#                                       work included; the core when none);
#                                       names the other suites it touches
#                                       without running them
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
quick_rev=()
case "${1-}" in
    "") ;;
    --quick)
        quick=true
        [ $# -le 2 ] || { echo "usage: bash scripts/test.sh [--quick [REV]]" >&2; exit 2; }
        [ $# -eq 2 ] && quick_rev=("$2")
        ;;
    *) echo "usage: bash scripts/test.sh [--quick [REV]]" >&2; exit 2 ;;
esac

# Each step's wall time is printed as the next one starts, and all of them at
# the end, so a run that grows says where (the full run's budget is 45
# minutes on 2 cores; CI's limit is 90).
timings=()
step_name=""
step_started=$SECONDS
# With each step's time, how busy the machine's CPUs were during it
# (/proc/stat): a step far below 100% leaves room for the background builds.
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
read -r step_busy step_total < <(cpu_ticks)
step() {
    if [ -n "$step_name" ]; then
        local took=$((SECONDS - step_started)) busy total pct
        read -r busy total < <(cpu_ticks)
        pct=$(( total > step_total ? 100 * (busy - step_busy) / (total - step_total) : 0 ))
        printf '    (%dm %02ds, CPUs %d%% busy: %s)\n' $((took / 60)) $((took % 60)) "$pct" "$step_name"
        timings+=("$(printf '%5ds %3d%%  %s' "$took" "$pct" "$step_name")")
    fi
    read -r step_busy step_total < <(cpu_ticks)
    step_name="$*"
    step_started=$SECONDS
    printf '\n==> %s\n' "$*"
}

# Builds that no step needs before its turn run in the background, at the
# lowest CPU priority, on the cycles the foreground leaves idle (processes
# starting, servers waiting on sockets): the fuzz targets' sanitizer build
# and the static release binary. `bg_wait NAME` waits for one, reports its
# time and fails with its log if it failed.
bg_dir=""
declare -A bg_pids=()
bg_start() {
    local name=$1
    shift
    [ -n "$bg_dir" ] || bg_dir=$(mktemp -d "${TMPDIR:-/tmp}/reqstate-test-bg.XXXXXX")
    # Its own process group (setsid), so that an early exit of this script
    # stops the whole build, not only the shell around it.
    # A new session is a new scheduler autogroup where the kernel has
    # autogroups (sched_autogroup_enabled): nice counts only inside one, so
    # the group itself is niced too, or it would get half the CPUs.
    setsid nice -n 19 bash -c 'started=$(date +%s); status=0
        echo 19 2>/dev/null >/proc/self/autogroup || true
        "${@:3}" >"$1" 2>&1 || status=$?
        echo "$status $(($(date +%s) - started))" >"$2"' \
        bg "$bg_dir/$name.log" "$bg_dir/$name.done" "$@" &
    bg_pids[$name]=$!
    echo "started in the background (nice 19): $name: $*"
}
bg_wait() {
    local name=$1 status secs waited=$SECONDS
    wait "${bg_pids[$name]}" || true
    read -r status secs <"$bg_dir/$name.done"
    echo "background $name: exit $status after ${secs}s (waited $((SECONDS - waited))s for it here; log: $bg_dir/$name.log)"
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$bg_dir/$name.log" >&2
        exit "$status"
    fi
}
bg_cleanup() {
    local pid
    for pid in "${bg_pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
# On a failure, the last lines of the log say which step failed and how, so
# that a CI log cut to its end still names it (a step that died of a signal
# printed nothing of its own before).
on_exit() {
    local status=$?
    bg_cleanup
    if [ "$status" -ne 0 ] && [ -n "$step_name" ]; then
        local took=$((SECONDS - step_started)) how="exit $status"
        [ "$status" -gt 128 ] && how="$how (signal $((status - 128)): $(kill -l $((status - 128)) 2>/dev/null || echo '?'))"
        printf '\ntest.sh: FAILED in step "%s", %s, %dm %02ds into the step, %dm %02ds into the run\n' \
            "$step_name" "$how" $((took / 60)) $((took % 60)) $((SECONDS / 60)) $((SECONDS % 60)) >&2
    fi
    return "$status"
}
trap on_exit EXIT
report_timings() {
    step "(end)"
    step_name=""
    printf '\nstep times:\n'
    printf '  %s\n' "${timings[@]}"
    printf '  %5ds  total\n' "$SECONDS"
}

# cargo-deny, installed where `cargo install` puts tools ($CARGO_HOME/bin):
# it compiles from source (about 5 minutes on 2 cores), once per machine
# rather than once per clone (it lived in the clone's .tools/ before, which a
# clean clone, as CI's, never has).
DENY_VERSION=0.20.2
DENY="${CARGO_HOME:-$HOME/.cargo}/bin/cargo-deny"
deny_installed() { [ "$("$DENY" --version 2>/dev/null)" = "cargo-deny $DENY_VERSION" ]; }
# Licences, bans and sources (deny.toml) of every workspace member, from
# Cargo.lock and the local registry cache only. Advisories are not checked: they need the RustSec
# advisory database, fetched from GitHub, which is unreachable here.
# `cargo fetch` first: --offline needs every crate of Cargo.lock in the local
# registry cache, the ones for other targets (macOS, Windows) included.
deny_check() {
    cargo fetch --locked --quiet
    "$DENY" --offline --workspace check licenses bans sources
}

if $quick; then
    step "what the change touches (scripts/lib/changed.py)"
    eval "$(python3 scripts/lib/changed.py "${quick_rev[@]}")"
    read -r -a pkgs <<< "$packages"
    echo "$changed_files files changed since $quick_base; packages: ${pkgs[*]}"
    # Only the packages touched: their clippy and their own tests. The
    # sidecar's integration tests start processes, and the conformance,
    # Python and benchmark packages need the other implementations built:
    # those are named below, not run.
    clippy_args=() test_args=() test_lib_args=()
    for p in "${pkgs[@]}"; do
        clippy_args+=(-p "$p")
        case "$p" in
            reqstate-sidecar) test_lib_args+=(-p "$p") ;;
            reqstate-conformance | reqstate-python | reqstate-benches) ;;
            *) test_args+=(-p "$p") ;;
        esac
    done

    step "prerequisites (quick)"
    rustup component add rustfmt clippy >/dev/null

    step "docs: links, anchors, § references and paths (scripts/check-docs.py)"
    python3 scripts/check-docs.py
    step "the house: per crate, files, lines, import circles and files over 1000 lines (scripts/house.py)"
    python3 scripts/house.py

    if $vectors; then
        step "vectors: tests/vectors/*.json match their definitions (reqstate-vectors check)"
        cargo run --locked -q -p reqstate-vectors -- check
    fi

    step "format (all) and lints (${pkgs[*]})"
    cargo fmt --all -- --check
    cargo clippy "${clippy_args[@]}" --all-targets --locked -- -D warnings

    step "licences, bans and sources (cargo deny)"
    if deny_installed; then
        deny_check
    else
        echo "cargo-deny $DENY_VERSION is not installed in $(dirname "$DENY"): not checked here;"
        echo "the full run (bash scripts/test.sh) installs it and checks."
    fi

    if [ "${#test_args[@]}" -gt 0 ]; then
        step "tests: unit, integration and doc (${test_args[*]})"
        cargo test --locked "${test_args[@]}"
    fi
    if [ "${#test_lib_args[@]}" -gt 0 ]; then
        step "tests: unit only (${test_lib_args[*]})"
        cargo test --locked "${test_lib_args[@]}" --lib
    fi

    report_timings
    step "quick tests passed"
    for p in "${pkgs[@]}"; do
        case "$p" in
            reqstate-sidecar) suites+=$'\n'"cargo test -p reqstate-sidecar --test sidecar" ;;
            reqstate-benches) suites+=$'\n'"cargo test -p reqstate-benches --bench tokens -- --test" ;;
        esac
    done
    if [ -n "${suites//$'\n'/}" ]; then
        echo "The change also touches suites the quick tier does not run:"
        printf '%s\n' "$suites" | sed '/^$/d; s/^/  /'
    fi
    echo "The full run, before a review: bash scripts/test.sh"
    exit 0
fi

step "prerequisites"
# Disk: a run from a clean clone writes about 8.5 GiB (target/ 5.6,
# fuzz/target 1.4, the venvs and node_modules; measured 8.4 GiB at the end
# of a run). Say so up front rather than dying mid-build with "No space left
# on device" (as a CI run once did, with 2.1 GiB free).
free_kib=$(df -Pk . | awk 'NR==2 {print $4}')
echo "free disk here: $((free_kib / 1048576)) GiB"
if [ "$free_kib" -lt $((12 * 1048576)) ]; then
    echo "warning: under 12 GiB free; the full run needs about 8.5 GiB" >&2
fi
# A one-off build gains nothing from incremental compilation, whose caches
# would roughly double target/debug.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# ring needs clang to build for wasm32; the single-use tests run a real
# redis-server and redis-cli (the Debian package) and start sidecars whose
# clocks libfaketime shifts; everything else comes from crates.io, npm and
# PyPI.
missing=()
command -v clang >/dev/null 2>&1 || missing+=(clang)
command -v musl-gcc >/dev/null 2>&1 || missing+=(musl-tools)
{ command -v redis-server && command -v redis-cli; } >/dev/null 2>&1 || missing+=(redis-server)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || missing+=(libfaketime)
# The instruction-count gate runs its operations under callgrind.
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
if [ "${#missing[@]}" -gt 0 ]; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
# The Debian package starts a system redis-server; the tests start their own
# on free ports and do not need it.
rustup component add rustfmt clippy >/dev/null
rustup target add x86_64-unknown-none wasm32-unknown-unknown x86_64-unknown-linux-musl >/dev/null

# The two biggest builds no early step needs (see bg_start above): the fuzz
# targets (nightly, AddressSanitizer: about 9 minutes of 2 CPUs alone) and
# the static release binary that scripts/artifacts.sh ships, with the
# instruction-count gate (benches/instructions), which counts that build's
# code: one release build for both. Each waits for nothing; the foreground's
# cargo builds use target/debug, which they do not lock.
bg_start fuzz-build bash fuzz/run.sh --build-only
bg_start release-musl cargo build --release --locked -p reqstate-sidecar -p reqstate-instructions --target x86_64-unknown-linux-musl

step "docs: links, anchors, § references and paths (scripts/check-docs.py)"
python3 scripts/check-docs.py --self-test
python3 scripts/check-docs.py

step "the house: per crate, files, lines, import circles and files over 1000 lines (scripts/house.py)"
python3 scripts/house.py

step "vendored h2: exactly crates.io's release + reqstate.patch; yanks, newer releases, advisories (scripts/vendor-h2)"
# cargo deny cannot see a path dependency: these scripts watch vendor/h2.
# A newer upstream release only warns; a yanked vendored version fails.
python3 scripts/vendor-h2/test_vendor_h2.py
python3 scripts/vendor-h2/refresh.py --check
python3 scripts/vendor-h2/upstream_check.py

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "vectors: tests/vectors/*.json match their definitions (reqstate-vectors check)"
cargo run --locked -q -p reqstate-vectors -- check

step "licences, bans and sources (cargo deny, deny.toml)"
deny_installed || cargo install --locked --quiet cargo-deny --version "$DENY_VERSION" --root "$(dirname "$(dirname "$DENY")")"
deny_check

step "TypeScript package build (its reqstate-ts command is in the conformance tests, tests/conformance)"
bash clients/typescript/build.sh

step "Python in-process package build (its python -m reqstate is in the conformance tests, tests/conformance)"
bash crates/reqstate-python/run-tests.sh --install-only
export REQSTATE_PYTHON="$PWD/crates/reqstate-python/.venv/bin/python"

step "tests (unit, integration, doc): each crate's own, then the cross-implementation conformance (tests/)"
cargo test --workspace --locked

step "benchmark smoke run (each benchmark once, in the test profile; figures come from cargo bench)"
# The reqstate-benches package (benches/Cargo.toml). The
# smoke run checks that each benchmark runs, not how fast, so it builds in the
# test profile, on the dependency graph `cargo test` built above (`cargo bench
# -- --test` compiled a second, optimized graph of the whole workspace: 5 to 7
# minutes here, against about 1.5). The sidecar benchmark starts the binary
# `cargo test` built (REQSTATE_BENCH_BIN). `cargo bench -p reqstate-benches --bench tokens` and
# `cargo bench -p reqstate-benches --bench sidecar` for figures still build and measure optimized
# code (docs/BENCHMARKS.md).
cargo test --locked -p reqstate-benches --bench tokens -- --test
REQSTATE_BENCH_BIN="$PWD/target/debug/reqstate" cargo test --locked -p reqstate-benches --bench sidecar -- --test
# The sidecar under h2load (Debian's nghttp2-client, installed when missing):
# Verify and Mint beside Health/Check over the Unix socket and TCP, every
# call checked against the sidecar's own counters; one round of 1 000 calls
# per case. The ratios of a debug build on a loaded machine are not figures:
# `benches/h2load.sh` on a release build is (docs/BENCHMARKS.md).
bash benches/h2load.sh --smoke --bin "$PWD/target/debug/reqstate"

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
source scripts/lib/python-venv.sh
ensure_venv "$PWD/.venv" tests/vectors/requirements.txt
.venv/bin/python -m pytest -q -p no:cacheprovider tests/vectors/verify_v1.py

step "independent Python check of the state JSON mapping (tests/vectors/verify_state_json.py)"
# Written from docs/CLI.md alone: maps every JSON text of state_json.json itself.
.venv/bin/python -m pytest -q -p no:cacheprovider tests/vectors/verify_state_json.py

step "call context corpus against RFC 8785 (tests/vectors/test_call_context.py, the rfc8785 package)"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/vectors/test_call_context.py

step "mutation check: every rule of the Python verifier broken one at a time must fail the vectors"
.venv/bin/python tests/vectors/mutation/run.py

# The clients run against the debug binary that `cargo test` built above.
export REQSTATE_BIN="$PWD/target/debug/reqstate"

step "stock gRPC clients, no reqstate code: grpcio and @grpc/grpc-js on the Unix socket; Go, C++, Java, Ruby (Debian packages, installed when missing) on the Unix socket and TCP with a bearer token; the SIDECAR.md snippets checked"
bash tests/stock_clients/run.sh

step "Node client (@grpc/grpc-js) and the TypeScript MCP SDK against the real sidecar, and its packaging with @reqstate/codec"
bash clients/node/run-tests.sh

step "TypeScript @reqstate/codec: vectors on Node, Deno, Bun and workerd; Rust/sidecar/TS cross-checks; the Worker on workerd"
bash clients/typescript/run-tests.sh

step "Python client (grpcio) and the official mcp SDK end to end against the real sidecar"
bash clients/python/run-tests.sh

step "Python in-process package (PyO3): vectors, cross-implementation, fork safety, GIL, the mcp SDK's compact boundary in memory and over HTTP, pip install from the checkout and the README quick start"
bash crates/reqstate-python/run-tests.sh

step "the official MCP conformance suite (@modelcontextprotocol/conformance 0.2.0-alpha.12: the 14 SEP-2322 server scenarios, Node 22) and the adversarial checks: the TypeScript SDK server on Node (hmac-sha256, xchacha20-poly1305) and on workerd, the Python SDK server, and rounds moved between the TypeScript and the Python server"
bash tests/mcp-conformance/run.sh

step "deployment kit: Kubernetes manifests and the systemd unit, validated and run (deploy/run-tests.sh)"
bash deploy/run-tests.sh

step "artifacts a user installs: the crates (cargo package, verified), the abi3 wheel without a toolchain, the npm tarball, the static musl binary (scripts/artifacts.sh, docs/RELEASE.md)"
# The binary is the background release-musl build (the same command): the
# script finds it up to date. The wheel is the one the Python steps built.
bg_wait release-musl
bash scripts/artifacts.sh

step "instruction counts of the hot paths against their budgets (callgrind; benches/instructions/budgets.toml)"
# Counts, not times: they do not move with the machine's load. The build is
# the background release-musl one above.
instructions=target/x86_64-unknown-linux-musl/release/reqstate-instructions
"$instructions" check
# The gate can fail: an operation over its budget exits 1.
tight="$(mktemp)"
printf 'tolerance_percent = 1.0\n[operation."floor/hmac-sha256"]\ninstructions = 100\n' > "$tight"
gate_rc=0
gate_out="$("$instructions" check --budgets "$tight" --only floor/hmac-sha256 2>&1)" || gate_rc=$?
rm -f "$tight"
if [ "$gate_rc" -ne 1 ] || ! grep -q "^floor/hmac-sha256 .*OVER BUDGET" <<< "$gate_out"; then
    printf '%s\n' "$gate_out" >&2
    echo "the instruction gate did not refuse an operation 90 times over its budget (exit $gate_rc)" >&2
    exit 1
fi

step "fuzzing: every target for 20 s (cargo fuzz, nightly, AddressSanitizer)"
bg_wait fuzz-build
bash fuzz/run.sh 20

step "keyring differential: random keyring texts and instants through the Rust core and the TypeScript reader (fuzz/differential)"
# The same minting key and verifying set, or the same refusal, from both
# readers of one file (a mixed fleet serves one keyring): 20 000 generated
# keyrings, then the keyring_schedule fuzz corpus replayed.
bash fuzz/differential/run.sh 20000 1
bash fuzz/differential/run.sh --corpus

report_timings
step "all tests passed"
