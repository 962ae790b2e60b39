"""Exceptions of reqstate_client.

Every RPC failure is a `ReqstateError`; a token that does not verify or open
is *not* an exception but a result (`Verified.valid`, `Unsealed.valid`).
`.refusal` says why a call failed in one lower-case word, whoever refused it
(`unauthenticated`, `permission_denied`, `overloaded`, `deadline_exceeded`,
`unavailable`, `lifetime_too_long`, ...), and the message what to do.

    ReqstateError                    any failed call (`.code`, `.details`, `.reason`)
    ├── TransportError               the sidecar could not be reached or did not answer in time
    │   └── OverloadedError          RESOURCE_EXHAUSTED: shed by the sidecar, retry with backoff
    ├── AuthenticationError          UNAUTHENTICATED: missing or wrong bearer token
    ├── PermissionDeniedError        PERMISSION_DENIED: peer uid not allowed
    └── InvalidRequestError          INVALID_ARGUMENT / OUT_OF_RANGE: a malformed request
"""

from __future__ import annotations

import os

import grpc

from ._types import Reason


class ReqstateError(Exception):
    """A call to the sidecar failed.

    `code` is the gRPC status code (None when the failure never reached gRPC),
    `details` the status message, and `reason` the format's reason of a
    failed Mint or Seal (its `reqstate-reason` trailer, `Reason.LIFETIME_TOO_LONG`),
    when the sidecar sent one. `refusal` is why the call failed, in lower
    case, always set: the `reqstate-reason` the sidecar sent (a format
    reason's `code`, or a refusal of its call gate: `unauthenticated`,
    `permission_denied`, `overloaded`, `deadline_exceeded`; docs/SIDECAR.md,
    "Errors"), else the gRPC status code's name (`unavailable` for a sidecar
    that cannot be reached, `deadline_exceeded` for a client-side timeout,
    `out_of_range`), else `no_status`.
    """

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        details: str = "",
        reason: Reason | None = None,
        refusal: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.details = details
        self.reason = reason
        self.refusal = refusal if refusal is not None else (reason.code if reason is not None else _code_name(code))


class TransportError(ReqstateError):
    """The sidecar could not be reached, dropped the call, or missed the deadline."""


class OverloadedError(TransportError):
    """The sidecar shed the call (RESOURCE_EXHAUSTED); retry with backoff."""


class AuthenticationError(ReqstateError):
    """UNAUTHENTICATED: the sidecar requires a bearer token and got none or a wrong one."""


class PermissionDeniedError(ReqstateError):
    """PERMISSION_DENIED: this caller (peer uid) may not call the sidecar."""


class InvalidRequestError(ReqstateError):
    """INVALID_ARGUMENT or OUT_OF_RANGE: the request was malformed or over a limit."""


_BY_CODE: dict[grpc.StatusCode, type[ReqstateError]] = {
    grpc.StatusCode.UNAVAILABLE: TransportError,
    grpc.StatusCode.DEADLINE_EXCEEDED: TransportError,
    grpc.StatusCode.CANCELLED: TransportError,
    grpc.StatusCode.UNKNOWN: TransportError,
    grpc.StatusCode.INTERNAL: TransportError,
    grpc.StatusCode.UNIMPLEMENTED: TransportError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: OverloadedError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidRequestError,
}

REASON_TRAILER = "reqstate-reason"

# The refusals of the sidecar's call gate (docs/SIDECAR.md, "Errors"): sent
# in the `reqstate-reason` trailer like a format reason, but not one.
GATE_REFUSALS = frozenset({"unauthenticated", "permission_denied", "overloaded", "deadline_exceeded"})


def _code_name(code: grpc.StatusCode | None) -> str:
    return code.name.lower() if code is not None else "no_status"


def _what_to_do(refusal: str, target: str) -> str | None:
    """What the caller can do about a refusal, for the message."""
    if refusal == "unauthenticated":
        return (
            "the sidecar requires a bearer token (it runs with --auth-token-file): "
            "pass token=... to Client, one of the tokens in that file"
        )
    if refusal == "permission_denied":
        return (
            "the sidecar takes calls on its Unix socket only from the uids of its --allow-uid: "
            f"run as one of them or add this process's uid ({os.geteuid()})"
        )
    if refusal in ("overloaded", "resource_exhausted"):
        return "the sidecar shed the call (--max-concurrent-calls): retry with backoff"
    if refusal == "deadline_exceeded":
        return (
            "no answer in time: pass a longer timeout= to the call or the Client "
            "(the sidecar stops a call at its --call-timeout-ms)"
        )
    if refusal == "unavailable":
        return f"is the sidecar running and listening at {target}? (`reqstate serve --listen ...`)"
    return None


def from_rpc_error(rpc: str, error: grpc.RpcError, target: str) -> ReqstateError:
    """The ReqstateError for a failed call."""
    # grpcio's own failures are both RpcError and Call, but a bare RpcError
    # (from an interceptor, say) has no code(), details() or trailers: ask
    # the object, not its static type (the grpcio stubs give every RpcError
    # a code()).
    call: object = error
    code: grpc.StatusCode | None = None
    details = ""
    reason: Reason | None = None
    refusal: str | None = None
    if isinstance(call, grpc.Call):
        code = call.code()
        details = call.details() or ""
        for key, value in call.trailing_metadata() or ():
            if key == REASON_TRAILER:
                sent = (value if isinstance(value, str) else value.decode("ascii", "replace")).strip().lower()
                if sent in GATE_REFUSALS:
                    refusal = sent  # the call gate's, not a reason of the format
                else:
                    reason = Reason.from_code(sent)
    if refusal is None:
        refusal = reason.code if reason is not None else _code_name(code)
    cls = _BY_CODE.get(code, ReqstateError) if code is not None else TransportError
    name = code.name if code is not None else "no status"
    message = f"reqstate {rpc} via {target}: {name}: {details}".rstrip(": ")
    if reason is not None:
        message += f" (reason: {reason.code})"
    hint = _what_to_do(refusal, target)
    if hint is not None:
        message += f"; {hint}"
    return cls(message, code=code, details=details, reason=reason, refusal=refusal)
