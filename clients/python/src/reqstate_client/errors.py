"""Exceptions of reqstate_client.

Every RPC failure is a `ReqstateError`; a token that does not verify or open
is *not* an exception but a result (`Verified.valid`, `Unsealed.valid`).

    ReqstateError                    any failed call (`.code`, `.details`, `.reason`)
    ├── TransportError               the sidecar could not be reached or did not answer in time
    │   └── OverloadedError          RESOURCE_EXHAUSTED: shed by the sidecar, retry with backoff
    ├── AuthenticationError          UNAUTHENTICATED: missing or wrong bearer token
    ├── PermissionDeniedError        PERMISSION_DENIED: peer uid not allowed
    └── InvalidRequestError          INVALID_ARGUMENT / OUT_OF_RANGE: a malformed request
"""

from __future__ import annotations

import grpc

from ._types import Reason


class ReqstateError(Exception):
    """A call to the sidecar failed.

    `code` is the gRPC status code (None when the failure never reached gRPC),
    `details` the status message, and `reason` the `reqstate-reason` trailer
    of a failed Mint or Seal, when the sidecar sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        details: str = "",
        reason: Reason | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.details = details
        self.reason = reason


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
    if isinstance(call, grpc.Call):
        code = call.code()
        details = call.details() or ""
        for key, value in call.trailing_metadata() or ():
            if key == REASON_TRAILER:
                reason = Reason.from_code(value if isinstance(value, str) else value.decode("ascii", "replace"))
    cls = _BY_CODE.get(code, ReqstateError) if code is not None else TransportError
    name = code.name if code is not None else "no status"
    message = f"reqstate {rpc} via {target}: {name}: {details}".rstrip(": ")
    if reason is not None:
        message += f" (reason: {reason.code})"
    return cls(message, code=code, details=details, reason=reason)
