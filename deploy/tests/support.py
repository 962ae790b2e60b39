"""Helpers for the deployment kit's tests: the manifests, the binary, paths
mapped into a temporary directory, Secret volumes written the way kubelet
writes them, a gRPC client generated from proto/, and the sidecar as a real
process."""

from __future__ import annotations

import atexit
import datetime
import importlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parent.parent
REPO = DEPLOY.parent
KUBERNETES = DEPLOY / "kubernetes"
SYSTEMD = DEPLOY / "systemd"
PROTO_ROOT = REPO / "proto"

# Figures the tests measured (exposure score, peak RSS), printed at the end
# of the run by conftest.py whatever pytest captures.
FIGURES: list[str] = []


def figure(text: str) -> None:
    print(text)
    FIGURES.append(text)


# The image's binary path, as the manifests and the unit name it.
IMAGE_BINARY = "/usr/local/bin/reqstate"


def reqstate_bin() -> Path:
    """$REQSTATE_BIN, else <repo>/target/debug/reqstate; fails when missing."""
    path = Path(os.environ.get("REQSTATE_BIN") or REPO / "target" / "debug" / "reqstate")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise RuntimeError(f"no reqstate binary at {path}: build it (cargo build --bin reqstate) or set REQSTATE_BIN")
    return path


# ---------------------------------------------------------------- manifests


def load_documents(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    assert docs, f"{path}: no documents"
    return docs


def kubernetes_files() -> list[Path]:
    files = sorted(KUBERNETES.glob("*.yaml"))
    assert files, f"no manifests in {KUBERNETES}"
    return files


def find(docs: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def reqstate_container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """The container that runs `reqstate serve` (an init container for a native sidecar)."""
    every = list(pod_spec.get("initContainers", [])) + list(pod_spec.get("containers", []))
    found = [c for c in every if c.get("command", [])[:1] == [IMAGE_BINARY] and "serve" in c.get("command", [])]
    assert len(found) == 1, f"expected one container running `{IMAGE_BINARY} serve`, found {len(found)}"
    return found[0]


def env_of(container: dict[str, Any]) -> dict[str, str]:
    out = {}
    for item in container.get("env", []):
        assert "value" in item, f"{container['name']}: env {item['name']} must be a literal value"
        out[item["name"]] = str(item["value"])
    return out


# ------------------------------------------------------------ path mapping


class PathMap:
    """Maps absolute paths under given prefixes (volume mount paths, or `/`
    for a whole file system root) into a temporary directory."""

    def __init__(self, prefixes: dict[str, Path]) -> None:
        # Longest first, so /etc/reqstate/keyring wins over /etc/reqstate.
        self.prefixes = sorted(prefixes.items(), key=lambda kv: -len(kv[0]))

    def path(self, original: str) -> str:
        for prefix, target in self.prefixes:
            if prefix == "/":
                return str(target) + original
            if original == prefix or original.startswith(prefix + "/"):
                return str(target) + original[len(prefix) :]
        raise AssertionError(f"{original} is on no mounted volume (a read-only root file system?)")

    def value(self, text: str) -> str:
        """Maps every absolute path in a flag value: `/p`, `unix:/p`,
        `unix:///p`, and comma-separated lists of them. `tcp:` addresses and
        anything else are left alone."""
        parts = []
        for part in text.split(","):
            m = re.fullmatch(r"(unix:(?://)?)?(/.*)", part)
            parts.append((m.group(1) or "") + self.path(m.group(2)) if m else part)
        return ",".join(parts)


def install_binary(target: Path) -> None:
    """$REQSTATE_BIN at `target`, executable by every uid: a hard link when
    possible (same file system, already world-executable), else a copy."""
    source = reqstate_bin()
    try:
        if source.stat().st_mode & 0o005 != 0o005:
            raise OSError("not world-executable")
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
        target.chmod(0o755)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def map_ports(text: str, ports: dict[int, int]) -> str:
    """Replaces `:PORT` at the end of `tcp:HOST:PORT` / `HOST:PORT` entries."""

    def one(part: str) -> str:
        m = re.fullmatch(r"(.*):(\d+)", part)
        if m and not part.startswith("unix:") and int(m.group(2)) in ports:
            return f"{m.group(1)}:{ports[int(m.group(2))]}"
        return part

    return ",".join(one(p) for p in text.split(","))


def private_tempdir(prefix: str) -> Path:
    """A short temporary directory others may traverse (the sidecar may run
    as another uid) but not write."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    # Removed at the end of the run even when a test fails before its own cleanup.
    atexit.register(shutil.rmtree, path, True)
    return path


# ------------------------------------------------------- Secret volumes


class SecretVolume:
    """A directory laid out as kubelet writes a Secret volume (its
    AtomicWriter): the files in `..<timestamp>/`, `..data` a symlink to it,
    and each key a symlink `<key> -> ..data/<key>`; an update writes a new
    timestamped directory, swaps `..data` with a rename, and removes the old
    one. The volume root is a sticky 1777 tmpfs, everything root-owned, the
    files `defaultMode` with the pod's fsGroup as group (docs/KEYRING.md)."""

    def __init__(self, root: Path, mode: int, gid: int | None) -> None:
        self.root = root
        self.mode = mode
        self.gid = gid
        self.generation = 0
        root.mkdir(parents=True)
        root.chmod(0o1777)

    def publish(self, files: dict[str, bytes]) -> None:
        self.generation += 1
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp = f"..{now:%Y_%m_%d_%H_%M_%S}.{now.microsecond:06d}{self.generation:03d}"
        new = self.root / stamp
        new.mkdir(mode=0o755)
        new.chmod(0o755)
        for name, data in files.items():
            f = new / name
            f.write_bytes(data)
            os.chown(f, 0, self.gid if self.gid is not None else 0)
            f.chmod(self.mode)
        data_link = self.root / "..data"
        old = os.readlink(data_link) if data_link.is_symlink() else None
        tmp_link = self.root / "..data_tmp"
        tmp_link.symlink_to(stamp)
        os.rename(tmp_link, data_link)
        for name in files:
            visible = self.root / name
            if not visible.is_symlink():
                visible.symlink_to(f"..data/{name}")
        if old is not None:
            shutil.rmtree(self.root / old)


def secret_volumes(pod_spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v["secret"] for v in pod_spec["volumes"] if "secret" in v}


def fs_group(pod_spec: dict[str, Any]) -> int | None:
    return pod_spec.get("securityContext", {}).get("fsGroup")


def effective(pod_spec: dict[str, Any], container: dict[str, Any], key: str) -> Any:
    """A securityContext setting of a container, falling back to the pod's."""
    own = container.get("securityContext", {})
    return own[key] if key in own else pod_spec.get("securityContext", {}).get(key)


# ------------------------------------------------------------------ gRPC


_STUBS: tuple[Any, Any] | None = None


def stubs() -> tuple[Any, Any]:
    """(reqstate_pb2, reqstate_pb2_grpc), generated from proto/ with
    grpcio-tools into a temporary directory (once per run)."""
    global _STUBS
    if _STUBS is None:
        from grpc_tools import protoc

        out = Path(tempfile.mkdtemp(prefix="rqs-stubs-"))
        atexit.register(shutil.rmtree, out, True)
        include = Path(protoc.__file__).resolve().parent / "_proto"
        proto = PROTO_ROOT / "reqstate" / "v1" / "reqstate.proto"
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out}", f"--grpc_python_out={out}", str(proto)]
        assert protoc.main(args) == 0, f"protoc failed: {args}"
        sys.path.insert(0, str(out))
        _STUBS = (
            importlib.import_module("reqstate.v1.reqstate_pb2"),
            importlib.import_module("reqstate.v1.reqstate_pb2_grpc"),
        )
    return _STUBS


class Api:
    """A reqstate.v1.RequestState client."""

    def __init__(self, target: str, token: str | None = None, credentials: Any = None, server_name: str | None = None):
        import grpc

        # A plain authority over Unix sockets: harmless with a sidecar that
        # accepts the path as authority, needed with one that does not.
        options: list[tuple[str, Any]] = [("grpc.default_authority", "localhost")] if target.startswith("unix:") else []
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        if credentials is None:
            self.channel = grpc.insecure_channel(target, options=options)
        else:
            self.channel = grpc.secure_channel(target, credentials, options=options)
        self.pb, pb_grpc = stubs()
        self.stub = pb_grpc.RequestStateStub(self.channel)
        self.metadata = [("authorization", f"Bearer {token}")] if token else []

    def mint(self, tool: str, step: str, state_json: str, context: bytes = b"") -> Any:
        req = self.pb.MintRequest(tool=tool, step=step, state_json=state_json, ttl_seconds=600, context=context)
        return self.stub.Mint(req, metadata=self.metadata, timeout=5)

    def verify(self, token: str, tool: str, step: str, context: bytes = b"") -> Any:
        req = self.pb.VerifyRequest(token=token, tool=tool, expected_step=step, context=context)
        return self.stub.Verify(req, metadata=self.metadata, timeout=5)

    def list_keys(self) -> Any:
        return self.stub.ListKeys(self.pb.ListKeysRequest(), metadata=self.metadata, timeout=5)

    def close(self) -> None:
        self.channel.close()


def primary_key(keys: Any) -> int:
    pb, _ = stubs()
    primaries = [k.id for k in keys.keys if k.status == pb.KEY_STATUS_PRIMARY]
    assert len(primaries) == 1, keys
    return primaries[0]


# --------------------------------------------------------------- processes


def run(cmd: list[str], *, check: bool = True, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


def as_user(uid: int, gid: int, groups: list[int] | None = None) -> dict[str, Any]:
    """subprocess keyword arguments that run a command as uid:gid."""
    return {"user": uid, "group": gid, "extra_groups": groups or []}


def wait_until(what: str, check: Callable[[], bool], timeout: float = 15, period: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(period)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Process:
    """A started `reqstate serve`, its stderr collected in a file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, **kw: Any) -> None:
        self.argv = argv
        self.log_path = log
        self.log_file = open(log, "wb")
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT, **kw)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        if not self.log_file.closed:
            self.log_file.flush()
        return self.log_path.read_text(errors="replace")

    def assert_running(self) -> None:
        assert self.proc.poll() is None, f"sidecar exited {self.proc.returncode}:\n{self.log()}"

    def peak_rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc status")

    def terminate(self, timeout: float, pid: int | None = None) -> int:
        """SIGTERM (to `pid`, a traced child, if given), then waits for the exit code."""
        if pid is None:
            self.proc.send_signal(signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            self.log_file.close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()


def quantity_bytes(text: str) -> int:
    """A Kubernetes memory quantity (Mi, Gi, M, plain bytes) in bytes."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 10**3, "M": 10**6, "G": 10**9}
    m = re.fullmatch(r"(\d+)([KMG]i?)?", str(text))
    assert m, f"unsupported quantity {text!r}"
    return int(m.group(1)) * units.get(m.group(2) or "", 1)


def quantity_millicpu(text: str) -> int:
    text = str(text)
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)
