#!/usr/bin/env bash
# Stock gRPC libraries against the real sidecar, with no reqstate code on the
# client side: stubs generated from proto/ at test time by each language's
# own tooling.
#
#   python  grpcio (gRPC's C core), Unix socket, no channel options
#   node    @grpc/grpc-js, Unix socket, no channel options
#   go      grpc-go (Debian), Unix socket and TCP with the bearer token
#   cpp     gRPC C++ (Debian), Unix socket and TCP with the bearer token
#   java    grpc-java with grpc-netty (Debian), TCP with the bearer token
#           (Debian's netty has no native epoll library, so no Unix socket:
#           the client checks that this is still the reason)
#   ruby    ruby-grpc (Debian, C core), Unix socket and TCP with the bearer token
#
# Each of go/cpp/java/ruby runs mint -> verify (a tampered token and another
# tool refused) -> batch -> a malformed request's rich error -> health, and
# over TCP a call without the token (UNAUTHENTICATED). The tonic case is
# tests/conformance/stock_clients.rs (cargo test).
#
#   bash tests/stock_clients/run.sh [python|node|go|cpp|java|ruby ...]   (default: all)
#
# Installs the Debian packages it needs when missing (apt-get; root or sudo),
# pinned Python and npm packages into tests/stock_clients/.venv and
# node_modules/ (git-ignored). Builds in a temporary folder. First checks
# that the snippets in docs/SIDECAR.md are the code the clients run
# (snippets.py). $REQSTATE_BIN defaults to target/debug/reqstate, which
# `cargo test` builds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export REQSTATE_BIN="${REQSTATE_BIN:-$repo/target/debug/reqstate}"
[ -x "$REQSTATE_BIN" ] || { echo "run.sh: no reqstate binary at $REQSTATE_BIN" >&2; exit 1; }

all=(python node go cpp java ruby)
if [ $# -gt 0 ]; then langs=("$@"); else langs=("${all[@]}"); fi
for lang in "${langs[@]}"; do
  case " ${all[*]} " in *" $lang "*) ;; *) echo "run.sh: unknown language '$lang' (one of: ${all[*]})" >&2; exit 2 ;; esac
done
wants() { case " ${langs[*]} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# both <library> <unix-target> <client command...>: the client over the Unix socket (no token), then
# over TCP with the bearer token; each run counts.
both() {
  local library=$1 target=$2
  shift 2
  echo "$library, over the Unix socket:"
  "$@" "$target"
  runs=$((runs + 1))
  echo "$library, over TCP with the bearer token:"
  "$@" "$tcp" "$bearer"
  runs=$((runs + 1))
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
declare -a timings=()
runs=0 # client runs that passed: the closing line counts them

echo "docs/SIDECAR.md snippets against the clients' sources:"
python3 "$here/snippets.py" --check

# --- Debian packages -------------------------------------------------------
declare -A debs=(
  [go]="golang-go golang-github-golang-protobuf-1-5-dev golang-google-protobuf-dev golang-google-grpc-dev golang-google-genproto-dev protobuf-compiler protoc-gen-go protoc-gen-go-grpc"
  [cpp]="g++ pkg-config protobuf-compiler protobuf-compiler-grpc grpc-proto libgrpc++-dev libprotobuf-dev"
  [java]="default-jdk-headless protobuf-compiler protobuf-compiler-grpc-java-plugin grpc-proto libgrpc-java libprotobuf-java libguava-java libnetty-java libperfmark-java libgoogle-gson-java libgoogle-common-protos-java libgeronimo-annotation-1.3-spec-java"
  [ruby]="ruby ruby-grpc ruby-grpc-tools ruby-googleapis-common-protos-types"
)
missing=()
for lang in go cpp java ruby; do
  wants "$lang" || continue
  for p in ${debs[$lang]}; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' ok installed$' && continue
    case " ${missing[*]-} " in *" $p "*) ;; *) missing+=("$p") ;; esac
  done
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "run.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "installing Debian packages: ${missing[*]}"
  t0=$(now)
  aptlog="$(mktemp)"
  if ! { "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -o DPkg::Lock::Timeout=600 "${missing[@]}"; } >"$aptlog" 2>&1; then
    cat "$aptlog" >&2
    echo "run.sh: apt-get failed (above)" >&2
    exit 1
  fi
  rm -f "$aptlog"
  timings+=("apt-get install: $(since "$t0") s")
  echo "${timings[-1]}"
fi

# --- the existing Python and Node clients (each starts its own sidecar) -----
if wants python; then
  t0=$(now)
  venv="$here/.venv"
  # shellcheck source=../../scripts/lib/python-venv.sh
  source "$repo/scripts/lib/python-venv.sh"
  ensure_venv "$venv" "$here/requirements.txt"
  echo "grpcio (C core), no channel options, over the Unix socket:"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/test_grpcio.py"
  runs=$((runs + 1))
  timings+=("python: $(since "$t0") s")
fi
if wants node; then
  t0=$(now)
  (cd "$here" && npm ci --no-audit --no-fund --silent)
  echo "@grpc/grpc-js, no channel options, over the Unix socket:"
  (cd "$here" && node --test grpc_js.test.mjs)
  runs=$((runs + 1))
  timings+=("node: $(since "$t0") s")
fi

# --- two sidecars for go/cpp/java/ruby: a Unix socket with no token (its file
# mode guards it), and loopback TCP with a bearer token ---------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/reqstate-stock-XXXXXX")"
pids=()
# Every command here may fail without stopping the cleanup (set -e applies in
# a trap too): a sidecar stopped by SIGTERM makes `wait` return 143, which
# used to end the trap early, leave $work behind and replace the script's own
# exit status with 143.
cleanup() {
  local pid
  for pid in "${pids[@]-}"; do
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

needs_sidecars=0
for lang in go cpp java ruby; do wants "$lang" && needs_sidecars=1; done
if [ "$needs_sidecars" = 1 ]; then
  socket="$work/reqstate.sock"
  bearer="stock-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s\n' "$bearer" >"$work/token"
  chmod 600 "$work/token"
  # The logs exist before the sidecars start: the loop below reads them at
  # once, and a background job opens its redirection only when it runs (a
  # missing file made sed fail, which set -e turned into an exit).
  : >"$work/unix.log"
  : >"$work/tcp.log"
  "$REQSTATE_BIN" serve --dev --listen "unix:$socket" >"$work/unix.log" 2>&1 &
  pids+=($!)
  "$REQSTATE_BIN" serve --dev --listen tcp:127.0.0.1:0 --auth-token-file "$work/token" >"$work/tcp.log" 2>&1 &
  pids+=($!)
  tcp=""
  for _ in $(seq 200); do
    port="$(sed -n 's/.*serving gRPC listen=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/tcp.log")"
    [ -n "$port" ] && tcp="127.0.0.1:$port"
    [ -S "$socket" ] && [ -n "$tcp" ] && break
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "run.sh: a sidecar exited at start:" >&2; cat "$work"/*.log >&2; exit 1; }
    done
    sleep 0.1
  done
  [ -S "$socket" ] && [ -n "$tcp" ] || { echo "run.sh: the sidecars did not start:" >&2; cat "$work"/*.log >&2; exit 1; }
  echo "sidecars: unix:$socket (no token), tcp:$tcp (bearer token)"
fi

if wants go; then
  t0=$(now)
  gopath="$work/go"
  mkdir -p "$gopath/src/stockclient/reqstatev1"
  cp "$here/go/client.go" "$gopath/src/stockclient/"
  m="Mreqstate/v1/reqstate.proto=stockclient/reqstatev1"
  protoc -I"$repo/proto" --go_out="$gopath/src" --go_opt=paths=import,"$m" \
    --go-grpc_out="$gopath/src" --go-grpc_opt=paths=import,"$m" reqstate/v1/reqstate.proto
  # Debian's Go libraries live in /usr/share/gocode: GOPATH mode, nothing downloaded.
  gocache="${GOCACHE:-}"
  [ -n "$gocache" ] || [ -n "${HOME:-}" ] || gocache="$work/gocache"
  (cd "$gopath/src/stockclient" && GO111MODULE=off GOPROXY=off GOFLAGS= GOPATH="$gopath:/usr/share/gocode" \
    ${gocache:+GOCACHE="$gocache"} go build -o "$work/go-client" .)
  built=$(since "$t0")
  both "grpc-go $(dpkg-query -W -f='${Version}' golang-google-grpc-dev)" "unix://$socket" "$work/go-client"
  timings+=("go: $(since "$t0") s (build $built s)")
fi

if wants cpp; then
  t0=$(now)
  out="$work/cpp"
  mkdir -p "$out"
  protoc -I"$repo/proto" -I/usr/share/grpc-proto --cpp_out="$out" --grpc_out="$out" \
    --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" reqstate/v1/reqstate.proto grpc/health/v1/health.proto
  # One g++ call, -O0: the client and the generated units.
  # shellcheck disable=SC2046
  g++ -O0 -std=c++17 -I"$out" -o "$work/cpp-client" "$here/cpp/client.cc" \
    "$out"/reqstate/v1/*.cc "$out"/grpc/health/v1/*.cc $(pkg-config --cflags --libs grpc++ protobuf)
  built=$(since "$t0")
  both "gRPC C++ $(dpkg-query -W -f='${Version}' libgrpc++-dev)" "unix:$socket" "$work/cpp-client"
  timings+=("cpp: $(since "$t0") s (build $built s)")
fi

if wants java; then
  t0=$(now)
  out="$work/java"
  mkdir -p "$out/src" "$out/classes"
  protoc -I"$repo/proto" -I/usr/share/grpc-proto --java_out="$out/src" --grpc-java_out="$out/src" \
    --plugin=protoc-gen-grpc-java="$(command -v grpc_java_plugin)" reqstate/v1/reqstate.proto grpc/health/v1/health.proto
  classpath=""
  for jar in grpc-api grpc-context grpc-core grpc-netty grpc-protobuf grpc-protobuf-lite grpc-stub \
    protobuf proto-google-common-protos guava perfmark-api gson \
    netty-buffer netty-codec netty-codec-http netty-codec-http2 netty-common netty-handler netty-resolver \
    netty-transport netty-transport-native-unix-common netty-transport-native-epoll \
    geronimo-annotation-1.3-spec; do
    [ -f "/usr/share/java/$jar.jar" ] || { echo "run.sh: no /usr/share/java/$jar.jar" >&2; exit 1; }
    classpath="$classpath${classpath:+:}/usr/share/java/$jar.jar"
  done
  # One javac call: the client and the generated sources (grpc_java_plugin
  # writes @javax.annotation.Generated, hence the geronimo jar, compile time only).
  find "$out/src" -name '*.java' >"$out/sources"
  javac -nowarn -d "$out/classes" -cp "$classpath" "$here/java/Client.java" @"$out/sources"
  built=$(since "$t0")
  echo "grpc-java $(dpkg-query -W -f='${Version}' libgrpc-java) (grpc-netty), over TCP with the bearer token:"
  java -cp "$out/classes:$classpath" Client "$tcp" "$bearer"
  runs=$((runs + 1))
  echo "grpc-java over the Unix socket (netty epoll domain sockets):"
  rc=0
  java -cp "$out/classes:$classpath" Client "unix:$socket" || rc=$?
  case $rc in
    0) runs=$((runs + 1)) ;;
    3) echo "java: the Unix socket is not available with Debian's netty (above); Java callers use TCP with the bearer token" ;;
    *) exit "$rc" ;;
  esac
  timings+=("java: $(since "$t0") s (build $built s)")
fi

if wants ruby; then
  t0=$(now)
  out="$work/ruby"
  mkdir -p "$out"
  grpc_tools_ruby_protoc -I"$repo/proto" --ruby_out="$out" --grpc_out="$out" reqstate/v1/reqstate.proto
  both "ruby-grpc $(dpkg-query -W -f='${Version}' ruby-grpc)" "unix:$socket" env RUBYLIB="$out" ruby "$here/ruby/client.rb"
  timings+=("ruby: $(since "$t0") s")
fi

echo "stock clients, times:"
printf '  %s\n' "${timings[@]}"
echo "stock clients: $runs passed, 0 failed"
