"""The reqstate container of each Kubernetes manifest, started for real.

Its command, args and env come from the manifest; only paths (onto
directories laid out like the pod's volumes: Secret volumes as kubelet writes
them, with the `..data` symlink, root-owned files of the Secret's
`defaultMode` and the pod's fsGroup) and TCP ports (free ones, on a shared
machine) are substituted. It runs as the container's uid with the fsGroup as
supplementary group; its probes run as kubelet runs exec probes. Then: a
mint and a verify over the real transport, a key rotation through a Secret
update (`..data` swap: add the key, roll out, promote, roll out; the sidecar
reloads by itself), SIGTERM and a clean exit."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import grpc
import pytest
from kube_policy import pod_spec_of
from kube_run import PodLayout, SidecarRun
from support import (
    KUBERNETES,
    Api,
    env_of,
    figure,
    find,
    free_port,
    http_get,
    load_documents,
    primary_key,
    private_tempdir,
    quantity_bytes,
    reqstate_bin,
    run,
    wait_until,
)

POD_FILE = KUBERNETES / "mcp-server-with-sidecar.yaml"
MTLS_FILE = KUBERNETES / "reqstate-mtls.yaml"
TOOL, STEP, STATE = "increase-counter", "confirm", '{"amount":5,"current":10}'
CONTEXT = b"principal=user-42;audience=counter-server;method=tools/call"


class Keyring:
    """A keyring file worked on outside the volume with `reqstate keys`, as
    an operator does before updating the Secret."""

    def __init__(self) -> None:
        self.dir = private_tempdir("rqs-keys-")
        self.dir.chmod(0o700)
        self.path = self.dir / "keyring.toml"
        self.keys("new")

    def keys(self, *args: str) -> None:
        run([str(reqstate_bin()), "keys", *args, "--keyring", str(self.path)])

    def data(self) -> bytes:
        return self.path.read_bytes()

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def secrets(self) -> list[str]:
        found = re.findall(r'^secret = "([^"]+)"', self.path.read_text(), re.MULTILINE)
        assert found, "no inline secret in the keyring"
        return found


def rotate_and_check(api: Api, publish: Any, keyring: Keyring, old_token: str) -> None:
    """docs/ROTATION.md through Secret updates: add key 2 (active), roll out,
    confirm; promote it, roll out, confirm; the next mint names key 2, the old
    key's token still verifies."""
    before = api.list_keys()
    assert [k.id for k in before.keys] == [1] and primary_key(before) == 1
    generation = before.keyring_generation

    keyring.keys("new")
    publish(keyring.data())
    wait_until(
        "key 2 (active) loaded from the ..data swap",
        lambda: {k.id for k in api.list_keys().keys} == {1, 2},
    )
    after_add = api.list_keys()
    assert primary_key(after_add) == 1 and after_add.keyring_generation == generation + 1
    assert api.mint(TOOL, STEP, STATE, CONTEXT).key_id == 1

    keyring.keys("promote", "2", "--force")  # confirmed above: every replica has key 2
    publish(keyring.data())
    wait_until("key 2 promoted by the ..data swap", lambda: primary_key(api.list_keys()) == 2)
    assert api.list_keys().keyring_generation == generation + 2
    minted = api.mint(TOOL, STEP, STATE, CONTEXT)
    assert minted.key_id == 2
    fresh = api.verify(minted.token, TOOL, STEP, CONTEXT)
    assert fresh.valid and fresh.key_id == 2 and fresh.state_json == STATE
    old = api.verify(old_token, TOOL, STEP, CONTEXT)
    assert old.valid and old.key_id == 1, "a token of the previous primary must still verify"


def stop(sidecar: SidecarRun, sockets: list[Path], never_logged: list[str]) -> None:
    assert sidecar.process is not None
    drain_ms = int(sidecar.env.get("REQSTATE_DRAIN_TIMEOUT_MS", "10000"))
    code = sidecar.process.terminate(timeout=drain_ms / 1000 + 10)
    log = sidecar.process.log()
    assert code == 0, f"exit {code} after SIGTERM:\n{log}"
    for s in sockets:
        assert not s.exists(), f"{s} left behind"
    # Logs never carry key material or the bearer token.
    for text in never_logged:
        assert text not in log, "a secret was logged"


def unix_sockets(sidecar: SidecarRun) -> list[Path]:
    return [Path(x.removeprefix("unix:")) for x in sidecar.env["REQSTATE_LISTEN"].split(",") if x.startswith("unix:")]


def check_metrics(sidecar: SidecarRun) -> None:
    metrics = sidecar.env.get("REQSTATE_METRICS")
    assert metrics, "the manifest serves metrics"
    for path, body in (("/live", "live"), ("/ready", "ready")):
        status, text = http_get(f"http://{metrics}{path}")
        assert (status, text.strip()) == (200, body), f"GET {path}: {status} {text!r}"
    status, text = http_get(f"http://{metrics}/metrics")
    assert status == 200
    # What each key does now (the promotion is a schedule: the file's status
    # of key 2 stays "active"; reqstate_key_status follows the schedule).
    series = [line for line in text.splitlines() if line.startswith("reqstate_key_status{")]
    assert 'reqstate_key_status{key_id="2",status="primary"} 1' in series, series
    assert "reqstate_keyring_reload_failures_total 0" in text.splitlines()


def check_probes(sidecar: SidecarRun) -> None:
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        proc = sidecar.probe(kind)
        assert proc.returncode == 0 and proc.stdout.strip() == "SERVING", f"{kind}: {proc}"


def check_memory(sidecar: SidecarRun, manifest: Path) -> None:
    assert sidecar.process is not None
    requested = quantity_bytes(sidecar.container["resources"]["requests"]["memory"])
    peak = sidecar.process.peak_rss_bytes()
    figure(f"{sidecar.container['name']} ({manifest.name}): peak RSS {peak / 2**20:.1f} MiB, request {requested / 2**20:.0f} MiB")
    assert peak < requested, f"peak RSS {peak} bytes is over the memory request {requested}"


# ------------------------------------------------------------------ same pod


def test_native_sidecar_pod_runs_as_written() -> None:
    docs = load_documents(POD_FILE)
    pod = pod_spec_of(find(docs, "Deployment"))
    keyring = Keyring()
    token = "bearer-" + os.urandom(16).hex()
    layout = PodLayout(pod, {"reqstate-keyring": {"keyring.toml": keyring.data()}, "reqstate-auth": {"token": token.encode()}})
    sidecar = SidecarRun(layout, {9464: free_port()})
    process = sidecar.start()
    try:
        sidecar.wait_started()
        check_probes(sidecar)

        # The socket: 0600 and owned by the sidecar's uid (the MCP server's).
        [sock] = unix_sockets(sidecar)
        st = sock.stat()
        assert (st.st_mode & 0o777, st.st_uid) == (0o600, sidecar.uid)

        # The MCP server's view: its REQSTATE_TARGET and token file, through
        # its own mounts (the same volumes).
        mcp = next(c for c in pod["containers"] if c["name"] == "mcp-server")
        mcp_paths = layout.path_map(mcp)
        mcp_env = {k: mcp_paths.value(v) for k, v in env_of(mcp).items()}
        mcp_token = Path(mcp_env["REQSTATE_TOKEN_FILE"]).read_text().strip()
        assert mcp_token == token
        api = Api(mcp_env["REQSTATE_TARGET"], token=mcp_token)

        # Mint and verify, then the bearer token is really required.
        minted = api.mint(TOOL, STEP, STATE, CONTEXT)
        assert minted.key_id == 1
        verified = api.verify(minted.token, TOOL, STEP, CONTEXT)
        assert verified.valid and verified.state_json == STATE
        with pytest.raises(grpc.RpcError) as refused:
            Api(mcp_env["REQSTATE_TARGET"], token="wrong").mint(TOOL, STEP, STATE)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        # The MCP server's uid connects through its read-only mount of the
        # socket's volume (as a real client: `reqstate health`).
        mcp_mount = next(m for m in mcp["volumeMounts"] if m["name"] == "reqstate-socket")
        assert mcp_mount.get("readOnly") is True
        ro_view = layout.root / "mcp-view"
        ro_view.mkdir()
        ro_sock = ro_view / sock.name
        mcp_uid = mcp["securityContext"]["runAsUser"]
        shell = (
            f"mount --bind -o ro {layout.volumes['reqstate-socket']} {ro_view} && "
            f"exec setpriv --reuid={mcp_uid} --regid={mcp_uid} --clear-groups "
            f"{sidecar.paths.path(sidecar.container['command'][0])} health --listen unix:{ro_sock}"
        )
        proc = run(["unshare", "--mount", "--", "sh", "-c", shell], check=False)
        assert proc.returncode == 0 and proc.stdout.strip() == "SERVING", proc
        # Any other uid is refused by the socket's mode.
        other = sidecar.probe("livenessProbe", uid=sidecar.uid + 1)
        assert other.returncode == 1, f"another uid reached the socket: {other}"

        rotate_and_check(api, lambda data: layout.secrets["reqstate-keyring"].publish({"keyring.toml": data}), keyring, minted.token)
        check_probes(sidecar)
        check_metrics(sidecar)
        check_memory(sidecar, POD_FILE)
        api.close()
        stop(sidecar, [sock], [token, *keyring.secrets()])
    finally:
        process.kill()
        print(process.log()[-4000:])
        layout.cleanup()
        keyring.cleanup()


# ------------------------------------------------------------- TCP and mTLS


def _certificates(server_names: list[str]) -> dict[str, bytes]:
    """A server CA and server certificate, a client CA and a client
    certificate, and a certificate from a CA the sidecar does not trust."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def build(subject: str, pub: Any, issuer: str, issuer_key: Any, ca: bool, usage: Any = None, sans: Any = None) -> Any:
        b = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(pub)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            b = b.add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
        if usage:
            b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    def pem(cert: Any) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(k: Any) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    out = {}
    server_ca_key, client_ca_key, rogue_ca_key = key(), key(), key()
    server_ca = build("test server CA", server_ca_key.public_key(), "test server CA", server_ca_key, True)
    client_ca = build("test client CA", client_ca_key.public_key(), "test client CA", client_ca_key, True)
    server_key, client_key, rogue_key = key(), key(), key()
    sans = [x509.DNSName(n) for n in server_names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server = build("reqstate", server_key.public_key(), "test server CA", server_ca_key, False, ExtendedKeyUsageOID.SERVER_AUTH, sans)
    client = build("mcp-server", client_key.public_key(), "test client CA", client_ca_key, False, ExtendedKeyUsageOID.CLIENT_AUTH)
    rogue = build("mcp-server", rogue_key.public_key(), "rogue CA", rogue_ca_key, False, ExtendedKeyUsageOID.CLIENT_AUTH)
    out.update(
        server_ca=pem(server_ca), client_ca=pem(client_ca), server=pem(server), server_key=key_pem(server_key),
        client=pem(client), client_key=key_pem(client_key), rogue=pem(rogue), rogue_key=key_pem(rogue_key),
    )
    return out


def test_tcp_mtls_deployment_runs_as_written() -> None:
    docs = load_documents(MTLS_FILE)
    pod = pod_spec_of(find(docs, "Deployment"))
    service = find(docs, "Service")
    server_name = f"{service['metadata']['name']}.default.svc"
    certs = _certificates([service["metadata"]["name"], server_name, server_name + ".cluster.local"])
    keyring = Keyring()
    layout = PodLayout(
        pod,
        {
            "reqstate-keyring": {"keyring.toml": keyring.data()},
            "reqstate-tls": {"tls.crt": certs["server"], "tls.key": certs["server_key"]},
            "reqstate-client-ca": {"ca.crt": certs["client_ca"]},
        },
    )
    grpc_port = service["spec"]["ports"][0]["port"]
    ports = {grpc_port: free_port(), 9464: free_port()}
    sidecar = SidecarRun(layout, ports)
    tcp = [x for x in sidecar.env["REQSTATE_LISTEN"].split(",") if x.startswith("tcp:")]
    assert tcp == [f"tcp:0.0.0.0:{ports[grpc_port]}"], tcp
    process = sidecar.start()
    try:
        sidecar.wait_started()
        check_probes(sidecar)
        target = f"127.0.0.1:{ports[grpc_port]}"

        def creds(cert: str | None) -> grpc.ChannelCredentials:
            if cert is None:
                return grpc.ssl_channel_credentials(root_certificates=certs["server_ca"])
            return grpc.ssl_channel_credentials(certs["server_ca"], certs[f"{cert}_key"], certs[cert])

        api = Api(target, credentials=creds("client"), server_name=server_name)
        minted = api.mint(TOOL, STEP, STATE, CONTEXT)
        verified = api.verify(minted.token, TOOL, STEP, CONTEXT)
        assert minted.key_id == 1 and verified.valid and verified.state_json == STATE

        # Without a client certificate, or with one from another CA: refused.
        for cert in (None, "rogue"):
            with pytest.raises(grpc.RpcError) as refused:
                Api(target, credentials=creds(cert), server_name=server_name).mint(TOOL, STEP, STATE)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, (cert, refused.value)

        # The probe over TCP works too, with the client certificate (the
        # manifest uses the pod-private socket instead).
        files = {}
        for name in ("server_ca", "client", "client_key"):
            files[name] = layout.root / f"{name}.pem"
            files[name].write_bytes(certs[name])
        tls_probe = [
            str(sidecar.paths.path(sidecar.container["command"][0])), "health", "--listen", f"tcp:{target}",
            "--tls-ca", str(files["server_ca"]), "--tls-cert", str(files["client"]),
            "--tls-key", str(files["client_key"]), "--tls-server-name", server_name,
        ]
        proc = run(tls_probe, check=False)
        assert proc.returncode == 0 and proc.stdout.strip() == "SERVING", proc

        rotate_and_check(api, lambda data: layout.secrets["reqstate-keyring"].publish({"keyring.toml": data}), keyring, minted.token)
        check_probes(sidecar)
        check_metrics(sidecar)
        check_memory(sidecar, MTLS_FILE)
        api.close()
        stop(sidecar, unix_sockets(sidecar), keyring.secrets())
    finally:
        process.kill()
        print(process.log()[-4000:])
        layout.cleanup()
        keyring.cleanup()


def test_the_tcp_listener_is_refused_without_client_authentication() -> None:
    """The same container without REQSTATE_CLIENT_CA must not start (exit 64):
    the manifest's client CA is what makes the network listener legal."""
    docs = load_documents(MTLS_FILE)
    pod = pod_spec_of(find(docs, "Deployment"))
    certs = _certificates(["reqstate"])
    keyring = Keyring()
    layout = PodLayout(
        pod,
        {
            "reqstate-keyring": {"keyring.toml": keyring.data()},
            "reqstate-tls": {"tls.crt": certs["server"], "tls.key": certs["server_key"]},
            "reqstate-client-ca": {"ca.crt": certs["client_ca"]},
        },
    )
    try:
        sidecar = SidecarRun(layout, {50051: free_port(), 9464: free_port()})
        del sidecar.env["REQSTATE_CLIENT_CA"]
        proc = subprocess.run(sidecar.argv, env=sidecar.env, capture_output=True, text=True, timeout=30, **sidecar.user_kwargs())
        assert proc.returncode == 64, proc
        assert "signing oracle" in proc.stderr
    finally:
        layout.cleanup()
        keyring.cleanup()
