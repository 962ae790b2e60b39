#!/usr/bin/env bash
# The official MCP conformance suite (14 SEP-2322 server scenarios, run-suite.sh) and the project's
# adversarial checks (adversarial.mjs) against the conformance servers built on the official SDKs
# with reqstate:
#
#   ts-node-hmac     the TypeScript server (servers/typescript) on Node, an hmac-sha256 keyring
#   ts-node-xchacha  the same, an xchacha20-poly1305 keyring
#   ts-worker        the same tools as a Worker (esbuild bundle) in workerd through miniflare
#   python           the Python server, started by servers/python/start.sh
#   cross            the TypeScript (Node) and the Python server at once, on one keyring and one
#                    audience: a round minted by either completes on the other (adversarial.mjs --cross)
#
#   bash tests/mcp-conformance/run.sh [part ...]      # default: all five, in that order
#
# Each part: start the server (env REQSTATE_KEYS, PORT), run-suite.sh, adversarial.mjs, stop it;
# then a second instance with REQSTATE_TTL_SECONDS=2 REQSTATE_CLOCK_LEEWAY_SECONDS=0 for the
# expiry check. Keyrings are fresh (`$REQSTATE_BIN keys new`); servers' logs and the suite's
# results stay in tests/mcp-conformance/results/run.*/ and results/<part>/ (git-ignored). Prints each part's time.
# Needs node (>= 20) and npm; $REQSTATE_BIN (default target/debug/reqstate) for the keyrings.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
REQSTATE_BIN=${REQSTATE_BIN:-$repo/target/debug/reqstate}
# How long a server may take to print `listening` (the Python server's start.sh builds its wheel first).
START_TIMEOUT=${REQSTATE_CONFORMANCE_START_TIMEOUT:-900}
ALL_PARTS=(ts-node-hmac ts-node-xchacha ts-worker python cross)
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=("${ALL_PARTS[@]}")
for p in "${parts[@]}"; do
  case " ${ALL_PARTS[*]} " in *" $p "*) ;; *) echo "run.sh: unknown part '$p' (parts: ${ALL_PARTS[*]})" >&2; exit 64 ;; esac
done
[ -x "$REQSTATE_BIN" ] || { echo "run.sh: REQSTATE_BIN=$REQSTATE_BIN is not an executable (build it: cargo build -p reqstate-sidecar)" >&2; exit 2; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "run.sh: node and npm are required" >&2; exit 2; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
t_all=$(now)

# A directory of its own per run (runs may overlap: another shell, another helper).
mkdir -p "$here/results"
run=$(mktemp -d "$here/results/run.XXXXXX")
echo "run.sh: keyrings, servers' output and logs in $run"

# --- build -------------------------------------------------------------------------------------
t=$(now)
needs_ts=0
for p in "${parts[@]}"; do case $p in ts-* | cross) needs_ts=1 ;; esac; done
if [ $needs_ts = 1 ]; then
  ts=$here/servers/typescript
  # The server's packages, pinned by its package-lock.json. @reqstate/codec is a `file:` dependency
  # installed as a packed copy (.npmrc install-links=true), so npm runs its `prepare` (the build from
  # clients/typescript/src) as it would for any user's `file:` dependency: re-installed on every run,
  # so the copy is always built from the current sources.
  if ! cmp -s "$ts/package-lock.json" "$ts/node_modules/.package-lock.json.installed" 2>/dev/null; then
    echo "run.sh: npm ci in tests/mcp-conformance/servers/typescript (@modelcontextprotocol/server 2.4.0, @modelcontextprotocol/client 2.4.0, esbuild, miniflare, typescript; @reqstate/codec from file:../../../../clients/typescript, built by its prepare)"
    (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$ts/package-lock.json" "$ts/node_modules/.package-lock.json.installed"
  else
    echo "run.sh: re-installing @reqstate/codec into servers/typescript from file:../../../../clients/typescript (packed, built by its prepare)"
    rm -rf "$ts/node_modules/@reqstate/codec"
    (cd "$ts" && npm install --no-audit --no-fund --loglevel=error)
  fi
  if [ -L "$ts/node_modules/@reqstate/codec" ] || [ ! -f "$ts/node_modules/@reqstate/codec/dist/index.js" ] || [ -e "$ts/node_modules/@reqstate/codec/src" ]; then
    echo "run.sh: @reqstate/codec is not installed as a built package copy in servers/typescript/node_modules" >&2
    exit 1
  fi
  (cd "$ts" && npx --no-install tsc -p . && node build.mjs)
fi
echo "run.sh: build: $(since "$t")"

# --- keyrings ------------------------------------------------------------------------------------
"$REQSTATE_BIN" keys new --keyring "$run/hmac.toml" --algorithm hmac-sha256 --log off >/dev/null
"$REQSTATE_BIN" keys new --keyring "$run/xchacha.toml" --algorithm xchacha20-poly1305 --log off >/dev/null
grep -q 'algorithm = "hmac-sha256"' "$run/hmac.toml" && grep -q 'algorithm = "xchacha20-poly1305"' "$run/xchacha.toml" ||
  { echo "run.sh: the generated keyrings do not have the expected algorithms" >&2; exit 1; }

# --- servers -------------------------------------------------------------------------------------
free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'; }

server_pid=
server_url=
# start_server <name> <keyring-file> <ttl> <leeway|""> <command...>: runs it in its own process group
# (so stopping it stops what it started), waits for `listening <url>` on its stdout.
start_server() {
  local name=$1 keys=$2 ttl=$3 leeway=$4
  shift 4
  local port
  port=$(free_port)
  # Both files exist before the server starts: the loop below reads the
  # output at once, and a background job opens its redirections only when it
  # runs (under set -e and pipefail a missing file would end this script).
  : >"$run/$name.log"
  : >"$run/$name.out"
  local envs=("REQSTATE_KEYS=$(cat "$keys")" "PORT=$port" "REQSTATE_TTL_SECONDS=$ttl")
  [ -z "$leeway" ] || envs+=("REQSTATE_CLOCK_LEEWAY_SECONDS=$leeway")
  env -u REQSTATE_CLOCK_LEEWAY_SECONDS "${envs[@]}" setsid "$@" >"$run/$name.out" 2>"$run/$name.log" &
  server_pid=$!
  local t0 deadline
  t0=$(now)
  deadline=$((SECONDS + START_TIMEOUT))
  while [ $SECONDS -le $deadline ]; do
    server_url=$(sed -n 's/^listening //p' "$run/$name.out" | head -n 1)
    if [ -n "$server_url" ]; then
      echo "$name: listening at $server_url (started in $(since "$t0"))"
      return 0
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "run.sh: $name exited before listening; its output:" >&2
      cat "$run/$name.out" "$run/$name.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "run.sh: $name did not print 'listening <url>' within $START_TIMEOUT s (REQSTATE_CONFORMANCE_START_TIMEOUT); its log:" >&2
  tail -n 20 "$run/$name.log" >&2
  stop_server
  return 1
}
stop_server() {
  if [ -n "$server_pid" ]; then
    kill -TERM -- "-$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
# The first server of a part that runs two at once (cross).
first_pid=
stop_both() {
  stop_server
  if [ -n "$first_pid" ]; then
    server_pid=$first_pid first_pid=
    stop_server
  fi
}
trap stop_both EXIT

# run_part <label> <keyring> <command...>
run_part() {
  local label=$1 keys=$2
  shift 2
  local t
  t=$(now)
  echo "=== $label"
  start_server "$label" "$keys" 600 "" "$@"
  bash "$here/run-suite.sh" "$server_url" "$label"
  echo "$label: adversarial checks (log: $run/$label.log)"
  node "$here/adversarial.mjs" "$server_url" "$run/$label.log"
  stop_server
  start_server "$label-expiry" "$keys" 2 0 "$@"
  echo "$label: expiry check on a second instance (REQSTATE_TTL_SECONDS=2, REQSTATE_CLOCK_LEEWAY_SECONDS=0)"
  node "$here/adversarial.mjs" --expiry "$server_url" "$run/$label-expiry.log"
  stop_server
  echo "=== $label: passed in $(since "$t")"
}

for p in "${parts[@]}"; do
  case $p in
    ts-node-hmac) run_part "$p" "$run/hmac.toml" node "$here/servers/typescript/dist/node.mjs" ;;
    ts-node-xchacha) run_part "$p" "$run/xchacha.toml" node "$here/servers/typescript/dist/node.mjs" ;;
    ts-worker) run_part "$p" "$run/xchacha.toml" node "$here/servers/typescript/run-worker.mjs" ;;
    python)
      start=$here/servers/python/start.sh
      [ -f "$start" ] || { echo "run.sh: part python: $start does not exist (the Python conformance server is not there)" >&2; exit 1; }
      run_part "$p" "$run/xchacha.toml" bash "$start"
      ;;
    cross)
      t=$(now)
      echo "=== cross"
      start_server cross-ts "$run/xchacha.toml" 600 "" node "$here/servers/typescript/dist/node.mjs"
      first_pid=$server_pid
      ts_url=$server_url
      start_server cross-python "$run/xchacha.toml" 600 "" bash "$here/servers/python/start.sh"
      node "$here/adversarial.mjs" --cross "$ts_url" "$run/cross-ts.log" "$server_url" "$run/cross-python.log"
      stop_both
      echo "=== cross: passed in $(since "$t")"
      ;;
  esac
done
echo "run.sh: ${parts[*]}: all passed in $(since "$t_all")"
