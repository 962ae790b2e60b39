"""Python client for the reqstate sidecar: mint, verify, seal and unseal MCP
`requestState` tokens over gRPC (`reqstate.v1.RequestState`).

    from reqstate_client import Client

    with Client("unix:///run/reqstate/reqstate.sock", token="...") as sidecar:
        minted = sidecar.mint("increase-counter", "confirm", state_json={"amount": 5})
        result = sidecar.verify(minted.token, "increase-counter", expected_step="confirm")
        assert result.valid and result.json() == {"amount": 5}

Single-use tokens: `mint(..., single_use=True)` is accepted once, by
`verify(..., consume=True)` (`Reason.REPLAYED` afterwards).

`reqstate_client.mcp.SidecarCodec` plugs the sidecar into the official `mcp`
SDK's `RequestStateSecurity`; `reqstate_client.mcp.single_use(state)` makes a
round's `requestState` single-use.

`reqstate_client.call_context(principal, audience, method, arguments_json)` is
the 32-byte context that binds a token to one call (docs/FORMAT.md §7): the
core crate's own `reqstate::call_context`, from the `reqstate` package (the
core linked in-process, a dependency of this one).
"""

from __future__ import annotations

import json
from typing import Any

import reqstate

from ._client import DEFAULT_TIMEOUT, Client, grpc_target
from ._types import (
    Algorithm,
    ItemError,
    KeyInfo,
    KeyList,
    KeyStatus,
    Minted,
    MintItem,
    Reason,
    Sealed,
    Transition,
    TransitionKind,
    Unsealed,
    Verified,
    VerifyItem,
)
from .errors import (
    AuthenticationError,
    InvalidRequestError,
    OverloadedError,
    PermissionDeniedError,
    ReqstateError,
    TransportError,
)

# -- call context -------------------------------------------------------------
# One implementation of FORMAT.md §7 per language: the core crate's, through
# the `reqstate` package. What follows only adapts it to this package's API
# (bytes accepted as UTF-8 text, `InvalidArgumentError` with the rule's name).

MAX_ARGUMENTS_DEPTH: int = reqstate.MAX_ARGUMENTS_DEPTH
"""Deepest nesting of arrays and objects accepted in the arguments."""


class InvalidArgumentError(ValueError):
    """Arguments that JCS cannot represent exactly, or that are not JSON.

    `code` is always ``"invalid_argument"`` (the core crate's error code);
    `reason` names the rule: ``not_json``, ``duplicate_key``,
    ``inexact_number``, ``lone_surrogate`` or ``too_deep``.
    """

    code = "invalid_argument"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _arguments_text(arguments_json: str | bytes) -> str:
    if isinstance(arguments_json, (bytes, bytearray)):
        try:
            return bytes(arguments_json).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError("not_json", "arguments are not UTF-8") from None
    if not isinstance(arguments_json, str):
        raise TypeError("arguments_json must be str or bytes (JSON text); use call_context_from_value for values")
    return arguments_json


def _refused(error: reqstate.InvalidArgument) -> InvalidArgumentError:
    # The native package names the rule of every refusal of JSON text.
    return InvalidArgumentError(error.rule or error.reason, error.message)


def canonical_json(arguments_json: str | bytes) -> str:
    """The JCS (RFC 8785) text of the JSON value `arguments_json` (the text as
    received: any spacing and key order). Raises `InvalidArgumentError` for text
    that is not one JSON value and for what JCS cannot represent exactly:
    duplicate keys, numbers whose JCS form is another number (``9007199254740993``,
    ``1e400``, ``0.10000000000000001``), lone surrogates, nesting deeper than 128."""
    text = _arguments_text(arguments_json)
    try:
        return reqstate.canonical_json_from_text(text)
    except reqstate.InvalidArgument as error:
        raise _refused(error) from None


def call_context(principal: str, audience: str, method: str, arguments_json: str | bytes) -> bytes:
    """The 32-byte call context of one call: the core crate's
    `reqstate::call_context`. `arguments_json` is the arguments' JSON text as
    received; see `canonical_json` for what is refused (`InvalidArgumentError`)."""
    text = _arguments_text(arguments_json)
    try:
        return reqstate.call_context_from_text(principal, audience, method, text)
    except reqstate.InvalidArgument as error:
        raise _refused(error) from None


def call_context_from_value(principal: str, audience: str, method: str, arguments: Any) -> bytes:
    """`call_context` for arguments already parsed (dicts, lists, str, int,
    float, bool, None): the value is printed with `json.dumps` and that text
    goes through `call_context`, so integers whose JCS form would be another
    integer (beyond 2**53, such as 2**64) are refused, and so are NaN and
    infinities. A parsed value no longer shows duplicate keys or how its
    numbers were written: when you hold the request's JSON text, pass it to
    `call_context` instead."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError as e:
        raise InvalidArgumentError("inexact_number", f"arguments cannot be JSON: {e}") from None
    except (TypeError, RecursionError) as e:
        raise InvalidArgumentError("not_json", f"arguments cannot be JSON: {e}") from None
    return call_context(principal, audience, method, text)


__version__ = "0.1.0"
"""The package's version, its one source: pyproject.toml reads it from here."""

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_ARGUMENTS_DEPTH",
    "Algorithm",
    "AuthenticationError",
    "Client",
    "InvalidArgumentError",
    "InvalidRequestError",
    "ItemError",
    "KeyInfo",
    "Transition",
    "TransitionKind",
    "KeyList",
    "KeyStatus",
    "MintItem",
    "Minted",
    "OverloadedError",
    "PermissionDeniedError",
    "Reason",
    "ReqstateError",
    "Sealed",
    "TransportError",
    "Unsealed",
    "Verified",
    "VerifyItem",
    "call_context",
    "call_context_from_value",
    "canonical_json",
    "grpc_target",
]
