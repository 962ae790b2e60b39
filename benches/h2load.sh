#!/usr/bin/env bash
# Unary Verify and Mint against grpc.health.v1.Health/Check, the no-op
# baseline of the same stack, under the same h2load load, over the Unix
# socket and over TCP (issue 28, item 6).
#
#   benches/h2load.sh [--smoke] [--rounds N] [--requests N] [--clients C]
#                     [--streams M] [--min-ratio R] [--bin PATH]
#
# The sidecar binary is --bin, else $REQSTATE_BIN, else target/release/reqstate
# (build it with `cargo build --release -p reqstate-sidecar --bin reqstate`).
# h2load (Debian's nghttp2-client) is installed with apt-get when missing.
#
# Cases run round-robin (Check, Verify, Mint on unix, then on tcp, then the
# next round), so that a load change on the machine hits every case alike;
# each ratio is a case's calls/s over Check's of the same round and
# transport, and the table shows the median ratio over the rounds.
#
# h2load only sees HTTP status 200: a gRPC error travels in the trailers.
# So every call is checked afterwards against the sidecar's own counters
# (`reqstate_calls_total` on --metrics): as many `ok` Verify and Mint calls
# as h2load completed, and no shed or refused call of any rpc. A failure
# there exits 1, as does any h2load error, and (with --min-ratio) a median
# ratio below the bound.
#
# Each case is a fixed number of calls (--requests, default 40 000), not a
# fixed time: h2load's --duration resets the calls in flight when it ends,
# which the sidecar then counts as answered or failed, and the check above
# could not be exact.
#
# --smoke: one round of 1 000 calls per case, for the test command (a few
# seconds).
set -euo pipefail

rounds=3
requests=40000
clients=4
streams=8
min_ratio=""
bin="${REQSTATE_BIN:-}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --smoke) rounds=1; requests=1000; shift ;;
        --rounds) rounds="$2"; shift 2 ;;
        --requests) requests="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --streams) streams="$2"; shift 2 ;;
        --min-ratio) min_ratio="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        *) echo "h2load.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${bin:-$root/target/release/reqstate}"
if [[ ! -x "$bin" ]]; then
    echo "h2load.sh: no reqstate binary at $bin: build it (cargo build --release -p reqstate-sidecar --bin reqstate) or pass --bin / REQSTATE_BIN" >&2
    exit 2
fi
if ! command -v h2load > /dev/null; then
    echo "h2load.sh: installing h2load (Debian package nghttp2-client)" >&2
    if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
    "${sudo[@]}" apt-get update -q > /dev/null
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q nghttp2-client > /dev/null
    echo "h2load.sh: installed $(h2load --version | head -1)" >&2
fi
for tool in python3 curl; do
    command -v "$tool" > /dev/null || { echo "h2load.sh: $tool is needed" >&2; exit 2; }
done

work="$(mktemp -d)"
sidecar_pid=""
cleanup() {
    if [[ -n "$sidecar_pid" ]]; then
        kill "$sidecar_pid" 2> /dev/null || true
        wait "$sidecar_pid" 2> /dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The keyring: one XChaCha20-Poly1305 key (the format's default), mode 0600.
umask 077
secret="$(python3 -c 'import base64; print(base64.b64encode(bytes([1] * 32)).decode())')"
printf 'version = 1\n\n[[key]]\nid = 1\nstatus = "primary"\nsecret = "%s"\n' "$secret" > "$work/keyring.toml"

tcp_port="$(free_port)"
metrics_port="$(free_port)"
in_flight=$((clients * streams))
"$bin" serve --keyring "$work/keyring.toml" \
    --listen "unix:$work/reqstate.sock" --listen "tcp:127.0.0.1:$tcp_port" \
    --metrics "127.0.0.1:$metrics_port" --log warn \
    --max-health-calls $((2 * in_flight > 16 ? 2 * in_flight : 16)) \
    2> "$work/sidecar.log" &
sidecar_pid=$!
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$metrics_port/ready" > /dev/null 2>&1 && break
    kill -0 "$sidecar_pid" 2> /dev/null || { cat "$work/sidecar.log" >&2; exit 1; }
    sleep 0.1
done
curl -fs "http://127.0.0.1:$metrics_port/ready" > /dev/null || { echo "h2load.sh: the sidecar never became ready" >&2; cat "$work/sidecar.log" >&2; exit 1; }

# The requests of benches/sidecar.rs: the same tool, step, state and context.
tool="increase-counter"
context="principal=user-42;audience=counter-server;method=tools/call"
token="$("$bin" mint --keyring "$work/keyring.toml" --tool "$tool" --step confirm \
    --state-json '{"current":10,"amount":5}' --ttl 3600 --context "$context" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')"

# gRPC messages: a 5-byte frame header (not compressed, big-endian length)
# and the protobuf encoding of the request (proto/reqstate/v1/reqstate.proto).
python3 - "$work" "$token" "$tool" "$context" << 'EOF'
import struct, sys
work, token, tool, context = sys.argv[1:5]

def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)

def field(number, value):
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value

def frame(message):
    return b"\0" + struct.pack(">I", len(message)) + message

requests = {
    # HealthCheckRequest { service: "" }: the empty message.
    "check": b"",
    # VerifyRequest { token, tool, expected_step, context }.
    "verify": field(1, token) + field(2, tool) + field(3, "confirm") + field(4, context),
    # MintRequest { tool, step, state_json, ttl_seconds, context }.
    "mint": field(1, tool) + field(2, "confirm") + field(4, '{"current":10,"amount":5}')
    + field(5, 600) + field(6, context),
}
for name, message in requests.items():
    with open(f"{work}/{name}.bin", "wb") as f:
        f.write(frame(message))
EOF

declare -A path=(
    [check]=/grpc.health.v1.Health/Check
    [verify]=/reqstate.v1.RequestState/Verify
    [mint]=/reqstate.v1.RequestState/Mint
)
declare -A done_calls=([verify]=0 [mint]=0)
results="$work/results"
: > "$results"
echo "h2load: $clients connections x $streams streams ($in_flight calls in flight), $requests calls per case, $rounds round(s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
    for transport in unix tcp; do
        if [[ $transport == unix ]]; then
            target=(-B "unix:$work/reqstate.sock")
            base="http://localhost"
        else
            target=()
            base="http://127.0.0.1:$tcp_port"
        fi
        for case in check verify mint; do
            out="$(h2load "${target[@]}" -c "$clients" -m "$streams" -n "$requests" \
                -d "$work/$case.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
                "$base${path[$case]}" 2>&1)" || { echo "$out" >&2; exit 1; }
            rps="$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<< "$out")"
            read -r succeeded failed errored < <(sed -n \
                's/^requests: .* \([0-9]*\) succeeded, \([0-9]*\) failed, \([0-9]*\) errored.*/\1 \2 \3/p' <<< "$out")
            if [[ -z "$rps" || -z "$succeeded" || "$failed" != 0 || "$errored" != 0 || "$succeeded" == 0 ]]; then
                echo "h2load.sh: $transport $case: h2load failed:" >&2
                echo "$out" >&2
                exit 1
            fi
            if [[ $case != check ]]; then
                done_calls[$case]=$((done_calls[$case] + succeeded))
            fi
            echo "$round $transport $case $rps" >> "$results"
        done
    done
done

# Every call h2load counted must have been answered `ok` by the service, and
# nothing refused or shed (a shed Check would make a fast, false baseline).
page="$(curl -fs "http://127.0.0.1:$metrics_port/metrics")"
count() {
    awk -v series="$1" '$1 == series { print $2; found = 1 } END { if (!found) print 0 }' <<< "$page"
}
for case in verify mint; do
    rpc="${case^}"
    ok="$(count "reqstate_calls_total{result=\"ok\",rpc=\"$rpc\"}")"
    # One Mint before the runs is not counted: the token came from `reqstate mint`.
    if [[ "${ok%.*}" != "${done_calls[$case]}" ]]; then
        echo "h2load.sh: $rpc: h2load completed ${done_calls[$case]} calls, the sidecar answered $ok ok" >&2
        grep '^reqstate_calls_total' <<< "$page" >&2
        exit 1
    fi
done
if grep '^reqstate_calls_total' <<< "$page" | grep -v 'result="ok"' | awk '$2 != 0 { bad = 1; print } END { exit !bad }' >&2; then
    echo "h2load.sh: some calls were refused or shed (above)" >&2
    exit 1
fi

python3 - "$results" "$min_ratio" << 'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
min_ratio = float(sys.argv[2]) if sys.argv[2] else None
rps = {}
for round_, transport, case, value in rows:
    rps.setdefault((transport, case), {})[round_] = float(value)
print("\n| transport | case | calls/s (median) | vs Health/Check (median of rounds) |")
print("|---|---|---:|---:|")
missed = []
for transport in ("unix", "tcp"):
    base = rps[(transport, "check")]
    for case in ("check", "verify", "mint"):
        values = rps[(transport, case)]
        ratios = [values[r] / base[r] for r in values]
        ratio = statistics.median(ratios)
        print(f"| {transport} | {case} | {statistics.median(values.values()):.0f} | {100 * ratio:.0f}% |")
        if min_ratio is not None and case != "check" and ratio < min_ratio:
            missed.append(f"{transport} {case}: {ratio:.2f} < {min_ratio}")
if missed:
    print("h2load.sh: below --min-ratio: " + "; ".join(missed), file=sys.stderr)
    sys.exit(1)
EOF
