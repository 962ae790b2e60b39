"""Mutation check of the vectors: does every rule of docs/FORMAT.md have a
vector that catches a verifier breaking it?

Applies each mutant of mutants.py to a copy of tests/vectors/verify_v1.py,
runs that copy's vector-driven tests (the ones parametrized by v1.json, not
the verifier's own hand-written unit tests) and counts the mutant killed if
any fails. Prints `mutation score: K/N killed (P%)` and the survivors; exits
non-zero below the threshold (95%) or if the unmutated copy fails.

    .venv/bin/python tests/vectors/mutation/run.py [--jobs 2] [--threshold 95]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
VECTORS_DIR = HERE.parent
sys.path.insert(0, str(HERE))
from mutants import MUTANTS  # noqa: E402

# The tests that read v1.json; the verifier's own unit tests (hand-made
# bodies, the draft's XChaCha vectors, the clock boundaries it derives) are
# left out so that the score measures the vectors alone.
VECTOR_TESTS = [
    "test_vector_file_is_version_1_with_the_default_policy",
    "test_derived_keys_match",
    "test_valid_vectors_verify",
    "test_valid_vectors_remint_identically",
    "test_sealed_vectors_unseal",
    "test_sealed_vectors_reseal_identically",
    "test_invalid_vectors_fail_with_their_reason",
    "test_accepted_vectors_verify",
    "test_mint_invalid_vectors_are_refused",
    "test_keyring_vectors",
    "test_policy_vectors",
    "test_single_use_vectors_remint_identically",
    "test_single_use_vectors_are_consumed_once_and_never_verified",
]


def apply(source: str, name: str, edits) -> str:
    for search, replacement in edits:
        n = source.count(search)
        if n != 1:
            raise SystemExit(f"mutant {name!r}: search string occurs {n} times, not once: {search!r}")
        source = source.replace(search, replacement)
    return source


def run_copy(source: str, workdir: Path) -> int:
    """Runs the vector tests of `source` in `workdir`; returns pytest's exit code."""
    workdir.mkdir()
    (workdir / "verify_v1.py").write_text(source, encoding="utf-8")
    os.symlink(VECTORS_DIR / "v1.json", workdir / "v1.json")
    nodes = [f"verify_v1.py::{t}" for t in VECTOR_TESTS]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header", *nodes],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    return proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=95.0)
    args = parser.parse_args()

    original = (VECTORS_DIR / "verify_v1.py").read_text(encoding="utf-8")
    names = [m[0] for m in MUTANTS]
    if len(set(names)) != len(names):
        raise SystemExit("mutant names are not unique")
    sources = [(name, rule, apply(original, name, edits)) for name, rule, edits in MUTANTS]
    for name, _, source in sources:
        if source == original:
            raise SystemExit(f"mutant {name!r} changes nothing")

    tmp = Path(tempfile.mkdtemp(prefix="reqstate-mutants-"))
    try:
        baseline = run_copy(original, tmp / "baseline")
        if baseline != 0:
            print(f"the unmutated verifier fails its vector tests (pytest exit {baseline})")
            return 1
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            codes = list(pool.map(lambda i: run_copy(sources[i][2], tmp / f"m{i}"), range(len(sources))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    killed, survived, invalid = [], [], []
    for (name, rule, _), code in zip(sources, codes):
        # pytest: 0 all passed, 1 some test failed; anything else (2: the copy
        # did not import or collect) means the mutant is not a valid verifier.
        {0: survived, 1: killed}.get(code, invalid).append((name, rule, code))
    counted = len(killed) + len(survived)
    score = 100.0 * len(killed) / counted if counted else 0.0
    print(f"mutation score: {len(killed)}/{counted} killed ({score:.1f}%)")
    for name, rule, _ in survived:
        print(f"  survived: {name} [{rule}]")
    for name, rule, code in invalid:
        print(f"  invalid (pytest exit {code}, excluded): {name} [{rule}]")
    if invalid:
        return 1
    return 0 if score >= args.threshold else 1


if __name__ == "__main__":
    sys.exit(main())
