"""The Python API over the core: keyrings, codecs, states, errors, batches."""

from __future__ import annotations

import json
import math
import os
import pickle
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import NOW, REPO, VECTORS, key_toml, secret, write_private

import reqstate
from reqstate import (
    Binding,
    Codec,
    InvalidArgument,
    Keyring,
    KeyringError,
    MemoryReplayStore,
    MintRefused,
    ReplayStore,
    ReqstateError,
    SpentRecord,
    TokenRefused,
    call_context,
    call_context_from_text,
    canonical_json,
    canonical_json_from_text,
)

HMAC = "hmac-sha256"
XCHACHA = "xchacha20-poly1305"
COUNTER = {"current": 10, "amount": 5}
COUNTER_CBOR = bytes.fromhex("a266616d6f756e74056763757272656e740a")


def keyring_text(*keys: tuple[int, str, str]) -> str:
    return "version = 1\n" + "".join(key_toml(i, alg, status) for i, alg, status in keys)


@pytest.fixture(params=[HMAC, XCHACHA])
def codec(request: pytest.FixtureRequest) -> Codec:
    algorithm: str = request.param
    other = XCHACHA if algorithm == HMAC else HMAC
    return Codec(Keyring.from_toml(keyring_text((1, algorithm, "primary"), (2, other, "active"), (3, HMAC, "retired"))))


@pytest.fixture
def binding() -> Binding:
    return Binding("increase-counter", call_context("user-42", "counter-server", "tools/call", {"current": 10}))


def reload_error(keyring: Keyring) -> str | None:
    """`last_reload_error`, read afresh (a property mypy would otherwise narrow)."""
    return keyring.last_reload_error


def reason_of(error: pytest.ExceptionInfo[ReqstateError]) -> str:
    assert error.value.reason in reqstate.REASONS
    return error.value.reason


# ------------------------------------------------------------------ mint/verify


def test_round_trip_and_every_binding(codec: Codec, binding: Binding) -> None:
    minted = codec.mint(binding, "confirm", COUNTER, ttl=600, now=NOW)
    assert (minted.key_id, minted.issued_at, minted.expires_at) == (1, NOW, NOW + 600)
    verified = codec.verify(minted.token, binding, expected_step="confirm", now=NOW + 1)
    assert verified.state == COUNTER and verified.step == "confirm"
    assert verified.state_cbor == COUNTER_CBOR
    assert (verified.key_id, verified.issued_at, verified.expires_at) == (1, NOW, NOW + 600)
    # Any step when none is expected.
    assert codec.verify(minted.token, binding, now=NOW).step == "confirm"
    refusals: dict[str, Callable[[], object]] = {
        "wrong_step": lambda: codec.verify(minted.token, binding, expected_step="amount", now=NOW),
        "expired": lambda: codec.verify(minted.token, binding, now=NOW + 600 + 60),
        "not_yet_valid": lambda: codec.verify(minted.token, binding, now=NOW - 61),
        "authentication_failed": lambda: codec.verify(minted.token, Binding("other-tool", binding.context), now=NOW),
        "malformed": lambda: codec.verify(minted.token + "-TAMPERED", binding, now=NOW),
    }
    for reason, attempt in refusals.items():
        with pytest.raises(TokenRefused) as refused:
            attempt()
        assert reason_of(refused) == reason
        assert refused.value.message
    other_args = Binding(binding.tool, call_context("user-42", "counter-server", "tools/call", {"current": 11}))
    with pytest.raises(TokenRefused, match="authentication_failed"):
        codec.verify(minted.token, other_args, now=NOW)
    # Within the leeway after expiry, still valid.
    assert codec.verify(minted.token, binding, now=NOW + 600 + 59).state == COUNTER


def test_keys_decide_retired_unknown_and_mismatched_algorithms(binding: Binding) -> None:
    old = Codec(Keyring.from_toml(keyring_text((3, HMAC, "primary"))))
    stranger = Codec(Keyring.from_toml(keyring_text((9, HMAC, "primary"))))
    impostor = Codec(Keyring.from_toml(keyring_text((2, HMAC, "primary"))))
    main = Codec(Keyring.from_toml(keyring_text((1, HMAC, "active"), (2, XCHACHA, "primary"), (3, HMAC, "retired"))))
    for minter, reason in ((old, "retired_key"), (stranger, "unknown_key"), (impostor, "algorithm_mismatch")):
        token = minter.mint(binding, "s", now=NOW).token
        with pytest.raises(TokenRefused) as refused:
            main.verify(token, binding, now=NOW)
        assert refused.value.reason == reason


def test_hmac_mint_is_deterministic_and_xchacha_is_not(binding: Binding) -> None:
    hmac = Codec(Keyring.from_toml(keyring_text((1, HMAC, "primary"))))
    assert hmac.mint(binding, "s", COUNTER, now=NOW).token == hmac.mint(binding, "s", COUNTER, now=NOW).token
    xchacha = Codec(Keyring.from_toml(keyring_text((1, XCHACHA, "primary"))))
    assert xchacha.mint(binding, "s", COUNTER, now=NOW).token != xchacha.mint(binding, "s", COUNTER, now=NOW).token


def test_reference_claims_are_76_and_108_characters(binding: Binding) -> None:
    context = bytes.fromhex(
        "7072696e636970616c3d757365722d34323b61756469656e63653d636f756e7465722d7365727665723b6d6574686f643d746f6f6c732f63616c6c"
    )
    reference = Binding("increase-counter", context)
    for algorithm, length in ((HMAC, 76), (XCHACHA, 108)):
        codec = Codec(Keyring.from_toml(keyring_text((1, algorithm, "primary"))))
        assert len(codec.mint(reference, "confirm", COUNTER, ttl=600, now=NOW).token) == length


def test_mint_refusals_in_the_cores_order(codec: Codec, binding: Binding) -> None:
    deep: Any = None
    for _ in range(17):
        deep = [deep]
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("empty step", {"step": ""}, "invalid_argument"),
        ("ttl 0", {"ttl": 0}, "invalid_argument"),
        ("ttl 0 before a deep state", {"ttl": 0, "state": deep}, "invalid_argument"),
        ("ttl above the policy", {"ttl": 86401}, "lifetime_too_long"),
        ("now + ttl overflows", {"now": 2**64 - 5, "ttl": 10}, "invalid_argument"),
        ("17 levels", {"state": deep}, "state_encoding"),
        ("no CBOR form", {"state": {"a": object()}}, "state_encoding"),
        ("non-str key", {"state": {1: 2}}, "state_encoding"),
        ("integer too large", {"state": 2**64}, "state_encoding"),
        ("lone surrogate", {"state": "\ud800"}, "state_encoding"),
    ]
    for name, args, reason in cases:
        kwargs = {"now": NOW, **{k: v for k, v in args.items() if k in ("ttl", "now")}}
        with pytest.raises(ReqstateError) as refused:
            codec.mint(binding, args.get("step", "s"), args.get("state"), **kwargs)
        assert refused.value.reason == reason, name
        assert isinstance(refused.value, InvalidArgument if reason == "invalid_argument" else MintRefused), name
    small = Codec(codec.keyring, max_token_len=64)
    with pytest.raises(MintRefused) as too_large:
        small.mint(binding, "s", "x" * 100, now=NOW)
    assert too_large.value.reason == "too_large"
    # A cyclic state is too deep, not a crash.
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(MintRefused, match="state_encoding"):
        codec.mint(binding, "s", cycle, now=NOW)


def test_bytes_parameters_refuse_str_and_name_themselves(codec: Codec, binding: Binding) -> None:
    """Every bytes parameter of the public API (_native.pyi) takes bytes or
    a bytearray; a str (which encoding?) or anything else is a TypeError
    naming the parameter and the type given."""
    token = codec.seal(b"p", b"a").token
    minted = codec.mint(binding, "s", now=NOW).token
    calls: dict[str, Callable[[Any], object]] = {
        "context": lambda v: Binding("x", v),
        "state_cbor": lambda v: codec.mint_cbor(binding, "s", v, now=NOW),
        "payload": lambda v: codec.seal(v),
        "aad": lambda v: codec.seal(b"p", v),
        "cbor": lambda v: reqstate.state_json_from_cbor(v),
    }
    unseal_aad: Callable[[Any], object] = lambda v: codec.unseal(token, v)  # noqa: E731
    for name, call in [*calls.items(), ("aad", unseal_aad)]:
        for value, type_name in (("not-bytes", "str"), (5, "int"), ([1, 2], "list"), (memoryview(b"x"), "memoryview")):
            with pytest.raises(TypeError) as refused:
                call(value)
            assert f"{name} must be bytes or bytearray, not {type_name}" in str(refused.value), (name, value)
            assert not isinstance(refused.value, reqstate.ReqstateError)
            if type_name == "str":
                assert ".encode()" in str(refused.value)
    # bytes and bytearray are taken alike.
    assert Binding("x", bytearray(b"ctx")).context == Binding("x", b"ctx").context == b"ctx"
    assert Binding("x", None).context == Binding("x").context == b""
    assert codec.unseal(codec.seal(bytearray(b"p"), bytearray(b"a")).token, bytearray(b"a")).payload == b"p"
    assert codec.unseal(codec.seal(b"p").token).payload == b"p"
    assert codec.verify_cbor(codec.mint_cbor(binding, "s", bytearray(b"\x01"), now=NOW).token, binding, now=NOW).state_cbor == b"\x01"
    assert reqstate.state_json_from_cbor(bytearray(b"\x01")) == "1"
    assert codec.verify(minted, binding, now=NOW).step == "s"
    from reqstate.mcp import InProcessCodec

    with pytest.raises(TypeError, match="aad must be bytes or bytearray, not str"):
        InProcessCodec(codec, aad="x", allow_readable=True)  # type: ignore[arg-type]


def test_arguments_are_checked_where_built() -> None:
    with pytest.raises(InvalidArgument) as empty:
        Binding("")
    assert empty.value.reason == "invalid_argument" and isinstance(empty.value, ValueError)
    # The reason once, then what is wrong: never "invalid_argument: invalid argument: ...".
    text = str(empty.value)
    assert text.startswith("invalid_argument: ") and "invalid argument" not in text, text
    bad_bindings: list[Callable[[], object]] = [
        lambda: Binding("t" * 257),
        lambda: Binding("t", b"x" * 65537),
        lambda: Binding(1, b""),  # type: ignore[arg-type]  # deliberately not a str: refused at run time
    ]
    for bad in bad_bindings:
        with pytest.raises(InvalidArgument):
            bad()
    keyring = Keyring.ephemeral()
    for policy in ({"max_token_len": 63}, {"clock_leeway": 601}, {"max_lifetime": 0}, {"max_lifetime": 2592001}):
        with pytest.raises(InvalidArgument):
            Codec(keyring, **policy)
    codec = Codec(keyring, max_token_len=1024, clock_leeway=0, max_lifetime=3600)
    assert (codec.max_token_len, codec.clock_leeway, codec.max_lifetime) == (1024, 0, 3600)
    assert Binding("t", b"ctx").context == b"ctx"
    assert Binding("t").context == b""
    with pytest.raises(TypeError, match="context must be bytes or bytearray, not str"):
        Binding("t", "ctx")  # type: ignore[arg-type]  # deliberately a str: refused at run time


# ----------------------------------------------------------------------- states


STATES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**64 - 1,
    -(2**63),
    -(2**64),
    1.0,
    0.1,
    -0.0,
    1e300,
    "é😀",
    b"\x00\x01",
    [1, [2, [3]]],
    {"b": {"c": []}, "a": [1.5, None], "😀": 1, "～": 2},
]


@pytest.mark.parametrize("state", STATES, ids=repr)
def test_states_round_trip(codec: Codec, binding: Binding, state: Any) -> None:
    token = codec.mint(binding, "s", state, now=NOW).token
    back = codec.verify(token, binding, now=NOW).state
    assert back == state and type(back) is type(state)
    if isinstance(state, float):
        assert str(back) == str(state)  # -0.0 stays -0.0


def test_state_bytes_follow_the_command_lines_mapping(codec: Codec, binding: Binding) -> None:
    """Python values map to the same CBOR as `mint --state-json` (docs/CLI.md)."""
    cases = {
        json.dumps(COUNTER): COUNTER_CBOR.hex(),
        '[1.0,1,-0,"é"]': "84f93c00010062c3a9",
        "100000.0": "fa47c35000",
        "0.1": "fb3fb999999999999a",
        '{"😀":1,"～":2}': "a263efbd9e0264f09f988001",
    }
    for text, cbor in cases.items():
        assert reqstate._native._cli_state_from_json(text).hex() == cbor
        token = codec.mint(binding, "s", json.loads(text), now=NOW).token
        assert codec.verify_cbor(token, binding, now=NOW).state_cbor.hex() == cbor
    # A tuple is an array; a bytearray a byte string.
    token = codec.mint(binding, "s", (1, bytearray(b"x")), now=NOW).token
    assert codec.verify(token, binding, now=NOW).state == [1, b"x"]


def test_raw_cbor_states(codec: Codec, binding: Binding) -> None:
    tagged = bytes.fromhex("c11a692b8900")
    token = codec.mint_cbor(binding, "s", tagged, now=NOW).token
    raw = codec.verify_cbor(token, binding, now=NOW)
    assert raw.state_cbor == tagged and raw.state is None
    with pytest.raises(TokenRefused) as no_form:
        codec.verify(token, binding, now=NOW)
    assert no_form.value.reason == "state_decoding"
    int_key = codec.mint_cbor(binding, "s", bytes.fromhex("a101f6"), now=NOW).token
    with pytest.raises(TokenRefused, match="state_decoding"):
        codec.verify(int_key, binding, now=NOW)
    for not_preferred in ("1801", "fb3ff0000000000000", "9f01ff", "0000", ""):
        with pytest.raises(MintRefused) as refused:
            codec.mint_cbor(binding, "s", bytes.fromhex(not_preferred), now=NOW)
        assert refused.value.reason == "state_encoding"


def test_every_nan_is_the_one_nan_and_infinities_are_kept(codec: Codec, binding: Binding) -> None:
    """A state has CBOR's NaN and infinities (docs/CLI.md): `@reqstate/codec`
    writes every NaN as `f97e00` and `--state-cbor-hex` accepts no other, so
    a NaN with its sign bit or a payload is written as that one NaN too (it
    was `f9fe00` and `fb7ff8000000000001`, bytes the command line refuses);
    an infinity is the half-precision one."""
    signed_nan = -float("nan")
    payload_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    signalling_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0]
    cases: list[tuple[Any, str]] = [
        (float("nan"), "a16161a16162f97e00"),
        (signed_nan, "a16161a16162f97e00"),
        (payload_nan, "a16161a16162f97e00"),
        (signalling_nan, "a16161a16162f97e00"),
        (float("inf"), "a16161a16162f97c00"),
        (float("-inf"), "a16161a16162f9fc00"),
    ]
    for x, cbor in cases:
        for state in ({"a": {"b": x}}, ({"a": {"b": x}},)):  # the fast path, and the general one (a tuple)
            minted = codec.mint(binding, "s", state, now=NOW).token
            got = codec.verify_cbor(minted, binding, now=NOW).state_cbor.hex()
            expected = cbor if isinstance(state, dict) else "81" + cbor
            assert got == expected, (x, got)
            reqstate._native._cli_check_state_cbor(bytes.fromhex(got))  # what --state-cbor-hex accepts
        assert codec.mint_many(binding, "s", [{"a": {"b": x}}], now=NOW)[0].token  # type: ignore[union-attr]
        back = codec.verify(codec.mint(binding, "s", x, now=NOW).token, binding, now=NOW).state
        assert (math.isnan(back) and math.isnan(x)) or back == x
        # JSON has no NaN or infinity: such a state has no JSON form.
        assert reqstate.state_json_from_cbor(bytes.fromhex(cbor)) is None


# ------------------------------------------------------------- seal, single use


def test_seal_and_unseal(codec: Codec, binding: Binding) -> None:
    sealed = codec.seal(b"payload", b"aad")
    assert sealed.key_id == 1
    opened = codec.unseal(sealed.token, b"aad")
    assert opened.payload == b"payload" and opened.key_id == 1
    with pytest.raises(TokenRefused, match="authentication_failed"):
        codec.unseal(sealed.token, b"other")
    with pytest.raises(TokenRefused, match="wrong_kind"):
        codec.verify(sealed.token, binding)
    with pytest.raises(TokenRefused, match="wrong_kind"):
        codec.unseal(codec.mint(binding, "s").token)
    with pytest.raises(InvalidArgument):
        codec.seal(b"x", b"a" * 65537)


def test_single_use_is_consumed_once(codec: Codec, binding: Binding) -> None:
    store = MemoryReplayStore(16)
    token = codec.mint(binding, "confirm", COUNTER, single_use=True, now=NOW).token
    with pytest.raises(TokenRefused, match="single_use"):
        codec.verify(token, binding, now=NOW)
    assert codec.consume(token, binding, store, expected_step="confirm", now=NOW).state == COUNTER
    assert len(store) == 1
    with pytest.raises(TokenRefused) as again:
        codec.consume(token, binding, store, now=NOW)
    assert again.value.reason == "replayed"
    with pytest.raises(TokenRefused, match="wrong_kind"):
        codec.consume(codec.mint(binding, "s").token, binding, store)


def test_a_panic_under_now_does_not_pin_the_clock(binding: Binding) -> None:
    """`now=` overrides the clock for one call (a thread-local of the native
    module, set and put back around the call). A panic under it (raised by
    PyO3 as `PanicException`, a `BaseException`) must put it back too: any
    code reading the clock outside a call's own override would otherwise
    read that time, and accept tokens that expired long ago."""
    codec = Codec(Keyring.ephemeral("hmac-sha256"))
    old = codec.mint(binding, "s", ttl=600, now=NOW).token
    with pytest.raises(BaseException, match="under the clock override") as panic:
        reqstate._native._panic_under_clock_override(NOW)
    assert type(panic.value).__name__ == "PanicException"
    before = int(time.time())
    assert before <= reqstate._native._clock_now() <= int(time.time()), "the panicked call's now= is still in force"
    assert before <= codec.mint(binding, "s").issued_at <= int(time.time()), "the panicked call's now= is in force"
    with pytest.raises(TokenRefused, match="expired"):
        codec.verify(old, binding)


def test_a_state_that_does_not_decode_is_refused_unrecorded(codec: Codec, binding: Binding) -> None:
    """FORMAT.md §8: decoding the state into what the caller asked for (step
    14) comes before recording the token (step 15, last). A single-use token
    whose state has no Python form is refused `state_decoding` by a consume
    that decodes, and is NOT recorded: a later consume that asks for the
    bytes (decode=False) still gets it, once."""
    store = MemoryReplayStore(16)
    tagged = bytes.fromhex("c11a69298c00")  # CBOR tag 1 (epoch time): no Python form
    token = codec.mint_cbor(binding, "confirm", tagged, single_use=True, now=NOW).token
    with pytest.raises(TokenRefused, match="state_decoding"):
        codec.consume(token, binding, store, expected_step="confirm", now=NOW)
    assert len(store) == 0, "a token whose state did not decode was recorded as spent"
    verified = codec.consume(token, binding, store, expected_step="confirm", now=NOW, decode=False)
    assert verified.state is None and verified.state_cbor == tagged and len(store) == 1
    with pytest.raises(TokenRefused, match="replayed"):
        codec.consume(token, binding, store, now=NOW, decode=False)


class SetStore:
    """A spent-token store written in Python (`reqstate.ReplayStore`): names
    in a set, every record it was handed kept for the test to look at."""

    def __init__(self) -> None:
        self.records: list[SpentRecord] = []
        self.names: set[str] = set()
        self.fails: BaseException | None = None
        self.answer: object = None

    def insert_if_absent(self, record: SpentRecord) -> bool:
        self.records.append(record)
        if self.fails is not None:
            raise self.fails
        if self.answer is not None:
            return self.answer  # type: ignore[return-value]
        if record.name in self.names:
            return False
        self.names.add(record.name)
        return True


def test_a_replay_store_written_in_python(codec: Codec, binding: Binding) -> None:
    """`Codec.consume` takes any `ReplayStore` (what `reqstate.redis` plugs
    into): it is called once every other check has passed, decoding the
    state included, with the record's name, the token's expiry and the
    verifier's clock; its refusals pass through, anything else it raises is
    `replay_store_unavailable`, never an acceptance."""
    store = SetStore()
    assert isinstance(store, ReplayStore) and not isinstance(object(), ReplayStore)
    minted = codec.mint(binding, "confirm", COUNTER, ttl=300, single_use=True, now=NOW)
    tagged = codec.mint_cbor(binding, "confirm", bytes.fromhex("c11a69298c00"), single_use=True, now=NOW).token
    checks: dict[str, Callable[[], object]] = {
        "wrong_step": lambda: codec.consume(minted.token, binding, store, expected_step="amount", now=NOW),
        "expired": lambda: codec.consume(minted.token, binding, store, now=NOW + 300 + 60),
        "authentication_failed": lambda: codec.consume(minted.token, Binding("other", binding.context), store, now=NOW),
        "state_decoding": lambda: codec.consume(tagged, binding, store, now=NOW),
        "wrong_kind": lambda: codec.consume(codec.mint(binding, "s", now=NOW).token, binding, store, now=NOW),
    }
    for refused, call in checks.items():
        with pytest.raises(TokenRefused) as error:
            call()
        assert error.value.reason == refused
    assert store.records == [], "the store was asked before every other check passed"

    assert codec.consume(minted.token, binding, store, expected_step="confirm", now=NOW + 5).state == COUNTER
    [record] = store.records
    assert len(record.token_id) == 16 and record.name == f"spent:v1:1:{record.token_id.hex()}"
    assert (record.key_id, record.expires_at, record.now) == (1, NOW + 300, NOW + 5)
    assert (record.clock_leeway, record.record_until) == (60, NOW + 360)
    assert record.name in repr(record)
    with pytest.raises(TokenRefused, match="replayed"):
        codec.consume(minted.token, binding, store, now=NOW + 6)

    again = codec.mint(binding, "confirm", COUNTER, single_use=True, now=NOW).token
    store.fails = TokenRefused("replay_store_full", "no room in the test store")
    with pytest.raises(TokenRefused) as full:
        codec.consume(again, binding, store, now=NOW)
    assert (full.value.reason, full.value.message) == ("replay_store_full", "no room in the test store")
    store.fails = RuntimeError("the store broke")
    with pytest.raises(TokenRefused) as broke:
        codec.consume(again, binding, store, now=NOW)
    assert broke.value.reason == "replay_store_unavailable" and "the store broke" in broke.value.message
    assert isinstance(broke.value.__cause__, RuntimeError)
    store.fails = TokenRefused("expired", "not a store's reason")
    assert reason_of_call(lambda: codec.consume(again, binding, store, now=NOW)) == "replay_store_unavailable"
    store.fails, store.answer = None, 1
    assert reason_of_call(lambda: codec.consume(again, binding, store, now=NOW)) == "replay_store_unavailable"
    store.answer = None
    assert codec.consume(again, binding, store, now=NOW).state == COUNTER  # never recorded before
    with pytest.raises(TypeError, match="insert_if_absent"):
        codec.consume(again, binding, object(), now=NOW)  # type: ignore[arg-type]


def reason_of_call(call: Callable[[], object]) -> str:
    try:
        call()
    except TokenRefused as refused:
        return refused.reason
    return "accepted"


# ---------------------------------------------------------------------- batches


def test_batches_give_one_result_per_item(codec: Codec, binding: Binding) -> None:
    minted = codec.mint_many(binding, "s", [1, {"a": object()}, "x"], now=NOW)
    assert isinstance(minted[0], reqstate.Minted) and isinstance(minted[2], reqstate.Minted)
    assert isinstance(minted[1], MintRefused) and minted[1].reason == "state_encoding"
    tokens = [m.token for m in minted if isinstance(m, reqstate.Minted)]
    results = codec.verify_many([*tokens, "garbage"], binding, expected_step="s", now=NOW)
    assert [r.state for r in results[:2] if isinstance(r, reqstate.Verified)] == [1, "x"]
    assert isinstance(results[2], TokenRefused) and results[2].reason == "malformed"
    refused = codec.verify_many(tokens, binding, expected_step="other", now=NOW)
    assert [r.reason for r in refused if isinstance(r, TokenRefused)] == ["wrong_step", "wrong_step"]


def test_batches_release_the_gil(binding: Binding) -> None:
    """While verify_many works on a large batch, another Python thread runs."""
    codec = Codec(Keyring.ephemeral())
    token = codec.mint(binding, "s", COUNTER).token
    tokens = [token] * 100_000
    ticks = 0
    done = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        time.sleep(0.05)
        before = ticks
        started = time.perf_counter()
        results = codec.verify_many(tokens, binding)
        elapsed = time.perf_counter() - started
        during = ticks - before
    finally:
        done.set()
        spinner.join()
    assert len(results) == len(tokens) and all(isinstance(r, reqstate.Verified) for r in results)
    # The batch takes tens of milliseconds; a thread kept off the GIL for
    # all of it would count (almost) nothing in the meantime.
    assert elapsed > 0.02, elapsed
    assert during > 1000, (during, elapsed)


# ---------------------------------------------------------------------- keyring


def test_keyring_text_errors_are_invalid_keyring() -> None:
    for text in (
        "",
        "[[key]]\nid = 1\nstatus = \"active\"\nsecret = \"AAAA\"\n",
        keyring_text((1, HMAC, "primary"), (1, HMAC, "active")),
        "version = 1\n[[key]]\nid = 1\nalgorithm = \"hmac-sha256\"\nstatus = \"primary\"\nsecret_file = \"x\"\n",
    ):
        with pytest.raises(KeyringError) as refused:
            Keyring.from_toml(text)
        assert refused.value.reason == "invalid_keyring"


def test_keyring_never_shows_a_secret() -> None:
    text = keyring_text((1, HMAC, "primary"), (2, XCHACHA, "retired"))
    keyring = Keyring.from_toml(text)
    shown = repr(keyring) + repr(keyring.keys()) + repr(Codec(keyring))
    for line in text.splitlines():
        if line.startswith("secret"):
            assert line.split('"')[1] not in shown
    assert [(k.id, k.algorithm, k.status) for k in keyring.keys()] == [(1, HMAC, "primary"), (2, XCHACHA, "retired")]
    assert keyring.primary_key_id == 1 and len(keyring) == 2
    with pytest.raises(TypeError):
        pickle.dumps(keyring)


def test_keyring_file_gets_the_sidecars_checks(tmp_dir: Path) -> None:
    path = write_private(tmp_dir / "keyring.toml", keyring_text((1, HMAC, "primary")))
    keyring = Keyring.from_file(path)
    assert str(keyring.path) == str(path) and keyring.primary_key_id == 1
    path.chmod(0o640)
    with pytest.raises(KeyringError, match="chmod 600") as readable:
        Keyring.from_file(path)
    # Python's option, not the sidecar's flag.
    assert "pass allow_insecure_permissions=True to Keyring.from_file" in readable.value.message
    assert "--allow" not in readable.value.message
    assert Keyring.from_file(path, allow_insecure_permissions=True).primary_key_id == 1
    path.chmod(0o620)  # writable by the group: never allowed
    with pytest.raises(KeyringError) as writable:
        Keyring.from_file(path, allow_insecure_permissions=True)
    assert "allow_insecure_permissions=True does not allow this" in writable.value.message
    assert "--allow" not in writable.value.message
    path.chmod(0o600)
    tmp_dir.chmod(0o777)  # a directory others can write: they could replace the file
    try:
        with pytest.raises(KeyringError, match="directory"):
            Keyring.from_file(path)
    finally:
        tmp_dir.chmod(0o700)
    with pytest.raises(KeyringError):
        Keyring.from_file(tmp_dir / "missing.toml")
    # secret_file, resolved next to the keyring and checked the same way.
    write_private(tmp_dir / "key-2", "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=\n")
    with_file = write_private(
        tmp_dir / "k2.toml",
        'version = 1\n[[key]]\nid = 2\nalgorithm = "hmac-sha256"\nstatus = "primary"\nsecret_file = "key-2"\n',
    )
    assert Keyring.from_file(with_file).primary_key_id == 2
    (tmp_dir / "key-2").chmod(0o644)
    with pytest.raises(KeyringError) as secret_readable:
        Keyring.from_file(with_file)
    assert "allow_insecure_permissions=True to Keyring.from_file" in secret_readable.value.message
    assert "--allow" not in secret_readable.value.message and "sidecar" not in secret_readable.value.message
    assert Keyring.from_file(with_file, allow_insecure_permissions=True).primary_key_id == 2


def test_reload_keeps_the_last_good_keyring(tmp_dir: Path, binding: Binding) -> None:
    path = write_private(tmp_dir / "keyring.toml", keyring_text((1, HMAC, "primary")))
    keyring = Keyring.from_file(path)
    codec = Codec(keyring)
    token = codec.mint(binding, "s", now=NOW).token
    assert keyring.reload() is False and keyring.generation == 1  # unchanged
    write_private(path, "not a keyring")
    with pytest.raises(KeyringError):
        keyring.reload()
    assert reload_error(keyring) is not None
    assert codec.verify(token, binding, now=NOW).key_id == 1  # still the old keys
    write_private(path, keyring_text((1, HMAC, "active"), (2, XCHACHA, "primary")))
    assert keyring.reload() is True and keyring.generation == 2 and reload_error(keyring) is None
    assert codec.mint(binding, "s", now=NOW).key_id == 2
    assert codec.verify(token, binding, now=NOW).key_id == 1
    with pytest.raises(KeyringError):
        Keyring.ephemeral().reload()


def test_auto_reload_follows_the_file(tmp_dir: Path, binding: Binding) -> None:
    path = write_private(tmp_dir / "keyring.toml", keyring_text((1, HMAC, "primary")))
    keyring = Keyring.from_file(path, auto_reload=True, check_interval=0.0)
    codec = Codec(keyring)
    assert keyring.auto_reload and codec.mint(binding, "s").key_id == 1
    write_private(path, keyring_text((1, HMAC, "active"), (2, XCHACHA, "primary")))
    assert codec.mint(binding, "s").key_id == 2
    write_private(path, "[[key]]\nbroken")
    assert codec.mint(binding, "s").key_id == 2  # the last good keyring
    error = reload_error(keyring)
    assert error is not None and "invalid keyring" in error
    write_private(path, keyring_text((1, HMAC, "retired"), (2, XCHACHA, "primary")))
    old = Codec(Keyring.from_toml(keyring_text((1, HMAC, "primary")))).mint(binding, "s").token
    with pytest.raises(TokenRefused, match="retired_key"):
        codec.verify(old, binding)
    assert reload_error(keyring) is None
    with pytest.raises(InvalidArgument):
        Keyring.from_file(path, check_interval=float("nan"))


def test_auto_reload_reports_a_bad_file_once_per_change(
    tmp_dir: Path, binding: Binding, caplog: pytest.LogCaptureFixture
) -> None:
    """A bad file read again at every interval is one warning on the
    `reqstate` logger, not one per read; a different bad file is another;
    a good one ends it."""
    path = write_private(tmp_dir / "keyring.toml", keyring_text((1, HMAC, "primary")))
    codec = Codec(Keyring.from_file(path, auto_reload=True, check_interval=0.0))
    caplog.set_level("WARNING", logger="reqstate")
    write_private(path, "[[key]]\nbroken")
    for _ in range(20):
        assert codec.mint(binding, "s").key_id == 1
    warnings = [r for r in caplog.records if r.name == "reqstate"]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "reload refused" in warnings[0].getMessage() and "still using the previous keys" in warnings[0].getMessage()
    write_private(path, "version = 2\n" + keyring_text((1, HMAC, "primary")))
    for _ in range(5):
        codec.mint(binding, "s")
    assert len([r for r in caplog.records if r.name == "reqstate"]) == 2
    write_private(path, keyring_text((1, HMAC, "active"), (2, HMAC, "primary")))
    assert codec.mint(binding, "s").key_id == 2
    assert len([r for r in caplog.records if r.name == "reqstate"]) == 2  # no warning: an info line (below)


def test_auto_reload_says_when_the_file_loads_again(
    tmp_dir: Path, binding: Binding, caplog: pytest.LogCaptureFixture
) -> None:
    """After a warning, the reload that succeeds is one info line on the
    `reqstate` logger (new keys or the same), and a good file read again is
    silent; `Keyring.keys()` reports as a `Codec` call does."""
    path = write_private(tmp_dir / "keyring.toml", keyring_text((1, HMAC, "primary")))
    keyring = Keyring.from_file(path, auto_reload=True, check_interval=0.0)
    codec = Codec(keyring)
    caplog.set_level("INFO", logger="reqstate")

    def logged() -> list[tuple[str, str]]:
        return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "reqstate"]

    for _ in range(3):
        codec.mint(binding, "s")
    assert logged() == []  # nothing to say while the file loads
    write_private(path, "[[key]]\nbroken")
    for _ in range(3):
        assert codec.mint(binding, "s").key_id == 1
    assert [level for level, _ in logged()] == ["WARNING"]
    write_private(path, keyring_text((1, HMAC, "active"), (2, HMAC, "primary")))
    for _ in range(3):
        assert codec.mint(binding, "s").key_id == 2
    assert [level for level, _ in logged()] == ["WARNING", "INFO"]
    level, message = logged()[1]
    assert f"keyring {path} loads again" in message and "its keys are in use (generation 2)" in message
    # Broken, then back to the very same text: the keys in use stay, said so.
    write_private(path, "[[key]]\nbroken")
    assert [k.id for k in keyring.keys()] == [1, 2]  # Keyring.keys() reports too
    write_private(path, keyring_text((1, HMAC, "active"), (2, HMAC, "primary")))
    assert keyring.primary_key_id == 2
    assert [level for level, _ in logged()] == ["WARNING", "INFO", "WARNING", "INFO"]
    assert "its keys are the ones already in use (generation 2)" in logged()[3][1]


SCHEDULED = (
    '[[key]]\nid = 1\nalgorithm = "hmac-sha256"\nstatus = "primary"\nretire_at = {retire}\nsecret = "{s1}"\n'
    '[[key]]\nid = 2\nalgorithm = "hmac-sha256"\nstatus = "active"\nmint_from = 2026-12-01T12:05:00Z\nsecret = "{s2}"\n'
)
TAKEOVER = 1_796_126_700  # 2026-12-01T12:05:00Z


def test_a_schedule_is_checked_against_each_codecs_policy(
    tmp_dir: Path, binding: Binding, caplog: pytest.LogCaptureFixture
) -> None:
    """retire_at must leave the tokens of the key it retires their whole
    life under the Codec's policy: refused when the Codec is made, and a
    reload that breaks it is not used by that Codec (it keeps its keys, as
    the sidecar does), reported once."""
    safe = SCHEDULED.format(retire="2026-12-01T12:16:00Z", s1=secret(1), s2=secret(2))
    short = SCHEDULED.format(retire="2026-12-01T12:15:59Z", s1=secret(1), s2=secret(2))
    with pytest.raises(KeyringError, match="refuses live tokens") as refused:
        Codec(Keyring.from_toml(short), max_lifetime=600, clock_leeway=60)
    assert refused.value.reason == "invalid_keyring"
    assert "line 1: key 1: retire_at 2026-12-01T12:15:59Z" in str(refused.value)
    with pytest.raises(KeyringError):  # the default policy: a day's tokens
        Codec(Keyring.from_toml(safe))
    codec = Codec(Keyring.from_toml(safe), max_lifetime=600, clock_leeway=60)
    assert [codec.mint(binding, "s", ttl=600, now=t).key_id for t in (TAKEOVER - 1, TAKEOVER, TAKEOVER + 1)] == [1, 2, 2]
    old = codec.mint(binding, "s", ttl=600, now=TAKEOVER - 1).token
    assert codec.verify(old, binding, now=TAKEOVER + 658).key_id == 1  # its last second
    with pytest.raises(TokenRefused, match="retired_key"):
        codec.verify(old, binding, now=TAKEOVER + 660)
    info = {k.id: (k.mint_from, k.retire_at) for k in codec.keyring.keys()}
    assert info == {1: (None, TAKEOVER + 660), 2: (TAKEOVER, None)}
    assert [codec.keyring.status_at(1, now=t) for t in (TAKEOVER - 1, TAKEOVER, TAKEOVER + 660)] == ["primary", "active", "retired"]

    path = write_private(tmp_dir / "keyring.toml", keyring_text((1, HMAC, "primary")))
    keyring = Keyring.from_file(path, auto_reload=True, check_interval=0.0)
    strict = Codec(keyring, max_lifetime=600, clock_leeway=60)
    caplog.set_level("WARNING", logger="reqstate")
    write_private(path, short)
    for _ in range(5):
        assert strict.mint(binding, "s", ttl=60, now=TAKEOVER + 1).key_id == 1  # the keys it had
    refusals = [r.getMessage() for r in caplog.records if "policy" in r.getMessage()]
    assert len(refusals) == 1 and "refuses live tokens" in refusals[0], refusals
    loose = Codec(keyring, max_lifetime=1, clock_leeway=0)  # the same keys pass a shorter policy
    assert loose.mint(binding, "s", ttl=1, now=TAKEOVER + 1).key_id == 2
    write_private(path, safe)
    assert strict.mint(binding, "s", ttl=60, now=TAKEOVER + 1).key_id == 2


def secret_file_keyring(directory: Path, seed: int = 1) -> Path:
    """A keyring whose one key's secret is in the file `key-1` beside it."""
    write_private(directory / "key-1", secret(seed) + "\n")
    return write_private(
        directory / "keyring.toml",
        'version = 1\n[[key]]\nid = 1\nalgorithm = "hmac-sha256"\nstatus = "primary"\nsecret_file = "key-1"\n',
    )


def assert_minted_under(token: str, binding: Binding, seed: int, not_seed: int) -> None:
    """`token` verifies under key 1 with secret `seed` only, not `not_seed`."""
    only = Codec(Keyring.from_toml("version = 1\n" + key_toml(1, HMAC, "primary", seed)))
    assert only.verify(token, binding, now=NOW).key_id == 1
    other = Codec(Keyring.from_toml("version = 1\n" + key_toml(1, HMAC, "primary", not_seed)))
    with pytest.raises(TokenRefused, match="authentication_failed"):
        other.verify(token, binding, now=NOW)


def test_reload_applies_a_rotated_secret_file(tmp_dir: Path, binding: Binding) -> None:
    """Security review 3, finding 6: the secret rotated in its file, the
    keyring's text unchanged. `reload()` applies it (it compares what the
    keyring was built from, secrets included), like the sidecar."""
    path = secret_file_keyring(tmp_dir, seed=1)
    keyring = Keyring.from_file(path)
    codec = Codec(keyring)
    before = codec.mint(binding, "s", now=NOW).token
    assert keyring.reload() is False
    text = path.read_bytes()
    (tmp_dir / "key-1").write_text(secret(9) + "\n")  # in place, mode 0600 kept
    assert path.read_bytes() == text
    assert keyring.reload() is True and keyring.generation == 2
    assert_minted_under(codec.mint(binding, "s", now=NOW).token, binding, seed=9, not_seed=1)
    with pytest.raises(TokenRefused, match="authentication_failed"):
        codec.verify(before, binding, now=NOW)  # key 1 is the new secret now
    assert keyring.reload() is False


def test_reload_applies_a_changed_secret_env(tmp_dir: Path, binding: Binding, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REQSTATE_TEST_SECRET_1", secret(1))
    path = write_private(
        tmp_dir / "keyring.toml",
        'version = 1\n[[key]]\nid = 1\nalgorithm = "hmac-sha256"\nstatus = "primary"\nsecret_env = "REQSTATE_TEST_SECRET_1"\n',
    )
    keyring = Keyring.from_file(path)
    assert keyring.reload() is False
    monkeypatch.setenv("REQSTATE_TEST_SECRET_1", secret(9))
    assert keyring.reload() is True
    assert_minted_under(Codec(keyring).mint(binding, "s", now=NOW).token, binding, seed=9, not_seed=1)


def test_auto_reload_applies_a_rotated_secret_file(tmp_dir: Path, binding: Binding) -> None:
    """`auto_reload` notices a rotated `secret_file` whose keyring text did
    not change (it reads the keyring again at each check, not only when the
    keyring file's own stat changed)."""
    path = secret_file_keyring(tmp_dir, seed=1)
    keyring = Keyring.from_file(path, auto_reload=True, check_interval=0.0)
    codec = Codec(keyring)
    assert_minted_under(codec.mint(binding, "s", now=NOW).token, binding, seed=1, not_seed=9)
    write_private(tmp_dir / "key-1", secret(9) + "\n")  # replaced, as a secret manager does
    assert_minted_under(codec.mint(binding, "s", now=NOW).token, binding, seed=9, not_seed=1)
    assert keyring.generation == 2 and reload_error(keyring) is None
    (tmp_dir / "key-1").write_text(secret(5) + "\n")  # in place
    assert_minted_under(codec.mint(binding, "s", now=NOW).token, binding, seed=5, not_seed=9)
    # With an interval: not re-read before it has passed, then applied.
    slow = Keyring.from_file(path, auto_reload=True, check_interval=0.3)
    slow_codec = Codec(slow)
    (tmp_dir / "key-1").write_text(secret(6) + "\n")
    assert_minted_under(slow_codec.mint(binding, "s", now=NOW).token, binding, seed=5, not_seed=6)
    time.sleep(0.4)
    assert_minted_under(slow_codec.mint(binding, "s", now=NOW).token, binding, seed=6, not_seed=5)


# ---------------------------------------------------------------- call context


def test_call_context_corpus() -> None:
    corpus = json.loads((VECTORS / "call_context.json").read_text(encoding="utf-8"))
    assert len(corpus["cases"]) > 20
    for case in corpus["cases"]:
        args = (case["principal"], case["audience"], case["method"], case["arguments_json"])
        if "context" in case:
            assert call_context_from_text(*args).hex() == case["context"], case["name"]
            assert canonical_json_from_text(case["arguments_json"]) == case["canonical"], case["name"]
        else:
            with pytest.raises(InvalidArgument) as refused:
                call_context_from_text(*args)
            assert refused.value.reason == "invalid_argument", case["name"]
            # The rule broken, by the corpus's name for it (the sidecar
            # client's InvalidArgumentError.reason comes from here).
            assert refused.value.rule == case["reason"], case["name"]
            with pytest.raises(InvalidArgument) as refused:
                canonical_json_from_text(case["arguments_json"])
            assert refused.value.rule == case["reason"], case["name"]


def test_call_context_refuses_a_raw_lone_surrogate_by_its_rule() -> None:
    # A Python str can hold a surrogate that no escape produced: it has no
    # UTF-8 form, and is refused as the escaped one is, not UnicodeEncodeError.
    for call in (
        lambda: canonical_json_from_text('{"s":"\ud800"}'),
        lambda: call_context_from_text("p", "a", "m", '{"s":"\ud800"}'),
        lambda: call_context("p", "a", "m", {"s": "\ud800"}),
        lambda: call_context("p", "a", "m", "\ud800"),
    ):
        with pytest.raises(InvalidArgument) as refused:
            call()
        assert refused.value.rule == "lone_surrogate"
    assert canonical_json_from_text("[" * reqstate.MAX_ARGUMENTS_DEPTH + "]" * reqstate.MAX_ARGUMENTS_DEPTH)
    with pytest.raises(InvalidArgument) as refused:
        canonical_json_from_text("[" * (reqstate.MAX_ARGUMENTS_DEPTH + 1) + "]" * (reqstate.MAX_ARGUMENTS_DEPTH + 1))
    assert refused.value.rule == "too_deep"
    # Other argument errors name no rule.
    with pytest.raises(InvalidArgument) as refused:
        Binding("", b"")
    assert refused.value.rule is None


def test_call_context_of_parsed_arguments() -> None:
    text = '{"current":10,"to":"bob"}'
    assert call_context("p", "a", "tools/call", json.loads(text)) == call_context_from_text("p", "a", "tools/call", text)
    assert call_context_from_text("p", "a", "tools/call", text.encode()) == call_context_from_text("p", "a", "tools/call", text)
    assert len(call_context("p", "a", "m", {})) == reqstate.CALL_CONTEXT_LEN == 32
    for bad in ({"x": float("nan")}, {"x": object()}, {"x": 2**64}, {"x": "\ud800"}):
        with pytest.raises(InvalidArgument):
            call_context("p", "a", "m", bad)
    with pytest.raises(InvalidArgument):
        call_context_from_text("p", "a", "m", '{"to":"mallory","to":"bob"}')
    with pytest.raises(InvalidArgument) as refused:
        call_context_from_text("p", "a", "m", b'{"a":"\xff"}')
    assert refused.value.rule == "not_json"
    with pytest.raises(TypeError, match="arguments_json must be the JSON text"):
        call_context_from_text("p", "a", "m", {"n": 1})  # type: ignore[arg-type]


def test_reasons_are_the_cores() -> None:
    # The conformance suite's list of reasons (tests/conformance/shapes.rs).
    conformance = (REPO / "tests" / "conformance" / "shapes.rs").read_text(encoding="utf-8")
    listed = conformance.split("const REASONS: &[&str] = &[", 1)[1].split("];", 1)[0]
    assert sorted(reqstate.REASONS) == sorted(json.loads("[" + listed.strip().rstrip(",") + "]"))


def test_version_and_typing_marker() -> None:
    assert reqstate.__version__ == "0.1.0"
    assert (Path(reqstate.__file__).parent / "py.typed").is_file()
    assert os.path.basename(reqstate._native.__file__).startswith("_native")
