"""reqstate in-process: mint and verify MCP `requestState` tokens by linking
the Rust core crate (PyO3, one abi3 wheel for CPython >= 3.9).

    from reqstate import Binding, Codec, Keyring, call_context

    codec = Codec(Keyring.from_file("keyring.toml", auto_reload=True))
    binding = Binding("increase-counter", call_context("user-42", "counter-server", "tools/call", {"current": 10}))
    token = codec.mint(binding, "confirm", {"current": 10, "amount": 5}, ttl=600).token
    state = codec.verify(token, binding, expected_step="confirm").state

Errors are exceptions with the core's reason name in `.reason`
(`TokenRefused`, `MintRefused`, `InvalidArgument`, `KeyringError`).
`reqstate.mcp` has the codec for the official `mcp` SDK; `reqstate.redis` a
spent-token store in Redis for single-use tokens across a fleet (the
`reqstate[redis]` extra); `python -m reqstate mint|verify` is the shared
command line (docs/CLI.md).

For a server that should hold no key material, the sidecar and its client
`reqstate_client` (clients/python) are the other choice: see the README.
"""

from __future__ import annotations

import json
from typing import Any

from . import _native
from ._errors import InvalidArgument, KeyringError, MintRefused, ReqstateError, TokenRefused
from ._native import (
    CALL_CONTEXT_LEN,
    MAX_ARGUMENTS_DEPTH,
    MAX_STATE_DEPTH,
    REASONS,
    Binding,
    Codec,
    KeyInfo,
    Keyring,
    MemoryReplayStore,
    Minted,
    Sealed,
    SpentRecord,
    Unsealed,
    Verified,
    canonical_json,
    state_cbor_from_json,
    state_json_from_cbor,
)
from ._store import ReplayStore

__all__ = [
    "CALL_CONTEXT_LEN",
    "MAX_ARGUMENTS_DEPTH",
    "MAX_STATE_DEPTH",
    "REASONS",
    "Binding",
    "Codec",
    "InvalidArgument",
    "KeyInfo",
    "Keyring",
    "KeyringError",
    "MemoryReplayStore",
    "MintRefused",
    "Minted",
    "ReplayStore",
    "ReqstateError",
    "Sealed",
    "SpentRecord",
    "TokenRefused",
    "Unsealed",
    "Verified",
    "__version__",
    "call_context",
    "canonical_json",
    "state_cbor_from_json",
    "state_json_from_cbor",
]

__version__: str = _native.VERSION

# One encoder, built once: `json.dumps` with options builds a new one per call.
_ARGUMENTS_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def call_context(principal: str, audience: str, method: str, arguments: Any) -> bytes:
    """The call context of one MCP call (FORMAT.md §7): 32 bytes binding a
    token to the principal, the audience (this server), the method and the
    exact arguments, digested in their RFC 8785 (JCS) form.

    `arguments` is the arguments' JSON text as received (`str`; preferred:
    duplicate keys and inexact numbers in it are refused) or the parsed value
    (a dict, list, ...), which is printed as JSON first. Raises
    `InvalidArgument` (reason `invalid_argument`) for arguments JCS cannot
    represent exactly (duplicate keys, numbers that are not exactly a double,
    lone surrogates, nesting deeper than `MAX_ARGUMENTS_DEPTH`, 128); for
    JSON text its `rule` names the rule broken.
    """
    if isinstance(arguments, str):
        text = arguments
    else:
        try:
            text = _ARGUMENTS_JSON.encode(arguments)
        except (TypeError, ValueError) as error:
            raise InvalidArgument("invalid_argument", f"the arguments are not JSON: {error}") from None
    # A lone surrogate in the text is refused there (rule lone_surrogate).
    return _native.call_context(principal, audience, method, text)
