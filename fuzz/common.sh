# Sourced by fuzz/run.sh and fuzz/grow-corpus.sh: their shared command line,
# `SECONDS [TARGET...]`. Sets fuzz_dir, seconds and targets (every target in
# fuzz_targets/ when none is named); exits 2 with the caller's usage line
# otherwise.

fuzz_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

parse_fuzz_args() {
    local usage="usage: bash fuzz/$(basename "$0") SECONDS [TARGET...]"
    [[ $# -ge 1 && $1 =~ ^[0-9]+$ && $1 -gt 0 ]] || { echo "$usage" >&2; exit 2; }
    seconds=$1
    shift
    local all=() t
    for t in "$fuzz_dir"/fuzz_targets/*.rs; do
        all+=("$(basename "$t" .rs)")
    done
    targets=("${@:-${all[@]}}")
    for t in "${targets[@]}"; do
        [[ -f $fuzz_dir/fuzz_targets/$t.rs ]] || { echo "unknown target: $t" >&2; exit 2; }
    done
}
