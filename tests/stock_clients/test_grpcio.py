"""Stock grpcio (gRPC's C core) against the real sidecar, as a new user would
write it: `grpc.insecure_channel("unix:///…")` with no channel options and
stubs generated from proto/ by grpcio-tools.

gRPC's C core sends the socket's path, percent-encoded, as the HTTP/2
`:authority` (`tmp%2F…%2Freqstate.sock`). Upstream h2 resets such streams;
the sidecar's patched h2 (vendor/h2/PATCH.md) accepts them on Unix sockets
and refuses them on TCP, with the standard rich error details.

Run by tests/stock_clients/run.sh; the binary is $REQSTATE_BIN.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

REPO = Path(__file__).resolve().parents[2]


def _generated_stubs() -> tuple[Any, Any]:
    """reqstate_pb2 and reqstate_pb2_grpc, generated now from proto/."""
    from grpc_tools import protoc

    out = Path(tempfile.mkdtemp(prefix="reqstate-stubs-"))
    code = protoc.main(
        [
            "protoc",
            f"-I{REPO / 'proto'}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            "reqstate/v1/reqstate.proto",
        ]
    )
    assert code == 0, "protoc failed"
    sys.path.insert(0, str(out))
    from reqstate.v1 import reqstate_pb2, reqstate_pb2_grpc  # type: ignore[import-not-found]

    return reqstate_pb2, reqstate_pb2_grpc


pb, pb_grpc = _generated_stubs()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sidecar:
    """`reqstate serve --dev` on a Unix socket and a loopback TCP port."""

    def __init__(self, directory: Path) -> None:
        binary = os.environ.get("REQSTATE_BIN", str(REPO / "target" / "debug" / "reqstate"))
        self.socket = directory / "reqstate.sock"
        self.tcp = f"127.0.0.1:{_free_port()}"
        self.log = (directory / "sidecar.log").open("wb")
        self.process = subprocess.Popen(
            [
                binary,
                "serve",
                "--dev",
                "--listen",
                f"unix:{self.socket}",
                "--listen",
                f"tcp:{self.tcp}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while not self.socket.exists():
            assert self.process.poll() is None, "the sidecar exited at start"
            assert time.monotonic() < deadline, "the sidecar did not bind its socket"
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        self.log.close()


@pytest.fixture(scope="module")
def sidecar() -> Iterator[Sidecar]:
    with tempfile.TemporaryDirectory() as directory:
        running = Sidecar(Path(directory))
        try:
            yield running
        finally:
            running.stop()


@pytest.fixture()
def unix_channel(sidecar: Sidecar) -> Iterator[grpc.Channel]:
    # No options: the C core picks the :authority itself.
    with grpc.insecure_channel(f"unix://{sidecar.socket}") as channel:
        yield channel


def test_the_c_core_sends_a_percent_encoded_path_as_authority(sidecar: Sidecar) -> None:
    # What this suite exists for: if a grpcio upgrade stopped sending such an
    # authority, the other tests would pass without exercising the patch. The
    # C core's own HTTP trace shows the headers it sends.
    probe = (
        "import grpc, sys\n"
        "from grpc_health.v1 import health_pb2, health_pb2_grpc\n"
        "with grpc.insecure_channel('unix://' + sys.argv[1]) as ch:\n"
        "    print(health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status)\n"
    )
    env = dict(os.environ, GRPC_TRACE="http", GRPC_VERBOSITY="debug")
    run = subprocess.run(
        [sys.executable, "-c", probe, str(sidecar.socket)], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == str(health_pb2.HealthCheckResponse.SERVING)
    assert f":authority: {_c_core_authority(sidecar)}," in run.stderr, "the C core sent another :authority"


def _c_core_authority(sidecar: Sidecar) -> str:
    """The :authority gRPC's C core sends for `unix://<path>` (grpc/grpc#38142):
    the path without its leading slash, each further slash as %2F."""
    return str(sidecar.socket).lstrip("/").replace("/", "%2F")


def test_unary_mint_and_verify(unix_channel: grpc.Channel) -> None:
    stub = pb_grpc.RequestStateStub(unix_channel)
    minted = stub.Mint(
        pb.MintRequest(tool="increase-counter", step="confirm", state_json='{"n":1}', ttl_seconds=60, context=b"ctx"),
        timeout=5,
    )
    assert minted.token and minted.key_id >= 1
    verified = stub.Verify(
        pb.VerifyRequest(token=minted.token, tool="increase-counter", expected_step="confirm", context=b"ctx"),
        timeout=5,
    )
    assert verified.valid, verified.detail
    assert verified.state_json == '{"n":1}'
    tampered = stub.Verify(
        pb.VerifyRequest(token=minted.token[:-2] + "AA", tool="increase-counter", context=b"ctx"), timeout=5
    )
    assert not tampered.valid
    assert tampered.reason != pb.REASON_UNSPECIFIED


def test_batch_mint_and_verify(unix_channel: grpc.Channel) -> None:
    stub = pb_grpc.RequestStateStub(unix_channel)
    items = [pb.MintRequest(tool="t", step=f"s{i}", state_json=str(i), ttl_seconds=60) for i in range(10)]
    minted = stub.MintBatch(pb.MintBatchRequest(items=items), timeout=5)
    assert len(minted.results) == 10
    tokens = [r.minted.token for r in minted.results]
    assert all(tokens)
    checks = [pb.VerifyRequest(token=t, tool="t", expected_step=f"s{i}") for i, t in enumerate(tokens)]
    checks.append(pb.VerifyRequest(token=tokens[0], tool="t", expected_step="other"))
    verified = stub.VerifyBatch(pb.VerifyBatchRequest(items=checks), timeout=5)
    assert [r.valid for r in verified.results] == [True] * 10 + [False]
    assert verified.results[10].reason == pb.REASON_WRONG_STEP
    assert [r.state_json for r in verified.results[:10]] == [str(i) for i in range(10)]


def test_health(unix_channel: grpc.Channel) -> None:
    stub = health_pb2_grpc.HealthStub(unix_channel)
    for service in ("", "reqstate.v1.RequestState"):
        answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_and_describes_the_service(unix_channel: grpc.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(unix_channel)
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="reqstate.v1.RequestState"),
    ]
    answers = list(stub.ServerReflectionInfo(iter(requests), timeout=5))
    services = {s.name for s in answers[0].list_services_response.service}
    assert "reqstate.v1.RequestState" in services
    assert "grpc.health.v1.Health" in services
    assert answers[1].file_descriptor_response.file_descriptor_proto, "no descriptor for the service"


def test_errors_carry_the_standard_rich_error_details(unix_channel: grpc.Channel) -> None:
    stub = pb_grpc.RequestStateStub(unix_channel)
    with pytest.raises(grpc.RpcError) as raised:
        stub.Mint(pb.MintRequest(tool="", step="s", ttl_seconds=60), timeout=5)
    error = raised.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(error)
    assert status is not None, "no google.rpc.Status in the trailers"
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    assert len(infos) == 1
    info = error_details_pb2.ErrorInfo()
    infos[0].Unpack(info)
    assert (info.reason, info.domain) == ("INVALID_ARGUMENT", "reqstate")
    # The older trailer, kept: the same reason, lower case.
    assert ("reqstate-reason", "invalid_argument") in list(error.trailing_metadata())


def test_tcp_keeps_refusing_a_malformed_authority(sidecar: Sidecar) -> None:
    # The same authority over TCP is still an error (upstream h2 resets the
    # stream; the sidecar answers INVALID_ARGUMENT with the reason).
    options = [("grpc.default_authority", _c_core_authority(sidecar))]
    with grpc.insecure_channel(sidecar.tcp, options=options) as channel:
        with pytest.raises(grpc.RpcError) as raised:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    error = raised.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert "malformed :authority" in (error.details() or "")
    status = rpc_status.from_call(error)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert info.reason == "INVALID_ARGUMENT"
    # A plain authority over TCP works as ever.
    with grpc.insecure_channel(sidecar.tcp) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
