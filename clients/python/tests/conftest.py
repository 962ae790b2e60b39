"""Real `reqstate serve` processes for the tests.

Like tests/support/sidecar_process.rs: a temp-dir keyring with mode 0600, a
Unix socket and a free loopback TCP port, a metrics port, readiness by
polling `grpc.health.v1.Health/Check`, killed on teardown.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import EllipsisType

import pytest

from reqstate_client import Client, KeyList, TransportError

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
REPO = PACKAGE_ROOT.parent.parent
BIN = Path(os.environ.get("REQSTATE_BIN") or REPO / "target" / "debug" / "reqstate")

AUTH_TOKEN = "test-bearer-token-0123456789"


def secret(seed: int) -> str:
    """A 32-byte secret as base64, different per seed."""
    return base64.b64encode(bytes([seed]) * 32).decode()


def keyring_toml(keys: list[tuple[int, str]]) -> str:
    """A keyring file body: (id, status) pairs, XChaCha20-Poly1305 keys."""
    out = "# test keyring\nversion = 1\n"
    for key_id, status in keys:
        out += (
            f'\n[[key]]\nid = {key_id}\nstatus = "{status}"\n'
            f'created = 2026-11-30T12:00:00Z\nsecret = "{secret(key_id)}"\n'
        )
    return out


def write_private(path: Path, text: str) -> None:
    """Writes a file with mode 0600, replacing it atomically."""
    tmp = path.with_suffix(".writing")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o600)
    tmp.rename(path)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Sidecar:
    """A running sidecar on a Unix socket and loopback TCP."""

    def __init__(
        self,
        keys: list[tuple[int, str]] | None = None,
        auth_token: str | None = AUTH_TOKEN,
        args: list[str] | None = None,
    ) -> None:
        if not BIN.is_file() or not os.access(BIN, os.X_OK):
            raise RuntimeError(
                f"no reqstate binary at {BIN}: build it (cargo build --bin reqstate) or set REQSTATE_BIN"
            )
        # Short path: Unix socket paths are limited to ~107 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="rqs-"))
        self.keyring = self.dir / "keyring.toml"
        write_private(self.keyring, keyring_toml(keys or [(1, "primary")]))
        self.unix = self.dir / "reqstate.sock"
        self.tcp_port = free_port()
        self.metrics_port = free_port()
        self.auth_token = auth_token
        self.stderr_path = self.dir / "stderr.log"
        argv = [str(BIN), "serve"]
        if auth_token is not None:
            token_file = self.dir / "auth-token"
            write_private(token_file, auth_token + "\n")
            argv += ["--auth-token-file", str(token_file)]
        argv += [
            "--keyring", str(self.keyring),
            "--listen", f"unix:{self.unix}",
            "--listen", f"tcp:127.0.0.1:{self.tcp_port}",
            "--metrics", f"127.0.0.1:{self.metrics_port}",
            "--reload-debounce-ms", "50",
            *(args or ()),
        ]  # fmt: skip
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, "REQSTATE_LOG": "info"},
            )
        try:
            self._wait_until_serving(30.0)
        except BaseException:
            self.stop()
            raise

    @property
    def unix_target(self) -> str:
        return f"unix://{self.unix}"

    @property
    def tcp_target(self) -> str:
        return f"127.0.0.1:{self.tcp_port}"

    def target(self, transport: str) -> str:
        return {"unix": self.unix_target, "tcp": self.tcp_target}[transport]

    def client(self, transport: str = "unix", token: str | None | EllipsisType = ..., timeout: float = 5.0) -> Client:
        """A client; by default (`...`) with the sidecar's own bearer token, `None` for none."""
        return Client(self.target(transport), self.auth_token if isinstance(token, EllipsisType) else token, timeout)

    def log(self) -> str:
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _wait_until_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"sidecar exited early with {code}\n{self.log()}")
            if self.unix.exists():
                with Client(self.unix_target, timeout=1.0) as probe:
                    try:
                        if probe.health() == "SERVING":
                            return
                    except TransportError:
                        pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sidecar not serving in time\n{self.log()}")
            time.sleep(0.025)

    def sighup(self) -> None:
        self.process.send_signal(signal.SIGHUP)

    def keys_cli(self, *args: str) -> str:
        """Runs `reqstate keys ARGS --keyring <this keyring>`; returns its output."""
        done = subprocess.run(
            [str(BIN), "keys", *args, "--keyring", str(self.keyring)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env={**os.environ, "REQSTATE_LOG": "warn"},
            timeout=30,
        )
        if done.returncode != 0:
            raise RuntimeError(f"reqstate keys {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done.stdout + done.stderr

    def wait_for_keys(self, what: str, check: Callable[[KeyList], bool], timeout: float = 10.0) -> KeyList:
        """Polls ListKeys until `check` holds."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                keys = client.list_keys()
                if check(keys):
                    return keys
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out waiting for {what}; keys: {keys}\n{self.log()}")
                time.sleep(0.02)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        for path in sorted(self.dir.rglob("*"), reverse=True):
            path.unlink() if not path.is_dir() else path.rmdir()
        self.dir.rmdir()


@pytest.fixture(scope="session")
def sidecar() -> Iterator[Sidecar]:
    """One sidecar shared by the tests that do not change its keyring: key 1
    primary, key 2 active, key 3 retired; bearer token required."""
    process = Sidecar(keys=[(1, "primary"), (2, "active"), (3, "retired")])
    yield process
    process.stop()


@pytest.fixture
def fresh_sidecar() -> Iterator[Sidecar]:
    """A sidecar of its own (key 1 primary), for tests that rotate keys or stop it."""
    process = Sidecar()
    yield process
    process.stop()


@pytest.fixture(params=["unix", "tcp"])
def transport(request: pytest.FixtureRequest) -> str:
    param: str = request.param
    return param


@pytest.fixture
def dead_unix_target() -> Iterator[str]:
    """A Unix socket path nothing listens on."""
    directory = Path(tempfile.mkdtemp(prefix="rqs-dead-"))
    yield f"unix://{directory / 'nobody.sock'}"
    directory.rmdir()
