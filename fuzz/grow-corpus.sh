#!/usr/bin/env bash
# Grow the committed corpus: fuzz each target for SECONDS from its committed
# corpus, minimize with `cargo fuzz cmin`, and write the minimized finds back
# as fuzz/corpus/<target>/min-<sha1> (committed, next to the seed-* files).
#
#   nice -n 10 bash fuzz/grow-corpus.sh SECONDS [TARGET...]
#
# One libFuzzer process at a time. Per target it prints libFuzzer's final
# stats line (`#N DONE cov: .. ft: .. corp: ..`), the executions, and the
# corpus size before and after cmin. It stops at the first crash, timeout or
# out-of-memory and leaves the input in fuzz/artifacts/<target>/ without
# touching that target's committed corpus.
#
# The committed corpus of a target is its seeds (seed-*, fuzz/make-seeds.py)
# plus the min-* files of the last run of this script; a min-* file whose
# bytes equal a seed is not written twice. Old min-* files are replaced.
# Environment: GROW_NO_BUILD=1 uses the binaries already in fuzz/target and
# minimizes with the same `-merge=1` run that `cargo fuzz cmin` performs after
# its own build (for when the tree does not build mid-edit); GROW_WORK_DIR keeps the logs and the grown/minimized corpora
# there (default: a temporary directory, removed at exit). GROW_BIN_DIR=dir
# runs the binaries of another build instead, with no build of its own and the
# same `-merge=1` (the long runs' uninstrumented build:
# `cargo +nightly fuzz build -s none --target-dir DIR`, then
# GROW_BIN_DIR=DIR/<host triple>/release).
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
parse_fuzz_args "$@"

cd "$fuzz_dir"
if [[ -n ${GROW_BIN_DIR:-} ]]; then
  GROW_NO_BUILD=1
fi
if [[ -z ${GROW_NO_BUILD:-} ]]; then
  echo "building fuzz targets (cargo +nightly fuzz build)" >&2
  cargo +nightly fuzz build >&2
fi
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin_dir=${GROW_BIN_DIR:-$fuzz_dir/target/$triple/release}

if [[ -n ${GROW_WORK_DIR:-} ]]; then
  work=$GROW_WORK_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/reqstate-grow.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

size() { echo "$(find "$1" -type f | wc -l) files, $(du -sb "$1" | cut -f1) bytes"; }

for t in "${targets[@]}"; do
  corpus=$work/$t.corpus
  artifacts=$work/$t.artifacts
  log=$work/$t.log
  rm -rf "$corpus" "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp "$fuzz_dir"/corpus/"$t"/seed-* "$corpus"/
  cp "$fuzz_dir"/corpus/"$t"/min-* "$corpus"/ 2>/dev/null || true
  echo "== $t: start corpus $(size "$corpus")"
  status=0
  "$bin_dir/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || status=$?
  grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true
  echo "executions: $(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  if [[ $status -ne 0 || -n $(find "$artifacts" -type f) ]]; then
    mkdir -p "$fuzz_dir/artifacts/$t"
    cp "$artifacts"/* "$fuzz_dir/artifacts/$t/" 2>/dev/null || true
    echo "$t: libFuzzer exited with $status; artifacts in fuzz/artifacts/$t/; log $log" >&2
    grep -E 'ERROR|panicked|SUMMARY|Test unit written|assert' "$log" | head -n 20 >&2 || true
    exit 1
  fi
  echo "grown corpus: $(size "$corpus")"
  # cmin merges into a temporary directory and replaces $corpus with it.
  if [[ -z ${GROW_NO_BUILD:-} ]]; then
    cargo +nightly fuzz cmin "$t" "$corpus" >"$work/$t.cmin.log" 2>&1
  else
    # What `cargo fuzz cmin` runs after its build, on the binary already built.
    rm -rf "$corpus.min" && mkdir "$corpus.min"
    "$bin_dir/$t" -merge=1 -timeout=10 -rss_limit_mb=2048 "$corpus.min" "$corpus" >"$work/$t.cmin.log" 2>&1
    rm -rf "$corpus" && mv "$corpus.min" "$corpus"
  fi
  echo "after cmin: $(size "$corpus")"
  rm -f "$fuzz_dir"/corpus/"$t"/min-*
  declare -A seed_sums=()
  while read -r sum _; do seed_sums[$sum]=1; done < <(sha1sum "$fuzz_dir"/corpus/"$t"/seed-*)
  for f in "$corpus"/*; do
    sum=$(sha1sum "$f" | cut -d' ' -f1)
    [[ -n ${seed_sums[$sum]:-} ]] || cp "$f" "$fuzz_dir/corpus/$t/min-$sum"
  done
  unset seed_sums
  echo "committed corpus: $(size "$fuzz_dir/corpus/$t") ($(ls "$fuzz_dir/corpus/$t" | grep -c '^seed-') seed-*, $(ls "$fuzz_dir/corpus/$t" | grep -c '^min-') min-*)"
done
