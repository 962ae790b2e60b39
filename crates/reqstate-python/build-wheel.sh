#!/usr/bin/env bash
# Prints the path of a wheel of the `reqstate` Python package (this directory)
# built from the sources as they are now, building it only when no such wheel
# is there already: the one build shared by crates/reqstate-python/run-tests.sh
# and clients/python/run-tests.sh (whose package depends on this one).
#
#   wheel="$(bash crates/reqstate-python/build-wheel.sh VENV_PYTHON)"
#   VENV_PYTHON -m pip install --no-deps --force-reinstall "$wheel"
#
# VENV_PYTHON is a virtualenv's interpreter with the pinned maturin in it
# (both runners' requirements-dev.txt pin it). The wheel is built as `pip
# install <dir>` builds it on a fresh machine (maturin's PEP 517 backend,
# release profile), without build isolation, compiled in the package's own
# target directory (crates/reqstate-python/target, from its
# .cargo/config.toml: pip runs the build in the package's directory) or
# $CARGO_TARGET_DIR, incrementally; the wheel is kept in <the workspace's
# cargo target dir>/wheels/ (CARGO_TARGET_DIR, default the repository's
# target/), where clients/python/run-tests.sh finds it too.
#
# Beside the wheel, `<wheel>.sources` holds the fingerprint of what it was
# built from (wheel_sources.py: every file of the Rust packages it links that
# are in this repository, their tests, benches and examples aside; the
# workspace's Cargo.toml and Cargo.lock; the rustc and maturin versions;
# RUSTFLAGS) and the wheel's SHA-256. A wheel is reused only when both still match; any
# other wheel there (maturin's own copy, a build from other sources) is not.
set -euo pipefail

python=${1:?usage: build-wheel.sh VENV_PYTHON}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
who=build-wheel.sh

# The fingerprint of the sources, and the target directory: "FINGERPRINT DIR".
fingerprint() {
    cargo metadata --format-version 1 --no-deps --manifest-path "$here/Cargo.toml" |
        "$python" "$here/wheel_sources.py"
}

read -r sources target < <(fingerprint)
wheels="$target/wheels"
sha() { "$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"; }

for stamp in "$wheels"/reqstate-*.whl.sources; do
    [[ -f "$stamp" ]] || continue
    wheel="${stamp%.sources}"
    if [[ -f "$wheel" ]] && [[ "$(cat "$stamp")" == "$sources $(sha "$wheel")" ]]; then
        echo "$who: reusing $wheel (built from these sources)" >&2
        echo "$wheel"
        exit 0
    fi
done

echo "$who: building the reqstate wheel" >&2
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
PATH="$(dirname "$python"):$PATH" "$python" -m pip wheel --quiet --disable-pip-version-check \
    --no-deps --no-build-isolation --wheel-dir "$out" "$here" >&2
built=("$out"/reqstate-*.whl)
if [[ ${#built[@]} -ne 1 || ! -f "${built[0]}" ]]; then
    echo "$who: expected one reqstate wheel from the build, found: ${built[*]}" >&2
    exit 1
fi
mkdir -p "$wheels"
wheel="$wheels/$(basename "${built[0]}")"
mv -f "${built[0]}" "$wheel"
# A wheel whose sources changed during the build is used, not stamped.
read -r after _ < <(fingerprint)
if [[ "$after" == "$sources" ]]; then
    echo "$sources $(sha "$wheel")" >"$wheel.sources.tmp"
    mv -f "$wheel.sources.tmp" "$wheel.sources"
else
    rm -f "$wheel.sources"
    echo "$who: the sources changed during the build: $wheel is not stamped for reuse" >&2
fi
echo "$wheel"
