"""`reqstate.redis.RedisReplayStore` against a real redis-server: the rule
every reqstate Redis store follows (the sidecar's and the TypeScript
package's too): one `SET <name> <attempt> NX GET PX <lifetime_ms>` per
consume, a lifetime relative to Redis's clock that outlives the token on
every verifier whatever its leeway and clock (within max_skew_ms), consumes
refused while the clocks disagree, a retry of a consume of unknown outcome
accepted once through the same store, and no password in any message."""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from conftest import key_toml
from redis_server import RedisServer, free_port

from reqstate import Binding, Codec, Keyring, SpentRecord, TokenRefused
from reqstate.redis import (
    DEFAULT_PREFIX,
    RedisReplayStore,
    record_lifetime_ms,
    redact_url,
)

COUNTER = {"current": 10, "amount": 5}
BINDING = Binding("increase-counter", b"user-42")
KEYRING = Keyring.from_toml("version = 1\n" + key_toml(1, "hmac-sha256", "primary"))
POLL = 0.2  # seconds between attempts


def reason(call: Callable[[], object]) -> str:
    """The reason `call` is refused with, or "accepted"."""
    try:
        call()
    except TokenRefused as refused:
        return refused.reason
    return "accepted"


class AbsoluteStore(RedisReplayStore):
    """The rule this module replaced, for comparison: an absolute expiry
    (PXAT) at `expires_at + clock_leeway` of the recording verifier's clock."""

    def _expiry(self, record: SpentRecord, lifetime_ms: int) -> list[str | int]:
        return ["PXAT", record.record_until * 1000]


def poll_until_expired(codec: Codec, store: RedisReplayStore, token: str, clock: Callable[[], float]) -> list[str]:
    """Consumes `token` every POLL seconds at `clock` until it is refused as
    expired (or accepted again); gives the reasons seen, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen.append(reason(lambda: codec.consume(token, BINDING, store, now=int(clock()))))
        if seen[-1] != "replayed":
            return seen
        time.sleep(POLL)
    raise AssertionError(f"never expired: {seen}")


# ------------------------------------------------------------------ the rule


def test_record_lifetime_is_relative_and_covers_every_leeway() -> None:
    assert record_lifetime_ms(expires_at=1010, now=1000, max_skew_ms=2000) == 614_000
    assert record_lifetime_ms(expires_at=0, now=10**12, max_skew_ms=0) == 1000  # at least a second
    # Recorded by a verifier up to max_skew_ms off Redis's clock, the record
    # is there whenever any verifier (any leeway, any clock within the skew) accepts.
    for recorder in (-2000, 0, 2000):
        for accepter in (-2000, 0, 2000):
            for leeway in (0, 1, 5, 60, 600):
                kept_until = 1_000_000 - recorder + record_lifetime_ms(1010, 1000, 2000)
                accepts_until = (1010 + leeway) * 1000 - accepter
                assert kept_until >= accepts_until, (recorder, accepter, leeway)


def test_a_verifier_behind_redis_refuses_every_replay_until_the_token_expires(redis_server: RedisServer) -> None:
    """(a) A verifier 1.5 s behind Redis (within max_skew_ms = 2000), leeway
    1 s, consumes a 1-second token once; every later attempt, every 200 ms,
    is `replayed` until the token expires on that verifier. The absolute
    PXAT rule let the record vanish while this verifier still accepted."""

    def behind() -> float:
        return time.time() - 1.5

    codec = Codec(KEYRING, clock_leeway=1)
    store = RedisReplayStore(redis_server.url, clock=behind)
    token = codec.mint(BINDING, "confirm", COUNTER, ttl=1, single_use=True, now=int(behind())).token
    assert codec.consume(token, BINDING, store, now=int(behind())).state == COUNTER
    skew = store.clock_skew_ms
    assert skew is not None and -1600 < skew < -1400
    seen = poll_until_expired(codec, store, token, behind)
    assert seen[-1] == "expired" and set(seen[:-1]) == {"replayed"} and len(seen) >= 5, seen

    absolute = AbsoluteStore(redis_server.url, clock=behind)
    token = codec.mint(BINDING, "confirm", COUNTER, ttl=1, single_use=True, now=int(behind())).token
    assert codec.consume(token, BINDING, absolute, now=int(behind())).state == COUNTER
    seen = poll_until_expired(codec, absolute, token, behind)
    assert seen[-1] == "accepted", f"the absolute rule held this time: {seen}"


def test_two_verifiers_with_other_leeways_share_one_record(redis_server: RedisServer) -> None:
    """(b) Verifiers with clock_leeway 1 s and 5 s on one Redis: consumed on
    the first, the token is `replayed` on the second on every attempt until
    it expires there (4 s after the first would have let it go)."""
    quick = Codec(KEYRING, clock_leeway=1)
    lenient = Codec(KEYRING, clock_leeway=5)
    token = quick.mint(BINDING, "confirm", COUNTER, ttl=1, single_use=True).token
    expires_at = int(time.time()) + 1
    assert quick.consume(token, BINDING, RedisReplayStore(redis_server.url)).state == COUNTER
    seen = poll_until_expired(lenient, RedisReplayStore(redis_server.url), token, time.time)
    assert seen[-1] == "expired" and set(seen[:-1]) == {"replayed"}, seen
    assert time.time() >= expires_at + 5 - 1

    # The absolute rule, recorded by the quick verifier, expired at its leeway.
    token = quick.mint(BINDING, "confirm", COUNTER, ttl=1, single_use=True).token
    assert quick.consume(token, BINDING, AbsoluteStore(redis_server.url)).state == COUNTER
    seen = poll_until_expired(lenient, RedisReplayStore(redis_server.url), token, time.time)
    assert seen[-1] == "accepted", f"the absolute rule held this time: {seen}"


def test_a_clock_off_by_more_than_max_skew_refuses_and_records_nothing(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """(c) 4.2 s behind Redis, 2 s allowed: refused unrecorded, with the skew
    in the message, logged once per change of state; once the clock is set
    right (a step of the wall clock, seen at once) consumes go through."""
    offset = [-4.2]

    def clock() -> float:
        return time.time() + offset[0]

    codec = Codec(KEYRING)
    store = RedisReplayStore(redis_server.url, clock=clock)
    token = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
    caplog.set_level(logging.INFO, logger="reqstate.redis")
    for _ in range(3):
        with pytest.raises(TokenRefused) as refused:
            codec.consume(token, BINDING, store, now=int(clock()))
        assert refused.value.reason == "replay_store_unavailable"
        said = re.search(
            r"the clock here is (\d+) ms behind the replay store's \(Redis TIME\), more than the 2000 ms "
            r"allowed \(max_skew_ms\): consumes are refused until the clocks agree",
            refused.value.message,
        )
        assert said, refused.value.message
        # The message names the measurement, and the measurement is the
        # offset within its own uncertainty (half the round trip of TIME,
        # which a loaded machine stretches: no fixed tolerance).
        measured = store.clock_skew
        assert measured is not None
        assert int(said.group(1)) == round(abs(measured.skew_ms)), (said.group(1), measured)
        assert abs(measured.skew_ms + 4200) <= measured.uncertainty_ms + 5, measured
    assert redis_server.admin.dbsize() == 0, "a consume refused for the clocks recorded something"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "4" in errors[0].getMessage() and "behind" in errors[0].getMessage()

    offset[0] = 0.0  # the clock is set right: a step, measured again before the next consume
    assert codec.consume(token, BINDING, store).state == COUNTER
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.WARNING]
    assert "agree again" in caplog.records[-1].getMessage()

    ahead = RedisReplayStore(redis_server.url, clock=lambda: time.time() + 3.0)
    fresh = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
    with pytest.raises(TokenRefused, match=r"ms ahead of the replay store's"):
        codec.consume(fresh, BINDING, ahead)


def test_an_unknown_outcome_is_retried_once_through_the_same_store(redis_server: RedisServer) -> None:
    """(d) The SET is held by `CLIENT PAUSE 1500 WRITE` past the store's
    timeout: refused `replay_store_unavailable` (it may have been recorded);
    after the pause, the retry through the same store is accepted, once;
    through another store object it is `replayed`."""
    codec = Codec(KEYRING)
    store = RedisReplayStore(redis_server.url, timeout=0.3)
    store.measure_clock_skew()
    token = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
    pauser = redis.Redis(host="127.0.0.1", port=redis_server.port)
    pauser.execute_command("CLIENT", "PAUSE", 1500, "WRITE")
    paused_at = time.monotonic()
    with pytest.raises(TokenRefused) as first:
        codec.consume(token, BINDING, store)
    assert time.monotonic() - paused_at < 1.2, "the store did not keep its timeout"
    assert first.value.reason == "replay_store_unavailable"
    assert "may have been recorded" in first.value.message and "same store object" in first.value.message
    assert store.pending_retries == 1
    time.sleep(max(0.0, 1.6 - (time.monotonic() - paused_at)))
    assert codec.consume(token, BINDING, store).state == COUNTER
    assert store.pending_retries == 0
    assert reason(lambda: codec.consume(token, BINDING, store)) == "replayed"
    assert reason(lambda: codec.consume(token, BINDING, RedisReplayStore(redis_server.url))) == "replayed"
    pauser.close()


class LosesTheReply:
    """A redis-py client whose first SET runs in Redis but whose reply is
    lost (as when a connection drops after the command was executed)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.lose = 1

    def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = self.client.execute_command(*args, **options)
        if args[0] == "SET" and self.lose > 0:
            self.lose -= 1
            raise redis.TimeoutError("Timeout reading from socket (test: the reply was lost)")
        return reply


def test_a_set_that_ran_but_whose_reply_was_lost_is_accepted_once_on_retry(redis_server: RedisServer) -> None:
    """The retry sends the same attempt: Redis answers it back (the earlier
    SET recorded it) and the retry is accepted; of eight concurrent
    retries only one is; another store's attempt is `replayed`."""
    codec = Codec(KEYRING)
    flaky = LosesTheReply(redis.Redis(host="127.0.0.1", port=redis_server.port, socket_timeout=1))
    store = RedisReplayStore(flaky)  # type: ignore[arg-type]
    token = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
    assert reason(lambda: codec.consume(token, BINDING, store)) == "replay_store_unavailable"
    [key] = redis_server.admin.keys("*")
    attempt = redis_server.admin.get(key)
    assert isinstance(attempt, bytes) and re.fullmatch(rb"[0-9a-f]{32}", attempt), attempt
    assert reason(lambda: codec.consume(token, BINDING, RedisReplayStore(redis_server.url))) == "replayed"

    results: list[str] = []
    barrier = threading.Barrier(8)

    def retry() -> None:
        barrier.wait()
        results.append(reason(lambda: codec.consume(token, BINDING, store)))

    threads = [threading.Thread(target=retry) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["accepted"] + ["replayed"] * 7, results
    assert redis_server.admin.get(key) == attempt


def test_the_default_prefix_and_the_record(redis_server: RedisServer) -> None:
    """(e) The record is `reqstate:spent:v1:<key id>:<token id hex>`, its
    value a 32-hex-digit attempt, its lifetime relative (PTTL)."""
    codec = Codec(KEYRING)
    minted = codec.mint(BINDING, "confirm", COUNTER, ttl=600, single_use=True)
    assert codec.consume(minted.token, BINDING, RedisReplayStore(redis_server.url)).state == COUNTER
    raw = base64.urlsafe_b64decode(minted.token + "=" * (-len(minted.token) % 4))
    at = raw.index(bytes.fromhex("a50050"))  # HMAC: the claims are in the clear (FORMAT.md §5.1)
    token_id = raw[at + 3 : at + 19].hex()
    name = f"reqstate:spent:v1:1:{token_id}"
    assert DEFAULT_PREFIX == "reqstate:"
    assert redis_server.admin.keys("*") == [name.encode()]
    value = redis_server.admin.get(name)
    assert isinstance(value, bytes) and re.fullmatch(rb"[0-9a-f]{32}", value)
    pttl = redis_server.admin.pttl(name)
    assert 1_200_000 - 5000 < pttl <= (600 + 600) * 1000 + 2 * 2000, pttl
    # Another prefix, another record.
    again = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
    store = RedisReplayStore(redis_server.url, prefix="counter-prod:")
    assert codec.consume(again, BINDING, store).state == COUNTER
    assert sum(1 for k in redis_server.admin.keys("counter-prod:spent:v1:1:*")) == 1


def test_redis_out_of_memory_is_replay_store_full(redis_server: RedisServer) -> None:
    codec = Codec(KEYRING)
    store = RedisReplayStore(redis_server.url)
    store.measure_clock_skew()
    redis_server.admin.config_set("maxmemory", 1)  # noeviction: writes refused
    try:
        token = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
        assert reason(lambda: codec.consume(token, BINDING, store)) == "replay_store_full"
    finally:
        redis_server.admin.config_set("maxmemory", 0)
    assert codec.consume(token, BINDING, store).state == COUNTER  # not recorded before


def test_redis_down_refuses_unrecorded() -> None:
    codec = Codec(KEYRING)
    store = RedisReplayStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5)
    token = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
    with pytest.raises(TokenRefused) as refused:
        codec.consume(token, BINDING, store)
    assert refused.value.reason == "replay_store_unavailable" and "Redis TIME" in refused.value.message


def test_a_unix_socket_url(redis_server: RedisServer) -> None:
    codec = Codec(KEYRING)
    store = RedisReplayStore(f"unix://{redis_server.socket}?db=0")
    token = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
    assert codec.consume(token, BINDING, store).state == COUNTER
    assert reason(lambda: codec.consume(token, BINDING, RedisReplayStore(redis_server.url))) == "replayed"
    store.close()
    assert reason(lambda: codec.consume(token, BINDING, store)) == "replay_store_unavailable"


# -------------------------------------------------------------- credentials

PASSWORD = "p/a@ss"
ENCODED = "p%2Fa%40ss"


def test_urls_are_shown_without_passwords() -> None:
    assert redact_url(f"redis://user:{PASSWORD}@redis.internal:6379/0") == "redis://user:***@redis.internal:6379/0"
    assert redact_url(f"redis://:{PASSWORD}@redis.internal:6379") == "redis://:***@redis.internal:6379"
    assert redact_url(f"redis://{PASSWORD}@redis.internal") == "redis://***@redis.internal"
    assert redact_url(f"rediss://user:{ENCODED}@h:6380/1") == "rediss://user:***@h:6380/1"
    assert redact_url(f"redis://h:6379/0?password={PASSWORD}&db=1") == "redis://h:6379/0?password=***&db=1"
    assert redact_url(f"redis://h/0?db=1&pass={PASSWORD}") == "redis://h/0?db=1&pass=***"
    assert redact_url(f"unix://:{PASSWORD}@/run/redis.sock?db=0") == "unix://:***@/run/redis.sock?db=0"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"


def test_no_password_reaches_a_message_or_a_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()
    codec = Codec(KEYRING)
    token = codec.mint(BINDING, "confirm", COUNTER, single_use=True).token
    shown: list[str] = []
    for url in (
        f"redis://user:{ENCODED}@127.0.0.1:{port}/0",
        f"redis://127.0.0.1:{port}/0?password={ENCODED}",
        f"unix://:{ENCODED}@/nonexistent/redis.sock",
    ):
        store = RedisReplayStore(url, timeout=0.3)
        shown.append(repr(store))
        with pytest.raises(TokenRefused) as refused:
            codec.consume(token, BINDING, store)
        shown.append(str(refused.value))
    for url in (
        f"http://user:{PASSWORD}@h/",
        f"redis://user:{ENCODED}@h:notaport/0",
        f"redis://user:{PASSWORD}@h:6379/0",  # unencoded: the parser reads "p" as the port
        f"redis://h:6379/0?password={PASSWORD}&db=x",
    ):
        with pytest.raises(ValueError) as bad:
            RedisReplayStore(url)
        shown.append(str(bad.value))
        assert bad.value.__cause__ is None and bad.value.__context__ is None
    shown += [r.getMessage() for r in caplog.records]
    for text in shown:
        assert PASSWORD not in text and ENCODED not in text and "a@ss" not in text and "'p'" not in text, text
    assert any("user:***@" in text for text in shown)


def test_an_injected_now_near_expiry_does_not_shorten_the_record(redis_server: RedisServer) -> None:
    """Issue 37: the lifetime came from `consume(..., now=)` while the clock
    guard checked the store's clock; a `now` 599 s ahead, just before the
    token's expiry, left a record of about 605 s for a token that verifies
    for 1200 s more on every clock in the fleet. The lifetime is the store
    clock's."""
    codec = Codec(KEYRING)
    minted = codec.mint(BINDING, "confirm", COUNTER, ttl=600, single_use=True)
    store = RedisReplayStore(redis_server.url, prefix="injected-now:")
    ahead = minted.expires_at - 1
    assert codec.consume(minted.token, BINDING, store, now=ahead).state == COUNTER
    (name,) = redis_server.admin.keys("injected-now:spent:v1:*")
    pttl = redis_server.admin.pttl(name)
    expected = record_lifetime_ms(minted.expires_at, int(time.time()), 2000)
    assert expected - 5000 < pttl <= expected, (pttl, expected)
    assert pttl > record_lifetime_ms(minted.expires_at, ahead, 2000) + 500_000
    # The token stays spent wherever it still verifies.
    assert reason(lambda: codec.consume(minted.token, BINDING, store)) == "replayed"
