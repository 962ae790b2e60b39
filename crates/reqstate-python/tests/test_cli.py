"""`python -m reqstate mint|verify` (docs/CLI.md). The full contract, every
ordered pair with the Rust and TypeScript command lines, is
tests/cli_conformance.rs; these check the Python one alone, in a subprocess."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import NOW, key_toml, run_cli, write_private

PY = [sys.executable, "-m", "reqstate"]


def keyring(tmp: Path) -> str:
    return str(write_private(tmp / "k.toml", "version = 1\n" + key_toml(1, "hmac-sha256", "primary")))


def test_mint_then_verify(tmp_dir: Path) -> None:
    k = keyring(tmp_dir)
    mint = run_cli([*PY, "mint", "--keyring", k, "--tool", "t", "--step", "s", "--state-json", '{"b":1.0,"a":[1]}',
                    f"--now={NOW}", "--context", "user-42"])  # fmt: skip
    assert mint.returncode == 0, mint.stderr
    minted = json.loads(mint.stdout)
    assert set(minted) == {"token", "key_id", "issued_at", "expires_at"} and minted["expires_at"] == NOW + 600
    verify = run_cli([*PY, "verify", "--keyring", k, "--tool", "t", "--context", "user-42", "--now", str(NOW),
                      "--expected-step", "s", "-"], stdin=minted["token"] + "\n")  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.endswith("\n") and verify.stdout.count("\n") == 1
    out = json.loads(verify.stdout)
    assert out["state"] == {"a": [1], "b": 1.0} and out["state_cbor_hex"] == "a2616181016162f93c00"
    refused = run_cli([*PY, "verify", "--keyring", k, "--tool", "t", "--now", str(NOW), "--", minted["token"]])
    assert refused.returncode == 1 and json.loads(refused.stdout)["reason"] == "authentication_failed"


def test_usage_errors_exit_64_with_nothing_on_stdout(tmp_dir: Path) -> None:
    k = keyring(tmp_dir)
    for argv in (
        [],
        ["sign"],
        ["mint", "--keyring", k, "--tool", "t"],
        ["mint", "--keyring", k, "--tool", "t", "--step", "s", "--tool", "u"],
        ["mint", "--keyring", k, "--tool", "t", "--step", "s", "--ttl=-1"],
        ["mint", "--keyring", k, "--tool", "t", "--step", "s", "--state-json", "[" * 100_000],
        ["mint", "--keyring", k, "--tool", "t", "--step", "s", "--state-cbor-hex", "1801"],
        ["mint", "--keyring", k, "--tool", "t", "--step", "s", "--single-use=yes"],
        ["verify", "--keyring", k, "--tool", "t"],
        ["verify", "--keyring", k, "--tool", "t", "a", "b"],
        ["verify", "--keyring", str(tmp_dir / "missing"), "--tool", "t", "x"],
    ):
        done = run_cli([*PY, *argv])
        assert done.returncode == 64 and done.stdout == "" and done.stderr.strip(), argv
    Path(k).chmod(0o644)
    done = run_cli([*PY, "mint", "--keyring", k, "--tool", "t", "--step", "s"])
    assert done.returncode == 64 and "chmod 600" in done.stderr
    done = run_cli([*PY, "mint", "--keyring", k, "--tool", "t", "--step", "s", "--allow-insecure-keyring-permissions"])
    assert done.returncode == 0, done.stderr


def test_help_lists_every_flag() -> None:
    mint = run_cli([*PY, "mint", "--help"])
    verify = run_cli([*PY, "verify", "--help"])
    assert mint.returncode == verify.returncode == 0
    for flag in ("--keyring", "--state-cbor-hex", "--single-use", "--max-lifetime", "--context-file"):
        assert flag in mint.stdout
    for flag in ("--expected-step", "--consume", "--token"):
        assert flag in verify.stdout
