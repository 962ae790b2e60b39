"""`python -m reqstate mint|verify` (docs/CLI.md). The full contract, every
ordered pair with the Rust and TypeScript command lines, is
tests/conformance/; these check the Python one alone, in a subprocess."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from conftest import NOW, key_toml, run_cli, write_private
from redis_server import RedisServer, free_port

from reqstate import Binding, Codec, Keyring, TokenRefused
from reqstate.redis import RedisReplayStore

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
    # This command line's flag, not the Python API's keyword.
    assert "(or pass --allow-insecure-keyring-permissions)" in done.stderr, done.stderr
    assert "allow_insecure_permissions" not in done.stderr and "Keyring.from_file" not in done.stderr
    done = run_cli([*PY, "mint", "--keyring", k, "--tool", "t", "--step", "s", "--allow-insecure-keyring-permissions"])
    assert done.returncode == 0, done.stderr
    Path(k).chmod(0o664)  # writable by the group: no flag allows it
    done = run_cli([*PY, "mint", "--keyring", k, "--tool", "t", "--step", "s", "--allow-insecure-keyring-permissions"])
    assert done.returncode == 64 and "(--allow-insecure-keyring-permissions does not allow this)" in done.stderr, done.stderr


def test_help_lists_every_flag() -> None:
    mint = run_cli([*PY, "mint", "--help"])
    verify = run_cli([*PY, "verify", "--help"])
    assert mint.returncode == verify.returncode == 0
    for flag in ("--keyring", "--state-cbor-hex", "--single-use", "--max-lifetime", "--context-file"):
        assert flag in mint.stdout
    for flag in ("--expected-step", "--consume", "--token", "--replay-store", "--replay-key-prefix",
                 "--replay-timeout-ms", "--replay-max-skew-ms"):  # fmt: skip
        assert flag in verify.stdout


# ------------------------------------------------------------- --replay-store


def mint_single_use(k: str) -> str:
    mint = run_cli([*PY, "mint", "--keyring", k, "--tool", "t", "--step", "s", "--single-use", "--context", "c"])
    assert mint.returncode == 0, mint.stderr
    token: str = json.loads(mint.stdout)["token"]
    return token


def consume(k: str, token: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return run_cli([*PY, "verify", "--keyring", k, "--tool", "t", "--context", "c", "--consume", *flags, token])


def test_consume_with_a_replay_store_spends_the_token_across_runs(tmp_dir: Path, redis_server: RedisServer) -> None:
    """`verify --consume --replay-store URL`: the record is kept in Redis by
    the shared rule, so a second run (or any other verifier on that Redis)
    refuses the token as replayed; same JSON as without the store."""
    k = keyring(tmp_dir)
    token = mint_single_use(k)
    first = consume(k, token, "--replay-store", redis_server.url)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["valid"] is True and first.stdout.count("\n") == 1
    [key] = redis_server.admin.keys("*")
    assert isinstance(key, bytes) and re.fullmatch(rb"reqstate:spent:v1:1:[0-9a-f]{32}", key), key
    for again in (
        consume(k, token, "--replay-store", redis_server.url),
        consume(k, token, f"--replay-store=unix://{redis_server.socket}", "--replay-timeout-ms", "500"),
    ):
        assert again.returncode == 1, again.stderr
        refused = json.loads(again.stdout)
        assert set(refused) == {"valid", "reason", "message"} and refused["reason"] == "replayed"
    # The library's store sees the same record.
    store = RedisReplayStore(redis_server.url)
    codec = Codec(Keyring.from_file(k))
    with pytest.raises(TokenRefused, match="replayed"):
        codec.consume(token, Binding("t", b"c"), store, decode=False)
    # Another prefix is another record set; without --replay-store, a record for the run only.
    other = consume(k, token, "--replay-store", redis_server.url, "--replay-key-prefix", "other:")
    assert other.returncode == 0, other.stderr
    assert consume(k, token).returncode == 0
    # A token consumed by the library is refused by the command line.
    fresh = mint_single_use(k)
    codec.consume(fresh, Binding("t", b"c"), store, decode=False)
    refused_run = consume(k, fresh, "--replay-store", redis_server.url, "--replay-max-skew-ms", "60000")
    assert refused_run.returncode == 1 and json.loads(refused_run.stdout)["reason"] == "replayed"


def test_a_replay_store_that_fails_refuses_the_token(tmp_dir: Path, redis_server: RedisServer) -> None:
    k = keyring(tmp_dir)
    token = mint_single_use(k)
    down = f"redis://user:{ENCODED}@127.0.0.1:{free_port()}/0?password={ENCODED}"
    done = consume(k, token, "--replay-store", down, "--replay-timeout-ms", "300")
    assert done.returncode == 1, done.stderr
    refused = json.loads(done.stdout)
    assert refused["reason"] == "replay_store_unavailable"
    assert "s3cr" not in done.stdout + done.stderr
    # Not recorded: the token is still good.
    assert consume(k, token, "--replay-store", redis_server.url).returncode == 0
    # A SET of unknown outcome: the run cannot retry it, and says so.
    token = mint_single_use(k)
    pauser = redis.Redis(host="127.0.0.1", port=redis_server.port)
    pauser.execute_command("CLIENT", "PAUSE", 3000, "WRITE")
    try:
        held = consume(k, token, "--replay-store", redis_server.url, "--replay-timeout-ms", "500")
    finally:
        pauser.execute_command("CLIENT", "UNPAUSE")
        pauser.close()
    assert held.returncode == 1, held.stderr
    message = json.loads(held.stdout)["message"]
    assert json.loads(held.stdout)["reason"] == "replay_store_unavailable"
    assert "may have been recorded" in message and "same store object" not in message, message


PASSWORD = "s3cr/et@x"
ENCODED = "s3cr%2Fet%40x"


def test_replay_flags_are_usage_errors_where_they_do_not_belong(tmp_dir: Path) -> None:
    k = keyring(tmp_dir)
    token = mint_single_use(k)
    base = [*PY, "verify", "--keyring", k, "--tool", "t", "--context", "c"]
    url = "redis://127.0.0.1:6379/0"
    for flags in (
        ["--replay-store", url],  # without --consume
        ["--replay-max-skew-ms", "100"],
        ["--consume", "--replay-key-prefix", "p:"],  # without --replay-store
        ["--consume", "--replay-timeout-ms", "100"],
        ["--consume", "--replay-store", url, "--replay-timeout-ms", "0"],
        ["--consume", "--replay-store", url, "--replay-timeout-ms", "60001"],
        ["--consume", "--replay-store", url, "--replay-timeout-ms", "1.5"],
        ["--consume", "--replay-store", url, "--replay-max-skew-ms", "0"],
        ["--consume", "--replay-store", url, "--replay-max-skew-ms", "-1"],
        ["--consume", "--replay-store", url, "--replay-store", url],
        ["--consume", "--replay-store", ""],
        ["--consume", "--replay-store", f"memcached://u:{PASSWORD}@h:1"],
        ["--consume", "--replay-store", f"http://h/?password={PASSWORD}"],
        ["--consume", "--replay-store", f"{url},redis://u:{PASSWORD}@h2:6379"],
        ["--consume", "--replay-store", "redis://u:p%2F@h:notaport/0"],
        ["--consume", "--replay-store", f"redis://u:{PASSWORD}@h:6379/0"],  # not percent-encoded
        ["--consume", "--replay-store"],
    ):
        done = run_cli([*base, *flags, token])
        assert done.returncode == 64 and done.stdout == "" and done.stderr.strip(), flags
        assert "s3cr" not in done.stderr and "et@x" not in done.stderr and "p%2F" not in done.stderr, done.stderr
    done = run_cli([*PY, "mint", "--keyring", k, "--tool", "t", "--step", "s", "--replay-store", url])
    assert done.returncode == 64 and "not a flag of mint" in done.stderr


def test_keys_new_prints_a_keyring_that_loads_and_mints(tmp_dir: Path) -> None:
    """Issue 40 item 6: `python -m reqstate keys new` makes a keyring (TOML,
    or the compact form with --compact), fresh every run; the TOML one loads
    from a 0600 file and its tokens verify; bad flags are exit 64."""
    first, second = run_cli([*PY, "keys", "new"]), run_cli([*PY, "keys", "new"])
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert first.stdout != second.stdout
    match = re.fullmatch(
        r'version = 1\n\n\[\[key\]\]\nid = 1\nstatus = "primary"\nalgorithm = "xchacha20-poly1305"\n'
        r"created = \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\n"
        r'secret = "([A-Za-z0-9+/]{43}=)"\n',
        first.stdout,
    )
    assert match, first.stdout
    path = write_private(tmp_dir / "keyring.toml", first.stdout)
    codec = Codec(Keyring.from_file(str(path)))
    minted = codec.mint(Binding("increase-counter", b""), "confirm", {"n": 1}, ttl=60)
    assert codec.verify(minted.token, Binding("increase-counter", b""), expected_step="confirm").state == {"n": 1}

    compact = run_cli([*PY, "keys", "new", "--compact", "--id", "2", "--status", "active", "--algorithm", "hmac-sha256", "--secret-bytes", "64"])
    assert compact.returncode == 0, compact.stderr
    entry = re.fullmatch(r"2:active:hmac-sha256:([A-Za-z0-9+/]+=*)\n", compact.stdout)
    assert entry and len(base64.b64decode(entry.group(1))) == 64, compact.stdout
    table = run_cli([*PY, "keys", "new", "--id", "2", "--status", "active"])
    assert table.stdout.startswith('[[key]]\nid = 2\nstatus = "active"\n'), table.stdout
    # Appended to the first keyring, it loads: the rotation's first step.
    Keyring.from_toml(first.stdout + "\n" + table.stdout)

    for args, message in [
        (["--id", "01"], "without leading zeros"),
        (["--id", "4294967296"], "0..=4294967295"),
        (["--status", "retired"], "--status must be primary"),
        (["--algorithm", "aes"], "--algorithm must be"),
        (["--secret-bytes", "31"], "32..=1024"),
        (["--keyring", "x"], "--keyring"),
        (["extra"], "no positional argument"),
    ]:
        bad = run_cli([*PY, "keys", "new", *args])
        assert bad.returncode == 64 and bad.stdout == "", (args, bad.stdout)
        assert message in bad.stderr, (args, bad.stderr)
    for args in (["keys"], ["keys", "init"]):
        bad = run_cli([*PY, *args])
        assert bad.returncode == 64 and "keys new" in bad.stderr, bad.stderr
