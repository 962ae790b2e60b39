#!/usr/bin/env bash
# Build every fuzz target and run each for SECONDS on a copy of its committed
# corpus (fuzz/corpus/<target>/seed-* and min-*).
#
#   bash fuzz/run.sh SECONDS [TARGET...]      (CI: bash fuzz/run.sh 20)
#   bash fuzz/run.sh --build-only             build the targets, run nothing
#                                             (the test command starts it in
#                                             the background, niced)
#
# Installs cargo-fuzz if missing, builds with `cargo +nightly fuzz build`
# (libFuzzer, AddressSanitizer, debug assertions), then runs the targets one
# after another, one process each (never two fuzzers at once). Prints per target:
#
#   fuzz <target>: <executions> executions in <s> s, <n> crashes
#
# and exits non-zero if any target crashed, timed out or ran out of memory.
# Crash inputs are copied to fuzz/artifacts/<target>/ (ignored by git).
# Environment:
#   FUZZ_LOG_DIR   keep each target's full libFuzzer log there (cov, ft, corpus)
#   FUZZ_CORPUS_DIR keep the grown corpora there instead of a temporary dir
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
build_only=false
if [[ ${1-} == --build-only && $# -eq 1 ]]; then
  build_only=true
else
  parse_fuzz_args "$@"
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz/run.sh needs the nightly toolchain (rustup toolchain install nightly)" >&2
  exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked >&2
fi

cd "$fuzz_dir"
echo "building fuzz targets (cargo +nightly fuzz build)" >&2
cargo +nightly fuzz build >&2
$build_only && exit 0
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin_dir=$fuzz_dir/target/$triple/release

work=$(mktemp -d "${TMPDIR:-/tmp}/reqstate-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
log_dir=${FUZZ_LOG_DIR:-$work/logs}
corpus_root=${FUZZ_CORPUS_DIR:-$work/corpus}
mkdir -p "$log_dir" "$corpus_root"

failed=0
for t in "${targets[@]}"; do
  corpus=$corpus_root/$t
  artifacts=$work/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  # The committed corpus: the seeds and the minimized finds of the last long
  # run (fuzz/grow-corpus.sh).
  cp "$fuzz_dir"/corpus/"$t"/seed-* "$corpus"/
  cp "$fuzz_dir"/corpus/"$t"/min-* "$corpus"/ 2>/dev/null || true
  log=$log_dir/$t.log
  start=$(date +%s.%N)
  status=0
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: libFuzzer's default.
  "$bin_dir/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || status=$?
  elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1 || true)
  if [[ -z $execs ]]; then
    execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#' || true)
  fi
  crashes=$(find "$artifacts" -type f | wc -l)
  if [[ $status -ne 0 && $crashes -eq 0 ]]; then
    crashes=1 # died without writing an artifact (e.g. killed)
  fi
  echo "fuzz $t: ${execs:-0} executions in $elapsed s, $crashes crashes"
  if [[ $status -ne 0 || $crashes -ne 0 ]]; then
    failed=1
    mkdir -p "$fuzz_dir/artifacts/$t"
    cp "$artifacts"/* "$fuzz_dir/artifacts/$t/" 2>/dev/null || true
    echo "  libFuzzer exited with $status; artifacts in fuzz/artifacts/$t/; log tail:" >&2
    grep -E 'ERROR|panicked|SUMMARY|Test unit written|assert' "$log" | head -n 20 >&2 || true
  fi
done
exit "$failed"
