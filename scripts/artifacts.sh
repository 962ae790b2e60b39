#!/usr/bin/env bash
# Builds every artifact a release ships, from this checkout, and checks each
# the way a user would install it (docs/RELEASE.md):
#
#   bash scripts/artifacts.sh [--out DIR] [--only PARTS]
#
#   crates  `cargo package --locked` of the workspace crates that are not
#           `publish = false` (reqstate, reqstate-keyring-file), packaged
#           together against a local overlay registry so that each .crate is
#           built from its packaged sources alone (cargo's verify step); then
#           its metadata, its file list and its README's links, as crates.io
#           would show them (scripts/lib/artifacts.py check-crate)
#   wheel   the abi3 wheel of crates/reqstate-python (build-wheel.sh: reused
#           when the test command built it from the same sources), installed
#           into a fresh virtualenv with PATH=/usr/bin:/bin (no cargo, no
#           rustc: checked), imported, one mint and verify, python -m reqstate
#   npm     `npm pack` of a clean copy of clients/typescript (its `prepare`
#           compiles dist/), installed into an empty project from the tarball,
#           one mint and verify with node
#   binary  the static release binary: cargo build --release --locked
#           -p reqstate-sidecar --target x86_64-unknown-linux-musl; checked to
#           be static (file, ldd), to print its version, and to serve --dev
#           and answer its own `reqstate health`
#
# PARTS is a comma-separated subset of crates,wheel,npm,binary (default: all).
# Artifacts go to DIR (default target/artifacts), with artifacts.tsv, the
# table printed at the end (artifact, path, bytes, MiB, check). Cargo builds
# in $CARGO_TARGET_DIR, by default the repository's target/, which the test
# command shares: the crates' verify step builds only the small crates and
# their dependencies (incremental from the last run), and the wheel is the
# one the test command's Python step built
# (build-wheel.sh reuses it; with no CARGO_TARGET_DIR given, it would build
# where that step does). Installs what it needs when missing, saying so:
# the rustup musl target and Debian's musl-tools (binary), the pinned maturin
# in crates/reqstate-python/.venv (wheel). Needs cargo, python3 (3.11), node
# and npm, and the crates.io and npm registries (or their local caches).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
who=artifacts.sh

out="$repo/target/artifacts"
parts="crates,wheel,npm,binary"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --only) parts=${2:?--only needs crates,wheel,npm,binary}; shift 2 ;;
        *) echo "usage: bash scripts/artifacts.sh [--out DIR] [--only crates,wheel,npm,binary]" >&2; exit 2 ;;
    esac
done
for p in ${parts//,/ }; do
    case "$p" in crates | wheel | npm | binary) ;; *) echo "$who: unknown part '$p' (crates, wheel, npm, binary)" >&2; exit 2 ;; esac
done
wants() { [[ ",$parts," == *",$1,"* ]]; }

# The caller's own CARGO_TARGET_DIR, if any, for the wheel: unset, the
# wheel builds where build-wheel.sh puts it (the Python package's own target
# directory), as the test command's build did.
caller_target_dir="${CARGO_TARGET_DIR-}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rows="$out/artifacts.tsv"
: >"$rows"
work="$(mktemp -d "${TMPDIR:-/tmp}/reqstate-artifacts.XXXXXX")"
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

helper=(python3 "$repo/scripts/lib/artifacts.py")
version="$(cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json, sys; print({p["name"]: p["version"] for p in json.load(sys.stdin)["packages"]}["reqstate-sidecar"])')"
timings=()
part_started=$SECONDS
part() {
    part_started=$SECONDS
    printf '\n==> %s\n' "$*"
}
part_done() {
    local took=$((SECONDS - part_started))
    timings+=("$(printf '%5ds  %s' "$took" "$1")")
    printf '    (%dm %02ds: %s)\n' $((took / 60)) $((took % 60)) "$1"
}
row() { printf '%s\t%s\t%s\t%s\n' "$1" "${2#"$repo"/}" "$(stat -c %s "$2")" "$3" >>"$rows"; }
die() { echo "$who: FAILED: $*" >&2; exit 1; }

# ---------------------------------------------------------------- crates
if wants crates; then
    part "crates: cargo package --locked (each .crate built from its packaged sources)"
    crates=() versions=()
    while read -r name ver; do crates+=("$name") versions+=("$ver"); done < <(
        cargo metadata --format-version 1 --no-deps --locked | "${helper[@]}" publishable)
    [[ ${#crates[@]} -gt 0 ]] || die "no workspace crate is publishable"
    echo "publishable (not publish = false): ${crates[*]}"
    package_args=(--locked)
    for c in "${crates[@]}"; do package_args+=(-p "$c"); done
    # A release is packaged from a clean checkout; a working tree with edits
    # in these crates is packaged as it is, and said so.
    dirty="$(git status --porcelain 2>/dev/null -- $(for c in "${crates[@]}"; do echo "crates/$c"; done) Cargo.toml Cargo.lock || true)"
    if [[ -n "$dirty" ]]; then
        echo "note: uncommitted changes in these crates are packaged as they are (--allow-dirty):"
        echo "$dirty" | sed 's/^/    /'
        package_args+=(--allow-dirty)
    fi
    log="$work/package.log"
    if ! cargo package "${package_args[@]}" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        die "cargo package ${package_args[*]}"
    fi
    # Any warning (missing metadata, a file that cannot be included, a
    # compiler warning in the packaged sources) is a failure here, but one:
    # the integration tests that `exclude` leaves out on purpose (they read
    # the repository's vectors and docs by relative path) are dropped from
    # the packaged manifest with a warning naming each.
    dropped='^warning: ignoring test `[a-z_]+` as `tests/[^`]+` is not included in the published package$'
    grep -E "$dropped" "$log" | sed 's/^warning: /note (intended, `exclude`): /' || true
    if grep -E '^(warning|error)' "$log" | grep -vE "$dropped" >&2; then
        die "cargo package printed warnings (above; full log: $log)"
    fi
    grep -E '^ *(Packaged|Verifying|Finished)' "$log" || true
    mkdir -p "$out/crates"
    for i in "${!crates[@]}"; do
        c="${crates[$i]}-${versions[$i]}.crate"
        [[ -f "$CARGO_TARGET_DIR/package/$c" ]] || die "cargo package made no $CARGO_TARGET_DIR/package/$c"
        cp -f "$CARGO_TARGET_DIR/package/$c" "$out/crates/"
        "${helper[@]}" check-crate "$out/crates/$c" || die "$c (above)"
        row "crate ${crates[$i]}" "$out/crates/$c" "packaged, verify-built, metadata, files, links"
    done
    part_done "crates"
fi

# ----------------------------------------------------------------- wheel
if wants wheel; then
    part "wheel: the abi3 wheel (crates/reqstate-python/build-wheel.sh) installed without a Rust toolchain"
    pydir="$repo/crates/reqstate-python"
    if [[ ! -x "$pydir/.venv/bin/python" ]] || ! "$pydir/.venv/bin/python" -c 'import maturin' 2>/dev/null; then
        echo "installing: crates/reqstate-python/.venv with its pinned requirements-dev.txt (maturin)"
    fi
    # shellcheck source=lib/python-venv.sh
    source "$repo/scripts/lib/python-venv.sh"
    ensure_venv "$pydir/.venv" "$pydir/requirements-dev.txt"
    if [[ -n "$caller_target_dir" ]]; then
        wheel="$(bash "$pydir/build-wheel.sh" "$pydir/.venv/bin/python")"
    else
        wheel="$(env -u CARGO_TARGET_DIR bash "$pydir/build-wheel.sh" "$pydir/.venv/bin/python")"
    fi
    cp -f "$wheel" "$out/"
    wheel="$out/$(basename "$wheel")"
    tag="$("${helper[@]}" wheel-tag "$wheel")"
    echo "wheel: $(basename "$wheel"), tag $tag"
    [[ "$tag" == cp310-abi3-* ]] || die "the wheel's tag is $tag, not cp310-abi3-* (one wheel for every CPython >= 3.10)"

    # A fresh virtualenv, then everything else with no toolchain on PATH.
    printf '# no requirements: the wheel is installed below, without cargo on PATH\n' >"$work/none.txt"
    ensure_venv "$work/venv" "$work/none.txt"
    bare=(env -i PATH=/usr/bin:/bin HOME="$work" LANG=C.UTF-8)
    if found="$("${bare[@]}" sh -c 'command -v cargo || command -v rustc || command -v maturin')"; then
        die "PATH=/usr/bin:/bin still has a Rust toolchain ($found): the install would not prove anything"
    fi
    echo "PATH=/usr/bin:/bin: no cargo, rustc or maturin (command -v fails)"
    "${bare[@]}" "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps "$wheel"
    (
        cd "$work"
        "${bare[@]}" "$work/venv/bin/python" - <<'EOF'
import reqstate
from reqstate import Binding, Codec, Keyring, TokenRefused, call_context

assert reqstate.__file__.startswith(__import__("sys").prefix), reqstate.__file__
codec = Codec(Keyring.ephemeral())
binding = Binding("increase-counter", call_context("user-42", "counter-server", "tools/call", {"current": 10}))
token = codec.mint(binding, "confirm", {"current": 10, "amount": 5}, ttl=600).token
verified = codec.verify(token, binding, expected_step="confirm")
assert verified.step == "confirm" and verified.state == {"current": 10, "amount": 5}, verified.state
other = Binding("increase-counter", call_context("user-43", "counter-server", "tools/call", {"current": 10}))
try:
    codec.verify(token, other, expected_step="confirm")
    raise SystemExit("a token bound to user-42 verified for user-43")
except TokenRefused as e:
    refused = e.reason
print(f"python: reqstate {reqstate.__version__} from {reqstate.__file__}: minted {len(token)} chars, verified, another caller refused ({refused})")
EOF
        "${bare[@]}" "$work/venv/bin/python" -m reqstate --help >"$work/help.txt" || die "python -m reqstate --help"
        grep -q "mint" "$work/help.txt" || die "python -m reqstate --help does not mention mint: $(cat "$work/help.txt")"
        echo "python -m reqstate --help: $(head -n 1 "$work/help.txt")"
    )
    row "wheel ($tag)" "$wheel" "installed with no toolchain, mint/verify, -m reqstate"
    part_done "wheel"
fi

# ------------------------------------------------------------------- npm
if wants npm; then
    part "npm: npm pack of clients/typescript, installed into an empty project from the tarball"
    npm_opts=(--no-audit --no-fund --loglevel=error)
    ts="$repo/clients/typescript"
    # A copy of what git has (tracked, and new files not ignored): no stale
    # dist/ from an older build can slip into the tarball. The build
    # dependencies are the checkout's when build.sh installed them, else
    # `prepare` installs them in the copy (npm ci).
    copy="$work/codec"
    mkdir -p "$copy"
    (cd "$ts" && git ls-files -z --cached --others --exclude-standard . |
        while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
        xargs -0 cp --parents -t "$copy")
    [[ -f "$copy/package.json" && ! -e "$copy/dist" ]] || die "clean copy of clients/typescript"
    if [[ -x "$ts/node_modules/typescript/bin/tsc" ]]; then ln -s "$ts/node_modules" "$copy/node_modules"; fi
    # (prepare's `npm ci`, when it runs, inherits --json: its report goes to
    # the log, shown only if packing fails.)
    (cd "$copy" && npm pack --json --pack-destination "$out" "${npm_opts[@]}") >"$work/pack.json" 2>"$work/pack.log" ||
        { cat "$work/pack.log" >&2; die "npm pack"; }
    tarball="$out/$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["filename"])' "$work/pack.json")"
    [[ -f "$tarball" ]] || die "npm pack made no tarball"
    python3 - "$work/pack.json" <<'EOF' || die "the tarball's files (above)"
import json, re, sys
files = sorted(f["path"] for f in json.load(open(sys.argv[1]))[0]["files"])
extra = [f for f in files if not re.fullmatch(r"dist/[a-z]+\.(js|d\.ts)|README\.md|package\.json|LICENSE", f)]
missing = [f for f in ("package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/cli.js") if f not in files]
if extra or missing:
    sys.exit(f"tarball: unexpected {extra}, missing {missing}")
print(f"tarball: {len(files)} files, nothing but dist/, the README and package.json")
EOF
    project="$work/project"
    mkdir -p "$project"
    printf '{"name":"empty","version":"1.0.0","private":true,"type":"module"}\n' >"$project/package.json"
    (cd "$project" && npm install --prefer-offline "${npm_opts[@]}" "$tarball")
    for dev in typescript @types/node redis; do
        [[ ! -e "$project/node_modules/$dev" ]] || die "installing the tarball brought a dev dependency: $dev"
    done
    (cd "$project" && node --input-type=module -e '
import { Codec, ReqstateError, callContext } from "@reqstate/codec";
const keyring = `1:primary:${Buffer.alloc(32, 7).toString("base64")}`;
const codec = new Codec({ keyring });
const context = callContext({ principal: "user-42", audience: "counter-server", method: "tools/call", argumentsJson: "{\"current\":10}" });
const { token } = codec.mint({ tool: "increase-counter", step: "confirm", state: { current: 10, amount: 5 }, ttl: 600, context });
const { step, state } = codec.verify(token, { tool: "increase-counter", context, expectedStep: "confirm" });
if (step !== "confirm" || state.current !== 10 || state.amount !== 5) throw new Error(`verified ${step} ${JSON.stringify(state)}`);
const other = callContext({ principal: "user-43", audience: "counter-server", method: "tools/call", argumentsJson: "{\"current\":10}" });
let reason;
try { codec.verify(token, { tool: "increase-counter", context: other, expectedStep: "confirm" }); } catch (e) { if (!(e instanceof ReqstateError)) throw e; reason = e.reason; }
if (!reason) throw new Error("a token bound to user-42 verified for user-43");
console.log(`node: @reqstate/codec from the tarball: minted ${token.length} chars, verified, another caller refused (${reason})`);
') || die "node mint/verify with the installed tarball"
    row "npm @reqstate/codec" "$tarball" "installed from the tarball, mint/verify"
    part_done "npm"
fi

# ---------------------------------------------------------------- binary
if wants binary; then
    triple=x86_64-unknown-linux-musl
    part "binary: cargo build --release --locked -p reqstate-sidecar --target $triple"
    if ! rustup target list --installed | grep -qx "$triple"; then
        echo "installing: rustup target add $triple"
        rustup target add "$triple"
    fi
    if ! command -v musl-gcc >/dev/null; then
        echo "installing: Debian package musl-tools (musl-gcc, for ring's C and assembly)"
        sudo=()
        [[ $(id -u) -eq 0 ]] || sudo=(sudo)
        "${sudo[@]}" apt-get install -y -qq musl-tools >/dev/null || {
            "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq musl-tools >/dev/null
        }
    fi
    build_started=$SECONDS
    cargo build --release --locked -p reqstate-sidecar --target "$triple"
    echo "build: $((SECONDS - build_started)) s"
    built="$CARGO_TARGET_DIR/$triple/release/reqstate"
    bin="$out/reqstate-$version-$triple"
    cp -f "$built" "$bin"
    kind="$(file -b "$bin")"
    echo "file: $kind"
    [[ "$kind" == *"statically linked"* || "$kind" == *"static-pie linked"* ]] || die "not a static executable: $kind"
    lddout="$(ldd "$bin" 2>&1 || true)"
    echo "ldd: $lddout"
    [[ "$lddout" == *"not a dynamic executable"* || "$lddout" == *"statically linked"* ]] || die "ldd lists libraries: $lddout"
    [[ "$("$bin" --version)" == "reqstate $version" ]] || die "--version printed '$("$bin" --version)'"
    echo "--version: $("$bin" --version)"
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "$bin" serve --dev --listen "tcp:127.0.0.1:$port" --log warn >"$work/serve.log" 2>&1 &
    server_pid=$!
    answered=false
    for _ in $(seq 1 50); do
        if health="$("$bin" health --listen "tcp:127.0.0.1:$port" --log off 2>&1)"; then answered=true; break; fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.2
    done
    $answered || { cat "$work/serve.log" >&2; die "serve --dev on tcp:127.0.0.1:$port did not answer health: $health"; }
    echo "serve --dev --listen tcp:127.0.0.1:$port, then reqstate health: $health"
    [[ "$health" == "SERVING" ]] || die "health printed '$health', not SERVING"
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    row "binary $triple (static)" "$bin" "static, --version, serve --dev + health"
    glibc="$CARGO_TARGET_DIR/release/reqstate"
    if [[ -f "$glibc" ]]; then
        row "binary glibc release (not built here)" "$glibc" "size only"
    fi
    part_done "binary"
fi

printf '\n==> artifacts (%s)\n' "${out#"$repo"/}"
"${helper[@]}" table "$rows"
printf '\npart times:\n'
printf '  %s\n' "${timings[@]}"
printf '  %5ds  total\n' "$SECONDS"
