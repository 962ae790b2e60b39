"""reqstate in-process: mint and verify MCP `requestState` tokens by linking
the Rust core crate (PyO3, one abi3 wheel for CPython >= 3.10).

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
    call_context,
    call_context_from_text,
    canonical_json,
    canonical_json_from_text,
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
    "call_context_from_text",
    "canonical_json",
    "canonical_json_from_text",
    "state_cbor_from_json",
    "state_json_from_cbor",
]

__version__: str = _native.VERSION
