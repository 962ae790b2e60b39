"""`InProcessCodec` never lets the SDK's envelope out readable: every key of
the mint order (the primary and each scheduled successor) is checked, and
the key a seal actually used is checked after it (issue 37)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import secret, write_private

import reqstate.mcp
from reqstate import InvalidArgument, Keyring
from reqstate.mcp import InProcessCodec


def instant(t: int) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled(tmp_dir: Path, hand_over: int, successor: str = "hmac-sha256") -> Path:
    """Key 1 (xchacha) mints until `hand_over`, then key 2 (`successor`)."""
    text = (
        "version = 1\n"
        f'[[key]]\nid = 1\nalgorithm = "xchacha20-poly1305"\nstatus = "primary"\n'
        f'secret = "{secret(1)}"\n'
        f'[[key]]\nid = 2\nalgorithm = "{successor}"\nstatus = "active"\nmint_from = {instant(hand_over)}\n'
        f'secret = "{secret(2)}"\n'
    )
    return write_private(tmp_dir / "keyring.toml", text)


def test_a_scheduled_hmac_successor_is_refused_at_construction(tmp_dir: Path) -> None:
    keyring = Keyring.from_file(scheduled(tmp_dir, int(time.time()) + 3600))
    assert keyring.primary_key_id == 1  # the primary today encrypts
    with pytest.raises(InvalidArgument, match="key scheduled to mint \\(mint_from\\) 2 is hmac-sha256"):
        InProcessCodec(keyring)
    # An encrypting successor is fine.
    InProcessCodec(Keyring.from_file(scheduled(tmp_dir, int(time.time()) + 3600, "xchacha20-poly1305")))


def test_no_seal_goes_out_readable_across_a_hand_over(tmp_dir: Path) -> None:
    """Seals around the instant key 2 (hmac) takes over: each one is under
    key 1 or refused, before, at and after the hand-over."""
    hand_over = int(time.time()) + 2
    codec = InProcessCodec(Keyring.from_file(scheduled(tmp_dir, hand_over)), allow_readable=True)
    codec.allow_readable = False  # as if the successor came with a reload
    keys: set[int] = set()
    refused = 0
    while time.time() < hand_over + 1.2:
        try:
            codec.seal(b"secret")
            keys.add(codec.last_key_id or 0)
        except InvalidArgument:
            refused += 1
    assert keys <= {1} and refused > 0


def test_the_key_a_seal_used_is_checked_after_it(tmp_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check before the seal and the seal read the keyring apart: a key
    change between them (here the check is made blind) must not let an HMAC
    seal out."""
    hand_over = int(time.time()) - 10  # key 2 (hmac) mints now
    codec = InProcessCodec(Keyring.from_file(scheduled(tmp_dir, hand_over)), allow_readable=True)
    codec.allow_readable = False
    monkeypatch.setattr(reqstate.mcp, "_refuse_readable", lambda keyring, what: None)
    with pytest.raises(InvalidArgument, match="sealed under key 2, which is not xchacha20-poly1305"):
        codec.seal(b"secret")
    assert codec.last_key_id is None


def test_an_hmac_key_whose_turn_has_passed_is_only_verified(tmp_dir: Path) -> None:
    """Moving off HMAC on a schedule: key 1 (hmac) minted until key 2
    (xchacha) took over ten seconds ago; key 1 stays to verify, mints no
    more, and does not make the keyring refused."""
    text = (
        "version = 1\n"
        f'[[key]]\nid = 1\nalgorithm = "hmac-sha256"\nstatus = "primary"\nsecret = "{secret(1)}"\n'
        f'[[key]]\nid = 2\nalgorithm = "xchacha20-poly1305"\nstatus = "active"\n'
        f'mint_from = {instant(int(time.time()) - 10)}\nsecret = "{secret(2)}"\n'
    )
    keyring = Keyring.from_file(write_private(tmp_dir / "keyring.toml", text))
    codec = InProcessCodec(keyring)
    assert codec.unseal(codec.seal(b"secret")) == b"secret" and codec.last_key_id == 2


def test_the_guard_judges_the_sealed_token_not_the_keyring(tmp_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 50 item 2: a reload racing the seal can change a key's algorithm
    in place (same id, hmac-sha256 <-> xchacha20-poly1305), so the keyring as
    it is after the seal may name another algorithm than the one the token
    was sealed with. Here the pre-check is blind and the keyring's lookup
    says xchacha20-poly1305 (as a reload would make it): the token's own
    header (hmac-sha256) decides, and the readable token never leaves."""
    hand_over = int(time.time()) - 10  # key 2 (hmac) mints now
    codec = InProcessCodec(Keyring.from_file(scheduled(tmp_dir, hand_over)), allow_readable=True)
    codec.allow_readable = False
    monkeypatch.setattr(reqstate.mcp, "_refuse_readable", lambda keyring, what: None)
    monkeypatch.setattr(reqstate.mcp, "_algorithm_of", lambda keyring, key_id: "xchacha20-poly1305", raising=False)
    with pytest.raises(InvalidArgument, match="sealed under key 2, which is not xchacha20-poly1305"):
        codec.seal(b"secret")
    assert codec.last_key_id is None
    # The header byte read as FORMAT.md §3 says, for both algorithms.
    hmac_token = InProcessCodec(Keyring.from_file(scheduled(tmp_dir, hand_over)), allow_readable=True).seal(b"x")
    assert reqstate.mcp._sealed_algorithm(hmac_token) == "hmac-sha256"
    aead = InProcessCodec(Keyring.from_file(scheduled(tmp_dir, hand_over, "xchacha20-poly1305")))
    assert reqstate.mcp._sealed_algorithm(aead.seal(b"x")) == "xchacha20-poly1305"
    assert reqstate.mcp._sealed_algorithm("") is None
