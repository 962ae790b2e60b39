"""deploy/kubernetes/*.yaml against the Kubernetes OpenAPI schemas, offline:
kubernetes-validate (pinned in deploy/requirements.txt) bundles them, and the
check runs in a network namespace of its own, with no network at all.

Versions: 1.29 (native sidecars on by default, beta), 1.33 (native sidecars
GA) and 1.37 (the newest the package bundles). --strict refuses unknown
fields, so a misspelt key fails instead of being dropped by the API server."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from support import kubernetes_files, load_documents, run

VERSIONS = ["1.29.0", "1.33.0", "1.37.0"]
VALIDATE = [sys.executable, "-m", "kubernetes_validate"]


def offline(cmd: list[str]) -> list[str]:
    """The command in a new network namespace: only a loopback device, down."""
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is needed to prove the check offline"
    return [unshare, "--net", "--", *cmd]


@pytest.mark.parametrize("version", VERSIONS)
def test_manifests_match_the_kubernetes_schemas(version: str) -> None:
    files = [str(p) for p in kubernetes_files()]
    proc = run(offline([*VALIDATE, "--strict", "-k", version, *files]), check=False)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, f"kubernetes-validate {version}:\n{proc.stdout}\n{proc.stderr}"
    # One "passed" line per resource.
    resources = sum(len(load_documents(Path(f))) for f in files)
    passed = [line for line in (proc.stdout + proc.stderr).splitlines() if " passed for resource " in line]
    assert len(passed) == resources, f"{len(passed)} of {resources} resources reported as passed"


def test_the_validator_catches_a_misspelt_field(tmp_path: Path) -> None:
    """The same run on a copy with one field misspelt must fail: the schema
    check is live, not vacuous."""
    source = kubernetes_files()[0]
    docs = load_documents(source)
    spec = docs[0]["spec"]["template"]["spec"]
    spec["initContainers" if "initContainers" in spec else "containers"][0]["restartPolicyy"] = "Always"
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    proc = run(offline([*VALIDATE, "--strict", "-k", VERSIONS[-1], str(broken)]), check=False)
    assert proc.returncode != 0, f"a misspelt field passed:\n{proc.stdout}\n{proc.stderr}"
    assert "restartPolicyy" in proc.stdout + proc.stderr
