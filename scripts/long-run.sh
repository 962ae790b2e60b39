#!/usr/bin/env bash
# The soak (crates/reqstate-sidecar/tests/sidecar/soak.rs) for MINUTES minutes against the release
# binary, with the sidecar's resident memory and open file descriptors
# sampled every 30 s: long enough to tell a plateau from a leak, which the
# 10 s run of the test command cannot.
#
#   bash scripts/long-run.sh MINUTES [LOG]
#
# Prints the series ("sample: elapsed_s rss_kib open_fds round_trips"), the
# soak's own summary line, and a verdict computed from the series: memory at
# the end of the second half against the end of the first. Exits non-zero if
# the soak fails (a refused valid token, a failed call, a reload not applied)
# or if memory grew by more than 10% over the second half.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${1-}"
case "$minutes" in
    '' | *[!0-9]*) echo "usage: bash scripts/long-run.sh MINUTES [LOG]" >&2; exit 2 ;;
esac
[ "$minutes" -ge 1 ] || { echo "MINUTES must be at least 1" >&2; exit 2; }
log="${2:-target/long-run-$(date -u +%Y%m%dT%H%M%SZ).log}"
mkdir -p "$(dirname "$log")"

echo "soak for $minutes min, samples every 30 s; log: $log"
# The test binary is run directly, not through `cargo test`, so cargo's lock
# on target/ is free for other builds during the hour.
soak_bin=$(cargo test --release --locked -p reqstate-sidecar --test sidecar --no-run 2>&1 |
    sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -n 1)
[ -x "$soak_bin" ] || { echo "could not build the soak test" >&2; exit 1; }
REQSTATE_SOAK_SECONDS=$((minutes * 60)) REQSTATE_SOAK_SAMPLE_SECONDS=30 \
    "$soak_bin" soak:: --nocapture 2>&1 | tee "$log" && status=0 || status=$?

verdict=0
grep '^sample: [0-9]' "$log" | awk '
    { t[NR] = $2; rss[NR] = $3; fds[NR] = $4; n = NR }
    END {
        if (n < 3) { print "verdict: too few samples (" n ") to judge"; exit 0 }
        mid = int((n + 1) / 2)
        maxfd = 0; for (i = 1; i <= n; i++) if (fds[i] > maxfd) maxfd = fds[i]
        growth = (rss[n] - rss[mid]) / rss[mid] * 100
        printf "RSS: first sample %d KiB, middle (%d s) %d KiB, last (%d s) %d KiB; second-half growth %.1f%%\n", rss[1], t[mid], rss[mid], t[n], rss[n], growth
        printf "open fds: first %d, last %d, most %d\n", fds[1], fds[n], maxfd
        if (growth > 10) { print "verdict: LEAK (memory still growing over the second half)"; exit 1 }
        print "verdict: plateau"
    }' || verdict=$?
exit $(( status != 0 ? status : verdict ))
