"""The rotation kit (docs/ROTATION.md): deploy/kubernetes/rotation/ (a
CronJob that runs `reqstate keys rotate` on the keyring Secret, its
ServiceAccount, Role and RoleBinding) and deploy/systemd/reqstate-rotate.
{service,timer}.

- The manifests against the Kubernetes schemas, offline (as
  test_kubernetes_schema.py), and the check shown to fail on a misspelt field.
- The RBAC: one Role, one rule, get and patch on the one Secret the sidecars
  mount, bound to the CronJob's ServiceAccount; the kubectl steps use no other
  verb; the API token reaches the kubectl steps only. Every property is also
  removed from a copy, and the checker must name it.
- The pod's security properties (kube_policy.check_container).
- The rotate step's command line and the service's ExecStart run for real on
  a keyring file: a key older than --every is rotated, the second run changes
  nothing byte for byte. Their --max-ttl/--leeway are the fleet's.
- `systemd-analyze verify` on the service and the timer (silent), and shown
  to complain about a bad value; the service's exposure at most 2.0.

Not run: the kubectl steps against a cluster (none here)."""

from __future__ import annotations

import copy
import os
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_policy import check_container
from support import IMAGE_BINARY, KUBERNETES, SYSTEMD, env_of, find, load_documents, reqstate_bin, reqstate_container, run
from test_kubernetes_schema import VERSIONS, offline
from test_systemd import exposure, parse_unit, systemd_analyze, with_binary_at

ROTATION = KUBERNETES / "rotation" / "reqstate-rotate.yaml"
SIDECAR_POD = KUBERNETES / "mcp-server-with-sidecar.yaml"
SERVICE = SYSTEMD / "reqstate-rotate.service"
TIMER = SYSTEMD / "reqstate-rotate.timer"
VALIDATE = [sys.executable, "-m", "kubernetes_validate"]
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def docs() -> list[dict[str, Any]]:
    return load_documents(ROTATION)


def pod(d: list[dict[str, Any]]) -> dict[str, Any]:
    return find(d, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def containers(d: list[dict[str, Any]]) -> list[dict[str, Any]]:
    p = pod(d)
    return list(p.get("initContainers", [])) + list(p.get("containers", []))


def rotate_step(d: list[dict[str, Any]]) -> dict[str, Any]:
    found = [c for c in containers(d) if c.get("command", [])[:3] == [IMAGE_BINARY, "keys", "rotate"]]
    assert len(found) == 1, f"expected one step running `{IMAGE_BINARY} keys rotate`, found {len(found)}"
    return found[0]


def keyring_secret() -> str:
    """The Secret the sidecar pods mount their keyring from."""
    pod_spec = find(load_documents(SIDECAR_POD), "Deployment")["spec"]["template"]["spec"]
    sidecar = reqstate_container(pod_spec)
    keyring_dir = str(Path(env_of(sidecar)["REQSTATE_KEYRING"]).parent)
    volume = next(m["name"] for m in sidecar["volumeMounts"] if m["mountPath"] == keyring_dir)
    return next(v["secret"]["secretName"] for v in pod_spec["volumes"] if v["name"] == volume)


def flag(command: list[str], name: str) -> str:
    assert name in command[:-1], f"{name} missing from {command}"
    return command[command.index(name) + 1]


# ------------------------------------------------------------------ schemas


@pytest.mark.parametrize("version", VERSIONS)
def test_rotation_manifest_matches_the_kubernetes_schemas(version: str) -> None:
    proc = run(offline([*VALIDATE, "--strict", "-k", version, str(ROTATION)]), check=False)
    assert proc.returncode == 0, f"kubernetes-validate {version}:\n{proc.stdout}\n{proc.stderr}"
    passed = [line for line in (proc.stdout + proc.stderr).splitlines() if " passed for resource " in line]
    assert len(passed) == len(docs()), f"{len(passed)} of {len(docs())} resources reported as passed"


def test_the_validator_catches_a_misspelt_field_in_the_cronjob(tmp_path: Path) -> None:
    d = docs()
    find(d, "CronJob")["spec"]["schedulee"] = "@daily"
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump_all(d), encoding="utf-8")
    proc = run(offline([*VALIDATE, "--strict", "-k", VERSIONS[-1], str(broken)]), check=False)
    assert proc.returncode != 0 and "schedulee" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


# --------------------------------------------------------------- RBAC, pod


def rbac_violations(d: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    secret = keyring_secret()
    cron = find(d, "CronJob")
    p = pod(d)
    account = p.get("serviceAccountName")
    roles = [x for x in d if x.get("kind") in ("Role", "ClusterRole")]
    if [r["kind"] for r in roles] != ["Role"]:
        out.append("exactly one Role (namespaced, no ClusterRole)")
    for role in roles:
        rules = role.get("rules", [])
        if len(rules) != 1:
            out.append(f"{role['kind']}/{role['metadata']['name']}: exactly one rule")
        for rule in rules:
            if rule.get("apiGroups") != [""] or rule.get("resources") != ["secrets"]:
                out.append("the rule must cover core secrets only")
            if rule.get("resourceNames") != [secret]:
                out.append(f"the rule must name the one Secret {secret!r} (resourceNames)")
            if not set(rule.get("verbs", [])) <= {"get", "patch"} or "*" in rule.get("verbs", []):
                out.append(f"verbs beyond get and patch: {rule.get('verbs')}")
    bindings = [x for x in d if x.get("kind") in ("RoleBinding", "ClusterRoleBinding")]
    if not any(
        b["kind"] == "RoleBinding"
        and b["roleRef"].get("kind") == "Role"
        and b["roleRef"].get("name") in {r["metadata"]["name"] for r in roles}
        and b.get("subjects") == [{"kind": "ServiceAccount", "name": account}]
        for b in bindings
    ):
        out.append("no RoleBinding gives the Role to the CronJob's ServiceAccount alone")
    if not any(x.get("kind") == "ServiceAccount" and x["metadata"]["name"] == account for x in d):
        out.append(f"the ServiceAccount {account!r} is not defined here")
    if p.get("automountServiceAccountToken") is not False:
        out.append("automountServiceAccountToken must be false (the token goes to the kubectl steps only)")
    token_volumes = {v["name"] for v in p.get("volumes", []) if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))}
    rotate = rotate_step(d)
    if any(m["name"] in token_volumes for m in rotate.get("volumeMounts", [])):
        out.append("the rotate step must not see the API token")
    roles_verbs = {v for r in roles for rule in r.get("rules", []) for v in rule.get("verbs", [])}
    for c in containers(d):
        script = " ".join(c.get("command", []) + c.get("args", []))
        for verb in re.findall(r"\bkubectl\s+(\w+)", script):
            if verb not in roles_verbs:
                out.append(f"{c['name']}: `kubectl {verb}` is not allowed by the Role")
            if verb == "patch" and "resourceVersion" not in script:
                out.append(f"{c['name']}: the patch must test the resourceVersion (no lost update)")
            if re.search(r"reqstate-keyring", script) and secret != "reqstate-keyring":
                out.append(f"{c['name']}: names another Secret than {secret!r}")
    if cron["spec"].get("concurrencyPolicy") != "Forbid":
        out.append("concurrencyPolicy must be Forbid (two rotations at once)")
    return out


def test_the_rotation_manifest_keeps_its_rbac_and_pod_properties() -> None:
    d = docs()
    assert rbac_violations(d) == []
    p = pod(d)
    found: list[str] = []
    for c in containers(d):
        found += check_container(p, c, c["name"])
    assert found == [], "\n".join(found)
    assert p["securityContext"].get("runAsNonRoot") is True
    assert p["securityContext"].get("seccompProfile", {}).get("type") == "RuntimeDefault"
    work = next(v for v in p["volumes"] if v["name"] == "work")
    assert work["emptyDir"].get("medium") == "Memory", "the keyring copy must stay in memory"


Mutation = Callable[[list[dict[str, Any]]], object]


def _role(d: list[dict[str, Any]]) -> dict[str, Any]:
    return find(d, "Role")["rules"][0]


MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "list verb": (lambda d: _role(d)["verbs"].append("list"), "verbs beyond"),
    "no resourceNames": (lambda d: _role(d).pop("resourceNames"), "resourceNames"),
    "other secret": (lambda d: _role(d).update(resourceNames=["other"]), "resourceNames"),
    "configmaps too": (lambda d: _role(d).update(resources=["secrets", "configmaps"]), "core secrets only"),
    "no binding": (lambda d: d.remove(find(d, "RoleBinding")), "RoleBinding"),
    "token automounted": (lambda d: pod(d).update(automountServiceAccountToken=True), "automountServiceAccountToken"),
    "token in rotate": (
        lambda d: rotate_step(d)["volumeMounts"].append({"name": "api-token", "mountPath": TOKEN_MOUNT}),
        "must not see the API token",
    ),
    "kubectl delete": (
        lambda d: pod(d)["containers"][0]["args"].append("kubectl delete secret reqstate-keyring"),
        "kubectl delete",
    ),
    "concurrent runs": (lambda d: find(d, "CronJob")["spec"].update(concurrencyPolicy="Allow"), "Forbid"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_removing_an_rbac_property_fails(name: str) -> None:
    mutate, expected = MUTATIONS[name]
    d = copy.deepcopy(docs())
    mutate(d)
    found = rbac_violations(d)
    assert any(expected in v for v in found), f"{name}: not caught: {found}"


# --------------------------------------------------- the commands, for real


def old_keyring(path: Path) -> None:
    """A keyring whose primary was created long ago: a rotation is due."""
    run([str(reqstate_bin()), "keys", "new", "--keyring", str(path)])
    text = re.sub(r"^created = .*$", "created = 2026-01-01T00:00:00Z", path.read_text(), flags=re.MULTILINE)
    path.write_text(text)
    os.chmod(path, 0o600)


def rotates_once_then_holds(cmd: list[str], keyring: Path, env: dict[str, str] | None = None) -> None:
    first = run(cmd, env=env)
    assert "scheduled key 2" in first.stdout, first.stdout + first.stderr
    once = keyring.read_bytes()
    assert b"mint_from" in once and b"retire_at" in once
    second = run(cmd, env=env)
    assert "no change" in second.stdout, second.stdout
    assert keyring.read_bytes() == once, "a second run changed the file"


def test_the_cronjob_rotate_step_runs_as_written(tmp_path: Path) -> None:
    command = rotate_step(docs())["command"]
    keyring = tmp_path / "keyring.toml"
    old_keyring(keyring)
    mapped = [str(reqstate_bin()) if a == IMAGE_BINARY else a.replace("/work/", f"{tmp_path}/") for a in command]
    rotates_once_then_holds(mapped, keyring)
    # The policy it schedules with is the one the sidecars serve.
    sidecar = env_of(reqstate_container(find(load_documents(SIDECAR_POD), "Deployment")["spec"]["template"]["spec"]))
    assert flag(command, "--max-ttl") == sidecar.get("REQSTATE_MAX_TTL", "86400")
    assert flag(command, "--leeway") == sidecar.get("REQSTATE_CLOCK_LEEWAY", "60")
    assert flag(command, "--every") == "30d"


def test_the_rotate_service_runs_as_written(tmp_path: Path) -> None:
    unit = parse_unit(SERVICE)
    assert unit["Type"] == ["oneshot"] and unit["User"] == ["reqstate"]
    env = dict(os.environ)
    for value in unit.get("Environment", []):
        name, _, v = value.partition("=")
        env[name] = v
    keyring = tmp_path / "keyring.toml"
    assert env["REQSTATE_KEYRING"] == "/etc/reqstate/keyring.toml"
    assert unit["ReadWritePaths"] == ["/etc/reqstate"], "the service must be able to write the keyring's directory"
    env["REQSTATE_KEYRING"] = str(keyring)
    old_keyring(keyring)
    cmd = shlex.split(unit["ExecStart"][-1])
    assert cmd[:3] == [IMAGE_BINARY, "keys", "rotate"] and flag(cmd, "--every") == "30d"
    rotates_once_then_holds([str(reqstate_bin()), *cmd[1:]], keyring, env=env)


def verify_units(*files: Path) -> tuple[int, str]:
    proc = run(with_binary_at(IMAGE_BINARY, [systemd_analyze(), "verify", *map(str, files)]), check=False)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def test_systemd_analyze_verify_passes_on_the_rotation_units() -> None:
    code, output = verify_units(SERVICE, TIMER)
    assert code == 0 and output == "", f"systemd-analyze verify: exit {code}\n{output}"
    timer = TIMER.read_text()
    assert re.search(r"^OnCalendar=daily$", timer, re.MULTILINE) and re.search(r"^Persistent=true$", timer, re.MULTILINE)


def test_systemd_analyze_verify_catches_a_bad_timer(tmp_path: Path) -> None:
    (tmp_path / SERVICE.name).write_text(SERVICE.read_text())
    broken = tmp_path / TIMER.name
    broken.write_text(TIMER.read_text().replace("OnCalendar=daily", "OnCalendar=dailyish"))
    code, output = verify_units(tmp_path / SERVICE.name, broken)
    assert code != 0 or "dailyish" in output, f"a bad timer passed verify: {output!r}"


def test_rotate_service_exposure_is_at_most_2() -> None:
    score, verdict, code = exposure(SERVICE)
    assert score <= 2.0 and code == 0, f"exposure {score} {verdict}"
