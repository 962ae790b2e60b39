"""A spent-token store in Redis (or Valkey) for single-use tokens across a
fleet (FORMAT.md §5.1, §8 step 15), over redis-py (the `reqstate[redis]`
extra). Needs Redis >= 7.0 (SET with both NX and GET).

    from reqstate import Codec, Keyring
    from reqstate.redis import RedisReplayStore

    store = RedisReplayStore("redis://reqstate:secret@redis:6379/0")
    verified = codec.consume(token, binding, store, expected_step="confirm")

Every Redis store of reqstate follows one rule (the sidecar in Rust, the
TypeScript package, this module), so that they share one Redis:

- the record of a token is `<prefix>spent:v1:<key id>:<token id hex>`, the
  prefix `reqstate:` by default;
- one command per consume, `SET <name> <attempt> NX GET PX <lifetime_ms>`,
  `<attempt>` 16 fresh random bytes in lowercase hex: nil means this call
  recorded it (accepted); `<attempt>` back means a retry of this store's own
  earlier attempt recorded it (accepted); anything else, replayed;
- the lifetime is relative to Redis's clock (never an absolute PXAT from
  this clock): `(expires_at + 600 - now) * 1000 + 2 * max_skew_ms`, at
  least 1000, so that the record outlives the token on every verifier,
  whatever its leeway (at most 600 s), while every verifier's clock is
  within `max_skew_ms` of Redis's; `now` is the earlier of the consume's
  `now=` and this store's `clock`, so that an injected `now=` ahead of the
  clock the guard checked cannot shorten the record;
- consumes are refused (`replay_store_unavailable`) while this clock and
  Redis's `TIME` disagree by more than `max_skew_ms`;
- a consume whose outcome is unknown (timed out, connection lost: the SET
  may have been recorded) is refused and its attempt remembered, so that
  retrying it through this same store object is accepted once if it was.
"""

from __future__ import annotations

import logging
import math
import os
import re
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as missing:  # pragma: no cover - the extra is not installed
    raise ImportError("reqstate.redis needs redis-py: pip install 'reqstate[redis]'") from missing

from ._errors import TokenRefused
from ._native import SpentRecord

__all__ = [
    "DEFAULT_PREFIX",
    "MAX_CLOCK_LEEWAY",
    "PENDING_CAPACITY",
    "ClockSkew",
    "RedisReplayStore",
    "record_lifetime_ms",
    "redact_url",
]

DEFAULT_PREFIX = "reqstate:"
"""The default record name prefix, the same in every implementation."""
MAX_CLOCK_LEEWAY = 600
"""The largest `clock_leeway` any verifier may have (FORMAT.md §8), seconds."""
PENDING_CAPACITY = 10_000
"""Consumes of unknown outcome remembered at most, for their retry."""
CLOCK_RECHECK_AFTER = 10.0
"""Redis `TIME` is read again before a consume once the last reading is older (s)."""
CLOCK_STEP = 0.1
"""A step of the wall clock (against the monotonic one) larger than this (s) makes it read again."""
_MAX_LIFETIME_MS = 10**15
_SCHEMES = ("redis", "rediss", "unix")
# Redis's `OOM` error reply (redis-py >= 4.3 has a class for it).
_OUT_OF_MEMORY: tuple[type[Exception], ...] = tuple(
    c for c in [getattr(redis.exceptions, "OutOfMemoryError", None)] if isinstance(c, type)
)

logger = logging.getLogger(__name__)


def record_lifetime_ms(expires_at: int, now: int, max_skew_ms: int) -> int:
    """How long Redis keeps the record of a token expiring at `expires_at`,
    recorded by a verifier whose clock read `now` (unix seconds), in
    milliseconds relative to Redis's clock: `(expires_at + 600 - now) * 1000
    + 2 * max_skew_ms`, at least 1000.

    Each verifier accepts the token until its own clock passes `expires_at`
    plus its own leeway (at most 600 s); the record outlives that on every
    verifier whose clock is within `max_skew_ms` of Redis's, in either
    direction (hence twice)."""
    ms = (expires_at + MAX_CLOCK_LEEWAY - now) * 1000 + 2 * max_skew_ms
    return max(1000, min(ms, _MAX_LIFETIME_MS))


# ------------------------------------------------------------------ URLs

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&;](?:pass|password)=)([^&;#]*)", re.IGNORECASE)


def redact_url(url: str) -> str:
    """`url` with its passwords replaced by `***`: the user-info's
    (`redis://user:***@host`, `redis://***@host`) and any `pass` or
    `password` query parameter's. For messages and logs.

    The query's password goes first (its value may hold an `@`); the
    user-info ends at the last `@`, so a password holding `/`, `?` or `@` is
    hidden whole."""
    out = _QUERY_PASSWORD.sub(lambda m: m.group(1) + "***", url)
    scheme = _SCHEME.match(out)
    if scheme is None:
        return out
    rest = out[scheme.end() :]
    at = rest.rfind("@")
    if at < 0:
        return out
    user, colon, _ = rest[:at].partition(":")
    shown = f"{user}:***" if colon else "***"
    return scheme.group(0) + shown + rest[at:]


def _passwords_of(url: str) -> list[str]:
    """Every password `url` holds, as written and percent-decoded, longest first."""
    found: set[str] = {m.group(2) for m in _QUERY_PASSWORD.finditer(url)}
    scheme = _SCHEME.match(url)
    if scheme is not None:
        rest = _QUERY_PASSWORD.sub("", url)[scheme.end() :]
        at = rest.rfind("@")
        if at >= 0:
            user, colon, password = rest[:at].partition(":")
            found.add(password if colon else user)
    every = {p for p in found if p} | {unquote(p) for p in found if p}
    return sorted(every, key=len, reverse=True)


def _redactor(url: str | None) -> Callable[[str], str]:
    """Hides `url`'s passwords in any text (the URL itself shown redacted)."""
    if url is None:
        return lambda text: text
    shown = redact_url(url)
    secrets_in_url = _passwords_of(url)

    def redact(text: str) -> str:
        text = text.replace(url, shown)
        for secret in secrets_in_url:
            text = text.replace(secret, "***")
        return text

    return redact


# ---------------------------------------------------------------- clocks


@dataclass(frozen=True)
class ClockSkew:
    """One reading of the clock here against Redis's `TIME`."""

    skew_ms: float
    """The clock here minus Redis's, in milliseconds: positive when the clock here is ahead."""
    uncertainty_ms: float
    """Half the round trip of `TIME`: the true skew is within `skew_ms ± uncertainty_ms`."""
    max_skew_ms: int
    """The limit."""
    within_limit: bool
    """`|skew_ms| + uncertainty_ms <= max_skew_ms`: consumes are allowed."""


@dataclass(frozen=True)
class _Reading:
    skew: ClockSkew
    at: float
    """monotonic() when read"""
    offset: float
    """clock() - monotonic() when read: a change means the wall clock stepped"""


# ----------------------------------------------------------------- store

# Stores whose pending attempts a forked child must forget (the parent may
# retry them: two processes must never both accept one token).
_STORES: weakref.WeakSet[RedisReplayStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class RedisReplayStore:
    """Spent-token records in Redis, shared by every verifier that uses the
    same Redis and prefix (the `reqstate` sidecars and the TypeScript
    package's Redis store included). Pass it to `Codec.consume` wherever a
    `MemoryReplayStore` goes.

    `client` is a redis-py `Redis` client or a URL (`redis://[user:password@]host:port[/db]`,
    `rediss://...` for TLS, `unix:///path/redis.sock`), from which the store
    makes its own client with `timeout` (seconds) as its socket timeouts and
    no automatic retry; a client given keeps its own `socket_timeout` (it
    must have one). `max_skew_ms`: how far this clock may be from Redis's
    before consumes are refused; every verifier sharing the Redis must use
    the same value. `clock` (unix seconds, default `time.time`) must be the
    clock the codec reads, and `monotonic` a monotonic clock (for tests).

    Needs Redis >= 7.0. Credentials never reach messages or logs: a URL is
    shown with its passwords replaced by `***`.
    """

    def __init__(
        self,
        client: redis.Redis | str,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = 1.0,
        max_skew_ms: int = 2000,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError("prefix must be a str")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive, finite number of seconds")
        if isinstance(max_skew_ms, bool) or not isinstance(max_skew_ms, int) or max_skew_ms < 0:
            raise ValueError("max_skew_ms must be an int of 0 or more")
        self.prefix = prefix
        self.timeout = float(timeout)
        self.max_skew_ms = max_skew_ms
        self._clock = clock
        self._monotonic = monotonic
        self._url: str | None = None
        if isinstance(client, str):
            self._url = client
            self._redact = _redactor(client)
            self._client: Any = self._connect(client)
            self._owns_client = True
        else:
            if not callable(getattr(client, "execute_command", None)):
                raise TypeError("client must be a redis-py client (redis.Redis) or a redis://, rediss:// or unix:// URL")
            kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
            if isinstance(kwargs, dict) and kwargs.get("socket_timeout", 0) is None:
                raise ValueError(
                    "the client has no socket_timeout: a consume could wait forever for Redis; "
                    "give it one (redis.Redis(..., socket_timeout=1.0)) or pass a URL"
                )
            self._redact = _redactor(None)
            self._client = client
            self._owns_client = False
        self._pending: dict[str, tuple[str, float]] = {}
        self._pending_lock = threading.Lock()
        self._clock_lock = threading.Lock()
        self._reading: _Reading | None = None
        self._closed = False
        _STORES.add(self)

    def _connect(self, url: str) -> Any:
        scheme = url.partition("://")[0].lower() if "://" in url else ""
        if scheme not in _SCHEMES:
            raise ValueError(f"{redact_url(url)}: expected a redis://, rediss:// or unix:// URL")
        try:
            return redis.Redis.from_url(
                url,
                socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout,
                retry=Retry(NoBackoff(), 0),
            )
        except Exception as error:
            # The parser's words may quote any piece of the URL (a password
            # with an unencoded `/` or `@` is read as a port): with a
            # password in it, none of them is shown.
            if _passwords_of(url):
                why = f"not a valid Redis URL ({type(error).__name__})"
            else:
                why = str(error)
        # Raised outside the handler: the parser's own error is neither the
        # cause nor the context of this one.
        raise ValueError(
            f"{redact_url(url)}: {why}; percent-encode a password's reserved characters (/ as %2F, @ as %40, : as %3A)"
        )

    def __repr__(self) -> str:
        where = redact_url(self._url) if self._url is not None else repr(self._client)
        return f"RedisReplayStore({where}, prefix={self.prefix!r}, max_skew_ms={self.max_skew_ms})"

    def __enter__(self) -> RedisReplayStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Forgets the pending attempts and closes the client if the store
        made it (from a URL). Later consumes are refused."""
        self._closed = True
        with self._pending_lock:
            self._pending.clear()
        if self._owns_client:
            self._client.close()

    def key(self, record: SpentRecord) -> str:
        """The Redis key of a record: `<prefix>spent:v1:<key id>:<token id hex>`."""
        return self.prefix + record.name

    # ------------------------------------------------------------ clocks

    @property
    def clock_skew(self) -> ClockSkew | None:
        """The last reading of the clocks, or None before one."""
        reading = self._reading
        return None if reading is None else reading.skew

    @property
    def clock_skew_ms(self) -> float | None:
        """The last measured skew of this clock against Redis's, in
        milliseconds (positive: this clock is ahead), or None before one."""
        reading = self._reading
        return None if reading is None else reading.skew.skew_ms

    def measure_clock_skew(self) -> ClockSkew:
        """Reads Redis `TIME` now and compares it with this clock. Raises
        `TokenRefused("replay_store_unavailable")` if Redis does not answer."""
        with self._clock_lock:
            return self._measure().skew

    def _measure(self) -> _Reading:
        t0 = self._clock()
        try:
            reply = self._client.execute_command("TIME")
        except (redis.RedisError, OSError) as error:
            raise TokenRefused(
                "replay_store_unavailable",
                f"could not read Redis TIME to compare the clocks: {self._describe(error)}; the token is refused unrecorded",
            ) from None
        t1 = self._clock()
        try:
            seconds, micros = (int(part) for part in reply)
        except (TypeError, ValueError):
            raise TokenRefused(
                "replay_store_unavailable", "Redis answered TIME with something other than [seconds, microseconds]"
            ) from None
        redis_ms = seconds * 1000 + micros / 1000
        skew_ms = (t0 + t1) * 500 - redis_ms
        uncertainty_ms = (t1 - t0) * 500
        skew = ClockSkew(
            skew_ms=skew_ms,
            uncertainty_ms=uncertainty_ms,
            max_skew_ms=self.max_skew_ms,
            within_limit=abs(skew_ms) + uncertainty_ms <= self.max_skew_ms,
        )
        previous = self._reading
        self._reading = _Reading(skew, self._monotonic(), self._clock() - self._monotonic())
        was_within = previous is None or previous.skew.within_limit
        if was_within and not skew.within_limit:
            logger.error("%s", self._skew_message(skew))
        elif not was_within and skew.within_limit:
            logger.warning(
                "the clocks agree again with the replay store's (Redis TIME, %.0f ms apart): consumes are accepted",
                skew_ms,
            )
        return self._reading

    def _skew_message(self, skew: ClockSkew) -> str:
        direction = "ahead of" if skew.skew_ms > 0 else "behind"
        return (
            f"the clock here is {abs(skew.skew_ms):.0f} ms {direction} the replay store's (Redis TIME), "
            f"more than the {self.max_skew_ms} ms allowed (max_skew_ms): consumes are refused until the "
            f"clocks agree (measured to ± {math.ceil(skew.uncertainty_ms)} ms), since a spent-token record "
            "could expire while a verifier still accepts its token"
        )

    def _check_clocks(self) -> None:
        """Refuses unless a recent reading puts the clocks within max_skew_ms."""
        with self._clock_lock:
            reading = self._reading
            mono = self._monotonic()
            if (
                reading is None
                or mono - reading.at > CLOCK_RECHECK_AFTER
                or abs(self._clock() - mono - reading.offset) > CLOCK_STEP
            ):
                reading = self._measure()
        if not reading.skew.within_limit:
            raise TokenRefused("replay_store_unavailable", self._skew_message(reading.skew))

    # ----------------------------------------------------------- pending

    @property
    def pending_retries(self) -> int:
        """Consumes whose outcome was unknown, remembered for a retry through this store."""
        with self._pending_lock:
            return len(self._pending)

    def _take_pending(self, name: str) -> str | None:
        with self._pending_lock:
            pending = self._pending.pop(name, None)
        if pending is None or pending[1] <= self._monotonic():
            return None
        return pending[0]

    def _put_pending(self, name: str, attempt: str, lifetime_ms: int) -> bool:
        """Remembers an attempt of unknown outcome until its record's lifetime
        ends; False when the store already remembers its capacity."""
        now = self._monotonic()
        with self._pending_lock:
            if name not in self._pending and len(self._pending) >= PENDING_CAPACITY:
                for expired in [n for n, (_, until) in self._pending.items() if until <= now]:
                    del self._pending[expired]
                if len(self._pending) >= PENDING_CAPACITY:
                    return False
            self._pending[name] = (attempt, now + lifetime_ms / 1000)
            return True

    def _forget_after_fork(self) -> None:
        """In a forked child: the parent keeps its pending attempts (only one
        process may retry one), and locks held by the parent's threads are
        not ours."""
        self._pending = {}
        self._pending_lock = threading.Lock()
        self._clock_lock = threading.Lock()

    # ----------------------------------------------------------- consume

    def _describe(self, error: BaseException) -> str:
        return self._redact(f"{type(error).__name__}: {error}")

    def _expiry(self, record: SpentRecord, lifetime_ms: int) -> list[str | int]:
        """The SET's expiry: always relative (PX), never an absolute time
        from this clock."""
        return ["PX", lifetime_ms]

    def insert_if_absent(self, record: SpentRecord) -> bool:
        """Records the token as spent with `SET <name> <attempt> NX GET PX
        <lifetime_ms>` (`record_lifetime_ms`): True if this call (or the
        retry of this store's own earlier attempt) recorded it, False if it
        was recorded before. Raises `TokenRefused` with
        `replay_store_unavailable` (clocks too far apart, Redis unreachable,
        an answer not in time: nothing is accepted) or `replay_store_full`
        (Redis out of memory)."""
        if self._closed:
            raise TokenRefused("replay_store_unavailable", "the replay store is closed")
        self._check_clocks()
        name = self.key(record)
        # The earlier of the call's `now=` and this store's clock (which the
        # clock guard just held within max_skew_ms of Redis's): a `now=`
        # ahead of it would give a record that dies in Redis while the token
        # still verifies on every clock in the fleet.
        lifetime_ms = record_lifetime_ms(
            record.expires_at, min(record.now, math.floor(self._clock())), self.max_skew_ms
        )
        # Taken out, so that of two concurrent retries only one sends it.
        pending = self._take_pending(name)
        attempt = pending if pending is not None else secrets.token_hex(16)
        try:
            reply = self._client.execute_command(
                "SET", name, attempt, "NX", "GET", *self._expiry(record, lifetime_ms), get=True
            )
        except redis.ResponseError as error:
            # Redis answered: this SET recorded nothing (an earlier attempt still may have).
            if pending is not None:
                self._put_pending(name, pending, lifetime_ms)
            detail = self._describe(error)
            if isinstance(error, _OUT_OF_MEMORY) or str(error).startswith("OOM"):
                raise TokenRefused("replay_store_full", f"Redis is out of memory and refused the record: {detail}") from None
            if "syntax error" in str(error).lower():
                detail += " (SET with NX and GET needs Redis 7.0 or later)"
            raise TokenRefused("replay_store_unavailable", f"Redis refused the record: {detail}") from None
        except (redis.RedisError, OSError) as error:
            # Timed out, connection lost: the SET may have run.
            if isinstance(error, redis.TimeoutError):
                detail = f"Redis did not answer in time ({self._describe(error)})"
            else:
                detail = f"Redis: {self._describe(error)}"
            if self._put_pending(name, attempt, lifetime_ms):
                raise TokenRefused(
                    "replay_store_unavailable",
                    f"{detail}; the token may have been recorded: retrying this same consume "
                    "through this same store object is accepted once if it was",
                ) from None
            raise TokenRefused(
                "replay_store_unavailable",
                f"{detail}; the token may have been recorded, and if it was a retry is refused as replayed "
                f"(this store already remembers {PENDING_CAPACITY} consumes whose outcome is unknown)",
            ) from None
        if reply is None:
            return True
        if isinstance(reply, bytes):
            reply = reply.decode("utf-8", "replace")
        if isinstance(reply, str):
            return reply == attempt
        if pending is not None:
            self._put_pending(name, pending, lifetime_ms)
        raise TokenRefused("replay_store_unavailable", "Redis answered SET NX GET with neither nil nor a string")
