"""Mutation check of the vectors: does every rule have a vector that catches
an independent checker breaking it?

One set per independent checker of tests/vectors/ (SETS below): the checker,
its tests that read the vector files (not its own hand-written unit tests),
the vector files, and its mutants (a module of this directory):

- verify_v1.py, v1.json, mutants.py: the rules of docs/FORMAT.md;
- verify_state_json.py, state_json.json, state_json_mutants.py: the one
  JSON -> CBOR mapping of docs/CLI.md and its `--state-cbor-hex` rules.

For each set, applies each mutant to a copy of the checker (beside links to
the vector files), runs that copy's vector-driven tests and counts the mutant
killed if any fails. Prints one `mutation score: K/N killed (P%) [set]` line
per set and its survivors; exits non-zero if a set is below its threshold, has
an invalid mutant (one whose copy does not import or collect), or if an
unmutated copy fails.

    .venv/bin/python tests/vectors/mutation/run.py [--jobs 2] [--threshold P] [--set NAME]

`--threshold` overrides every set's own (100% for both: every mutant killed); `--set` runs one set (verify_v1.py or state_json).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VECTORS_DIR = HERE.parent
sys.path.insert(0, str(HERE))

# One copy's tests take seconds; a mutant that makes the checker loop is
# stopped after this long and reported as invalid.
TIMEOUT_SECONDS = 300
TIMED_OUT = -1


@dataclass(frozen=True)
class MutationSet:
    """One checker, the tests of it that read the vector files, the files,
    and the module whose MUTANTS break it."""

    name: str
    checker: str
    tests: tuple[str, ...]
    vector_files: tuple[str, ...]
    mutants_module: str
    threshold: float


SETS = [
    MutationSet(
        name="verify_v1.py",
        checker="verify_v1.py",
        # The tests that read v1.json; the verifier's own unit tests
        # (hand-made bodies, the draft's XChaCha vectors, the clock
        # boundaries it derives) are left out so that the score measures
        # the vectors alone.
        tests=(
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
            "test_schedule_vectors",
            "test_keyring_text_vectors",
            "test_single_use_vectors_remint_identically",
            "test_single_use_vectors_are_consumed_once_and_never_verified",
            "test_shared_lifetime_vectors",
        ),
        vector_files=("v1.json",),
        mutants_module="mutants",
        threshold=100.0,
    ),
    MutationSet(
        name="state_json",
        checker="verify_state_json.py",
        # test_the_checker_refuses_what_it_should is the checker's own
        # sanity check, independent of the file: left out.
        tests=("test_file_shape", "test_json_case", "test_cbor_hex_case"),
        vector_files=("state_json.json",),
        mutants_module="state_json_mutants",
        threshold=100.0,
    ),
]


def apply(source: str, name: str, edits) -> str:
    for search, replacement in edits:
        n = source.count(search)
        if n != 1:
            raise SystemExit(f"mutant {name!r}: search string occurs {n} times, not once: {search!r}")
        source = source.replace(search, replacement)
    return source


def run_copy(mset: MutationSet, source: str, workdir: Path) -> int:
    """Runs the vector tests of `source` (a copy of `mset`'s checker) in
    `workdir`; returns pytest's exit code."""
    workdir.mkdir()
    (workdir / mset.checker).write_text(source, encoding="utf-8")
    for name in mset.vector_files:
        os.symlink(VECTORS_DIR / name, workdir / name)
    nodes = [f"{mset.checker}::{t}" for t in mset.tests]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header", *nodes],
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            timeout=TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        # A copy that runs away is reported, not waited for: an invalid
        # mutant (it fails the run), never a kill.
        return TIMED_OUT
    return proc.returncode


def run_set(mset: MutationSet, jobs: int, threshold: float | None) -> bool:
    """Runs one set; prints its score line and survivors; whether it passed."""
    mutants = importlib.import_module(mset.mutants_module).MUTANTS
    original = (VECTORS_DIR / mset.checker).read_text(encoding="utf-8")
    names = [m[0] for m in mutants]
    if len(set(names)) != len(names):
        raise SystemExit(f"{mset.mutants_module}: mutant names are not unique")
    sources = [(name, rule, apply(original, name, edits)) for name, rule, edits in mutants]
    for name, _, source in sources:
        if source == original:
            raise SystemExit(f"{mset.mutants_module}: mutant {name!r} changes nothing")

    tmp = Path(tempfile.mkdtemp(prefix="reqstate-mutants-"))
    try:
        baseline = run_copy(mset, original, tmp / "baseline")
        if baseline != 0:
            print(f"[{mset.name}] the unmutated {mset.checker} fails its vector tests (pytest exit {baseline})")
            return False
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            codes = list(pool.map(lambda i: run_copy(mset, sources[i][2], tmp / f"m{i}"), range(len(sources))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    killed, survived, invalid = [], [], []
    for (name, rule, _), code in zip(sources, codes):
        # pytest: 0 all passed, 1 some test failed; anything else (2: the copy
        # did not import or collect) means the mutant is not a valid checker.
        {0: survived, 1: killed}.get(code, invalid).append((name, rule, code))
    counted = len(killed) + len(survived)
    score = 100.0 * len(killed) / counted if counted else 0.0
    wanted = mset.threshold if threshold is None else threshold
    print(
        f"mutation score: {len(killed)}/{counted} killed ({score:.1f}%) "
        f"[{mset.name}: {mset.checker}, {', '.join(mset.vector_files)}, {mset.mutants_module}.py; "
        f"required {wanted:g}%]"
    )
    for name, rule, _ in survived:
        print(f"  survived: {name} [{rule}]")
    for name, rule, code in invalid:
        why = f"timed out after {TIMEOUT_SECONDS} s" if code == TIMED_OUT else f"pytest exit {code}"
        print(f"  invalid ({why}, excluded): {name} [{rule}]")
    return not invalid and counted > 0 and score >= wanted


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=None, help="overrides every set's own threshold")
    parser.add_argument("--set", choices=[s.name for s in SETS], default=None, help="run only this set")
    args = parser.parse_args()
    passed = [run_set(s, args.jobs, args.threshold) for s in SETS if args.set in (None, s.name)]
    return 0 if all(passed) else 1


if __name__ == "__main__":
    sys.exit(main())
