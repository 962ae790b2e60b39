#!/usr/bin/env bash
# The keyring-schedule differential: random scheduled keyrings and instants
# through the Rust core (keyring-eval, this directory's package) and through
# @reqstate/codec (clients/typescript/dist), compared by compare.mjs.
#
#   bash fuzz/differential/run.sh [COUNT [SEED]]   COUNT random inputs (default 100000, seed 1)
#   bash fuzz/differential/run.sh --corpus        the keyring_schedule corpus (seed-* and min-*)
#
# Builds keyring-eval (stable, release) and the TypeScript package if its
# dist/ is missing. Exits non-zero on any disagreement.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cargo build --quiet --release --locked --manifest-path "$here/Cargo.toml" >&2
if [[ ! -f $root/clients/typescript/dist/index.js ]]; then
  bash "$root/clients/typescript/build.sh" >&2
fi
eval_bin=$here/target/release/keyring-eval
if [[ ${1-} == --corpus ]]; then
  "$eval_bin" corpus "$root/fuzz/corpus/keyring_schedule" | node "$here/compare.mjs"
else
  "$eval_bin" random "${1:-100000}" "${2:-1}" | node "$here/compare.mjs"
fi
