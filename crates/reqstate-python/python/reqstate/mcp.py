"""reqstate for the official `mcp` Python SDK (`mcp>=2.3,<3`), in-process.

Three ways, all on the same keyring (file, rotation, retirement) as the
sidecar and every other reqstate implementation:

**1. The compact boundary** (`RequestStateBoundary`, recommended): replaces
the SDK's own `requestState` boundary (a server middleware) in one line, on
`MCPServer` and on the lowlevel `Server`:

    from mcp.server.mcpserver import MCPServer
    from reqstate import Keyring
    import reqstate.mcp

    keyring = Keyring.from_file("/run/reqstate/keyring.toml", auto_reload=True)
    server = reqstate.mcp.bind(MCPServer("counter-server"), keyring)

Handlers keep returning `InputRequiredResult(input_requests=..., request_state=...)`
and reading `ctx.request_state` as plaintext, exactly as with the SDK's
boundary. The boundary mints each `input_required` result's state into a
reqstate token bound (in its call context, never carried) to the tool, the
arguments, the method, the principal and the audience, with the round's step
= the keys it asked (docs/MCP.md); the token carries only the handler's
state: 76 (HMAC) or 108 (XChaCha20-Poly1305) characters plus the step and
the state, against about 300 for the SDK's envelope. An inbound state that
verifies but whose asked keys are not all answered reaches the handler
anyway (asking again, SEP-2322), with `unanswered()` listing what is
missing; a refused one is the SDK's frozen `-32602 "Invalid or expired
requestState"` on the wire and one line on the `reqstate` logger.

**2. The SDK's envelope, sealed by reqstate** (`InProcessCodec`): a one-line
swap for the SDK's own `AESGCMRequestStateCodec`, for fleets that must keep
the SDK's envelope (tokens 283-338 characters for the conformance suite's
states). The SDK keeps stamping and checking its claims (expiry, method,
tool, argument digest, audience, principal); reqstate seals them under the
keyring's primary key and opens them under any active key.

    server = MCPServer(
        "counter-server",
        request_state_security=RequestStateSecurity(codec=InProcessCodec(keyring)),
    )

Tokens are bound to `DEFAULT_AAD`, the same associated data as
`reqstate_client.mcp.SidecarCodec`: with the same keyring, a state sealed by
a server using the sidecar opens in one using this codec, and back.

**3. reqstate's tokens by hand** (`CompactStates`), for a handler that mints
and verifies its own `requestState` (a lowlevel `Server` without a
boundary), and single-use rounds:

    store = RedisReplayStore(os.environ["REQSTATE_REPLAY_STORE"])
    binding = states.binding("increase-counter", arguments, principal)
    token = codec.mint(binding, "confirm", {"current": 10, "amount": 5}, single_use=True).token
    ...
    verified = await anyio.to_thread.run_sync(
        lambda: codec.consume(token, binding, store, expected_step="confirm"))

`InProcessCodec` sees only the SDK's sealed bytes and cannot make a round
single-use.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Literal, NoReturn, TypeVar


def _sdk_missing(error: ImportError) -> ImportError:
    """What to do when the SDK is absent or another major version."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = f"mcp {version('mcp')} is installed"
        except PackageNotFoundError:
            found = "mcp is not installed"
    except ImportError:  # pragma: no cover - importlib.metadata is in every supported Python
        found = "mcp could not be inspected"
    return ImportError(
        f"reqstate.mcp needs the official MCP SDK for Python, mcp>=2.3.0,<3 (protocol 2026-07-28), and "
        f"{found} ({error}): pip install 'reqstate[mcp]' (or pip install 'mcp>=2.3.0,<3')"
    )


try:
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.provider import principal_components
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.request_state import InvalidRequestState
    from mcp.server.request_state import RequestStateBoundary as SDKRequestStateBoundary
    from mcp.shared.exceptions import MCPError
    from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, InputRequiredResult
    from mcp_types.methods import INPUT_REQUIRED_METHODS, is_input_required
except ImportError as _missing:
    raise _sdk_missing(_missing) from None

from ._errors import InvalidArgument, MintRefused, ReqstateError, TokenRefused
from ._native import Binding, Codec, Keyring, Verified

__all__ = [
    "DEFAULT_AAD",
    "MAX_STEP_LEN",
    "MAX_TOKEN_LEN",
    "SUPPORTED_SDK",
    "CompactStates",
    "InProcessCodec",
    "NoSubject",
    "Refusal",
    "RequestStateBoundary",
    "Round",
    "bind",
    "current_round",
    "default_principal",
    "invalid_request_state",
    "log_name",
    "step_of",
    "unanswered",
]

DEFAULT_AAD = b"reqstate/mcp-python-sdk/request-state/v1"
"""The associated data every `InProcessCodec` token is bound to unless `aad=`
says otherwise (the same as `reqstate_client.mcp.DEFAULT_AAD`)."""

MAX_TOKEN_LEN = 1024 * 1024
"""The longest token the core makes or reads, in characters (the core's
`Policy::MAX_MAX_TOKEN_LEN`): `InProcessCodec` and a `RequestStateBoundary`
built from a `Keyring` use it, so they seal what the SDK's own codec seals
(a payload up to about 786 000 bytes)."""

MAX_STEP_LEN = 256
"""The format's longest step, in UTF-8 bytes: a round whose asked keys are
longer as a JSON array gets the `sha256:` form (`step_of`)."""

SUPPORTED_SDK = "mcp>=2.3.0,<3"
"""The SDK versions whose server middleware seam `bind` knows."""

FROZEN_MESSAGE = "Invalid or expired requestState"

logger = logging.getLogger(__name__)
refusal_logger = logging.getLogger("reqstate")
"""Refusals are logged here, one WARNING line each:
`reqstate refused <method> <tool>: <reason>: <message>`, the tool as
`log_name` writes it."""

MAX_LOGGED_NAME = 64
"""The most code points of a client-supplied name a log line carries."""


def log_name(name: str) -> str:
    """A name the client chose (a tool's `params.name`, a resource's
    `params.uri`) as a refusal's log line and message write it
    (tests/vectors/mcp_log_names.json, the same text as the TypeScript
    drop-in): its first 64 code points in double quotes, `"` and `\\`
    escaped with a backslash, printable ASCII as itself and every other
    character as `\\u` and four lowercase hex digits (beyond U+FFFF its
    surrogate pair), then `...(N characters)` when it is longer. The result
    is printable ASCII: the middleware runs before the SDK validates the
    request, so a newline or a terminal escape in a name must not reach the
    log, nor a megabyte of it."""
    out = ['"']
    for char in name[:MAX_LOGGED_NAME]:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code <= 0x7E:
            out.append(char)
        elif code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    out.append('"')
    if len(name) > MAX_LOGGED_NAME:
        out.append(f"...({len(name)} characters)")
    return "".join(out)


class NoSubject(InvalidArgument):
    """The caller's access token names a client but no subject (user), so
    the default principal cannot tell two users of that client apart: the
    round is refused rather than bound to the client alone."""

    def __init__(self) -> None:
        super().__init__(
            "invalid_argument",
            "the access token names no subject (its token verifier sets no AccessToken.subject), so the "
            "round cannot be bound to the user: every user of the OAuth client would share it. Make the token "
            "verifier set subject, or pass RequestStateBoundary(principal=...) to choose the caller "
            "(e.g. a function returning the token's client_id, to bind the client knowingly).",
        )


def default_principal(ctx: ServerRequestContext[Any, Any]) -> str:
    """The principal a `RequestStateBoundary` binds without `principal=`
    (docs/MCP.md, tests/vectors/mcp_principals.json; the same string as the
    TypeScript drop-in for the same caller): `null` without an access token,
    else the compact JSON array `[client_id, issuer, subject]` of the SDK's
    `principal_components` (byte for byte the SDK's `authenticated_principal`),
    which no unauthenticated call and no custom principal can equal.

    Raises `NoSubject` for a token without a subject."""
    del ctx  # the SDK keeps the caller in a context variable, not in ctx
    token = get_access_token()
    if token is None:
        return "null"
    client_id, issuer, subject = principal_components(token)
    if subject is None:
        raise NoSubject()
    return json.dumps([client_id, issuer, subject], separators=(",", ":"))


def _sdk_default_names() -> frozenset[str]:
    """The names a server gets when it is given none: "" and the SDK's
    default (`MCPServer`'s `name` parameter, "mcp-server" in mcp 2.x)."""
    names = {"", "mcp-server"}
    try:
        import inspect

        from mcp.server.mcpserver import MCPServer

        default = inspect.signature(MCPServer.__init__).parameters["name"].default
        if isinstance(default, str):
            names.add(default)
    except Exception:  # noqa: BLE001 - another SDK layout: the known names stand
        pass
    return frozenset(names)


_UNNAMED = _sdk_default_names()


def _sealed_algorithm(token: str) -> str | None:
    """The algorithm a token's header byte names (FORMAT.md §3: its low two
    bits, 1 hmac-sha256, 2 xchacha20-poly1305), from the token itself."""
    try:
        header = base64.urlsafe_b64decode(token[:4])[0]
    except (ValueError, IndexError):
        return None
    return {1: "hmac-sha256", 2: "xchacha20-poly1305"}.get(header & 0x03)


def _mint_order(keyring: Keyring) -> list[tuple[int, str, bool]]:
    """The keys that mint from now on, as (id, algorithm, minting now): the one minting
    now and every key scheduled to take over later (`mint_from` after now),
    all at one clock reading (two readings would miss a key whose
    `mint_from` falls between them). A key whose turn has passed is not
    among them: a keyring that moved from an HMAC key to an encrypting one
    on a schedule keeps the old key to verify."""
    now = math.floor(time.time())
    order: list[tuple[int, str, bool]] = []
    for key in keyring.keys():
        minting = keyring.status_at(key.id, now) == "primary"
        if minting or (key.mint_from is not None and key.mint_from > now):
            order.append((key.id, key.algorithm, minting))
    return order


def _refuse_readable(keyring: Keyring, what: str) -> None:
    """Raises when a key of the mint order is integrity-only (hmac-sha256).
    Every scheduled successor counts, not only the primary at this reading:
    the seal reads the clock again, and at a hand-over instant it would
    mint under the successor."""
    for key_id, algorithm, minting in _mint_order(keyring):
        if algorithm == "hmac-sha256":
            which = "primary key" if minting else "key scheduled to mint (mint_from)"
            raise InvalidArgument(
                "invalid_argument",
                f"{what}: the keyring's {which} {key_id} is hmac-sha256, which only signs: the SDK's "
                "requestState envelope (the handler's state, the tool, the argument digest) would be readable "
                "by the client, where the SDK's own codec encrypts it. Make every key that mints, or is "
                "scheduled to, xchacha20-poly1305, or pass allow_readable=True to accept readable states.",
            )


class InProcessCodec:
    """An `mcp.server.request_state.RequestStateCodec` on the linked core:
    `seal` and `unseal` cost microseconds and never leave the process.

    `codec` is a `reqstate.Codec` or a `Keyring`. Only its keyring is used:
    the codec seals and opens with its own policy, whose `max_token_len` is
    `max_token_len` (default `MAX_TOKEN_LEN`, 1 MiB: a payload up to about
    786 000 bytes, so the SDK's states of 100 kB and more seal). A payload
    over it raises `MintRefused("too_large", ...)` naming the sizes (the SDK
    logs it and answers `-32603`). Rotation is the keyring's:
    `keyring.reload()`, or `Keyring.from_file(..., auto_reload=True)`.

    An integrity-only key (`hmac-sha256`) that mints, or is scheduled to
    (`mint_from`), is refused, here and at every seal (a reload can bring
    one), and a seal that went out under one anyway (a reload between the
    check and the seal) is discarded and refused: the SDK's codec encrypts,
    and an HMAC token leaves the envelope readable by the client. Pass
    `allow_readable=True` to accept that.

    What does nothing under the SDK's envelope: the `Codec`'s `clock_leeway`
    and `max_lifetime` (a sealed envelope has no expiry of its own: the SDK
    checks its `exp` claim against its `RequestStateSecurity(ttl=...)`, with
    60 s of leeway for `iat` only), steps and `expected_step` (the SDK does
    not bind rounds to steps), and single-use tokens. The compact
    `RequestStateBoundary` has all of them.
    """

    def __init__(
        self,
        codec: Codec | Keyring,
        *,
        aad: bytes = DEFAULT_AAD,
        allow_readable: bool = False,
        max_token_len: int = MAX_TOKEN_LEN,
    ) -> None:
        if isinstance(codec, Codec):
            keyring = codec.keyring
        elif isinstance(codec, Keyring):
            keyring = codec
        else:
            raise TypeError("InProcessCodec takes a reqstate.Codec or a reqstate.Keyring")
        if not isinstance(aad, bytes | bytearray):
            raise TypeError(f"aad must be bytes or bytearray, not {type(aad).__name__}")
        self.allow_readable = bool(allow_readable)
        if not self.allow_readable:
            _refuse_readable(keyring, "InProcessCodec")
        self.codec = Codec(keyring, max_token_len=max_token_len)
        """The codec that seals: the keyring given, `max_token_len` as given."""
        self.aad = bytes(aad)
        self.last_key_id: int | None = None
        """The key id of the last successful seal or unseal (for logs and tests)."""

    def seal(self, payload: bytes) -> str:
        """`payload` sealed under the primary key, bound to `aad`.

        Raises:
            InvalidArgument: a key that mints or is scheduled to (after a
                reload) is hmac-sha256, or the seal was made under one, and
                `allow_readable` is not set.
            MintRefused: the payload is too large (`too_large`: the sizes and
                the limit in the message); the SDK answers -32603 and logs it.
        """
        if not self.allow_readable:
            # Checked at every seal: a reload, or a schedule (mint_from), can
            # make another key primary.
            _refuse_readable(self.codec.keyring, "InProcessCodec.seal")
        try:
            sealed = self.codec.seal(bytes(payload), self.aad)
        except MintRefused as refused:
            if refused.reason != "too_large":
                raise
            raise MintRefused(
                "too_large",
                f"the SDK's requestState envelope is {len(payload)} bytes; sealed, {refused.message} "
                f"(InProcessCodec(max_token_len=...), at most {MAX_TOKEN_LEN})",
            ) from None
        if not self.allow_readable and _sealed_algorithm(sealed.token) != "xchacha20-poly1305":
            # The check above and the seal read the keyring (and the clock)
            # apart, and a reload can change a key's algorithm under the same
            # id: what counts is the token that was produced, whose header
            # names the algorithm it was sealed with (FORMAT.md §3).
            raise InvalidArgument(
                "invalid_argument",
                f"InProcessCodec.seal: the payload was sealed under key {sealed.key_id}, which is not "
                "xchacha20-poly1305 (the keyring changed during the seal); the readable token was discarded. "
                "Make every key that mints, or is scheduled to, xchacha20-poly1305.",
            )
        self.last_key_id = sealed.key_id
        return sealed.token

    def unseal(self, token: str) -> bytes:
        """The payload `seal` sealed.

        Raises:
            InvalidRequestState: malformed, altered, under an unknown, retired
                or foreign key, another aad; the message is the reason name.
        """
        if not isinstance(token, str) or not token:
            raise InvalidRequestState("malformed")
        try:
            opened = self.codec.unseal(token, self.aad)
        except TokenRefused as refused:
            raise InvalidRequestState(refused.reason) from None
        except Exception as error:  # fail closed on anything unexpected
            logger.exception("requestState unseal failed closed")
            raise InvalidRequestState("codec error") from error
        self.last_key_id = opened.key_id
        return opened.payload


def invalid_request_state(reason: str) -> MCPError:
    """The SDK's own answer to a state that does not open: `-32602` with the
    frozen message; the reason is for the log only."""
    logger.warning("requestState rejected: %s", reason)
    return _frozen_error()


def _frozen_error() -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=FROZEN_MESSAGE, data={"reason": "invalid_request_state"})


# ------------------------------------------------------------------ the step of a round


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def step_of(keys: Iterable[str]) -> str:
    """The step of a round that asked for input under `keys` (docs/MCP.md,
    "The step of a round", the same bytes as the TypeScript drop-in): the
    compact JSON array of the distinct keys sorted by their UTF-8 bytes, or
    `sha256:` + base64url(SHA-256 of that text) when it is longer than
    `MAX_STEP_LEN` (256) UTF-8 bytes. `[]` for no keys.

    Raises `InvalidArgument` for a key that is not a string or has a lone
    surrogate (it has no UTF-8 form).
    """
    encoded: dict[bytes, str] = {}
    for key in keys:
        if not isinstance(key, str):
            raise InvalidArgument("invalid_argument", f"an input request key must be a string, not {type(key).__name__}")
        try:
            encoded[key.encode("utf-8")] = key
        except UnicodeEncodeError:
            raise InvalidArgument("invalid_argument", "an input request key has a lone surrogate") from None
    text = "[" + ",".join(json.dumps(encoded[k], ensure_ascii=False) for k in sorted(encoded)) + "]"
    data = text.encode("utf-8")
    if len(data) <= MAX_STEP_LEN:
        return text
    return "sha256:" + _b64url(hashlib.sha256(data).digest())


def _asked_keys(step: str) -> list[str] | None:
    """The keys a step names, or None for a `sha256:` step (or a step this
    rule did not make: minted by hand)."""
    if not step.startswith("["):
        return None
    try:
        keys = json.loads(step)
    except ValueError:
        return None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        return None
    return keys


# ------------------------------------------------------------------ the compact boundary


@dataclass(frozen=True)
class Round:
    """What the boundary found about this request's round (`current_round()`).

    `asked`: the keys the verified token's round asked for (None under a
    `sha256:` step, which cannot be read back). `unanswered`: those of them
    with no answer in `inputResponses` (None when `asked` is None and the
    answers' keys do not make the step). `complete`: every asked key
    answered.
    """

    step: str
    asked: tuple[str, ...] | None
    unanswered: tuple[str, ...] | None
    complete: bool


@dataclass(frozen=True)
class Refusal:
    """One refused `requestState`, as the `on_refusal` hook receives it:
    `reason` is the format's reason name (docs/CLI.md, "Reasons"), `message`
    what it can mean for this call, the tool in it as `log_name` writes it;
    never the state, the arguments or the principal. `tool` is the name (or
    uri) exactly as the client sent it, unchecked: write it with `log_name`
    wherever it goes into a log."""

    reason: str
    message: str
    method: str
    tool: str

    def line(self) -> str:
        """The operator's log line."""
        return f"reqstate refused {self.method} {log_name(self.tool)}: {self.reason}: {self.message}"


_ROUND: ContextVar[Round | None] = ContextVar("reqstate_mcp_round", default=None)


def current_round() -> Round | None:
    """The round of the request being handled: None on a first round (no
    `requestState` came in) or outside a `RequestStateBoundary`."""
    return _ROUND.get()


def unanswered() -> list[str] | None:
    """The keys this request's verified state asked for that its
    `inputResponses` do not answer: `[]` when the round is complete (or a
    first round); None when the round is incomplete under a `sha256:` step
    (asked keys over 256 bytes), whose keys cannot be named: ask again for
    the keys your state says you asked."""
    found = _ROUND.get()
    if found is None or found.complete:
        return []
    return None if found.unanswered is None else list(found.unanswered)


_MESSAGES = {
    "authentication_failed": (
        "the token does not verify for {method} {tool} as called (its tool, arguments, method, principal "
        "or audience differ from the minting call, or it was altered)"
    ),
    "expired": 'the token for {method} {tool} has expired (its lifetime plus the clock leeway has passed)',
    "not_yet_valid": 'the token for {method} {tool} was issued in the future (clocks further apart than the leeway)',
    "unknown_key": 'the token for {method} {tool} names a key this keyring does not have',
    "retired_key": 'the token for {method} {tool} was minted under a retired key',
    "wrong_step": 'the token for {method} {tool} asked for other input than this request answers',
    "malformed": 'the requestState of {method} {tool} is not a reqstate token',
}

ServerT = TypeVar("ServerT")
PrincipalOf = Callable[[ServerRequestContext[Any, Any]], "str | None"]
"""A custom caller: a string names it (bound as a JSON string), None is
no authenticated caller (bound as `null`, as `default_principal` binds an
unauthenticated call)."""


class RequestStateBoundary:
    """A server middleware that replaces the SDK's `RequestStateBoundary`
    with reqstate's compact tokens (docs/MCP.md). Install it with
    `bind(server)` (or `reqstate.mcp.bind(server, keyring)`).

    - `codec`: a `Keyring` (the boundary makes a `Codec` with
      `max_token_len=MAX_TOKEN_LEN`, `clock_leeway` and `max_lifetime`) or a
      `Codec` (its policy is used as it is: its default `max_token_len` of
      8192 holds states up to about 6 000 characters).
    - `audience`: this server's identity; default the name of the server it
      is bound to (as the SDK's boundary).
    - `ttl`: seconds a round's token lives (default 600, the SDK's); over
      the codec's `max_lifetime` raises here. A token is accepted until
      `ttl + clock_leeway` (default 60 s: replicas' clocks differ; the SDK
      has none for `exp`).
    - `principal(ctx)`: the caller, as a string or None for no
      authenticated caller; bound as its compact JSON (`"alice"`, `null`).
      Default `default_principal`: `[client_id, issuer, subject]` of the
      access token, `null` without one, and a token without a subject is
      refused (`NoSubject`) rather than bound to its client alone.
    - `incomplete`: `"ask-again"` (default: the handler runs with its state
      and `unanswered()`) or `"refuse"` (`wrong_step`).
    - `on_refusal(Refusal)`: called for each refusal, after the log line
      (its exceptions are logged and swallowed).
    """

    def __init__(
        self,
        codec: Codec | Keyring,
        *,
        audience: str | None = None,
        ttl: int = 600,
        principal: PrincipalOf | None = None,
        incomplete: Literal["ask-again", "refuse"] = "ask-again",
        on_refusal: Callable[[Refusal], None] | None = None,
        clock_leeway: int = 60,
        max_lifetime: int = 86400,
    ) -> None:
        if isinstance(codec, Keyring):
            codec = Codec(codec, max_token_len=MAX_TOKEN_LEN, clock_leeway=clock_leeway, max_lifetime=max_lifetime)
        if not isinstance(codec, Codec):
            raise TypeError("RequestStateBoundary takes a reqstate.Codec or a reqstate.Keyring")
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
            raise InvalidArgument("invalid_argument", f"ttl must be a whole number of seconds >= 1, got {ttl!r}")
        if ttl > codec.max_lifetime:
            raise InvalidArgument(
                "invalid_argument",
                f"ttl {ttl} s is over the codec's max_lifetime of {codec.max_lifetime} s: every round would fail",
            )
        if incomplete not in ("ask-again", "refuse"):
            raise InvalidArgument("invalid_argument", f"incomplete must be 'ask-again' or 'refuse', got {incomplete!r}")
        if audience is not None and (not isinstance(audience, str) or not audience):
            raise InvalidArgument("invalid_argument", "audience must be a non-empty string")
        self.codec = codec
        self.audience = audience
        self.ttl = ttl
        self.principal = principal
        self.incomplete = incomplete
        self.on_refusal = on_refusal

    def bind(self, server: ServerT) -> ServerT:
        """Installs this boundary on `server` (an `MCPServer` or a lowlevel
        `Server`) and returns it: on `MCPServer` in place of the SDK's
        `RequestStateBoundary` (same position: inside OpenTelemetry, outside
        user middleware), on a lowlevel `Server` in place of one appended
        there, else right after the SDK's OpenTelemetry middleware. Without
        an `audience`, a copy bound to the server's name is installed.

        Raises `TypeError` for an object without the SDK's middleware list,
        `RuntimeError` when an `MCPServer` has no SDK boundary to replace
        (not a supported SDK) or the server already has a reqstate boundary.
        """
        middleware = getattr(server, "middleware", None)
        name = getattr(server, "name", None)
        if not isinstance(middleware, list) or not isinstance(name, str):
            raise TypeError(
                f"bind() takes the SDK's MCPServer or lowlevel Server ({SUPPORTED_SDK}), "
                f"got {type(server).__name__} without a middleware list"
            )
        chain: list[Any] = middleware
        if any(isinstance(m, RequestStateBoundary) for m in chain):
            raise RuntimeError("this server already has a reqstate RequestStateBoundary")
        if self.audience is None and name in _UNNAMED:
            raise InvalidArgument(
                "invalid_argument",
                f"bind(): the server has no name of its own ({name!r}, the SDK's default, which every unnamed "
                "server shares) to bind its rounds to, so two such services sharing a keyring would accept "
                "each other's rounds: name it, MCPServer(\"counter\"), or pass audience=\"<this service>\"",
            )
        installed = self if self.audience is not None else self._with_audience(name)
        sdk = [i for i, m in enumerate(chain) if isinstance(m, SDKRequestStateBoundary)]
        if len(sdk) > 1:
            raise RuntimeError("the server has several SDK RequestStateBoundary middlewares: bind() replaces one")
        if sdk:
            chain[sdk[0]] = installed
        elif _is_mcpserver(server):
            raise RuntimeError(
                "MCPServer has no SDK RequestStateBoundary in its middleware to replace: "
                f"this SDK is not one bind() supports ({SUPPORTED_SDK})"
            )
        else:
            at = 0
            for i, m in enumerate(chain):
                if type(m).__name__ == "OpenTelemetryMiddleware":
                    at = i + 1
            chain.insert(at, installed)
        return server

    def _with_audience(self, audience: str) -> RequestStateBoundary:
        copy = object.__new__(RequestStateBoundary)
        copy.__dict__.update(self.__dict__)
        copy.audience = audience
        return copy

    # -- the middleware

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method not in INPUT_REQUIRED_METHODS:
            return await call_next(ctx)
        if self.audience is None:
            raise RuntimeError("RequestStateBoundary without an audience: install it with bind(server)")
        params: Mapping[str, Any] = ctx.params or {}
        tool = _tool_of(ctx.method, params)
        binding: Binding | None = None
        found: Round | None = None
        wire = params.get("requestState")
        if wire is not None:  # an explicit JSON null counts as absent, as in the SDK
            binding, verified = self._verify(ctx, tool, wire)
            found = self._round(verified.step, params.get("inputResponses"))
            if not found.complete and self.incomplete == "refuse":
                self._refuse(ctx.method, tool, "wrong_step", None)
            new_params = dict(params)
            new_params["requestState"] = _plaintext(verified.state)
            responses = params.get("inputResponses")
            if found.asked is not None and isinstance(responses, Mapping):
                # Answers under keys this round did not ask are ignored (SEP-2322).
                new_params["inputResponses"] = {k: v for k, v in responses.items() if k in found.asked}
            ctx = replace(ctx, params=new_params)
        token = _ROUND.set(found)
        try:
            result = await call_next(ctx)
        finally:
            _ROUND.reset(token)
        return self._mint_result(ctx, tool, binding, result)

    def _binding(self, ctx: ServerRequestContext[Any, Any], tool: str) -> Binding:
        params: Mapping[str, Any] = ctx.params or {}
        arguments: Any = {} if ctx.method == "resources/read" else params.get("arguments")
        return Binding.for_call(
            tool, self._principal(ctx), self.audience or "", ctx.method, {} if arguments is None else arguments
        )

    def _principal(self, ctx: ServerRequestContext[Any, Any]) -> str:
        if self.principal is None:
            return default_principal(ctx)
        chosen = self.principal(ctx)
        if chosen is not None and not isinstance(chosen, str):
            raise InvalidArgument("invalid_argument", f"principal() returned {type(chosen).__name__}, not str or None")
        # As JSON, a chosen "null" or "[...]" is a string: it never equals the
        # default's null or array.
        return json.dumps(chosen, separators=(",", ":"))

    def _verify(self, ctx: ServerRequestContext[Any, Any], tool: str, wire: Any) -> tuple[Binding, Verified]:
        if not isinstance(wire, str):
            self._refuse(ctx.method, tool, "malformed", None)
        try:
            binding = self._binding(ctx, tool)
            return binding, self.codec.verify(wire, binding)
        except ReqstateError as refused:
            self._refuse(ctx.method, tool, refused.reason, refused.message)
        except Exception:  # deny on error: a raising principal() fails closed
            logger.exception("requestState verification raised on %s", ctx.method)
            self._refuse(ctx.method, tool, "invalid_argument", "the call context could not be made")

    def _round(self, step: str, responses: Any) -> Round:
        answered = set(responses) if isinstance(responses, Mapping) else set()
        asked = _asked_keys(step)
        if asked is None:
            try:
                complete = step_of(k for k in answered if isinstance(k, str)) == step
            except InvalidArgument:  # an answer key without UTF-8: not this round's
                complete = False
            return Round(step, None, () if complete else None, complete)
        missing = tuple(k for k in asked if k not in answered)
        return Round(step, tuple(asked), missing, not missing)

    def _refuse(self, method: str, tool: str, reason: str, detail: str | None) -> NoReturn:
        template = _MESSAGES.get(reason)
        if template is not None:
            message = template.format(method=method, tool=log_name(tool))
        else:
            message = detail or reason
        refusal = Refusal(reason=reason, message=message, method=method, tool=tool)
        refusal_logger.warning("%s", refusal.line())
        if self.on_refusal is not None:
            try:
                self.on_refusal(refusal)
            except Exception:
                logger.exception("the on_refusal hook raised (ignored)")
        raise _frozen_error()

    def _mint_result(
        self, ctx: ServerRequestContext[Any, Any], tool: str, binding: Binding | None, result: HandlerResult
    ) -> HandlerResult:
        if not is_input_required(result):
            return result
        if isinstance(result, InputRequiredResult):
            state: Any = result.request_state
            asked: Any = result.input_requests or {}
        else:  # the wire mapping (is_input_required admits only these two)
            state = result.get("requestState")
            asked = result.get("inputRequests") or {}
        if state is not None and not isinstance(state, str):
            return result  # only a short-circuiting middleware puts a non-string here, as in the SDK
        try:
            step = step_of(asked.keys() if isinstance(asked, Mapping) else ())
        except InvalidArgument as error:  # the handler's own keys
            refusal_logger.error("reqstate could not mint %s %s: %s", ctx.method, log_name(tool), error)
            raise MCPError(code=INTERNAL_ERROR, message="Internal error") from None
        try:
            if binding is None:
                binding = self._binding(ctx, tool)
            token = self.codec.mint(binding, step, state, ttl=self.ttl).token
        except ReqstateError as error:
            refusal_logger.error(
                "reqstate could not mint %s %s: %s: %s", ctx.method, log_name(tool), error.reason, error.message
            )
            if isinstance(error, InvalidArgument):
                raise MCPError(code=INVALID_PARAMS, message=f"Invalid params: {error.message}") from None
            raise MCPError(code=INTERNAL_ERROR, message="Internal error") from None
        if isinstance(result, InputRequiredResult):
            return result.model_copy(update={"request_state": token})
        return {**result, "requestState": token}


def _is_mcpserver(server: object) -> bool:
    from mcp.server.mcpserver import MCPServer

    return isinstance(server, MCPServer)


def _tool_of(method: str, params: Mapping[str, Any]) -> str:
    value = params.get("uri") if method == "resources/read" else params.get("name")
    return value if isinstance(value, str) else ""


def _plaintext(state: Any) -> str | None:
    """The handler's state as the SDK hands it: a string. A state minted by
    another implementation as a JSON value (the TypeScript drop-in) is its
    compact JSON text."""
    if state is None or isinstance(state, str):
        return state
    if isinstance(state, bytes):
        return state.decode("utf-8", "surrogateescape")
    return json.dumps(state, ensure_ascii=False, separators=(",", ":"))


def bind(server: ServerT, codec: Codec | Keyring, **options: Any) -> ServerT:
    """`RequestStateBoundary(codec, **options).bind(server)`: the one line.

        server = reqstate.mcp.bind(MCPServer("counter-server"), keyring)
    """
    return RequestStateBoundary(codec, **options).bind(server)


# ------------------------------------------------------------------ tokens by hand


class CompactStates:
    """reqstate's compact, step-bound tokens as a handler's `requestState`,
    minted and verified by the handler itself.

    For a handler that owns its state (the SDK's lowlevel `Server` without
    a boundary, whose `on_call_tool` receives `params.request_state` as the
    client sent it), and for single-use rounds. Each token is bound to the
    tool, the caller's principal, `audience` (this server), the method and
    the exact arguments, and to the step it was minted for:
    `open(..., expected_step=...)` refuses a token from another round.

        states = CompactStates(Codec(keyring), audience="counter-server")
        token = states.mint("increase-counter", arguments, "confirm", {"current": 10, "amount": 5})
        ...
        verified = states.open(params.request_state, "increase-counter", arguments, expected_step="confirm")
    """

    def __init__(self, codec: Codec, audience: str, *, ttl: int = 600, method: str = "tools/call") -> None:
        self.codec = codec
        self.audience = audience
        self.ttl = ttl
        self.method = method

    def binding(self, tool: str, arguments: Any, principal: str = "") -> Binding:
        """The tool and call context a token of this call is bound to.

        `arguments` are the parsed arguments (a `str` is a JSON string, not
        JSON text: for the text as received, build the binding with
        `Binding(tool, call_context_from_text(...))`); `principal` the
        authenticated caller (empty for none, e.g. stdio)."""
        return Binding.for_call(tool, principal, self.audience, self.method, arguments)

    def mint(
        self, tool: str, arguments: Any, step: str, state: Any, *, principal: str = "", ttl: int | None = None
    ) -> str:
        """A token for the next round: `state` (JSON-compatible, or bytes)
        for `step`, valid `ttl` seconds (default the instance's)."""
        binding = self.binding(tool, arguments, principal)
        return self.codec.mint(binding, step, state, ttl=self.ttl if ttl is None else ttl).token

    def open(
        self,
        token: str | None,
        tool: str,
        arguments: Any,
        *,
        expected_step: str | None = None,
        principal: str = "",
    ) -> Verified | None:
        """The verified contents of `token`, or None when there is none (the
        first round). Raises the SDK's `-32602` `MCPError` for any token that
        does not verify: altered, expired, for another tool, step, caller,
        server or arguments, under a retired or unknown key."""
        if token is None:
            return None
        try:
            binding = self.binding(tool, arguments, principal)
            return self.codec.verify(token, binding, expected_step=expected_step)
        except ReqstateError as refused:
            raise invalid_request_state(refused.reason) from None
