"""One keyring file, four implementations: tokens minted in Python verify in
the sidecar, the Rust crate (the `reqstate` binary's `verify`) and the
TypeScript package (`reqstate-ts verify`), and theirs verify in Python.

The keyring file is the sidecar's own (written by the Python client's test
helper, mode 0600): Python loads it with `Keyring.from_file`, the command
lines with `--keyring`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import AUTH_TOKEN, BIN, NOW, TS_CLI, Sidecar, need, run_cli

from reqstate import Binding, Codec, Keyring, TokenRefused, call_context

TOOL = "increase-counter"
STEP = "confirm"
STATE = {"current": 10, "amount": 5}
CONTEXT = call_context("user-42", "counter-server", "tools/call", {"current": 10})
XCHACHA_AND_HMAC = """version = 1

[[key]]
id = 1
algorithm = "xchacha20-poly1305"
status = "primary"
secret = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="

[[key]]
id = 2
algorithm = "hmac-sha256"
status = "active"
secret = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="

[[key]]
id = 3
algorithm = "hmac-sha256"
status = "retired"
secret = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM="
"""


@pytest.fixture(scope="module")
def sidecar() -> Iterator[Any]:
    need(BIN, "build it first: cargo build --bin reqstate")
    process = Sidecar()
    # The sidecar's keyring file, replaced by ours (same mode) and reloaded.
    keyring: Path = process.keyring
    tmp = keyring.with_name("keyring.writing")
    tmp.write_text(XCHACHA_AND_HMAC, encoding="utf-8")
    tmp.chmod(0o600)
    tmp.rename(keyring)
    process.sighup()
    process.wait_for_keys("three keys", lambda keys: keys.get(3) is not None)
    yield process
    process.stop()


def cli(name: str) -> list[str]:
    if name == "rust":
        return [str(need(BIN, "cargo build --bin reqstate"))]
    return ["node", str(need(TS_CLI, "bash clients/typescript/build.sh"))]


def cli_mint(name: str, keyring: Path, *extra: str) -> dict[str, Any]:
    done = run_cli(
        [*cli(name), "mint", "--keyring", str(keyring), "--tool", TOOL, "--step", STEP,
         "--state-json", json.dumps(STATE), "--context-hex", CONTEXT.hex(), "--now", str(NOW), *extra]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    minted: dict[str, Any] = json.loads(done.stdout)
    return minted


def cli_verify(name: str, keyring: Path, token: str, now: int = NOW + 5) -> tuple[int, dict[str, Any]]:
    done = run_cli(
        [*cli(name), "verify", "--keyring", str(keyring), "--tool", TOOL, "--expected-step", STEP,
         "--context-hex", CONTEXT.hex(), "--now", str(now), "--token", token]
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    verified: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, verified


@pytest.mark.parametrize("implementation", ["rust", "typescript"])
def test_python_tokens_verify_in_the_command_lines_and_back(sidecar: Any, implementation: str) -> None:
    keyring_path: Path = sidecar.keyring
    codec = Codec(Keyring.from_file(keyring_path))
    binding = Binding(TOOL, CONTEXT)
    ours = codec.mint(binding, STEP, STATE, ttl=600, now=NOW)
    code, verified = cli_verify(implementation, keyring_path, ours.token)
    assert code == 0, verified
    assert verified["state"] == STATE and verified["key_id"] == 1 and verified["step"] == STEP
    assert verified["state_cbor_hex"] == "a266616d6f756e74056763757272656e740a"
    # Tampered: refused there as here.
    code, refused = cli_verify(implementation, keyring_path, ours.token[:-2] + ("AA" if ours.token[-2:] != "AA" else "BB"))
    assert code == 1 and refused["reason"] == "authentication_failed"
    code, expired = cli_verify(implementation, keyring_path, ours.token, now=NOW + 660)
    assert code == 1 and expired["reason"] == "expired"

    # The reverse: their token verifies here.
    theirs = cli_mint(implementation, keyring_path)
    got = codec.verify(theirs["token"], binding, expected_step=STEP, now=NOW + 5)
    assert got.state == STATE and got.key_id == theirs["key_id"] == 1

    # HMAC (key 2 as the primary of a second file): byte for byte the same token.
    hmac_path = keyring_path.with_name("hmac.toml")
    hmac_path.write_text(XCHACHA_AND_HMAC.replace('"primary"', '"active"', 1).replace(
        'id = 2\nalgorithm = "hmac-sha256"\nstatus = "active"', 'id = 2\nalgorithm = "hmac-sha256"\nstatus = "primary"'
    ), encoding="utf-8")  # fmt: skip
    hmac_path.chmod(0o600)
    hmac = Codec(Keyring.from_file(hmac_path))
    mine = hmac.mint(binding, STEP, STATE, ttl=600, now=NOW)
    assert mine.key_id == 2 and mine.token == cli_mint(implementation, hmac_path)["token"]
    hmac_path.unlink()

    # A token under the retired key 3: refused everywhere as retired_key.
    old = Codec(Keyring.from_toml(XCHACHA_AND_HMAC.replace('"retired"', '"primary"').replace('"primary"', '"active"', 1)))
    retired = old.mint(binding, STEP, STATE, now=NOW)
    assert retired.key_id == 3
    code, refused = cli_verify(implementation, keyring_path, retired.token)
    assert code == 1 and refused["reason"] == "retired_key"
    with pytest.raises(TokenRefused, match="retired_key"):
        codec.verify(retired.token, binding, now=NOW)


def test_python_tokens_verify_in_the_sidecar_and_back(sidecar: Any) -> None:
    keyring_path: Path = sidecar.keyring
    codec = Codec(Keyring.from_file(keyring_path))
    binding = Binding(TOOL, CONTEXT)
    with sidecar.client() as client:
        ours = codec.mint(binding, STEP, STATE)
        verified = client.verify(ours.token, TOOL, expected_step=STEP, context=CONTEXT)
        assert verified.valid and verified.key_id == 1 and verified.step == STEP
        # The sidecar shows a map state as JSON (its CBOR is ours, byte for byte).
        assert json.loads(verified.state_json or "null") == STATE
        wrong = client.verify(ours.token, TOOL, expected_step="amount", context=CONTEXT)
        assert not wrong.valid and wrong.reason.code == "wrong_step"
        other = client.verify(ours.token, TOOL, context=b"another caller")
        assert not other.valid and other.reason.code == "authentication_failed"

        # Bytes states: the sidecar's `state` bytes are a CBOR byte string.
        as_bytes = codec.mint(binding, STEP, b"\x01\x02")
        assert client.verify(as_bytes.token, TOOL, context=CONTEXT).state == b"\x01\x02"

        theirs = client.mint(TOOL, STEP, state_json=STATE, ttl_seconds=600, context=CONTEXT)
        got = codec.verify(theirs.token, binding, expected_step=STEP)
        assert got.state == STATE and got.key_id == 1
        their_bytes = client.mint(TOOL, STEP, state=b"opaque", ttl_seconds=60, context=CONTEXT)
        assert codec.verify(their_bytes.token, binding).state == b"opaque"

        # Sealed payloads, both ways, bound to the same associated data.
        sealed = client.seal(b"payload", aad=b"aad")
        assert codec.unseal(sealed.token, b"aad").payload == b"payload"
        mine = codec.seal(b"payload 2", b"aad")
        opened = client.unseal(mine.token, aad=b"aad")
        assert opened.valid and opened.payload == b"payload 2"
        with pytest.raises(TokenRefused, match="authentication_failed"):
            codec.unseal(sealed.token, b"other")

        # Single use: minted here, consumed by the sidecar once.
        once = codec.mint(binding, STEP, STATE, single_use=True)
        assert client.verify(once.token, TOOL, context=CONTEXT, consume=True).valid
        assert client.verify(once.token, TOOL, context=CONTEXT, consume=True).reason.code == "replayed"
