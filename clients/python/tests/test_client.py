"""reqstate_client.Client against a real sidecar, over its Unix socket and TCP."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from conftest import AUTH_TOKEN, Sidecar, free_port

from reqstate_client import (
    Algorithm,
    AuthenticationError,
    Client,
    InvalidRequestError,
    ItemError,
    KeyStatus,
    Minted,
    MintItem,
    PermissionDeniedError,
    Reason,
    ReqstateError,
    TransportError,
    VerifyItem,
)
from reqstate_client._client import channel_options
from reqstate_client._pb import reqstate_pb2 as pb

CONTEXT = b'{"principal":"user-42","audience":"counter-server","args":"sha256:..."}'


def test_health_answers_without_the_bearer_token(sidecar: Sidecar, transport: str) -> None:
    with sidecar.client(transport, token=None) as client:
        assert client.health() == "SERVING"
        assert client.health("reqstate.v1.RequestState") == "SERVING"


def test_the_socket_gets_a_plain_authority_unless_the_caller_sets_one(sidecar: Sidecar) -> None:
    # On a Unix socket grpcio would send the socket's path, percent-encoded,
    # as :authority, which only the sidecar's patched h2 accepts
    # (vendor/h2/PATCH.md): the client sends `localhost` instead, so it does
    # not depend on that patch. A caller's own authority wins.
    authority = ("grpc.default_authority", "localhost")
    assert channel_options("unix:///run/reqstate.sock") == [authority]
    assert channel_options("unix-abstract:reqstate") == [authority]
    assert channel_options("unix:/run/reqstate.sock", [("grpc.max_send_message_length", 1)]) == [
        ("grpc.max_send_message_length", 1),
        authority,
    ]
    own = [("grpc.default_authority", "reqstate.internal")]
    assert channel_options("unix:///run/reqstate.sock", own) == own
    # Over TCP the target's host:port stays the authority.
    assert channel_options("127.0.0.1:50051") == []
    assert channel_options("localhost:50051", own) == own
    for options in ([], [authority], own):
        with Client(sidecar.unix_target, sidecar.auth_token, 5.0, options=options) as client:
            minted = client.mint("t", "s", state_json=1, ttl_seconds=60)
            assert client.verify(minted.token, "t", expected_step="s").json() == 1
            assert client.health() == "SERVING"


def _authorities_sent(code: str, socket: str) -> list[str]:
    """The :authority values gRPC's C core sends while `code` runs (its HTTP
    trace, GRPC_TRACE=http), in a child process given the socket path."""
    env = dict(os.environ, GRPC_TRACE="http", GRPC_VERBOSITY="debug")
    run = subprocess.run([sys.executable, "-c", code, socket], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "SERVING", run.stdout
    return re.findall(r":authority: ([^,\s]+),", run.stderr)


def test_the_authority_on_the_wire_is_localhost(sidecar: Sidecar) -> None:
    socket = str(sidecar.unix)
    path_authority = socket.lstrip("/").replace("/", "%2F")
    # The control: a bare grpcio channel sends the percent-encoded path
    # (if the trace stopped showing it, the check below would prove nothing).
    bare = (
        "import grpc, sys\n"
        "with grpc.insecure_channel('unix://' + sys.argv[1]) as ch:\n"
        "    check = ch.unary_unary('/grpc.health.v1.Health/Check')\n"
        "    check(b'', timeout=5)\n"
        "    print('SERVING')\n"
    )
    assert set(_authorities_sent(bare, socket)) == {path_authority}
    client = (
        "import sys\n"
        "from reqstate_client import Client\n"
        "with Client('unix://' + sys.argv[1], timeout=5) as c:\n"
        "    print(c.health())\n"
    )
    assert set(_authorities_sent(client, socket)) == {"localhost"}


def test_mint_then_verify_json_state(sidecar: Sidecar, transport: str) -> None:
    with sidecar.client(transport) as client:
        before = int(time.time())
        minted = client.mint(
            "increase-counter",
            "confirm",
            state_json={"current": 10, "amount": 5},
            ttl_seconds=120,
            context=CONTEXT,
        )
        assert isinstance(minted, Minted)
        assert minted.key_id == 1  # the primary
        assert minted.expires_at - minted.issued_at == 120
        assert before - 1 <= minted.issued_at <= int(time.time()) + 1
        assert set(minted.token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

        verified = client.verify(minted.token, "increase-counter", expected_step="confirm", context=CONTEXT)
        assert verified.valid and verified
        assert verified.reason is Reason.UNSPECIFIED
        assert verified.detail == ""
        assert verified.step == "confirm"
        assert verified.state is None
        assert verified.json() == {"current": 10, "amount": 5}
        assert (verified.key_id, verified.issued_at, verified.expires_at) == (
            minted.key_id,
            minted.issued_at,
            minted.expires_at,
        )


def test_mint_then_verify_bytes_and_default_ttl(sidecar: Sidecar) -> None:
    with sidecar.client() as client:
        minted = client.mint("t", "s", state=b"\x00\xffopaque")
        assert minted.expires_at - minted.issued_at == 600  # the sidecar's --default-ttl
        verified = client.verify(minted.token, "t")
        assert verified.valid
        assert verified.state == b"\x00\xffopaque"
        assert verified.state_json is None
        with pytest.raises(ValueError):
            verified.json()
        # Raw JSON text is passed through as is.
        text = client.mint("t", "s", state_json='[1, "two"]')
        assert client.verify(text.token, "t").state_json == '[1,"two"]'
        # Neither state: empty bytes.
        assert client.verify(client.mint("t", "s").token, "t").state == b""
        with pytest.raises(ValueError):
            client.mint("t", "s", state=b"x", state_json="1")


def test_invalid_tokens_are_results_not_exceptions(sidecar: Sidecar, transport: str) -> None:
    with sidecar.client(transport) as client:
        token = client.mint("increase-counter", "confirm", state_json={"amount": 5}, context=CONTEXT).token
        sealed = client.seal(b"payload").token
        flipped = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
        cases = {
            "altered": (flipped, "increase-counter", "confirm", CONTEXT, Reason.AUTHENTICATION_FAILED),
            "other tool": (token, "decrease-counter", None, CONTEXT, Reason.AUTHENTICATION_FAILED),
            "other caller": (token, "increase-counter", None, b"someone else", Reason.AUTHENTICATION_FAILED),
            "other step": (token, "increase-counter", "amount", CONTEXT, Reason.WRONG_STEP),
            "not base64url": ("not a token!", "increase-counter", None, CONTEXT, Reason.MALFORMED),
            "sealed, not a state token": (sealed, "increase-counter", None, CONTEXT, Reason.WRONG_KIND),
            "too long": ("A" * 9000, "increase-counter", None, CONTEXT, Reason.TOO_LARGE),
        }
        for name, (candidate, tool, step, context, reason) in cases.items():
            result = client.verify(candidate, tool, expected_step=step, context=context)
            assert not result.valid and not result, name
            assert result.reason is reason, (name, result)
            assert result.detail, name
            assert result.state is None and result.state_json is None and result.step == "", name
        assert client.verify(token, "increase-counter", context=CONTEXT).valid  # the original still verifies


def test_tokens_of_a_retired_or_unknown_key_are_refused(sidecar: Sidecar) -> None:
    # Key 3 is retired in the shared sidecar's keyring, key 9 is in no keyring:
    # mint them with sidecars of their own that hold the same secrets as primary.
    for key_id, reason in ((3, Reason.RETIRED_KEY), (9, Reason.UNKNOWN_KEY)):
        other = Sidecar(keys=[(key_id, "primary")])
        try:
            with other.client() as client:
                token = client.mint("t", "s").token
                sealed = client.seal(b"p").token
        finally:
            other.stop()
        with sidecar.client() as client:
            assert client.verify(token, "t").reason is reason
            assert client.unseal(sealed).reason is reason


def test_malformed_requests_raise_with_their_reason(sidecar: Sidecar) -> None:
    with sidecar.client() as client:
        with pytest.raises(InvalidRequestError) as empty_tool:
            client.mint("", "s")
        assert empty_tool.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert empty_tool.value.reason is Reason.INVALID_ARGUMENT
        with pytest.raises(InvalidRequestError) as bad_json:
            client.mint("t", "s", state_json="{not json")
        assert bad_json.value.reason is Reason.INVALID_ARGUMENT
        with pytest.raises(InvalidRequestError) as too_long:
            client.mint("t", "s", ttl_seconds=10**9)
        assert too_long.value.reason is Reason.LIFETIME_TOO_LONG
        with pytest.raises(InvalidRequestError):
            client.verify("x", "")
        assert isinstance(too_long.value, ReqstateError)


def test_seal_and_unseal(sidecar: Sidecar, transport: str) -> None:
    with sidecar.client(transport) as client:
        sealed = client.seal(b'{"v":1,"s":"state"}', aad=b"domain-a")
        assert sealed.key_id == 1
        opened = client.unseal(sealed.token, aad=b"domain-a")
        assert opened.valid and opened
        assert opened.payload == b'{"v":1,"s":"state"}'
        assert opened.key_id == 1
        assert opened.reason is Reason.UNSPECIFIED
        # Another aad, an altered token, a state token: in-band failures.
        other_aad = client.unseal(sealed.token, aad=b"domain-b")
        assert not other_aad.valid and other_aad.reason is Reason.AUTHENTICATION_FAILED
        assert other_aad.payload == b""
        assert client.unseal(sealed.token + "-TAMPERED", aad=b"domain-a").valid is False
        state_token = client.mint("t", "s").token
        assert client.unseal(state_token).reason is Reason.WRONG_KIND
        # Two seals of the same payload differ (random nonce).
        assert client.seal(b"same").token != client.seal(b"same").token


def test_mint_batch_and_verify_batch(sidecar: Sidecar, transport: str) -> None:
    with sidecar.client(transport) as client:
        results = client.mint_batch(
            [
                MintItem("counter", "a", state_json={"n": 1}),
                MintItem("", "b", state_json={"n": 2}),
                MintItem("counter", "c", state=b"3", context=b"ctx"),
            ]
        )
        assert len(results) == 3
        first, second, third = results
        assert isinstance(first, Minted) and isinstance(third, Minted)
        assert isinstance(second, ItemError)
        assert second.reason is Reason.INVALID_ARGUMENT and second.detail

        verified = client.verify_batch(
            [
                VerifyItem(third.token, "counter", expected_step="c", context=b"ctx"),
                VerifyItem(first.token, "counter", expected_step="a"),
                VerifyItem(first.token, ""),
                VerifyItem(first.token, "counter", expected_step="zzz"),
                VerifyItem(third.token, "counter"),  # context missing
            ]
        )
        assert [v.valid for v in verified] == [True, True, False, False, False]
        assert verified[0].state == b"3" and verified[0].step == "c"
        assert verified[1].json() == {"n": 1} and verified[1].step == "a"
        assert [v.reason for v in verified[2:]] == [
            Reason.INVALID_ARGUMENT,
            Reason.WRONG_STEP,
            Reason.AUTHENTICATION_FAILED,
        ]
        assert client.mint_batch([]) == [] and client.verify_batch([]) == []


def test_single_use_token_is_consumed_once(sidecar: Sidecar, transport: str) -> None:
    with sidecar.client(transport) as client:
        minted = client.mint("redeem", "confirm", state_json={"coupon": 7}, context=CONTEXT, single_use=True)
        plain = client.mint("redeem", "confirm", state_json={"coupon": 7}, context=CONTEXT)
        assert len(minted.token) == len(plain.token) + 24  # the 16-byte token id
        assert minted.key_id == 1 and minted.expires_at - minted.issued_at == 600

        # A plain verify never accepts it, before or after it is consumed.
        refused = client.verify(minted.token, "redeem", context=CONTEXT)
        assert not refused.valid and refused.reason is Reason.SINGLE_USE and refused.reason.code == "single_use"
        assert refused.detail and refused.state_json is None and refused.step == ""
        # Refused consumes (another caller, another step, altered) do not spend it.
        flipped = minted.token[:-3] + ("A" if minted.token[-3] != "A" else "B") + minted.token[-2:]
        for token, step, context, reason in (
            (minted.token, None, b"someone else", Reason.AUTHENTICATION_FAILED),
            (minted.token, "amount", CONTEXT, Reason.WRONG_STEP),
            (flipped, None, CONTEXT, Reason.AUTHENTICATION_FAILED),
        ):
            result = client.verify(token, "redeem", expected_step=step, context=context, consume=True)
            assert not result.valid and result.reason is reason, result

        first = client.verify(minted.token, "redeem", expected_step="confirm", context=CONTEXT, consume=True)
        assert first.valid and first.reason is Reason.UNSPECIFIED
        assert first.step == "confirm" and first.json() == {"coupon": 7}
        assert (first.issued_at, first.expires_at) == (minted.issued_at, minted.expires_at)

        second = client.verify(minted.token, "redeem", expected_step="confirm", context=CONTEXT, consume=True)
        assert not second.valid and second.reason is Reason.REPLAYED and second.reason.code == "replayed"
        assert second.detail and second.state_json is None
        assert client.verify(minted.token, "redeem", context=CONTEXT).reason is Reason.SINGLE_USE

        # consume is for single-use tokens only; the others still verify.
        assert client.verify(plain.token, "redeem", context=CONTEXT, consume=True).reason is Reason.WRONG_KIND
        assert client.verify(plain.token, "redeem", context=CONTEXT).valid
        sealed = client.seal(b"payload").token
        assert client.verify(sealed, "redeem", consume=True).reason is Reason.WRONG_KIND
        assert client.unseal(minted.token).reason is Reason.WRONG_KIND


def test_single_use_in_batches(sidecar: Sidecar, transport: str) -> None:
    with sidecar.client(transport) as client:
        minted = client.mint_batch(
            [
                MintItem("redeem", "confirm", state=b"once!", single_use=True),
                MintItem("redeem", "confirm", state=b"often"),
            ]
        )
        assert all(isinstance(m, Minted) for m in minted)
        once, often = (m.token for m in minted if isinstance(m, Minted))
        assert len(once) == len(often) + 24
        results = client.verify_batch(
            [
                VerifyItem(once, "redeem", consume=True),
                VerifyItem(once, "redeem", consume=True),
                VerifyItem(once, "redeem"),
                VerifyItem(often, "redeem", consume=True),
                VerifyItem(often, "redeem"),
            ]
        )
        assert [r.reason for r in results] == [
            Reason.UNSPECIFIED,
            Reason.REPLAYED,
            Reason.SINGLE_USE,
            Reason.WRONG_KIND,
            Reason.UNSPECIFIED,
        ]
        assert results[0].state == b"once!" and results[4].state == b"often"
        assert client.verify(once, "redeem", consume=True).reason is Reason.REPLAYED

        # The same token many times in one batch: accepted exactly once.
        token = client.mint("redeem", "confirm", single_use=True).token
        many = client.verify_batch([VerifyItem(token, "redeem", consume=True)] * 16)
        assert [r.valid for r in many].count(True) == 1
        assert {r.reason for r in many if not r.valid} == {Reason.REPLAYED}


def test_a_full_replay_store_refuses_and_records_nothing() -> None:
    """--replay-capacity 64: more consumes than that, the extra ones refused
    as REPLAY_STORE_FULL, never accepted unrecorded."""
    full = Sidecar(args=["--replay-capacity", "64"])
    try:
        with full.client() as client:
            minted = client.mint_batch([MintItem("redeem", "confirm", single_use=True)] * 80)
            tokens = [m.token for m in minted if isinstance(m, Minted)]
            assert len(tokens) == 80
            results = client.verify_batch([VerifyItem(t, "redeem", consume=True) for t in tokens])
            accepted = [t for t, r in zip(tokens, results, strict=True) if r.valid]
            refused = [t for t, r in zip(tokens, results, strict=True) if not r.valid]
            assert {r.reason for r in results if not r.valid} == {Reason.REPLAY_STORE_FULL}
            assert 0 < len(accepted) <= 64 and len(refused) >= 16
            assert Reason.REPLAY_STORE_FULL.code == "replay_store_full"
            # Still full: a refused token stays refused, an accepted one is replayed.
            assert client.verify(refused[0], "redeem", consume=True).reason is Reason.REPLAY_STORE_FULL
            assert client.verify(accepted[0], "redeem", consume=True).reason is Reason.REPLAYED
            # Everything else keeps working.
            assert client.verify(client.mint("t", "s").token, "t").valid
    finally:
        full.stop()


def test_an_unreachable_replay_store_fails_closed() -> None:
    """--replay-store at a Redis nobody runs: consumes are refused as
    REPLAY_STORE_UNAVAILABLE, plain verifies still work."""
    dead = Sidecar(args=["--replay-store", f"redis://127.0.0.1:{free_port()}", "--replay-timeout-ms", "200"])
    try:
        with dead.client() as client:
            token = client.mint("redeem", "confirm", single_use=True).token
            for _ in range(2):
                result = client.verify(token, "redeem", consume=True)
                assert not result.valid and result.reason is Reason.REPLAY_STORE_UNAVAILABLE, result
                assert result.reason.code == "replay_store_unavailable"
            batch = client.verify_batch([VerifyItem(token, "redeem", consume=True)] * 2)
            assert [r.reason for r in batch] == [Reason.REPLAY_STORE_UNAVAILABLE] * 2
            assert client.verify(token, "redeem").reason is Reason.SINGLE_USE
            assert client.verify(client.mint("t", "s").token, "t").valid
    finally:
        dead.stop()


def test_list_keys(sidecar: Sidecar, transport: str) -> None:
    with sidecar.client(transport) as client:
        keys = client.list_keys()
    assert keys.keyring_generation == 1
    assert [(k.id, k.status) for k in keys.keys] == [
        (1, KeyStatus.PRIMARY),
        (2, KeyStatus.ACTIVE),
        (3, KeyStatus.RETIRED),
    ]
    assert all(k.algorithm is Algorithm.XCHACHA20_POLY1305 for k in keys.keys)
    assert keys.keys[0].created_at == 1796040000  # 2026-11-30T12:00:00Z
    assert keys.primary is not None and keys.primary.id == 1
    assert keys.get(2) is not None and keys.get(4) is None
    # The schedule fields and the evidence (issue 25): no schedule here, the
    # file's statuses are what the keys do; the sidecar's clock and policy.
    assert [k.file_status for k in keys.keys] == [k.status for k in keys.keys]
    assert all(k.mint_from is None and k.retire_at is None for k in keys.keys)
    assert keys.minting_key_id == 1 and keys.next_transition is None
    assert abs(keys.now - time.time()) < 60
    assert len(keys.keyring_sha256) == 64 and keys.max_ttl_seconds > 0


def test_bearer_token_is_required(sidecar: Sidecar, transport: str) -> None:
    for token in (None, "wrong-token", AUTH_TOKEN + "x"):
        with sidecar.client(transport, token=token) as client:
            for call in (
                lambda: client.mint("t", "s"),
                lambda: client.verify("x", "t"),
                lambda: client.seal(b"p"),
                lambda: client.unseal("x"),
                client.list_keys,
            ):
                with pytest.raises(AuthenticationError) as refused:
                    call()
                assert refused.value.code is grpc.StatusCode.UNAUTHENTICATED
                assert not isinstance(refused.value, TransportError)
                # The call gate's refusal, said as such and with what to do:
                # not a reason of the format (it read `reason: unrecognized`).
                assert refused.value.refusal == "unauthenticated" and refused.value.reason is None
                assert "unrecognized" not in str(refused.value)
                said = str(refused.value)
                assert "requires a bearer token" in said and "pass token=... to Client" in said
            assert client.health() == "SERVING"
    with sidecar.client(transport, token=AUTH_TOKEN) as client:
        assert client.list_keys().keys


def test_a_uid_not_allowed_is_told_so() -> None:
    """PERMISSION_DENIED (--allow-uid without this process's uid): the gate's
    refusal, and which uid to allow."""
    other = os.geteuid() + 1
    process = Sidecar(args=["--allow-uid", str(other)])
    try:
        with process.client("unix") as client:
            with pytest.raises(PermissionDeniedError) as refused:
                client.mint("t", "s")
        assert refused.value.code is grpc.StatusCode.PERMISSION_DENIED
        assert refused.value.refusal == "permission_denied" and refused.value.reason is None
        assert "unrecognized" not in str(refused.value)
        assert f"--allow-uid: run as one of them or add this process's uid ({os.geteuid()})" in str(refused.value)
    finally:
        process.stop()


def test_a_client_deadline_is_told_so(tmp_path: Path) -> None:
    """A deadline the client set and missed (no answer from the sidecar, so
    no trailer): `deadline_exceeded`, and how to give it longer.

    The peer accepts the connection and never answers, so the deadline is
    missed every time (a real sidecar under a 1 µs deadline sometimes
    answered first: a CI run failed on it)."""
    path = tmp_path / "silent.sock"
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(str(path))
    silent.listen()
    accepted: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                accepted.append(silent.accept()[0])
        except OSError:
            return

    threading.Thread(target=accept, daemon=True).start()
    try:
        with Client(f"unix://{path}", token=AUTH_TOKEN, timeout=0.3) as client:
            with pytest.raises(TransportError) as late:
                client.list_keys()
    finally:
        silent.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        silent.close()
        for connection in accepted:
            connection.close()
    assert late.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert late.value.refusal == "deadline_exceeded" and late.value.reason is None
    assert "pass a longer timeout=" in str(late.value)


def test_a_format_reason_stays_the_reason(sidecar: Sidecar) -> None:
    """A refusal with a reason of the format keeps it in `reason`, and
    `refusal` is its code."""
    with sidecar.client() as client:
        with pytest.raises(InvalidRequestError) as refused:
            client.mint("t", "s", ttl_seconds=10**9)
    assert refused.value.reason is Reason.LIFETIME_TOO_LONG
    assert refused.value.refusal == "lifetime_too_long" and "(reason: lifetime_too_long)" in str(refused.value)


def test_unreachable_sidecar_raises_transport_error(dead_unix_target: str) -> None:
    for target in (dead_unix_target, f"127.0.0.1:{free_port()}", f"tcp:127.0.0.1:{free_port()}"):
        with Client(target, token="t", timeout=2.0) as client:
            started = time.monotonic()
            for call in (
                lambda: client.mint("t", "s"),
                lambda: client.verify("x", "t"),
                lambda: client.seal(b"p"),
                lambda: client.unseal("x"),
                lambda: client.mint_batch([MintItem("t", "s")]),
                lambda: client.verify_batch([VerifyItem("x", "t")]),
                client.list_keys,
                client.health,
            ):
                with pytest.raises(TransportError) as failed:
                    call()
                assert isinstance(failed.value, ReqstateError)
                assert failed.value.code is grpc.StatusCode.UNAVAILABLE
                assert target in str(failed.value)
                assert failed.value.refusal == "unavailable" and failed.value.reason is None
                assert f"is the sidecar running and listening at {target}?" in str(failed.value)
            assert time.monotonic() - started < 10  # fails fast, does not hang


def test_a_closed_client_raises_transport_error(sidecar: Sidecar) -> None:
    with sidecar.client() as client:
        assert client.list_keys().keys
    with pytest.raises(TransportError):
        client.list_keys()
    client.close()  # idempotent


def test_enums_mirror_the_proto() -> None:
    for python_enum, proto_enum, prefix in (
        (Reason, pb.Reason, "REASON_"),
        (Algorithm, pb.Algorithm, "ALGORITHM_"),
        (KeyStatus, pb.KeyStatus, "KEY_STATUS_"),
    ):
        proto = {name.removeprefix(prefix): number for name, number in proto_enum.items()}
        ours = {m.name: m.value for m in python_enum if m.name != "UNRECOGNIZED"}
        assert ours == proto, python_enum.__name__
        assert python_enum.from_wire(999) is python_enum.UNRECOGNIZED
    assert Reason.AUTHENTICATION_FAILED.code == "authentication_failed"
    assert Reason.from_code("retired_key") is Reason.RETIRED_KEY
    assert Reason.from_code("REASON_RETIRED_KEY") is Reason.RETIRED_KEY
    assert Reason.from_code("") is None
    assert Reason.from_code("something_new") is Reason.UNRECOGNIZED


def test_targets() -> None:
    from reqstate_client import grpc_target

    assert grpc_target("unix:///run/reqstate.sock") == "unix:///run/reqstate.sock"
    assert grpc_target("tcp:127.0.0.1:50051") == "127.0.0.1:50051"
    assert grpc_target("localhost:50051") == "localhost:50051"
    with pytest.raises(ValueError):
        Client("")
    assert "***" in repr(Client("localhost:1", token="secret")) and "secret" not in repr(
        Client("localhost:1", token="secret")
    )


def _non_loopback_local_ip() -> str | None:
    """The host's own address that is not loopback (to listen on), if any."""
    try:
        names = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    except OSError:
        names = []
    for name in names:
        if ":" in name or name.startswith("127."):
            continue
        with socket.socket() as probe:
            try:
                probe.bind((name, 0))
            except OSError:
                continue
        return name
    return None


def test_a_token_never_goes_in_plaintext_to_another_host(sidecar: Sidecar) -> None:
    """Security review round 4, finding 2: without TLS credentials a bearer
    token goes to a Unix socket or loopback only; another host raises before
    any channel is made, unless `insecure_send_token=True`."""
    listener = socket.socket()
    own = _non_loopback_local_ip()
    # The host's own non-loopback address, to see that nothing connects; on
    # a machine without one, TEST-NET-1 (never routed, never contacted).
    if own is not None:
        listener.bind((own, 0))
        listener.listen()
        listener.setblocking(False)
        outside = f"{own}:{listener.getsockname()[1]}"
    else:
        listener.close()
        outside = "192.0.2.1:50051"
    try:
        for target in (outside, f"tcp:{outside}", f"dns:///{outside}", f"ipv4:127.0.0.1:1,{outside}"):
            with pytest.raises(ValueError) as refused:
                Client(target, token=AUTH_TOKEN)
            said = str(refused.value)
            for hint in ("not a loopback address", "credentials=", "unix://", "insecure_send_token=True"):
                assert hint in said, (target, said)
            assert AUTH_TOKEN not in said
        # Through the MCP codec's client options as well.
        from reqstate_client.mcp import SidecarCodec

        with pytest.raises(ValueError, match="not a loopback address"):
            SidecarCodec(outside, AUTH_TOKEN)
        if own is not None:
            with pytest.raises(BlockingIOError):
                listener.accept()
        # No token, TLS credentials, or told plainly: a channel is made.
        Client(outside).close()
        Client(outside, token=AUTH_TOKEN, credentials=grpc.ssl_channel_credentials()).close()
        Client(outside, token=AUTH_TOKEN, insecure_send_token=True).close()
    finally:
        listener.close()
    # Loopback and Unix sockets keep working with the token.
    for transport in ("unix", "tcp"):
        with sidecar.client(transport) as client:
            assert client.list_keys().keys
    port = sidecar.target("tcp").rsplit(":", 1)[1]
    for target in (f"localhost:{port}", f"tcp:localhost:{port}", f"dns:///localhost:{port}"):
        with Client(target, token=AUTH_TOKEN) as client:
            assert client.list_keys().keys
