"""A real `redis-server` for the tests (the Debian package, as the sidecar's
tests use it: tests/support/redis_server.rs), on a free loopback port and a
Unix socket in a private temporary directory, with no persistence. Stopped
when the test session ends. Missing `redis-server` fails the tests (never
skips them): scripts/test.sh installs it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis

SERVER = os.environ.get("REDIS_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process."""

    def __init__(self, *extra: str) -> None:
        if not Path(SERVER).exists():
            raise AssertionError(f"{SERVER} is missing: apt-get install redis-server (scripts/test.sh installs it)")
        self._dir = tempfile.TemporaryDirectory(prefix="rqs-redis-")
        self.dir = Path(self._dir.name)
        self.port = free_port()
        self.socket = self.dir / "redis.sock"
        argv = [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--unixsocket", str(self.socket)]
        argv += ["--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", str(self.dir), *extra]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.admin = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.admin.ping():
                    break
            except redis.RedisError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                stderr = self.process.stderr.read().decode() if self.process.stderr else ""
                self.stop()
                raise AssertionError(f"redis-server did not start: {stderr}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.admin.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()
        self._dir.cleanup()

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
