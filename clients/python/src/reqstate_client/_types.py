"""Typed results and enums of the reqstate sidecar protocol (reqstate.v1)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any


class Reason(enum.IntEnum):
    """Why a token did not verify or open, or why a request was refused.

    Mirrors the proto enum `reqstate.v1.Reason` value for value, without the
    `REASON_` prefix. `code` is the lower-case name used in the
    `reqstate-reason` trailer and in the sidecar's metrics
    (`Reason.AUTHENTICATION_FAILED.code == "authentication_failed"`).
    A value this client does not know (added to the proto later) reads as
    `UNRECOGNIZED`, never as success.
    """

    UNSPECIFIED = 0
    TOO_LARGE = 1
    MALFORMED = 2
    UNSUPPORTED_VERSION = 3
    UNSUPPORTED_ALGORITHM = 4
    WRONG_KIND = 5
    UNKNOWN_KEY = 6
    RETIRED_KEY = 7
    ALGORITHM_MISMATCH = 8
    AUTHENTICATION_FAILED = 9
    EXPIRED = 10
    NOT_YET_VALID = 11
    WRONG_STEP = 12
    LIFETIME_TOO_LONG = 13
    STATE_ENCODING = 14
    STATE_DECODING = 15
    INVALID_ARGUMENT = 16
    RANDOMNESS_UNAVAILABLE = 17
    INVALID_KEYRING = 18
    # Single-use tokens (MintRequest.single_use, VerifyRequest.consume):
    SINGLE_USE = 19  # a single-use token given to a plain verify: it must be consumed
    REPLAYED = 20  # already consumed, on this sidecar or any other sharing its replay store
    REPLAY_STORE_FULL = 21  # the replay store is full of live records: refused, not recorded
    REPLAY_STORE_UNAVAILABLE = 22  # the replay store did not answer in time: refused, not recorded
    # Not in the proto: a wire value newer than this client.
    UNRECOGNIZED = -1

    @property
    def code(self) -> str:
        """The lower-case reason name (`expired`, `retired_key`, …)."""
        return self.name.lower()

    @classmethod
    def from_wire(cls, value: int) -> Reason:
        try:
            return cls(value)
        except ValueError:
            return cls.UNRECOGNIZED

    @classmethod
    def from_code(cls, code: str | None) -> Reason | None:
        """The reason named by a `reqstate-reason` trailer value, if any."""
        if not code:
            return None
        name = code.strip().upper().removeprefix("REASON_")
        if name == "UNRECOGNIZED":
            return cls.UNRECOGNIZED
        try:
            return cls[name]
        except KeyError:
            return cls.UNRECOGNIZED


class Algorithm(enum.IntEnum):
    """Mirrors `reqstate.v1.Algorithm` (without the `ALGORITHM_` prefix)."""

    UNSPECIFIED = 0
    HMAC_SHA256 = 1
    XCHACHA20_POLY1305 = 2
    UNRECOGNIZED = -1

    @classmethod
    def from_wire(cls, value: int) -> Algorithm:
        try:
            return cls(value)
        except ValueError:
            return cls.UNRECOGNIZED


class KeyStatus(enum.IntEnum):
    """Mirrors `reqstate.v1.KeyStatus` (without the `KEY_STATUS_` prefix)."""

    UNSPECIFIED = 0
    PRIMARY = 1
    ACTIVE = 2
    RETIRED = 3
    UNRECOGNIZED = -1

    @classmethod
    def from_wire(cls, value: int) -> KeyStatus:
        try:
            return cls(value)
        except ValueError:
            return cls.UNRECOGNIZED


@dataclass(frozen=True)
class Minted:
    """A minted token (`MintResponse`)."""

    token: str
    key_id: int
    issued_at: int
    expires_at: int


@dataclass(frozen=True)
class ItemError:
    """Why one item of a `mint_batch` was not minted (`ItemError`)."""

    reason: Reason
    detail: str


@dataclass(frozen=True)
class Verified:
    """The result of verifying a token (`VerifyResponse`).

    An invalid token is a result, not an exception: check `valid` (or use the
    object as a bool). When `valid` is false only `reason` and `detail` are
    meaningful. The state comes back in the form it was minted with: `state`
    (bytes) or `state_json` (JSON text; `json()` parses it).
    """

    valid: bool
    reason: Reason
    detail: str = ""
    step: str = ""
    state: bytes | None = None
    state_json: str | None = None
    key_id: int = 0
    issued_at: int = 0
    expires_at: int = 0

    def __bool__(self) -> bool:
        return self.valid

    def json(self) -> Any:
        """The state parsed from `state_json`; ValueError when the state is bytes."""
        if self.state_json is None:
            raise ValueError("this token's state was minted as bytes, not JSON")
        return json.loads(self.state_json)


@dataclass(frozen=True)
class Sealed:
    """A sealed payload (`SealResponse`)."""

    token: str
    key_id: int


@dataclass(frozen=True)
class Unsealed:
    """The result of opening a sealed token (`UnsealResponse`); invalid is a result."""

    valid: bool
    reason: Reason
    detail: str = ""
    payload: bytes = b""
    key_id: int = 0

    def __bool__(self) -> bool:
        return self.valid


@dataclass(frozen=True)
class KeyInfo:
    """One key of the sidecar's keyring, without its material.

    `status` is what the key does now at the sidecar's clock (PRIMARY: it
    mints; RETIRED: its tokens are refused), following the keyring's
    schedule; `file_status` is what the file writes. Instants are unix
    seconds."""

    id: int
    algorithm: Algorithm
    status: KeyStatus
    created_at: int | None = None
    file_status: KeyStatus = KeyStatus.UNSPECIFIED
    mint_from: int | None = None
    retire_at: int | None = None
    last_verified_at: int | None = None
    minted: int = 0
    verified: int = 0


class TransitionKind(enum.IntEnum):
    """Mirrors `reqstate.v1.TransitionKind` (without the prefix)."""

    UNSPECIFIED = 0
    STARTS_MINTING = 1
    RETIRES = 2
    UNRECOGNIZED = -1

    @classmethod
    def from_wire(cls, value: int) -> TransitionKind:
        try:
            return cls(value)
        except ValueError:
            return cls.UNRECOGNIZED


@dataclass(frozen=True)
class Transition:
    """A scheduled change: key `key_id` starts minting or retires at `at`."""

    at: int
    key_id: int
    kind: TransitionKind


@dataclass(frozen=True)
class KeyList:
    """The sidecar's keys (`ListKeysResponse`): which key mints at `now`
    (the sidecar's clock), the next scheduled transition, the SHA-256 of
    the keyring file it serves (equal on replicas that loaded the same
    file) and the policy its schedule checks use."""

    keys: tuple[KeyInfo, ...]
    keyring_generation: int
    now: int = 0
    minting_key_id: int = 0
    next_transition: Transition | None = None
    keyring_sha256: str = ""
    max_ttl_seconds: int = 0
    clock_leeway_seconds: int = 0

    @property
    def primary(self) -> KeyInfo | None:
        return next((k for k in self.keys if k.status is KeyStatus.PRIMARY), None)

    def get(self, key_id: int) -> KeyInfo | None:
        return next((k for k in self.keys if k.id == key_id), None)


@dataclass(frozen=True)
class MintItem:
    """One item of `mint_batch`, with the arguments of `Client.mint`."""

    tool: str
    step: str
    state: bytes | None = None
    state_json: Any = None
    ttl_seconds: int = 0
    context: bytes = b""
    single_use: bool = False


@dataclass(frozen=True)
class VerifyItem:
    """One item of `verify_batch`, with the arguments of `Client.verify`."""

    token: str
    tool: str
    expected_step: str | None = None
    context: bytes = field(default=b"")
    consume: bool = False
