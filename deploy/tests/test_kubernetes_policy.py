"""The security properties of deploy/kubernetes/*.yaml (PyYAML): every
container non-root with a read-only root file system, no capabilities, no
privilege escalation, RuntimeDefault seccomp, resources; no service-account
token; reqstate a native sidecar probed through `reqstate health`, its socket
on an in-memory emptyDir, its keyring a Secret directory mount, secrets as
files; the MCP server in the socket owner's uid and blind to the keyring; the
network shape with TLS, client certificates, a NetworkPolicy and a PDB.

Each property is also removed from a copy, one at a time, and the checker
must name it: a property that can be deleted without failing a test is not
checked."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kube_policy import pod_spec_of, violations
from support import KUBERNETES, find, load_documents, reqstate_container

POD_FILE = KUBERNETES / "mcp-server-with-sidecar.yaml"
MTLS_FILE = KUBERNETES / "reqstate-mtls.yaml"


def test_every_manifest_keeps_every_property() -> None:
    for path in sorted(KUBERNETES.glob("*.yaml")):
        found = violations(load_documents(path))
        assert found == [], f"{path.name}:\n" + "\n".join(found)


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return pod_spec_of(find(docs, "Deployment"))


def _sidecar(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return reqstate_container(_pod(docs))


def _mcp(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(c for c in _pod(docs)["containers"] if c["name"] == "mcp-server")


def _mount(container: dict[str, Any], path: str) -> dict[str, Any]:
    return next(m for m in container["volumeMounts"] if m["mountPath"] == path)


def _env(container: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e for e in container["env"] if e["name"] == name)


def _volume(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(v for v in _pod(docs)["volumes"] if v["name"] == name)


Mutation = Callable[[list[dict[str, Any]]], object]

POD_MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "service account token mounted": (lambda d: _pod(d).pop("automountServiceAccountToken"), "automountServiceAccountToken"),
    "pod runAsNonRoot removed": (lambda d: _pod(d)["securityContext"].pop("runAsNonRoot"), "pod runAsNonRoot"),
    "pod seccomp removed": (lambda d: _pod(d)["securityContext"].pop("seccompProfile"), "pod seccompProfile"),
    "processes shared": (lambda d: _pod(d).update(shareProcessNamespace=True), "shareProcessNamespace"),
    "sidecar root fs writable": (lambda d: _sidecar(d)["securityContext"].pop("readOnlyRootFilesystem"), "readOnlyRootFilesystem"),
    "sidecar as root": (lambda d: _sidecar(d)["securityContext"].update(runAsUser=0), "runAsUser"),
    "sidecar keeps capabilities": (lambda d: _sidecar(d)["securityContext"].pop("capabilities"), "capabilities.drop"),
    "sidecar adds a capability": (lambda d: _sidecar(d)["securityContext"]["capabilities"].update(add=["NET_ADMIN"]), "capabilities.add"),
    "sidecar may escalate": (lambda d: _sidecar(d)["securityContext"].pop("allowPrivilegeEscalation"), "allowPrivilegeEscalation"),
    "sidecar privileged": (lambda d: _sidecar(d)["securityContext"].update(privileged=True), "privileged"),
    "sidecar seccomp unconfined": (
        lambda d: [_sidecar(d)["securityContext"].update(seccompProfile={"type": "Unconfined"})],
        "seccompProfile must be RuntimeDefault",
    ),
    "sidecar without limits": (lambda d: _sidecar(d)["resources"].pop("limits"), "resources.limits"),
    "sidecar request above limit": (lambda d: _sidecar(d)["resources"]["requests"].update(memory="1Gi"), "memory request above"),
    "not a native sidecar": (lambda d: _sidecar(d).pop("restartPolicy"), "native sidecar"),
    "liveness probe removed": (lambda d: _sidecar(d).pop("livenessProbe"), "livenessProbe"),
    "startup probe not reqstate health": (
        lambda d: _sidecar(d)["startupProbe"].update(exec={"command": ["/bin/true"]}),
        "startupProbe must exec",
    ),
    "readiness probe on another socket": (
        lambda d: _sidecar(d)["readinessProbe"]["exec"]["command"].__setitem__(3, "unix:/tmp/other.sock"),
        "readinessProbe must probe",
    ),
    "socket on disk emptyDir": (lambda d: _volume(d, "reqstate-socket")["emptyDir"].pop("medium"), "medium: Memory"),
    "socket on a hostPath": (
        lambda d: [_volume(d, "reqstate-socket").pop("emptyDir"), _volume(d, "reqstate-socket").update(hostPath={"path": "/run/x"})],
        "hostPath",
    ),
    "keyring through subPath": (
        lambda d: _mount(_sidecar(d), "/etc/reqstate/keyring").update(subPath="keyring.toml"),
        "subPath",
    ),
    "keyring mount writable": (lambda d: _mount(_sidecar(d), "/etc/reqstate/keyring").pop("readOnly"), "readOnly"),
    "keyring readable by others": (lambda d: _volume(d, "reqstate-keyring")["secret"].update(defaultMode=0o444), "others read"),
    "keyring from a ConfigMap": (
        lambda d: [
            _volume(d, "reqstate-keyring").pop("secret"),
            _volume(d, "reqstate-keyring").update(configMap={"name": "keyring"}),
        ],
        "Secret volume",
    ),
    "bearer token outside a Secret": (
        lambda d: _env(_sidecar(d), "REQSTATE_AUTH_TOKEN_FILE").update(value="/run/reqstate/token"),
        "REQSTATE_AUTH_TOKEN_FILE",
    ),
    "insecure flag": (lambda d: _sidecar(d)["env"].append({"name": "REQSTATE_INSECURE", "value": "true"}), "REQSTATE_INSECURE"),
    "metrics off loopback": (lambda d: _env(_sidecar(d), "REQSTATE_METRICS").update(value="0.0.0.0:9464"), "loopback"),
    "MCP server as root": (lambda d: _mcp(d)["securityContext"].update(runAsNonRoot=False), "runAsNonRoot"),
    "MCP server root fs writable": (lambda d: _mcp(d)["securityContext"].update(readOnlyRootFilesystem=False), "readOnlyRootFilesystem"),
    "MCP server keeps capabilities": (lambda d: _mcp(d)["securityContext"].pop("capabilities"), "capabilities.drop"),
    "MCP server in another uid": (lambda d: _mcp(d)["securityContext"].update(runAsUser=1000), "sidecar's uid"),
    "MCP server mounts the keyring": (
        lambda d: _mcp(d)["volumeMounts"].append({"name": "reqstate-keyring", "mountPath": "/etc/reqstate/keyring"}),
        "must not mount the keyring",
    ),
    "MCP server without resources": (lambda d: _mcp(d).pop("resources"), "resources.requests"),
}

MTLS_MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "no NetworkPolicy": (lambda d: d.remove(find(d, "NetworkPolicy")), "NetworkPolicy"),
    "NetworkPolicy selects nothing": (
        lambda d: find(d, "NetworkPolicy")["spec"]["podSelector"].update(matchLabels={"app": "other"}),
        "NetworkPolicy",
    ),
    "no PodDisruptionBudget": (lambda d: d.remove(find(d, "PodDisruptionBudget")), "PodDisruptionBudget"),
    "no client certificates": (
        lambda d: _sidecar(d)["env"].remove(_env(_sidecar(d), "REQSTATE_CLIENT_CA")),
        "client certificates",
    ),
    "host network": (lambda d: _pod(d).update(hostNetwork=True), "hostNetwork"),
    "TLS key from a non-Secret": (
        lambda d: _env(_sidecar(d), "REQSTATE_TLS_KEY").update(value="/run/reqstate/tls.key"),
        "REQSTATE_TLS_KEY",
    ),
    "probe over TCP without a listener match": (
        lambda d: _sidecar(d)["livenessProbe"]["exec"]["command"].__setitem__(3, "tcp:127.0.0.1:50051"),
        "livenessProbe must probe",
    ),
    "Service targets no port": (lambda d: find(d, "Service")["spec"]["ports"][0].update(targetPort="http"), "targetPort"),
    "service account token mounted": (lambda d: _pod(d).update(automountServiceAccountToken=True), "automountServiceAccountToken"),
    "root fs writable": (lambda d: _sidecar(d)["securityContext"].pop("readOnlyRootFilesystem"), "readOnlyRootFilesystem"),
}


@pytest.mark.parametrize("name", sorted(POD_MUTATIONS))
def test_removing_a_property_of_the_pod_fails(name: str) -> None:
    mutate, expected = POD_MUTATIONS[name]
    docs = copy.deepcopy(load_documents(POD_FILE))
    mutate(docs)
    found = violations(docs)
    assert any(expected in v for v in found), f"{name}: expected a violation naming {expected!r}, got {found}"


@pytest.mark.parametrize("name", sorted(MTLS_MUTATIONS))
def test_removing_a_property_of_the_mtls_deployment_fails(name: str) -> None:
    mutate, expected = MTLS_MUTATIONS[name]
    docs = copy.deepcopy(load_documents(MTLS_FILE))
    mutate(docs)
    found = violations(docs)
    assert any(expected in v for v in found), f"{name}: expected a violation naming {expected!r}, got {found}"
