"""Type stubs of `reqstate._native`, the PyO3 module (crates/reqstate-python/src/lib.rs)."""

from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import Any, Literal, final

from ._errors import InvalidArgument, MintRefused, TokenRefused
from ._store import ReplayStore

REASONS: list[str]
CALL_CONTEXT_LEN: int
MAX_ARGUMENTS_DEPTH: int
MAX_STATE_DEPTH: int
VERSION: str

@final
class KeyInfo:
    """One key of a keyring (no secret)."""

    @property
    def id(self) -> int: ...
    @property
    def algorithm(self) -> Literal["hmac-sha256", "xchacha20-poly1305"]: ...
    @property
    def status(self) -> Literal["primary", "active", "retired"]: ...
    @property
    def created_at(self) -> int | None: ...
    @property
    def mint_from(self) -> int | None: ...
    @property
    def retire_at(self) -> int | None: ...

@final
class Keyring:
    """Keys by id: one primary that mints, active keys that verify, retired keys refused."""

    @staticmethod
    def from_toml(text: str) -> Keyring: ...
    @staticmethod
    def from_file(
        path: str | PathLike[str],
        *,
        allow_insecure_permissions: bool = False,
        auto_reload: bool = False,
        check_interval: float = 1.0,
    ) -> Keyring: ...
    @staticmethod
    def ephemeral(algorithm: Literal["hmac-sha256", "xchacha20-poly1305"] = "xchacha20-poly1305") -> Keyring: ...
    def reload(self) -> bool: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def auto_reload(self) -> bool: ...
    @property
    def last_reload_error(self) -> str | None: ...
    @property
    def generation(self) -> int: ...
    @property
    def primary_key_id(self) -> int: ...
    def keys(self) -> list[KeyInfo]: ...
    def status_at(self, key_id: int, now: int | None = None) -> Literal["primary", "active", "retired"] | None: ...
    def __len__(self) -> int: ...

@final
class Binding:
    """The tool and context bytes a state token is bound to (checked once).
    `context` is bytes (a `str` is a TypeError: encode it, or build it with
    `call_context`)."""

    def __init__(self, tool: str, context: bytes | bytearray | None = None) -> None: ...
    @staticmethod
    def for_call(tool: str, principal: str, audience: str, method: str, arguments: Any) -> Binding:
        """The binding of one MCP call in one native call: `Binding(tool,
        call_context(principal, audience, method, arguments))` without the
        context's bytes in between (`arguments` a parsed value: a `str` is a
        JSON string). Raises `InvalidArgument` as both do."""
    @property
    def tool(self) -> str: ...
    @property
    def context(self) -> bytes: ...

@final
class Minted:
    @property
    def token(self) -> str: ...
    @property
    def key_id(self) -> int: ...
    @property
    def issued_at(self) -> int: ...
    @property
    def expires_at(self) -> int: ...

@final
class Verified:
    @property
    def step(self) -> str: ...
    @property
    def state(self) -> Any: ...
    @property
    def state_cbor(self) -> bytes: ...
    @property
    def key_id(self) -> int: ...
    @property
    def issued_at(self) -> int: ...
    @property
    def expires_at(self) -> int: ...

@final
class Sealed:
    @property
    def token(self) -> str: ...
    @property
    def key_id(self) -> int: ...

@final
class Unsealed:
    @property
    def payload(self) -> bytes: ...
    @property
    def key_id(self) -> int: ...

@final
class MemoryReplayStore:
    """Spent single-use tokens, in this process's memory."""

    def __init__(self, capacity: int = 100000) -> None: ...
    def __len__(self) -> int: ...

@final
class SpentRecord:
    """One single-use token to record as spent, as `Codec.consume` hands it
    to a `ReplayStore`: the record's name, never the token."""

    @property
    def name(self) -> str:
        """`spent:v1:<key id>:<token id hex>`, to put after a shared store's prefix."""
    @property
    def key_id(self) -> int: ...
    @property
    def token_id(self) -> bytes: ...
    @property
    def expires_at(self) -> int:
        """The token's expiry, unix seconds."""
    @property
    def now(self) -> int:
        """The verifier's clock reading used for this verification, unix seconds."""
    @property
    def clock_leeway(self) -> int: ...
    @property
    def record_until(self) -> int:
        """`expires_at + clock_leeway`: the least a store must keep the record."""

@final
class Codec:
    """Mints and verifies requestState tokens under a keyring and a policy."""

    def __init__(
        self,
        keyring: Keyring,
        *,
        max_token_len: int = 8192,
        clock_leeway: int = 60,
        max_lifetime: int = 86400,
    ) -> None: ...
    @property
    def keyring(self) -> Keyring: ...
    @property
    def max_token_len(self) -> int: ...
    @property
    def clock_leeway(self) -> int: ...
    @property
    def max_lifetime(self) -> int: ...
    def mint(
        self,
        binding: Binding,
        step: str,
        state: Any = None,
        *,
        ttl: int = 600,
        single_use: bool = False,
        now: int | None = None,
    ) -> Minted: ...
    def mint_cbor(
        self,
        binding: Binding,
        step: str,
        state_cbor: bytes | bytearray,
        *,
        ttl: int = 600,
        single_use: bool = False,
        now: int | None = None,
    ) -> Minted: ...
    def verify(
        self, token: str, binding: Binding, *, expected_step: str | None = None, now: int | None = None
    ) -> Verified: ...
    def verify_cbor(
        self, token: str, binding: Binding, *, expected_step: str | None = None, now: int | None = None
    ) -> Verified: ...
    def consume(
        self,
        token: str,
        binding: Binding,
        store: MemoryReplayStore | ReplayStore,
        *,
        expected_step: str | None = None,
        now: int | None = None,
        decode: bool = True,
    ) -> Verified: ...
    def seal(self, payload: bytes | bytearray, aad: bytes | bytearray = b"") -> Sealed: ...
    def unseal(self, token: str, aad: bytes | bytearray = b"") -> Unsealed: ...
    def mint_many(
        self, binding: Binding, step: str, states: Iterable[Any], *, ttl: int = 600, now: int | None = None
    ) -> list[Minted | MintRefused | InvalidArgument]: ...
    def verify_many(
        self,
        tokens: Iterable[str],
        binding: Binding,
        *,
        expected_step: str | None = None,
        now: int | None = None,
    ) -> list[Verified | TokenRefused]: ...

def call_context(principal: str, audience: str, method: str, arguments: Any) -> bytes:
    """The call context of one MCP call (FORMAT.md §7): 32 bytes binding a
    token to the principal, the audience (this server), the method and the
    exact arguments, digested in their RFC 8785 (JCS) form.

    `arguments` is the parsed value (`dict` with `str` keys, `list`,
    `tuple`, `str`, `int`, `float`, `bool`, `None`), read in Rust without
    printing it in Python: the same context as its `json.dumps` text. A
    `str` is a JSON string (`'{"n":1}'` is that string, as the TypeScript
    `callContext({arguments})` binds it, not an object): for the JSON text
    as received use `call_context_from_text`. Raises `InvalidArgument`
    (reason `invalid_argument`) for arguments JCS cannot represent exactly,
    its `rule` naming the rule broken: `not_json` (a value of another type,
    or a dict key that is not a `str`), `inexact_number` (a number that is
    not exactly a double, such as `2**64`; a NaN or an infinity),
    `lone_surrogate`, `too_deep` (nesting deeper than `MAX_ARGUMENTS_DEPTH`,
    128)."""

def call_context_from_text(principal: str, audience: str, method: str, arguments_json: str | bytes | bytearray) -> bytes:
    """`call_context` of the arguments' JSON text as received (`str`, or
    UTF-8 `bytes`/`bytearray`; preferred when you have it: only the text
    shows duplicate keys and how numbers were written). Raises
    `InvalidArgument` as `call_context` does, and for text that is not one
    JSON value (`not_json`) or repeats a key (`duplicate_key`); `TypeError`
    for anything but text."""

def canonical_json(arguments: Any) -> str:
    """The JCS (RFC 8785) text of one parsed JSON value, as `call_context`
    takes it (a `str` is a JSON string). Raises `InvalidArgument` for what
    JCS cannot represent exactly, its `rule` naming the rule broken (see
    `call_context`)."""

def canonical_json_from_text(arguments_json: str | bytes | bytearray) -> str:
    """The JCS (RFC 8785) text of one JSON text, as `call_context_from_text`
    reads it. Raises `InvalidArgument` for text that is not one JSON value
    and for what JCS cannot represent exactly."""

def state_cbor_from_json(text: str) -> bytes:
    """The CBOR bytes of a state given as JSON text, by the one mapping of
    docs/CLI.md (the sidecar's `state_json`, `reqstate mint --state-json`):
    mint them with `Codec.mint_cbor`. Raises `InvalidArgument` for text the
    mapping refuses, `MintRefused` (reason `state_encoding`) for JSON nested
    deeper than 16 levels."""

def state_json_from_cbor(cbor: bytes | bytearray) -> str | None:
    """The JSON form of a state's CBOR bytes (docs/CLI.md), as `reqstate
    verify` and the sidecar print it; None when the state has none."""

def _cli_state_from_json(text: str) -> bytes: ...
def _cli_check_state_cbor(cbor: bytes) -> None: ...
def _cli_state_json(cbor: bytes) -> str | None: ...
def _hex(data: bytes) -> str: ...
def _panic_under_clock_override(now: int) -> None: ...
def _clock_now() -> int: ...
