"""The security properties every workload in deploy/kubernetes/ must keep,
as a checker that lists what is missing (test_kubernetes_policy.py runs it
on the shipped manifests, and on copies with one property removed)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from support import IMAGE_BINARY, effective, env_of, quantity_bytes, quantity_millicpu, reqstate_container

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"}


def pod_spec_of(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]


def pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    return doc["metadata"]["labels"] if doc["kind"] == "Pod" else doc["spec"]["template"]["metadata"]["labels"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    match = selector.get("matchLabels", {})
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def check_container(pod: dict[str, Any], c: dict[str, Any], where: str) -> list[str]:
    out = []
    sc = c.get("securityContext", {})
    if effective(pod, c, "runAsNonRoot") is not True:
        out.append(f"{where}: runAsNonRoot must be true")
    uid = effective(pod, c, "runAsUser")
    if not isinstance(uid, int) or uid == 0:
        out.append(f"{where}: runAsUser must be a non-zero uid")
    if sc.get("readOnlyRootFilesystem") is not True:
        out.append(f"{where}: readOnlyRootFilesystem must be true")
    if sc.get("allowPrivilegeEscalation") is not False:
        out.append(f"{where}: allowPrivilegeEscalation must be false")
    if sc.get("privileged") is True:
        out.append(f"{where}: privileged")
    caps = sc.get("capabilities", {})
    if caps.get("drop") != ["ALL"]:
        out.append(f"{where}: capabilities.drop must be [ALL]")
    if caps.get("add"):
        out.append(f"{where}: capabilities.add must be empty")
    seccomp = sc.get("seccompProfile") or pod.get("securityContext", {}).get("seccompProfile") or {}
    if seccomp.get("type") != "RuntimeDefault":
        out.append(f"{where}: seccompProfile must be RuntimeDefault")
    res = c.get("resources", {})
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in res.get(kind, {}):
                out.append(f"{where}: resources.{kind}.{r} missing")
    if not out or all("resources" not in o for o in out):
        req, lim = res["requests"], res["limits"]
        if quantity_millicpu(req["cpu"]) > quantity_millicpu(lim["cpu"]):
            out.append(f"{where}: cpu request above its limit")
        if quantity_bytes(req["memory"]) > quantity_bytes(lim["memory"]):
            out.append(f"{where}: memory request above its limit")
    return out


def _probe_listen(command: list[str]) -> str | None:
    return command[command.index("--listen") + 1] if "--listen" in command[:-1] else None


def check_reqstate(pod: dict[str, Any], where: str, native_sidecar: bool) -> list[str]:
    out = []
    c = reqstate_container(pod)
    env = env_of(c)
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod["volumes"]}
    if native_sidecar:
        if c not in pod.get("initContainers", []) or c.get("restartPolicy") != "Always":
            out.append(f"{where}: reqstate must be a native sidecar (init container, restartPolicy: Always)")
    listen = [x for x in env.get("REQSTATE_LISTEN", "").split(",") if x]
    unix = [x for x in listen if x.startswith("unix:")]
    if not unix:
        out.append(f"{where}: no Unix listener")
    # Probes: exec `reqstate health` against one of the sidecar's Unix listeners.
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        cmd = c.get(kind, {}).get("exec", {}).get("command", [])
        if cmd[:2] != [IMAGE_BINARY, "health"]:
            out.append(f"{where}: {kind} must exec `{IMAGE_BINARY} health`")
        elif _probe_listen(cmd) not in unix:
            out.append(f"{where}: {kind} must probe one of the Unix listeners {unix}")
    # Every Unix socket on an in-memory emptyDir.
    for addr in unix:
        parent = str(PurePosixPath(addr.removeprefix("unix:")).parent)
        vol = volumes.get(mounts.get(parent, {}).get("name", ""), {})
        if "emptyDir" not in vol:
            out.append(f"{where}: socket {addr} is not directly in an emptyDir mount")
        elif vol["emptyDir"].get("medium") != "Memory":
            out.append(f"{where}: the socket's emptyDir must be medium: Memory")
    # The keyring: a file directly inside a mounted Secret directory (no
    # subPath, or the ..data swap never reaches the container).
    keyring = env.get("REQSTATE_KEYRING")
    if not keyring:
        out.append(f"{where}: REQSTATE_KEYRING missing")
    else:
        mount = mounts.get(str(PurePosixPath(keyring).parent))
        if mount is None or "secret" not in volumes[mount["name"]]:
            out.append(f"{where}: REQSTATE_KEYRING must be a file directly inside a Secret volume's mount")
        elif "subPath" in mount or "subPathExpr" in mount:
            out.append(f"{where}: the keyring mount must not use subPath (rotation needs the ..data swap)")
        elif mount.get("readOnly") is not True:
            out.append(f"{where}: the keyring mount must be readOnly")
        else:
            mode = volumes[mount["name"]]["secret"].get("defaultMode", 0o644)
            if mode & 0o022:
                out.append(f"{where}: the keyring Secret's defaultMode {mode:o} lets group or others write")
            if mode & 0o004:
                out.append(f"{where}: the keyring Secret's defaultMode {mode:o} lets others read")
    # Secret files (bearer token, TLS) come from Secret volumes, never env values.
    for var in ("REQSTATE_AUTH_TOKEN_FILE", "REQSTATE_TLS_CERT", "REQSTATE_TLS_KEY", "REQSTATE_CLIENT_CA"):
        if var in env:
            mount = mounts.get(str(PurePosixPath(env[var]).parent))
            if mount is None or "secret" not in volumes[mount["name"]]:
                out.append(f"{where}: {var} must be a file in a Secret volume")
    if "REQSTATE_INSECURE" in env:
        out.append(f"{where}: REQSTATE_INSECURE must not be set")
    if "REQSTATE_DEV" in env:
        out.append(f"{where}: REQSTATE_DEV must not be set")
    metrics = env.get("REQSTATE_METRICS")
    if metrics and not metrics.startswith("127.0.0.1:"):
        out.append(f"{where}: REQSTATE_METRICS must be on loopback")
    return out


def violations(docs: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    workloads = [d for d in docs if d.get("kind") in WORKLOADS]
    if not workloads:
        return ["no workload"]
    for doc in workloads:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        pod = pod_spec_of(doc)
        if pod.get("automountServiceAccountToken") is not False:
            out.append(f"{name}: automountServiceAccountToken must be false")
        for flag in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"):
            if pod.get(flag) is True:
                out.append(f"{name}: {flag} must not be true")
        psc = pod.get("securityContext", {})
        if psc.get("runAsNonRoot") is not True:
            out.append(f"{name}: pod runAsNonRoot must be true")
        if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            out.append(f"{name}: pod seccompProfile must be RuntimeDefault")
        for v in pod.get("volumes", []):
            if "hostPath" in v:
                out.append(f"{name}: hostPath volume {v['name']}")
        containers = list(pod.get("initContainers", [])) + list(pod.get("containers", []))
        for c in containers:
            out += check_container(pod, c, f"{name}/{c['name']}")
        sidecar = reqstate_container(pod)
        others = [c for c in pod.get("containers", []) if c is not sidecar]
        native = bool(others)
        out += check_reqstate(pod, name, native_sidecar=native)
        keyring_volumes = {
            m["name"]
            for m in sidecar.get("volumeMounts", [])
            if m["mountPath"] == str(PurePosixPath(env_of(sidecar).get("REQSTATE_KEYRING", "/")).parent)
        }
        for c in others:
            # The socket is 0600, owned by the sidecar's uid: the MCP server
            # must run as that uid, and must not see the keyring.
            if effective(pod, c, "runAsUser") != effective(pod, sidecar, "runAsUser"):
                out.append(f"{name}/{c['name']}: must run as the sidecar's uid (the socket is 0600)")
            if any(m["name"] in keyring_volumes for m in c.get("volumeMounts", [])):
                out.append(f"{name}/{c['name']}: must not mount the keyring")
        labels = pod_labels(doc)
        for svc in (d for d in docs if d.get("kind") == "Service"):
            if all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()):
                ports = {p["name"] for c in containers for p in c.get("ports", [])}
                for p in svc["spec"]["ports"]:
                    if p["targetPort"] not in ports:
                        out.append(f"Service/{svc['metadata']['name']}: targetPort {p['targetPort']} is no container port")
        if any(d.get("kind") == "Service" for d in docs):
            # Reached from other pods: a NetworkPolicy and a PDB must cover it.
            if not any(
                d.get("kind") == "NetworkPolicy" and _selects(d["spec"]["podSelector"], labels)
                and "Ingress" in d["spec"].get("policyTypes", [])
                for d in docs
            ):
                out.append(f"{name}: no NetworkPolicy restricts ingress to it")
            if not any(d.get("kind") == "PodDisruptionBudget" and _selects(d["spec"]["selector"], labels) for d in docs):
                out.append(f"{name}: no PodDisruptionBudget selects it")
            env = env_of(sidecar)
            tcp = [x for x in env.get("REQSTATE_LISTEN", "").split(",") if x.startswith("tcp:")]
            if tcp and not ("REQSTATE_TLS_CERT" in env and "REQSTATE_CLIENT_CA" in env):
                out.append(f"{name}: a TCP listener needs TLS and client certificates (REQSTATE_CLIENT_CA)")
    return out
