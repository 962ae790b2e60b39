"""Independent Python implementation of the reqstate token format v1.

Written from docs/FORMAT.md and tests/vectors/v1.json alone (no Rust source was
read), to check that the specification is enough to build a compatible
verifier and minter; every kind of vector in the file (valid, sealed,
single_use, accepted, invalid, mint_invalid, keyrings, policies) is run, including the
single-use tokens of FORMAT.md §5.1 and the "consume" operation (§8 step 15)
with an in-memory spent-token store. (The single-use parts were written from
FORMAT.md §5.1 and §8 by a session that had also read the Rust core's
single-use change; their independence rests on the spec text, the mutants
and the vectors rather than on not having seen the code.) tests/vectors/mutation/
breaks its rules one at a time to check that the vectors pin them. Run with:

    python -m pytest -q tests/vectors/verify_v1.py

Dependencies: the standard library and `cryptography` (ChaCha20-Poly1305 and a
cross-check of HKDF); see requirements.txt next to this file.
"""

from __future__ import annotations

import base64
import hashlib
import dataclasses
import datetime
import hmac
import json
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

VECTORS_PATH = Path(__file__).with_name("v1.json")

# --------------------------------------------------------------------------
# Errors (names as in FORMAT.md §8 and the vectors' `expect_fail`)
# --------------------------------------------------------------------------


class TokenError(Exception):
    """A refusal, carrying the spec's reason name."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def fail(reason: str, detail: str = "") -> TokenError:
    return TokenError(reason, detail)


# --------------------------------------------------------------------------
# §1 Keys
# --------------------------------------------------------------------------

ALGORITHMS = {"hmac-sha256": 1, "xchacha20-poly1305": 2}
ALG_HMAC = 1
ALG_XCHACHA = 2
HKDF_SALT = b"reqstate/v1 keyring"
HKDF_INFO_PREFIX = b"reqstate/v1 "


def hkdf_sha256(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 by hand."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    okm, block, counter = b"", b"", 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        okm += block
        counter += 1
    return okm[:length]


def derive_working_key(secret: bytes, algorithm: str) -> bytes:
    if algorithm not in ALGORITHMS:
        raise fail("invalid_keyring", f"unknown algorithm {algorithm!r}")
    if not 32 <= len(secret) <= 1024:
        raise fail("invalid_keyring", "secret must be 32 to 1024 bytes")
    return hkdf_sha256(HKDF_SALT, secret, HKDF_INFO_PREFIX + algorithm.encode("ascii"), 32)


def derive_nonce_key(secret: bytes) -> bytes:
    """§4.2: the HMAC key that hedges an XChaCha20-Poly1305 key's nonces."""
    return hkdf_sha256(HKDF_SALT, secret, b"reqstate/v1 xchacha20-poly1305 nonce", 32)


def derive_working_key_with_cryptography(secret: bytes, algorithm: str) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(),
        length=32,
        salt=HKDF_SALT,
        info=HKDF_INFO_PREFIX + algorithm.encode("ascii"),
    ).derive(secret)


@dataclass(frozen=True)
class Key:
    id: int
    algorithm: str  # "hmac-sha256" | "xchacha20-poly1305"
    status: str  # "primary" | "active" | "retired"
    working_key: bytes
    nonce_key: bytes = b""  # §4.2's K_n, XChaCha20-Poly1305 keys only
    mint_from: Optional[int] = None  # KEYRING.md, Keys on a schedule (unix seconds)
    retire_at: Optional[int] = None

    def retired_at(self, now: Optional[int]) -> bool:
        """Refused at `now`: retired by status, or its retire_at has come."""
        if self.status == "retired":
            return True
        if self.retire_at is None:
            return False
        if now is None:
            raise AssertionError("a scheduled key needs the instant")
        return now >= self.retire_at

    @property
    def alg_id(self) -> int:
        return ALGORITHMS[self.algorithm]


class Keyring:
    def __init__(self, keys: list[tuple]):
        """keys: (id, algorithm, status, secret[, mint_from, retire_at])."""
        self.keys: dict[int, Key] = {}
        for kid, alg, status, secret, *schedule in keys:
            mint_from, retire_at = (schedule + [None, None])[:2]
            if not 0 <= kid < 2**32:
                raise fail("invalid_keyring", "key id must be an unsigned 32-bit integer")
            if kid in self.keys:
                raise fail("invalid_keyring", "duplicate key id")
            if status not in ("primary", "active", "retired"):
                raise fail("invalid_keyring", f"bad status {status!r}")
            nonce_key = derive_nonce_key(secret) if alg == "xchacha20-poly1305" else b""
            if mint_from is not None and status != "active":
                raise fail("invalid_keyring", "mint_from on a key that is not active")
            if retire_at is not None and status == "retired":
                raise fail("invalid_keyring", "retire_at on a retired key")
            self.keys[kid] = Key(kid, alg, status, derive_working_key(secret, alg), nonce_key, mint_from, retire_at)
        primaries = [k for k in self.keys.values() if k.status == "primary"]
        if len(primaries) != 1:
            raise fail("invalid_keyring", "a keyring holds exactly one primary key")
        self.primary = primaries[0]
        # The mint order: the primary, then the scheduled keys by mint_from.
        scheduled = sorted((k for k in self.keys.values() if k.mint_from is not None), key=lambda k: k.mint_from)
        if len({k.mint_from for k in scheduled}) != len(scheduled):
            raise fail("invalid_keyring", "two keys start minting at the same instant")
        self.mint_order = [self.primary] + scheduled
        for i, k in enumerate(self.mint_order):
            if k.retire_at is None:
                continue
            if i + 1 == len(self.mint_order):
                raise fail("invalid_keyring", "the last key of the mint order retires: nothing would mint")
            if k.retire_at < self.mint_order[i + 1].mint_from:
                raise fail("invalid_keyring", "a minting key retires before its successor takes over")

    def minting(self, now: Optional[int]) -> Key:
        """The last key of the mint order whose mint_from has come."""
        if now is None:
            if len(self.mint_order) > 1:
                raise AssertionError("a scheduled keyring needs the instant")
            return self.primary
        started = [k for k in self.mint_order[1:] if k.mint_from <= now]
        return started[-1] if started else self.primary

    def check_schedule(self, policy: "Policy") -> None:
        """A mint-order key retires no earlier than its successor's
        mint_from + max lifetime + leeway."""
        for k, successor in zip(self.mint_order, self.mint_order[1:]):
            if k.retire_at is not None and k.retire_at < successor.mint_from + policy.max_lifetime + policy.clock_leeway:
                raise fail("invalid_keyring", f"key {k.id} retires while its tokens are live")

    def get(self, kid: int) -> Optional[Key]:
        return self.keys.get(kid)


# --------------------------------------------------------------------------
# KEYRING.md: a keyring file's fields (the vectors' `keyrings` give each
# `[[key]]` table as a JSON object, `created` as the date-time's text)
# --------------------------------------------------------------------------

KEY_FIELDS = ("id", "algorithm", "status", "created", "mint_from", "retire_at", "secret", "secret_file", "secret_env")
DEFAULT_ALGORITHM = "xchacha20-poly1305"
# A TOML offset date-time: a date, a time with seconds, an offset.
OFFSET_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
STD_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
SECRET_AROUND = " \t\r\n"


def read_secret(text: str) -> bytes:
    """KEYRING.md, "How a secret is read": ASCII space, tab, CR, LF around
    it ignored; the standard alphabet inside; padding absent or complete;
    the unused low bits of the last character zero."""
    body = text.strip(SECRET_AROUND)
    unpadded = body.rstrip("=")
    pad = len(body) - len(unpadded)
    if pad and pad != -len(unpadded) % 4:
        raise fail("invalid_keyring", "secret: padding that is not complete")
    digits = [STD_ALPHABET.find(c) for c in unpadded]
    if -1 in digits:
        raise fail("invalid_keyring", "secret: a character outside the standard base64 alphabet")
    if len(digits) % 4 == 1:
        raise fail("invalid_keyring", "secret: 4n+1 base64 characters")
    number = 0
    for d in digits:
        number = number * 64 + d
    spare = (6 * len(digits)) % 8
    if number % (1 << spare):
        raise fail("invalid_keyring", "secret: unused bits set")
    return (number >> spare).to_bytes(6 * len(digits) // 8, "big")


def load_keyring_file(version, entries: list[dict]) -> "Keyring":
    """A keyring file given as its `version` (None: absent) and `[[key]]`
    tables; every problem is `invalid_keyring`."""
    # The integer 1: not `true` or `1.0` (which Python's == would take for 1), not "1".
    if version is not None and (type(version) is not int or version != 1):
        raise fail("invalid_keyring", f"version {version!r}")
    if not entries:
        raise fail("invalid_keyring", "no [[key]]")
    keys = []
    for e in entries:
        unknown = [f for f in e if f not in KEY_FIELDS]
        if unknown:
            raise fail("invalid_keyring", f"unknown field {unknown[0]!r}")
        sources = [f for f in ("secret", "secret_file", "secret_env") if f in e]
        if len(sources) != 1:
            raise fail("invalid_keyring", "exactly one of secret, secret_file, secret_env")
        if sources != ["secret"]:
            raise AssertionError("the vectors give secrets inline")
        if type(e.get("id")) is not int:
            raise fail("invalid_keyring", "id is required, an integer")
        if type(e.get("status")) is not str:
            raise fail("invalid_keyring", "status is required, a string")
        if "created" in e and not OFFSET_DATE_TIME.fullmatch(e["created"]):
            raise fail("invalid_keyring", "created is not an offset date-time")
        schedule = [schedule_instant(e[f]) if f in e else None for f in ("mint_from", "retire_at")]
        keys.append((e["id"], e.get("algorithm", DEFAULT_ALGORITHM), e["status"], read_secret(e["secret"]), *schedule))
    return Keyring(keys)


# KEYRING.md, "How an instant is read": the fields of a schedule instant.
SCHEDULE_INSTANT = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[Tt ](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?P<fraction>\.\d+)?"
    r"(?:[Zz]|(?P<sign>[+-])(?P<oh>\d{2}):(?P<om>\d{2}))"
)
LAST_SCHEDULE_INSTANT = 253402300799  # 9999-12-31T23:59:59Z


def days_in_month(year: int, month: int) -> int:
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]


def days_from_1970(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 of a proleptic Gregorian date (no checks: a day
    past the month's end runs on into the next)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def schedule_instant(text: str) -> int:
    """`mint_from` / `retire_at`: an offset date-time with its seconds and
    no fraction (however written), a real calendar date, hour 0-23, minute
    and second 0-59, the offset (hours 0-23, minutes 0-59) applied, within
    1970-01-01T00:00:00Z ..= 9999-12-31T23:59:59Z; as unix seconds."""
    m = SCHEDULE_INSTANT.fullmatch(text)
    if not m:
        raise fail("invalid_keyring", "a schedule instant is not an offset date-time with seconds")
    if m.group("fraction"):
        raise fail("invalid_keyring", "a schedule instant with a fraction of a second")
    year, month, day, hour, minute, second = (int(m.group(g)) for g in ("y", "mo", "d", "h", "mi", "s"))
    if not (1 <= month <= 12 and 1 <= day <= days_in_month(year, month)):
        raise fail("invalid_keyring", "a schedule instant on a date the calendar does not have")
    if hour > 23 or minute > 59 or second > 59:
        raise fail("invalid_keyring", "a schedule instant with an hour, minute or second out of range")
    offset = 0
    if m.group("sign"):
        oh, om = int(m.group("oh")), int(m.group("om"))
        if oh > 23 or om > 59:
            raise fail("invalid_keyring", "a schedule instant with an offset out of range")
        offset = (oh * 60 + om) * (-1 if m.group("sign") == "-" else 1)
    seconds = days_from_1970(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset * 60
    if seconds < 0:
        raise fail("invalid_keyring", "a schedule instant before 1970")
    if seconds > LAST_SCHEDULE_INSTANT:
        raise fail("invalid_keyring", "a schedule instant after 9999-12-31T23:59:59Z")
    return seconds


class TomlDateTime(str):
    """A TOML date-time value, as written."""


def read_toml_keeping_datetimes(text: str) -> dict:
    """tomllib's reading, with each date-time value kept as its text
    (tomllib would turn it into a `datetime`, which has no second 60, no
    digits past microseconds and no memory of a fraction written `.0`):
    the parser delimits the value, schedule_instant decides what it means.
    tomllib's own grammar still refuses what TOML does not allow."""
    import tomllib
    import tomllib._parser as parser

    saved = parser.match_to_datetime
    parser.match_to_datetime = lambda match: TomlDateTime(match.group())
    try:
        return tomllib.loads(text)
    finally:
        parser.match_to_datetime = saved


def load_keyring_text(text: str) -> "Keyring":
    """A keyring file as its TOML text (the vectors' `keyring_texts`)."""
    import tomllib

    try:
        doc = read_toml_keeping_datetimes(text)
    except tomllib.TOMLDecodeError as e:
        raise fail("invalid_keyring", f"not valid TOML: {e}") from None
    unknown = [k for k in doc if k not in ("version", "key")]
    if unknown:
        raise fail("invalid_keyring", f"unknown top-level field {unknown[0]!r}")
    tables = doc.get("key", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise fail("invalid_keyring", "`key` must be an array of tables")
    entries = []
    for t in tables:
        e = dict(t)
        for f in ("created", "mint_from", "retire_at"):
            if f in e:
                if not isinstance(e[f], TomlDateTime):
                    raise fail("invalid_keyring", f"{f} is not a TOML date-time")
                e[f] = str(e[f])
        entries.append(e)
    return load_keyring_file(doc.get("version"), entries)


@dataclass(frozen=True)
class Policy:
    max_token_len: int = 8192
    clock_leeway: int = 60
    max_lifetime: int = 86400

    def __post_init__(self):
        if not 0 <= self.clock_leeway <= 600:
            raise fail("invalid_argument", "clock_leeway is at most 600 s")
        if not 64 <= self.max_token_len <= 1048576:
            raise fail("invalid_argument", "max_token_len is 64 to 1048576")
        if not 1 <= self.max_lifetime <= 2592000:
            raise fail("invalid_argument", "max_lifetime is 1 to 2592000 s")


U64_MAX = 2**64 - 1


def sat_add(a: int, b: int) -> int:
    """§8: sums of clock values saturate at 2^64 - 1."""
    return min(a + b, U64_MAX)


# --------------------------------------------------------------------------
# §2 Encoding: strict base64url without padding
# --------------------------------------------------------------------------

B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
B64_INDEX = {c: i for i, c in enumerate(B64_ALPHABET)}


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def b64url_decode_strict(text: str) -> bytes:
    """Refuses padding, characters outside the alphabet, impossible lengths and
    non-zero unused low bits of the last character (FORMAT.md §2)."""
    values = []
    for ch in text:
        v = B64_INDEX.get(ch)
        if v is None:
            raise fail("malformed", f"character {ch!r} outside the base64url alphabet")
        values.append(v)
    if len(values) % 4 == 1:
        raise fail("malformed", "impossible base64 length")
    out = bytearray()
    acc, bits = 0, 0
    for v in values:
        acc = (acc << 6) | v
        bits += 6
        if bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
            acc &= (1 << bits) - 1
    if acc != 0:  # the `bits` (2 or 4) unused low bits of the last character
        raise fail("malformed", "non-canonical base64 (unused bits set)")
    return bytes(out)


# --------------------------------------------------------------------------
# §3 Layout helpers
# --------------------------------------------------------------------------

KIND_STATE = 0
KIND_SEALED = 1
KIND_SINGLE_USE = 2
TOKEN_ID_LEN = 16


def leb128_encode(n: int) -> bytes:
    if not 0 <= n < 2**32:
        raise ValueError("key id out of range")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def leb128_decode_key_id(raw: bytes, pos: int) -> tuple[int, int]:
    """Returns (value, position after). Raises malformed per §8 step 4."""
    value, shift, start = 0, 0, pos
    while True:
        if pos >= len(raw):
            raise fail("malformed", "truncated key id")
        if pos - start >= 5:
            raise fail("malformed", "key id longer than 5 bytes")
        b = raw[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    if pos - start > 1 and raw[pos - 1] == 0x00:
        raise fail("malformed", "key id not minimally encoded")
    if value >= 2**32:
        raise fail("malformed", "key id >= 2^32")
    return value, pos


def header_byte(kind: int, alg: int) -> int:
    return (1 << 4) | (kind << 2) | alg


# --------------------------------------------------------------------------
# §4.2 HChaCha20 (by hand) and XChaCha20-Poly1305
# --------------------------------------------------------------------------

MASK32 = 0xFFFFFFFF


def _rotl32(v: int, c: int) -> int:
    return ((v << c) & MASK32) | (v >> (32 - c))


def _quarter_round(s: list[int], a: int, b: int, c: int, d: int) -> None:
    """RFC 8439 §2.1."""
    s[a] = (s[a] + s[b]) & MASK32
    s[d] = _rotl32(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & MASK32
    s[b] = _rotl32(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & MASK32
    s[d] = _rotl32(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & MASK32
    s[b] = _rotl32(s[b] ^ s[c], 7)


def hchacha20(key: bytes, nonce16: bytes) -> bytes:
    """draft-irtf-cfrg-xchacha-03 §2.2: ChaCha20 block setup with the 128-bit
    nonce in words 12..15, 20 rounds, no feed-forward, output words 0..3 and
    12..15 little-endian."""
    if len(key) != 32 or len(nonce16) != 16:
        raise ValueError("HChaCha20 takes a 32-byte key and a 16-byte nonce")
    s = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    s += list(struct.unpack("<8I", key))
    s += list(struct.unpack("<4I", nonce16))
    for _ in range(10):
        _quarter_round(s, 0, 4, 8, 12)
        _quarter_round(s, 1, 5, 9, 13)
        _quarter_round(s, 2, 6, 10, 14)
        _quarter_round(s, 3, 7, 11, 15)
        _quarter_round(s, 0, 5, 10, 15)
        _quarter_round(s, 1, 6, 11, 12)
        _quarter_round(s, 2, 7, 8, 13)
        _quarter_round(s, 3, 4, 9, 14)
    return struct.pack("<8I", *(s[0:4] + s[12:16]))


def xchacha20_poly1305_encrypt(key: bytes, nonce24: bytes, aad: bytes, plaintext: bytes) -> bytes:
    if len(nonce24) != 24:
        raise ValueError("XChaCha20-Poly1305 takes a 24-byte nonce")
    subkey = hchacha20(key, nonce24[:16])
    chacha_nonce = b"\x00\x00\x00\x00" + nonce24[16:24]
    return ChaCha20Poly1305(subkey).encrypt(chacha_nonce, plaintext, aad)


def xchacha20_poly1305_decrypt(key: bytes, nonce24: bytes, aad: bytes, ct_and_tag: bytes) -> bytes:
    """Raises cryptography.exceptions.InvalidTag on failure."""
    subkey = hchacha20(key, nonce24[:16])
    chacha_nonce = b"\x00\x00\x00\x00" + nonce24[16:24]
    return ChaCha20Poly1305(subkey).decrypt(chacha_nonce, ct_and_tag, aad)


# --------------------------------------------------------------------------
# §4 Authentication
# --------------------------------------------------------------------------


def lp(x: bytes) -> bytes:
    return struct.pack(">I", len(x)) + x


def associated_data(prefix: bytes, tool: bytes, context: bytes) -> bytes:
    return prefix + lp(tool) + lp(context)


def hmac_tag(key: bytes, a: bytes, body: bytes) -> bytes:
    return hmac.new(key, a + body, hashlib.sha256).digest()[:16]


# --------------------------------------------------------------------------
# §5 Claims envelope (CBOR, parsed by hand)
# --------------------------------------------------------------------------

MAX_STATE_DEPTH = 16


class CborError(Exception):
    pass


def _cbor_head(buf: bytes, pos: int) -> tuple[int, int, Optional[int], int]:
    """Reads an initial byte and its argument.

    Returns (major type, additional info, argument or None if indefinite/break,
    position after the head)."""
    if pos >= len(buf):
        raise CborError("truncated")
    ib = buf[pos]
    pos += 1
    mt, ai = ib >> 5, ib & 0x1F
    if ai < 24:
        return mt, ai, ai, pos
    if ai in (24, 25, 26, 27):
        n = 1 << (ai - 24)
        if pos + n > len(buf):
            raise CborError("truncated argument")
        return mt, ai, int.from_bytes(buf[pos : pos + n], "big"), pos + n
    if ai == 31:
        return mt, ai, None, pos
    raise CborError("reserved additional information 28-30")


def cbor_well_formed(buf: bytes, pos: int, depth: int = 0, breakable: bool = False) -> tuple[int, Optional[int]]:
    """RFC 8949 Appendix C well-formedness, plus the §5 nesting limit.

    `depth` is the number of enclosing arrays/maps/tags *within the state
    item*. Returns (position after the item, major type of the item; -1 for a
    break, None for an indefinite-length item)."""
    mt, ai, arg, pos = _cbor_head(buf, pos)
    if arg is None:  # ai == 31
        if mt == 7:
            if not breakable:
                raise CborError("unexpected break")
            return pos, -1
        if mt in (0, 1, 6):
            raise CborError("indefinite length on a major type without one")
        if mt in (2, 3):
            while True:
                pos, chunk_mt = cbor_well_formed(buf, pos, depth, breakable=True)
                if chunk_mt == -1:
                    return pos, None
                if chunk_mt != mt:
                    raise CborError("indefinite string chunk of another type or indefinite")
        if depth + 1 > MAX_STATE_DEPTH:
            raise CborError("nested deeper than 16 levels")
        if mt == 4:
            while True:
                pos, it = cbor_well_formed(buf, pos, depth + 1, breakable=True)
                if it == -1:
                    return pos, None
        # mt == 5
        while True:
            pos, it = cbor_well_formed(buf, pos, depth + 1, breakable=True)
            if it == -1:
                return pos, None
            pos, _ = cbor_well_formed(buf, pos, depth + 1)
    if mt in (2, 3):
        if pos + arg > len(buf):
            raise CborError("truncated string")
        if mt == 3:
            try:
                buf[pos:pos + arg].decode("utf-8")
            except UnicodeDecodeError:
                raise CborError("text string is not UTF-8") from None
        return pos + arg, mt
    if mt in (4, 5, 6):
        if depth + 1 > MAX_STATE_DEPTH:
            raise CborError("nested deeper than 16 levels")
        count = 1 if mt == 6 else arg * (2 if mt == 5 else 1)
        if count > len(buf) - pos:  # each item takes at least one byte
            raise CborError("truncated container")
        for _ in range(count):
            pos, _ = cbor_well_formed(buf, pos, depth + 1)
        return pos, mt
    if mt == 7 and ai == 24 and arg < 32:
        raise CborError("two-byte simple value below 32")
    return pos, mt


def _read_shortest_uint(buf: bytes, pos: int, mt_expected: int) -> tuple[int, int]:
    mt, ai, arg, pos2 = _cbor_head(buf, pos)
    if mt != mt_expected or arg is None:
        raise CborError(f"expected definite major type {mt_expected}")
    minimum = {24: 24, 25: 0x100, 26: 0x10000, 27: 0x100000000}.get(ai, 0)
    if arg < minimum:
        raise CborError("not the shortest encoding")
    return arg, pos2


def encode_cbor_head(mt: int, n: int) -> bytes:
    if n < 24:
        return bytes([(mt << 5) | n])
    for ai, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([(mt << 5) | ai]) + n.to_bytes(size, "big")
    raise ValueError("integer too large for CBOR")


@dataclass(frozen=True)
class Claims:
    issued_at: int
    lifetime: int
    step: str
    state: bytes  # the state item's CBOR bytes, as minted
    token_id: Optional[bytes] = None  # §5.1, single-use tokens only

    @property
    def expires_at(self) -> int:
        return self.issued_at + self.lifetime


def parse_claims(body: bytes, single_use: bool = False) -> Claims:
    """`A4 01 <uint> 02 <uint> 03 <text> 04 <item>`, deterministic, strict;
    for a single-use token (§5.1) `A5 00 50 <16 bytes> 01 … 04 <item>`.
    Raises malformed (§8 step 9)."""
    try:
        token_id = None
        if single_use:
            # §5.1: key 0 first, a byte string of exactly 16 bytes, shortest
            # heads; the rest is §5's envelope under a map of five.
            if body[:3] != b"\xa5\x00\x50" or len(body) < 3 + TOKEN_ID_LEN:
                raise CborError("not A5 00 50 <16 bytes>")
            token_id = body[3 : 3 + TOKEN_ID_LEN]
            body = b"\xa4" + body[3 + TOKEN_ID_LEN :]
        if body[:2] != b"\xa4\x01":
            raise CborError("not A4 01")
        issued_at, pos = _read_shortest_uint(body, 2, 0)
        if body[pos : pos + 1] != b"\x02":
            raise CborError("key 2 missing")
        lifetime, pos = _read_shortest_uint(body, pos + 1, 0)
        if body[pos : pos + 1] != b"\x03":
            raise CborError("key 3 missing")
        step_len, pos = _read_shortest_uint(body, pos + 1, 3)
        if not 1 <= step_len <= 256 or pos + step_len > len(body):
            raise CborError("step length")
        step = body[pos : pos + step_len].decode("utf-8")  # see report: UTF-8 assumed required
        pos += step_len
        if body[pos : pos + 1] != b"\x04":
            raise CborError("key 4 missing")
        state_start = pos + 1
        end, _ = cbor_well_formed(body, state_start)
        if end != len(body):
            raise CborError("trailing bytes after the state item")
        return Claims(issued_at, lifetime, step, body[state_start:end], token_id)
    except (CborError, UnicodeDecodeError) as e:
        raise fail("malformed", f"claims envelope: {e}") from None


def encode_claims(issued_at: int, lifetime: int, step: str, state_cbor: bytes) -> bytes:
    step_b = step.encode("utf-8")
    return (
        b"\xa4\x01"
        + encode_cbor_head(0, issued_at)
        + b"\x02"
        + encode_cbor_head(0, lifetime)
        + b"\x03"
        + encode_cbor_head(3, len(step_b))
        + step_b
        + b"\x04"
        + state_cbor
    )


# --------------------------------------------------------------------------
# §8 Verification
# --------------------------------------------------------------------------


def _open_token(token: str, kind_wanted: int, tool: bytes, context: bytes, keyring: Keyring, policy: Policy, now: Optional[int]) -> bytes:
    """Steps 1-8. Returns the authenticated body."""
    # 1. size, before any decoding, in bytes
    if len(token.encode("utf-8")) > policy.max_token_len:
        raise fail("too_large")
    # 2. base64url
    raw = b64url_decode_strict(token)
    if not raw:
        raise fail("malformed", "empty token")
    # 3. header
    h = raw[0]
    version, kind, alg = h >> 4, (h >> 2) & 0x3, h & 0x3
    if version != 1:
        raise fail("unsupported_version")
    if kind == 3:
        raise fail("malformed", "reserved kind")
    if alg not in (ALG_HMAC, ALG_XCHACHA):
        raise fail("unsupported_algorithm")
    # 4. key id
    key_id, pos = leb128_decode_key_id(raw, 1)
    prefix = raw[:pos]
    # 5. minimum length, by the header's algorithm (see report)
    minimum = len(prefix) + (16 if alg == ALG_HMAC else 24 + 16)
    if len(raw) < minimum:
        raise fail("malformed", "too short")
    # 6. kind
    if kind != kind_wanted:
        if kind_wanted == KIND_STATE and kind == KIND_SINGLE_USE:
            raise fail("single_use", "a single-use token is consumed, not verified")
        raise fail("wrong_kind")
    # 7. key
    key = keyring.get(key_id)
    if key is None:
        raise fail("unknown_key")
    if key.retired_at(now):
        raise fail("retired_key")
    if key.alg_id != alg:
        raise fail("algorithm_mismatch")
    # 8. tag
    a = associated_data(prefix, tool, context)
    rest = raw[pos:]
    if key.alg_id == ALG_HMAC:
        body, tag = rest[:-16], rest[-16:]
        if not hmac.compare_digest(hmac_tag(key.working_key, a, body), tag):
            raise fail("authentication_failed")
        return body
    nonce, ct = rest[:24], rest[24:]
    try:
        return xchacha20_poly1305_decrypt(key.working_key, nonce, a, ct)
    except InvalidTag:
        raise fail("authentication_failed") from None


def verify(
    token: str,
    tool: bytes,
    context: bytes,
    now: int,
    keyring: Keyring,
    policy: Policy = Policy(),
    expected_step: Optional[str] = None,
    decode_state: Optional[Callable[[bytes], object]] = None,
    single_use: bool = False,
) -> Claims:
    """Steps 0-14; `single_use` asks for a single-use token (consume's steps
    0-14, §8 step 6)."""
    # 0. the caller's own arguments
    if not 1 <= len(tool) <= 256:
        raise fail("invalid_argument", "tool must be 1 to 256 bytes")
    if len(context) > 65536:
        raise fail("invalid_argument", "context over 65536 bytes")
    body = _open_token(token, KIND_SINGLE_USE if single_use else KIND_STATE, tool, context, keyring, policy, now)
    # 9.
    claims = parse_claims(body, single_use)
    # 10.
    if claims.lifetime == 0 or claims.issued_at + claims.lifetime > U64_MAX:
        raise fail("malformed", "lifetime zero or expiry overflows")
    if claims.lifetime > policy.max_lifetime:
        raise fail("lifetime_too_long")
    # 11.
    if claims.issued_at > sat_add(now, policy.clock_leeway):
        raise fail("not_yet_valid")
    # 12.
    if now >= sat_add(claims.expires_at, policy.clock_leeway):
        raise fail("expired")
    # 13.
    if expected_step is not None and claims.step != expected_step:
        raise fail("wrong_step")
    # 14.
    if decode_state is not None:
        try:
            decode_state(claims.state)
        except Exception:
            raise fail("state_decoding") from None
    return claims


SHARED_LIFETIME_CAP_MS = 10**15
MAX_CLOCK_LEEWAY = 600


def shared_record_lifetime_ms(expires_at: int, now: int, max_skew_ms: int) -> int:
    """§5.1: a shared store's relative record lifetime, exact, then held
    within [1000, 10^15] ms."""
    ms = (expires_at + MAX_CLOCK_LEEWAY - now) * 1000 + 2 * max_skew_ms
    return min(max(ms, 1000), SHARED_LIFETIME_CAP_MS)


def spent_record_name(key_id: int, token_id: bytes) -> str:
    """§5.1: the record's name (without a deployment prefix)."""
    return f"spent:v1:{key_id}:{token_id.hex()}"


class SpentStore:
    """An in-memory spent-token store: record name -> until (unix seconds)."""

    def __init__(self, live: tuple[str, ...] = ()):
        self.records: dict[str, int] = {name: U64_MAX for name in live}

    def insert_if_absent(self, name: str, until: int, now: int) -> bool:
        held = self.records.get(name)
        if held is not None and held > now:
            return False
        self.records[name] = until
        return True


def consume(
    token: str,
    tool: bytes,
    context: bytes,
    now: int,
    keyring: Keyring,
    store: SpentStore,
    policy: Policy = Policy(),
    expected_step: Optional[str] = None,
    decode_state: Optional[Callable[[bytes], object]] = None,
) -> tuple[Claims, int]:
    """Steps 0-15 for a single-use token; returns the claims and the key id."""
    claims = verify(token, tool, context, now, keyring, policy, expected_step, decode_state, single_use=True)
    key_id, _ = leb128_decode_key_id(b64url_decode_strict(token), 1)
    # 15. record (key_id, token_id) until expires_at + leeway, atomically.
    until = sat_add(claims.expires_at, policy.clock_leeway)
    if not store.insert_if_absent(spent_record_name(key_id, claims.token_id), until, now):
        raise fail("replayed")
    return claims, key_id


def unseal(token: str, aad: bytes, keyring: Keyring, policy: Policy = Policy(), now: Optional[int] = None) -> bytes:
    if len(aad) > 65536:
        raise fail("invalid_argument", "aad over 65536 bytes")
    return _open_token(token, KIND_SEALED, b"", aad, keyring, policy, now)


# --------------------------------------------------------------------------
# Minting (§8, last paragraph)
# --------------------------------------------------------------------------


def _wrap(kind: int, key: Key, tool: bytes, context: bytes, body: bytes, rng: Callable[[int], bytes]) -> bytes:
    prefix = bytes([header_byte(kind, key.alg_id)]) + leb128_encode(key.id)
    a = associated_data(prefix, tool, context)
    if key.alg_id == ALG_HMAC:
        return prefix + body + hmac_tag(key.working_key, a, body)
    r = rng(24)
    if len(r) != 24:
        raise ValueError("rng must return 24 bytes")
    # §4.2: the nonce is hedged, HMAC-SHA256(K_n, r ‖ A ‖ body)[0..24].
    nonce = hmac.new(key.nonce_key, r + a + body, hashlib.sha256).digest()[:24]
    return prefix + nonce + xchacha20_poly1305_encrypt(key.working_key, nonce, a, body)


def mint(
    keyring: Keyring,
    tool: bytes,
    context: bytes,
    step: str,
    state_cbor: bytes,
    ttl: int,
    now: int,
    rng: Callable[[int], bytes],
    policy: Policy = Policy(),
    single_use: bool = False,
) -> str:
    if not 1 <= len(tool) <= 256:
        raise fail("invalid_argument", "tool must be 1 to 256 bytes")
    if not 1 <= len(step.encode("utf-8")) <= 256:
        raise fail("invalid_argument", "step must be 1 to 256 bytes")
    if len(context) > 65536:
        raise fail("invalid_argument", "context over 65536 bytes")
    if ttl == 0:
        raise fail("invalid_argument", "ttl of zero")
    if ttl > policy.max_lifetime:
        raise fail("lifetime_too_long")
    if now + ttl > U64_MAX:
        raise fail("invalid_argument", "now + ttl overflows 64 bits")
    try:
        end, _ = cbor_well_formed(state_cbor, 0)
        if end != len(state_cbor):
            raise CborError("trailing bytes")
    except CborError as e:
        raise fail("state_encoding", str(e)) from None
    body = encode_claims(now, ttl, step, state_cbor)
    if single_use:
        return _mint_single_use(keyring, tool, context, body, rng, policy, now)
    token = b64url_encode(_wrap(KIND_STATE, keyring.minting(now), tool, context, body, rng))
    if len(token) > policy.max_token_len:
        raise fail("too_large")
    return token


def _mint_single_use(keyring: Keyring, tool: bytes, context: bytes, body: bytes, rng, policy: Policy, now: int) -> str:
    """§5.1: the token id is drawn after the state check (mint check 4) and
    before r (check 5), under either algorithm; then the size (check 6)."""
    token_id = rng(TOKEN_ID_LEN)
    su_body = b"\xa5\x00" + encode_cbor_head(2, len(token_id)) + token_id + body[1:]
    token = b64url_encode(_wrap(KIND_SINGLE_USE, keyring.minting(now), tool, context, su_body, rng))
    if len(token) > policy.max_token_len:
        raise fail("too_large")
    return token


def seal(keyring: Keyring, payload: bytes, aad: bytes, rng: Callable[[int], bytes], policy: Policy = Policy(), now: Optional[int] = None) -> str:
    if len(aad) > 65536:
        raise fail("invalid_argument", "aad over 65536 bytes")
    token = b64url_encode(_wrap(KIND_SEALED, keyring.minting(now), b"", aad, payload, rng))
    if len(token) > policy.max_token_len:
        raise fail("too_large")
    return token


def fixed_rng(data: bytes) -> Callable[[int], bytes]:
    """An rng that hands out `data` once, in order, and fails when exhausted or
    when asked for bytes it does not have (so an HMAC mint with an empty nonce
    proves no randomness was drawn)."""
    buf = bytearray(data)

    def rng(n: int) -> bytes:
        if n > len(buf):
            raise fail("randomness_unavailable", f"rng asked for {n} bytes, only {len(buf)} available")
        out = bytes(buf[:n])
        del buf[:n]
        return out

    rng.remaining = lambda: len(buf)  # type: ignore[attr-defined]
    return rng


# --------------------------------------------------------------------------
# Vector loading
# --------------------------------------------------------------------------

VECTORS = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
POLICY = Policy(**VECTORS["policy"])
# `secret` is standard base64 with padding (not stated by the file; see report).
SECRETS = {k["id"]: base64.b64decode(k["secret"], validate=True) for k in VECTORS["keys"]}
KEY_SPECS = {k["id"]: k for k in VECTORS["keys"]}
KEYRING = Keyring([(k["id"], k["algorithm"], k["status"], SECRETS[k["id"]]) for k in VECTORS["keys"]])


def only_primary_keyring(key_id: int) -> Keyring:
    k = KEY_SPECS[key_id]
    return Keyring([(key_id, k["algorithm"], "primary", SECRETS[key_id])])


def _ids(vs):
    return [v["name"] for v in vs]


def policy_of(v) -> Policy:
    """A vector's own policy, or the file's."""
    return Policy(**v["policy"]) if "policy" in v else POLICY


def decode_uint(state: bytes) -> int:
    """The caller type "uint" of `decode_as`: one unsigned integer (major type 0)."""
    mt, _, arg, end = _cbor_head(state, 0)
    if mt != 0 or arg is None or end != len(state):
        raise ValueError("not an unsigned integer")
    return arg


DECODERS = {None: None, "uint": decode_uint}


def run_verify(v):
    """Runs a vector's verify or unseal; returns Claims or the payload."""
    context = bytes.fromhex(v["context"])
    if v["operation"] == "verify":
        return verify(
            v["token"],
            v["tool"].encode("utf-8"),
            context,
            v["now"],
            KEYRING,
            policy_of(v),
            expected_step=v.get("expected_step"),
            decode_state=DECODERS[v.get("decode_as")],
        )
    if v["operation"] == "unseal":
        # §4/§6: the tool of a sealed payload is empty; the vector's `tool` is empty too.
        return unseal(v["token"], context, KEYRING, policy_of(v))
    if v["operation"] == "consume":
        # §8 step 15 with a store holding `spent` (live records); a refused
        # consume must leave it as it was.
        store = SpentStore(tuple(v.get("spent", ())))
        before = dict(store.records)
        try:
            claims, key_id = consume(
                v["token"],
                v["tool"].encode("utf-8"),
                context,
                v["now"],
                KEYRING,
                store,
                policy_of(v),
                expected_step=v.get("expected_step"),
                decode_state=DECODERS[v.get("decode_as")],
            )
        except TokenError:
            assert store.records == before, "a refused consume changed the store"
            raise
        return claims, key_id, before, store.records
    raise AssertionError(f"unknown operation {v['operation']!r}")


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


def test_vector_file_is_version_1_with_the_default_policy():
    assert VECTORS["format_version"] == 1
    assert POLICY == Policy()  # §8 defaults: 8192, 60, 86400
    assert len(VECTORS["valid"]) > 0 and len(VECTORS["sealed"]) > 0 and len(VECTORS["invalid"]) > 0
    assert len(VECTORS["single_use"]) > 0
    known = {"description", "format_version", "policy", "keys", "valid", "sealed", "single_use", "accepted", "invalid", "mint_invalid", "keyrings", "policies", "shared_lifetimes", "schedules", "keyring_texts"}
    assert set(VECTORS) == known, "a section this verifier does not run"
    operations = {v["operation"] for v in VECTORS["invalid"] + VECTORS["accepted"]}
    assert operations == {"verify", "consume", "unseal"}


@pytest.mark.parametrize("spec", VECTORS["keys"], ids=lambda k: f"key {k['id']}")
def test_derived_keys_match(spec):
    secret = SECRETS[spec["id"]]
    want = bytes.fromhex(spec["derived_key"])
    assert derive_working_key(secret, spec["algorithm"]) == want
    assert derive_working_key_with_cryptography(secret, spec["algorithm"]) == want
    assert KEYRING.get(spec["id"]).working_key == want
    # per-algorithm derivation: the other algorithm gives an unrelated key
    other = "hmac-sha256" if spec["algorithm"] == "xchacha20-poly1305" else "xchacha20-poly1305"
    assert derive_working_key(secret, other) != want
    if spec["algorithm"] == "xchacha20-poly1305":
        assert derive_nonce_key(secret) == bytes.fromhex(spec["nonce_key"])
        assert KEYRING.get(spec["id"]).nonce_key == derive_nonce_key(secret)
    else:
        assert spec["nonce_key"] == ""


def test_hchacha20_matches_the_draft_vector():
    # draft-irtf-cfrg-xchacha-03 §2.2.1
    key = bytes(range(32))
    nonce = bytes.fromhex("000000090000004a0000000031415927")
    want = bytes.fromhex("82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc")
    assert hchacha20(key, nonce) == want


def test_xchacha20_poly1305_matches_the_draft_vector():
    # draft-irtf-cfrg-xchacha-03 Appendix A.3.1
    key = bytes(range(0x80, 0xA0))
    nonce = bytes(range(0x40, 0x58))
    aad = bytes.fromhex("50515253c0c1c2c3c4c5c6c7")
    pt = (
        b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip "
        b"for the future, sunscreen would be it."
    )
    want = bytes.fromhex(
        "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb"
        "731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b452"
        "2f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9"
        "21f9664c97637da9768812f615c68b13b52e"
        "c0875924c1c7987947deafd8780acf49"
    )
    assert xchacha20_poly1305_encrypt(key, nonce, aad, pt) == want
    assert xchacha20_poly1305_decrypt(key, nonce, aad, want) == pt


def test_reference_claims_envelope_matches_section_5():
    # §5 reference claims, and §9's "reference claims envelope: 39"
    state = bytes.fromhex("a2") + b"\x67current\x0a" + b"\x66amount\x05"
    body = encode_claims(1764460800, 600, "confirm", state)
    want = bytes.fromhex("a4011a692b8900021902580367") + b"confirm" + b"\x04" + state
    assert body == want
    assert len(body) == 39
    c = parse_claims(body)
    assert (c.issued_at, c.lifetime, c.step, c.state, c.expires_at) == (1764460800, 600, "confirm", state, 1764461400)


@pytest.mark.parametrize("v", VECTORS["valid"], ids=_ids(VECTORS["valid"]))
def test_valid_vectors_verify(v):
    claims = verify(
        v["token"],
        v["tool"].encode("utf-8"),
        bytes.fromhex(v["context"]),
        v["now"],
        KEYRING,
        policy_of(v),
        expected_step=v["step"],
    )
    assert claims.step == v["step"]
    assert claims.state.hex() == v["state_cbor"]
    assert claims.issued_at == v["issued_at"]
    assert claims.expires_at == v["expires_at"]
    assert claims.lifetime == v["ttl"]
    assert len(v["token"]) == v["token_chars"]
    # the token's key id and algorithm are the vector's
    raw = b64url_decode_strict(v["token"])
    kid, _ = leb128_decode_key_id(raw, 1)
    assert kid == v["key_id"]
    assert raw[0] & 3 == ALGORITHMS[KEY_SPECS[kid]["algorithm"]]
    assert (raw[0] >> 2) & 3 == KIND_STATE


@pytest.mark.parametrize("v", VECTORS["valid"], ids=_ids(VECTORS["valid"]))
def test_valid_vectors_remint_identically(v):
    rng = fixed_rng(bytes.fromhex(v["random"]))
    token = mint(
        only_primary_keyring(v["key_id"]),
        v["tool"].encode("utf-8"),
        bytes.fromhex(v["context"]),
        v["step"],
        bytes.fromhex(v["state_cbor"]),
        v["ttl"],
        v["now"],
        rng,
        policy_of(v),
    )
    assert token == v["token"]
    assert rng.remaining() == 0, "the vector's random bytes were not all drawn"


@pytest.mark.parametrize("v", VECTORS["valid"], ids=_ids(VECTORS["valid"]))
def test_valid_vectors_boundaries_of_the_clock(v):
    """Last accepted second before expiry and earliest accepted issue time."""
    args = (v["token"], v["tool"].encode("utf-8"), bytes.fromhex(v["context"]))
    leeway = POLICY.clock_leeway
    last_ok = sat_add(v["expires_at"], leeway) - 1
    assert verify(*args, last_ok, KEYRING, POLICY).expires_at == v["expires_at"]
    with pytest.raises(TokenError) as e:
        verify(*args, last_ok + 1, KEYRING, POLICY)
    assert e.value.reason == "expired"
    first_ok = v["issued_at"] - leeway
    assert verify(*args, first_ok, KEYRING, POLICY).issued_at == v["issued_at"]
    with pytest.raises(TokenError) as e:
        verify(*args, first_ok - 1, KEYRING, POLICY)
    assert e.value.reason == "not_yet_valid"


@pytest.mark.parametrize("v", VECTORS["sealed"], ids=_ids(VECTORS["sealed"]))
def test_sealed_vectors_unseal(v):
    assert unseal(v["token"], bytes.fromhex(v["aad"]), KEYRING, policy_of(v)).hex() == v["payload"]
    raw = b64url_decode_strict(v["token"])
    assert (raw[0] >> 2) & 3 == KIND_SEALED
    assert leb128_decode_key_id(raw, 1)[0] == v["key_id"]


@pytest.mark.parametrize("v", VECTORS["sealed"], ids=_ids(VECTORS["sealed"]))
def test_sealed_vectors_reseal_identically(v):
    rng = fixed_rng(bytes.fromhex(v["random"]))
    token = seal(only_primary_keyring(v["key_id"]), bytes.fromhex(v["payload"]), bytes.fromhex(v["aad"]), rng, policy_of(v))
    assert token == v["token"]
    assert rng.remaining() == 0, "the vector's random bytes were not all drawn"


@pytest.mark.parametrize("v", VECTORS["invalid"], ids=_ids(VECTORS["invalid"]))
def test_invalid_vectors_fail_with_their_reason(v):
    with pytest.raises(TokenError) as e:
        run_verify(v)
    assert e.value.reason == v["expect_fail"], str(e.value)


@pytest.mark.parametrize("v", VECTORS["accepted"], ids=_ids(VECTORS["accepted"]))
def test_accepted_vectors_verify(v):
    got = run_verify(v)
    if v["operation"] == "consume":
        claims, key_id, before, after = got
        assert (claims.issued_at, claims.expires_at, claims.step, claims.state.hex(), key_id) == (
            v["issued_at"],
            v["expires_at"],
            v["step"],
            v["state_cbor"],
            v["key_id"],
        )
        assert v["spent_record"] not in before
        assert after == {**before, v["spent_record"]: v["record_until"]}
        return
    if v["operation"] == "unseal":
        assert got.hex() == v["payload"]
    else:
        assert (got.issued_at, got.expires_at, got.step, got.state.hex()) == (
            v["issued_at"],
            v["expires_at"],
            v["step"],
            v["state_cbor"],
        )


@pytest.mark.parametrize("v", VECTORS["mint_invalid"], ids=_ids(VECTORS["mint_invalid"]))
def test_mint_invalid_vectors_are_refused(v):
    rng = fixed_rng(bytes.fromhex(v["random"]))
    keyring = only_primary_keyring(v["key_id"])
    with pytest.raises(TokenError) as e:
        if v["operation"] == "mint":
            mint(
                keyring,
                v["tool"].encode("utf-8"),
                bytes.fromhex(v["context"]),
                v["step"],
                bytes.fromhex(v["state_cbor"]),
                v["ttl"],
                v["now"],
                rng,
                policy_of(v),
                single_use=v.get("single_use", False),
            )
        elif v["operation"] == "seal":
            seal(keyring, bytes.fromhex(v["payload"]), bytes.fromhex(v["context"]), rng, policy_of(v))
        else:
            raise AssertionError(f"unknown operation {v['operation']!r}")
    assert e.value.reason == v["expect_fail"], str(e.value)


@pytest.mark.parametrize("v", VECTORS["single_use"], ids=_ids(VECTORS["single_use"]))
def test_single_use_vectors_remint_identically(v):
    """§5.1 / §8 mint order: the token id is drawn first, then (XChaCha) r."""
    token_id = bytes.fromhex(v["token_id"])
    assert len(token_id) == TOKEN_ID_LEN
    rng = fixed_rng(token_id + bytes.fromhex(v["random"]))
    token = mint(
        only_primary_keyring(v["key_id"]),
        v["tool"].encode("utf-8"),
        bytes.fromhex(v["context"]),
        v["step"],
        bytes.fromhex(v["state_cbor"]),
        v["ttl"],
        v["now"],
        rng,
        policy_of(v),
        single_use=True,
    )
    assert token == v["token"]
    assert len(token) == v["token_chars"]
    assert rng.remaining() == 0, "the vector's random bytes were not all drawn"
    raw = b64url_decode_strict(v["token"])
    assert (raw[0] >> 2) & 3 == KIND_SINGLE_USE


@pytest.mark.parametrize("v", VECTORS["single_use"], ids=_ids(VECTORS["single_use"]))
def test_single_use_vectors_are_consumed_once_and_never_verified(v):
    args = (v["token"], v["tool"].encode("utf-8"), bytes.fromhex(v["context"]), v["now"], KEYRING)
    with pytest.raises(TokenError) as e:
        verify(*args, policy_of(v), expected_step=v["step"])
    assert e.value.reason == "single_use"
    store = SpentStore()
    claims, key_id = consume(*args, store, policy_of(v), expected_step=v["step"])
    assert (claims.issued_at, claims.expires_at, claims.step, claims.state.hex(), key_id) == (
        v["issued_at"],
        v["expires_at"],
        v["step"],
        v["state_cbor"],
        v["key_id"],
    )
    assert claims.token_id.hex() == v["token_id"]
    assert store.records == {v["spent_record"]: v["record_until"]}
    with pytest.raises(TokenError) as e:
        consume(*args, store, policy_of(v), expected_step=v["step"])
    assert e.value.reason == "replayed"


@pytest.mark.parametrize("v", VECTORS["keyrings"], ids=_ids(VECTORS["keyrings"]))
def test_keyring_vectors(v):
    if "expect_fail" in v:
        with pytest.raises(TokenError) as e:
            load_keyring_file(v.get("version"), v["keys"])
        assert e.value.reason == v["expect_fail"], str(e.value)
        return
    keyring = load_keyring_file(v.get("version"), v["keys"])
    m = v["mint"]
    tool, context = m["tool"].encode("utf-8"), bytes.fromhex(m["context"])
    claims = verify(m["token"], tool, context, m["now"], keyring, Policy())
    assert (claims.step, claims.state.hex()) == (m["step"], m["state_cbor"])
    key_id, _ = leb128_decode_key_id(b64url_decode_strict(m["token"]), 1)
    assert key_id == m["key_id"]
    mine = mint(keyring, tool, context, m["step"], bytes.fromhex(m["state_cbor"]), m["ttl"], m["now"], os.urandom, Policy())
    assert leb128_decode_key_id(b64url_decode_strict(mine), 1)[0] == m["key_id"]
    verify(mine, tool, context, m["now"], keyring, Policy())
    if m["deterministic"]:
        assert mine == m["token"]


@pytest.mark.parametrize("v", VECTORS["policies"], ids=_ids(VECTORS["policies"]))
def test_policy_vectors(v):
    if "expect_fail" not in v:
        assert dataclasses.asdict(Policy(**v["policy"])) == v["built"]
        return
    with pytest.raises(TokenError) as e:
        Policy(**v["policy"])
    assert e.value.reason == v["expect_fail"], str(e.value)


# ---- steps 9-10 and the CBOR walker, which the vectors cannot reach without
# ---- a key: build key-holder-forged bodies under key 1 (HMAC) and key 2.

REF_TOOL = b"increase-counter"
REF_CONTEXT = b"ctx"
REF_NOW = 1764460800


def _forge(key_id: int, body: bytes) -> str:
    key = KEYRING.get(key_id)
    return b64url_encode(_wrap(KIND_STATE, key, REF_TOOL, REF_CONTEXT, body, fixed_rng(bytes(24))))


def _nest(depth: int) -> bytes:
    return b"\x81" * depth + b"\x00"


GOOD_STATE = bytes.fromhex("a266616d6f756e74056763757272656e740a")
FORGED_BODIES = [
    ("ok", encode_claims(REF_NOW, 600, "confirm", GOOD_STATE), None),
    ("indefinite-length state is allowed", encode_claims(REF_NOW, 600, "s", bytes.fromhex("9f7f6161ff01bf6162f4ffff")), None),
    ("depth 16 is allowed", encode_claims(REF_NOW, 600, "s", _nest(16)), None),
    ("depth 17 (arrays)", encode_claims(REF_NOW, 600, "s", _nest(17)), "malformed"),
    ("depth 17 (tags)", encode_claims(REF_NOW, 600, "s", b"\xc1" * 17 + b"\x00"), "malformed"),
    ("empty body", b"", "malformed"),
    ("lifetime 0", encode_claims(REF_NOW, 0, "s", b"\xf6"), "malformed"),
    ("expiry overflows 64 bits", encode_claims(2**64 - 1, 1, "s", b"\xf6"), "malformed"),
    ("lifetime above max", encode_claims(REF_NOW, 86401, "s", b"\xf6"), "lifetime_too_long"),
    ("non-shortest issued_at", bytes.fromhex("a4011b00000000692b89000219025803617304f6"), "malformed"),
    ("non-shortest lifetime", bytes.fromhex("a4011a692b8900021a0000025803617304f6"), "malformed"),
    ("keys out of order", bytes.fromhex("a402190258011a692b890003617304f6"), "malformed"),
    ("five entries", bytes.fromhex("a5011a692b89000219025803617304f605f6"), "malformed"),
    ("empty step", encode_claims(REF_NOW, 600, "", b"\xf6"), "malformed"),
    ("step of 257 bytes", encode_claims(REF_NOW, 600, "x" * 257, b"\xf6"), "malformed"),
    ("step of 256 bytes", encode_claims(REF_NOW, 600, "x" * 256, b"\xf6"), None),
    ("indefinite step", bytes.fromhex("a4011a692b890002190258037f6173ff04f6"), "malformed"),
    ("trailing byte", encode_claims(REF_NOW, 600, "s", b"\xf6\x00"), "malformed"),
    ("missing state", encode_claims(REF_NOW, 600, "s", b""), "malformed"),
    ("truncated state", encode_claims(REF_NOW, 600, "s", b"\x82\x01"), "malformed"),
    ("stray break", encode_claims(REF_NOW, 600, "s", b"\xff"), "malformed"),
    ("reserved ai 28", encode_claims(REF_NOW, 600, "s", b"\x1c"), "malformed"),
    ("two-byte simple 0x10", encode_claims(REF_NOW, 600, "s", b"\xf8\x10"), "malformed"),
    ("indefinite text with byte chunk", encode_claims(REF_NOW, 600, "s", b"\x7f\x41a\xff"), "malformed"),
    ("indefinite uint", encode_claims(REF_NOW, 600, "s", b"\x1f"), "malformed"),
    ("indefinite map with odd items", encode_claims(REF_NOW, 600, "s", b"\xbf\x01\xff"), "malformed"),
    ("not yet valid", encode_claims(REF_NOW + 61, 600, "s", b"\xf6"), "not_yet_valid"),
]


@pytest.mark.parametrize("key_id", [1, 2])
@pytest.mark.parametrize("name,body,reason", FORGED_BODIES, ids=[n for n, _, _ in FORGED_BODIES])
def test_key_holder_bodies_follow_steps_9_and_10(key_id, name, body, reason):
    token = _forge(key_id, body)
    if reason is None:
        claims = verify(token, REF_TOOL, REF_CONTEXT, REF_NOW, KEYRING, POLICY)
        assert encode_claims(claims.issued_at, claims.lifetime, claims.step, claims.state) == body
    else:
        with pytest.raises(TokenError) as e:
            verify(token, REF_TOOL, REF_CONTEXT, REF_NOW, KEYRING, POLICY)
        assert e.value.reason == reason, str(e.value)


def test_base64url_decoder_is_strict():
    assert b64url_decode_strict("") == b""
    assert b64url_decode_strict("AAE") == b"\x00\x01"
    for bad in ("AAE=", "AA+E", "AA/E", "AAF", "AAAAA", "AA E", "A"):
        with pytest.raises(TokenError) as e:
            b64url_decode_strict(bad)
        assert e.value.reason == "malformed", bad


def test_key_id_leb128_limits():
    assert leb128_encode(200) == b"\xc8\x01"
    assert leb128_decode_key_id(b"\x11\xff\xff\xff\xff\x0f", 1) == (2**32 - 1, 6)
    for bad in (b"\x11", b"\x11\x80", b"\x11\x80\x00", b"\x11\xff\xff\xff\xff\x10", b"\x11\x80\x80\x80\x80\x80\x00"):
        with pytest.raises(TokenError) as e:
            leb128_decode_key_id(bad, 1)
        assert e.value.reason == "malformed", bad.hex()


@pytest.mark.parametrize("v", VECTORS["shared_lifetimes"], ids=_ids(VECTORS["shared_lifetimes"]))
def test_shared_lifetime_vectors(v):
    assert shared_record_lifetime_ms(v["expires_at"], v["now"], v["max_skew_ms"]) == v["lifetime_ms"]


@pytest.mark.parametrize("v", VECTORS["schedules"], ids=_ids(VECTORS["schedules"]))
def test_schedule_vectors(v):
    """KEYRING.md, Keys on a schedule: the file loads and its schedule
    passes the policy, or it is refused; at each instant, the minting key
    (byte for byte when deterministic) and each key's token verified or
    refused."""
    policy = Policy(**v["policy"])

    def load():
        keyring = load_keyring_file(None, v["keys"])
        keyring.check_schedule(policy)
        return keyring

    if "expect_fail" in v:
        with pytest.raises(TokenError) as e:
            load()
        assert e.value.reason == v["expect_fail"], str(e.value)
        return
    keyring = load()
    c = v["claims"]
    tool, context, state = c["tool"].encode("utf-8"), bytes.fromhex(c["context"]), bytes.fromhex(c["state_cbor"])
    assert v["at"], "an accepted schedule vector checks at least one instant"
    for at in v["at"]:
        now = at["now"]
        assert keyring.minting(now).id == at["minting"]
        mine = mint(keyring, tool, context, c["step"], state, c["ttl"], now, os.urandom, policy)
        assert leb128_decode_key_id(b64url_decode_strict(mine), 1)[0] == at["minting"]
        if at["deterministic"]:
            assert mine == at["token"]
        # Every kind is minted (and sealed) by the key that mints at `now`.
        once = mint(keyring, tool, context, c["step"], state, c["ttl"], now, os.urandom, policy, single_use=True)
        assert leb128_decode_key_id(b64url_decode_strict(once), 1)[0] == at["minting"]
        sealed = seal(keyring, state, context, os.urandom, policy, now)
        assert leb128_decode_key_id(b64url_decode_strict(sealed), 1)[0] == at["minting"]
        claims = verify(at["token"], tool, context, now, keyring, policy, expected_step=c["step"])
        assert claims.state == state
        for t in at["tokens"]:
            try:
                verify(t["token"], tool, context, now, keyring, policy, expected_step=c["step"])
                got = "ok"
            except TokenError as e:
                got = e.reason
            assert got == t["result"], (now, t["key_id"])
            for o in t.get("others", ()):
                try:
                    if o["operation"] == "verify":
                        verify(o["token"], tool, context, now, keyring, policy, expected_step=c["step"])
                    elif o["operation"] == "consume":
                        consume(o["token"], tool, context, now, keyring, SpentStore(), policy, expected_step=c["step"])
                    else:
                        unseal(o["token"], context, keyring, policy, now)
                    got = "ok"
                except TokenError as e:
                    got = e.reason
                assert got == o["result"], (now, t["key_id"], o["what"])
            assert leb128_decode_key_id(b64url_decode_strict(t["token"]), 1)[0] == t["key_id"]


@pytest.mark.parametrize("v", VECTORS["keyring_texts"], ids=_ids(VECTORS["keyring_texts"]))
def test_keyring_text_vectors(v):
    """KEYRING.md, How an instant is read: the TOML text loads, or is
    refused; at each instant, the minting key and the keys not retired."""
    if "expect_fail" in v:
        with pytest.raises(TokenError) as e:
            load_keyring_text(v["toml"])
        assert e.value.reason == v["expect_fail"], str(e.value)
        return
    keyring = load_keyring_text(v["toml"])
    assert v["at"], "an accepted keyring text checks at least one instant"
    for at in v["at"]:
        now = at["now"]
        assert keyring.minting(now).id == at["minting"], now
        assert sorted(k.id for k in keyring.keys.values() if not k.retired_at(now)) == at["verifying"], now
