"""A synchronous gRPC client for the reqstate sidecar (`reqstate.v1.RequestState`)."""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import grpc

from ._pb import reqstate_pb2 as pb
from ._pb import reqstate_pb2_grpc as pb_grpc
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
from .errors import ReqstateError, TransportError, from_rpc_error

DEFAULT_TIMEOUT = 5.0
"""Seconds a call may take, connection included, unless `timeout=` says otherwise."""

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")

_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def grpc_target(target: str) -> str:
    """The grpcio target for `unix:///path`, `unix:/path`, `tcp:host:port` or `host:port`."""
    if not isinstance(target, str) or not target:
        raise ValueError("target must be a non-empty string: unix:///path/to.sock or host:port")
    if target.startswith("tcp:"):
        return target[len("tcp:") :]
    return target


def _host_port(address: str) -> tuple[str, str] | None:
    """`host` and `port` of `host:port` or `[v6]:port`; None when it has neither form."""
    if address.startswith("["):
        host, bracket, rest = address[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            return None
        return host, rest[1:]
    host, colon, port = address.rpartition(":")
    if not colon or not host or ":" in host:
        return None
    return host, port


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def _non_loopback_host(grpc_target: str) -> str | None:
    """The first host of `grpc_target` (as `grpc_target()` gives it) that is
    not loopback, or None when every address it reaches is loopback (a Unix
    socket included). A name counts as loopback only if every address it
    resolves to is (`localhost` on a misconfigured machine may not be); a
    target this cannot read, or a name that does not resolve, is returned
    as not loopback: the token must not go where this cannot tell."""
    if grpc_target.startswith(("unix:", "unix-abstract:")):
        return None
    if grpc_target.startswith(("ipv4:", "ipv6:")):
        addresses = grpc_target.split(":", 1)[1].split(",")
    elif grpc_target.startswith("dns:"):
        rest = grpc_target[len("dns:") :]
        if rest.startswith("//"):
            # dns://[resolver]/host:port
            rest = rest[2:].partition("/")[2]
        addresses = [rest]
    else:
        addresses = [grpc_target]
    for address in addresses:
        parsed = _host_port(address)
        if parsed is None:
            return address
        host, port = parsed
        try:
            infos = socket.getaddrinfo(host, port or None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return host
        resolved = [info[4][0] for info in infos]
        outside = [str(ip) for ip in resolved if not isinstance(ip, str) or not _is_loopback(ip)]
        if not resolved:
            return host
        if outside:
            return outside[0]
    return None


def check_plaintext_token(target: str, token: str | None, credentials: object, insecure_send_token: bool) -> None:
    """Refuses (`ValueError`) to send a bearer token over a plaintext channel
    to a host that is not loopback: anyone on the path could read it, and
    with it mint anything the sidecar mints. A Unix socket, loopback TCP,
    TLS `credentials` or `insecure_send_token=True` pass."""
    if token is None or credentials is not None or insecure_send_token:
        return
    outside = _non_loopback_host(grpc_target(target))
    if outside is not None:
        raise ValueError(
            f"Client({target!r}, token=...): {outside} is not a loopback address and the channel is "
            "plaintext, so the bearer token would cross the network readable by anyone on the path. "
            "Pass credentials=grpc.ssl_channel_credentials(...) (TLS), connect over a Unix socket "
            "(unix:///path/to.sock), or pass insecure_send_token=True if the network is trusted entirely"
        )


UNIX_SOCKET_AUTHORITY = "localhost"
"""The HTTP/2 `:authority` sent on a Unix socket unless the caller's options
set `grpc.default_authority`."""


def channel_options(grpc_target: str, options: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
    """The grpcio channel options for `grpc_target` (as `grpc_target()` gives
    it): the caller's `options`, plus ``("grpc.default_authority",
    "localhost")`` on a Unix socket unless they set one.

    On a Unix socket gRPC's C core sends the socket's path, percent-encoded,
    as the `:authority` (`run%2Freqstate%2Freqstate.sock`), which is not a URI
    authority: HTTP/2 servers built on the `http` crate (upstream h2) reset
    such streams. A plain name works with any server; over TCP the target's
    own host:port stays the authority."""
    chosen = list(options)
    unix = grpc_target.startswith(("unix:", "unix-abstract:"))
    if unix and not any(name == "grpc.default_authority" for name, _ in chosen):
        chosen.append(("grpc.default_authority", UNIX_SOCKET_AUTHORITY))
    return chosen


def _state_json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _mint_request(
    tool: str,
    step: str,
    state: bytes | None,
    state_json: Any,
    ttl_seconds: int,
    context: bytes,
    single_use: bool,
) -> pb.MintRequest:
    if state is not None and state_json is not None:
        raise ValueError("give at most one of state (bytes) and state_json")
    request = pb.MintRequest(
        tool=tool, step=step, ttl_seconds=ttl_seconds, context=bytes(context), single_use=single_use
    )
    if state is not None:
        request.state = bytes(state)
    elif state_json is not None:
        request.state_json = _state_json_text(state_json)
    return request


def _verify_request(
    token: str, tool: str, expected_step: str | None, context: bytes, consume: bool
) -> pb.VerifyRequest:
    request = pb.VerifyRequest(token=token, tool=tool, context=bytes(context), consume=consume)
    if expected_step is not None:
        request.expected_step = expected_step
    return request


def _minted(response: pb.MintResponse) -> Minted:
    return Minted(
        token=response.token,
        key_id=response.key_id,
        issued_at=response.issued_at,
        expires_at=response.expires_at,
    )


def _verified(response: pb.VerifyResponse) -> Verified:
    which = response.WhichOneof("state_value")
    return Verified(
        valid=response.valid,
        reason=Reason.from_wire(response.reason),
        detail=response.detail,
        step=response.step,
        state=response.state if which == "state" else None,
        state_json=response.state_json if which == "state_json" else None,
        key_id=response.key_id,
        issued_at=response.issued_at,
        expires_at=response.expires_at,
    )


class _Stub:
    """`reqstate_pb2_grpc.RequestStateStub` with its methods typed.

    grpcio-tools generates no stubs for the `_grpc` module: its methods are
    untyped attributes. Naming their request and response messages here lets
    mypy check every call against reqstate_pb2.pyi.
    """

    def __init__(self, channel: grpc.Channel) -> None:
        stub = pb_grpc.RequestStateStub(channel)
        self.Mint: grpc.UnaryUnaryMultiCallable[pb.MintRequest, pb.MintResponse] = stub.Mint
        self.Verify: grpc.UnaryUnaryMultiCallable[pb.VerifyRequest, pb.VerifyResponse] = stub.Verify
        self.MintBatch: grpc.UnaryUnaryMultiCallable[pb.MintBatchRequest, pb.MintBatchResponse] = stub.MintBatch
        self.VerifyBatch: grpc.UnaryUnaryMultiCallable[pb.VerifyBatchRequest, pb.VerifyBatchResponse] = stub.VerifyBatch
        self.Seal: grpc.UnaryUnaryMultiCallable[pb.SealRequest, pb.SealResponse] = stub.Seal
        self.Unseal: grpc.UnaryUnaryMultiCallable[pb.UnsealRequest, pb.UnsealResponse] = stub.Unseal
        self.ListKeys: grpc.UnaryUnaryMultiCallable[pb.ListKeysRequest, pb.ListKeysResponse] = stub.ListKeys


class Client:
    """A client of one reqstate sidecar.

    `target` is `unix:///run/reqstate/reqstate.sock` or `host:port` (also
    `tcp:host:port`, as the sidecar's `--listen` spells it). `token` is the
    sidecar's bearer token (`--auth-token-file`), sent as
    `authorization: Bearer <token>` on every call. `timeout` bounds every
    call in seconds. `credentials` (a `grpc.ChannelCredentials`) switches to
    TLS for a sidecar with `--tls-cert`. `options` are grpcio channel options;
    on a Unix socket the `:authority` sent is `localhost` unless they set
    `grpc.default_authority` (`channel_options`).

    A `token` without `credentials` goes only to a Unix socket or to a host
    whose every address is loopback: another host raises `ValueError`
    before any channel is made, unless `insecure_send_token=True` (the
    token then crosses the network in plaintext).

    Token failures are results (`Verified.valid`, `Unsealed.valid`); RPC
    failures raise `ReqstateError` subclasses, `TransportError` when the
    sidecar cannot be reached. Thread-safe; use as a context manager or call
    `close()`.
    """

    def __init__(
        self,
        target: str,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] = (),
        insecure_send_token: bool = False,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._grpc_target = grpc_target(target)
        check_plaintext_token(target, token, credentials, insecure_send_token)
        chosen_options = channel_options(self._grpc_target, options)
        if credentials is None:
            self._channel = grpc.insecure_channel(self._grpc_target, options=chosen_options)
        else:
            self._channel = grpc.secure_channel(self._grpc_target, credentials, options=chosen_options)
        self._stub = _Stub(self._channel)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token is not None else ()
        )
        # Raw bytes both ways: no serializers, so grpcio passes them through.
        self._health: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self._channel.unary_unary(_HEALTH_CHECK)
        self._closed = False

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Closes the channel; later calls raise TransportError."""
        if not self._closed:
            self._closed = True
            self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.target!r}, token={'***' if self._metadata else None})"

    # -- plumbing ----------------------------------------------------------

    def _call(
        self,
        rpc: str,
        method: grpc.UnaryUnaryMultiCallable[_Request, _Response],
        request: _Request,
        timeout: float | None,
    ) -> _Response:
        if self._closed:
            raise TransportError(f"reqstate {rpc} via {self.target}: the client is closed")
        try:
            return method(
                request,
                timeout=self.timeout if timeout is None else timeout,
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(rpc, error, self.target) from None
        except ValueError as error:
            # grpcio raises ValueError for a closed channel.
            raise TransportError(f"reqstate {rpc} via {self.target}: {error}") from None

    # -- RPCs --------------------------------------------------------------

    def mint(
        self,
        tool: str,
        step: str,
        *,
        state: bytes | None = None,
        state_json: Any = None,
        ttl_seconds: int = 0,
        context: bytes = b"",
        single_use: bool = False,
        timeout: float | None = None,
    ) -> Minted:
        """Mints one token under the primary key.

        The state is `state` (bytes) or `state_json` (JSON text, or any value
        `json.dumps` takes); neither means empty bytes. `ttl_seconds=0` is the
        sidecar's default TTL. `context` (caller, audience, argument digest …)
        is bound but not stored: `verify` must give the same bytes. A malformed
        request raises InvalidRequestError with `.reason` set.

        `single_use=True` mints a token that verifies once: a plain `verify`
        refuses it (`Reason.SINGLE_USE`), `verify(..., consume=True)` accepts it
        once and then refuses it as `Reason.REPLAYED`, on every sidecar that
        shares the replay store. Mint the round that commits an effect this way
        (the token is 24 characters longer).
        """
        request = _mint_request(tool, step, state, state_json, ttl_seconds, context, single_use)
        return _minted(self._call("Mint", self._stub.Mint, request, timeout))

    def verify(
        self,
        token: str,
        tool: str,
        *,
        expected_step: str | None = None,
        context: bytes = b"",
        consume: bool = False,
        timeout: float | None = None,
    ) -> Verified:
        """Verifies one token: a token that does not verify is `valid=False` with a `reason`.

        `consume=True` redeems a single-use token (minted with `single_use=True`):
        after every other check passes the sidecar records it as spent and
        accepts it only the first time (`Reason.REPLAYED` afterwards). Consuming
        a token that is not single-use is `Reason.WRONG_KIND`; when the replay
        store cannot record it the token is refused (`Reason.REPLAY_STORE_FULL`,
        `Reason.REPLAY_STORE_UNAVAILABLE`): consuming fails closed.
        """
        request = _verify_request(token, tool, expected_step, context, consume)
        return _verified(self._call("Verify", self._stub.Verify, request, timeout))

    def mint_batch(self, items: Iterable[MintItem], *, timeout: float | None = None) -> list[Minted | ItemError]:
        """Mints many tokens; each result is a `Minted` or an `ItemError`, in item order."""
        request = pb.MintBatchRequest(
            items=[
                _mint_request(i.tool, i.step, i.state, i.state_json, i.ttl_seconds, i.context, i.single_use)
                for i in items
            ]
        )
        response = self._call("MintBatch", self._stub.MintBatch, request, timeout)
        results: list[Minted | ItemError] = []
        for result in response.results:
            if result.WhichOneof("outcome") == "minted":
                results.append(_minted(result.minted))
            else:
                results.append(ItemError(reason=Reason.from_wire(result.error.reason), detail=result.error.detail))
        return results

    def verify_batch(self, items: Iterable[VerifyItem], *, timeout: float | None = None) -> list[Verified]:
        """Verifies many tokens, each on its own; results in item order.

        Items with `consume=True` are consumed as by `verify`; the same
        single-use token twice in one batch is accepted at most once.
        """
        request = pb.VerifyBatchRequest(
            items=[_verify_request(i.token, i.tool, i.expected_step, i.context, i.consume) for i in items]
        )
        response = self._call("VerifyBatch", self._stub.VerifyBatch, request, timeout)
        return [_verified(r) for r in response.results]

    def seal(self, payload: bytes, *, aad: bytes = b"", timeout: float | None = None) -> Sealed:
        """Seals opaque bytes under the primary key, bound to `aad` (no expiry is added)."""
        request = pb.SealRequest(payload=bytes(payload), aad=bytes(aad))
        response = self._call("Seal", self._stub.Seal, request, timeout)
        return Sealed(token=response.token, key_id=response.key_id)

    def unseal(self, token: str, *, aad: bytes = b"", timeout: float | None = None) -> Unsealed:
        """Opens a token made by `seal` with the same `aad`; failure is `valid=False`."""
        request = pb.UnsealRequest(token=token, aad=bytes(aad))
        response = self._call("Unseal", self._stub.Unseal, request, timeout)
        return Unsealed(
            valid=response.valid,
            reason=Reason.from_wire(response.reason),
            detail=response.detail,
            payload=response.payload,
            key_id=response.key_id,
        )

    def list_keys(self, *, timeout: float | None = None) -> KeyList:
        """The sidecar's keys right now (never their material) and its keyring generation."""
        response = self._call("ListKeys", self._stub.ListKeys, pb.ListKeysRequest(), timeout)

        def optional(message: Any, field: str) -> int | None:
            return int(getattr(message, field)) if message.HasField(field) else None

        t = response.next_transition if response.HasField("next_transition") else None
        return KeyList(
            keys=tuple(
                KeyInfo(
                    id=k.id,
                    algorithm=Algorithm.from_wire(k.algorithm),
                    status=KeyStatus.from_wire(k.status),
                    created_at=optional(k, "created_at"),
                    file_status=KeyStatus.from_wire(k.file_status),
                    mint_from=optional(k, "mint_from"),
                    retire_at=optional(k, "retire_at"),
                    last_verified_at=optional(k, "last_verified_at"),
                    minted=k.minted,
                    verified=k.verified,
                )
                for k in response.keys
            ),
            keyring_generation=response.keyring_generation,
            now=response.now,
            minting_key_id=response.minting_key_id,
            next_transition=None
            if t is None
            else Transition(at=t.at, key_id=t.key_id, kind=TransitionKind.from_wire(t.kind)),
            keyring_sha256=response.keyring_sha256,
            max_ttl_seconds=response.max_ttl_seconds,
            clock_leeway_seconds=response.clock_leeway_seconds,
        )

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """`grpc.health.v1.Health/Check`: "SERVING", "NOT_SERVING", … (needs no bearer token)."""
        encoded = service.encode()
        if len(encoded) > 127:
            raise ValueError("service name too long")
        request = (b"\x0a" + bytes([len(encoded)]) + encoded) if encoded else b""
        raw = self._call("Health/Check", self._health, request, timeout)
        # HealthCheckResponse { ServingStatus status = 1; }: absent means 0.
        status = raw[1] if len(raw) >= 2 and raw[0] == 0x08 else 0
        return _HEALTH_STATUS.get(status, f"UNKNOWN({status})")


__all__ = ["Client", "DEFAULT_TIMEOUT", "ReqstateError", "grpc_target"]
