"""A pod's reqstate container started for real, outside Kubernetes: its
command, args and env read from the manifest, every path on a volume mapped
into a temporary directory laid out as kubelet lays out the volumes, the
process run as the container's uid with the pod's fsGroup, probes run as
kubelet runs exec probes (same uid, the container's environment)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from support import (
    IMAGE_BINARY,
    PathMap,
    Process,
    SecretVolume,
    effective,
    env_of,
    fs_group,
    install_binary,
    map_ports,
    private_tempdir,
    reqstate_container,
    run,
)


class PodLayout:
    """The pod's volumes as directories, and a path map per container."""

    def __init__(self, pod: dict[str, Any], secrets: dict[str, dict[str, bytes]]) -> None:
        self.pod = pod
        self.root = private_tempdir("rqsk-")
        self.gid = fs_group(pod)
        # The image: the binary where the manifest names it.
        image_bin = self.root / "bin"
        image_bin.mkdir(mode=0o755)
        self.binary = image_bin / Path(IMAGE_BINARY).name
        install_binary(self.binary)
        self.volumes: dict[str, Path] = {}
        self.secrets: dict[str, SecretVolume] = {}
        for v in pod["volumes"]:
            path = self.root / f"v-{v['name']}"
            if "emptyDir" in v:
                # kubelet: 0777; with an fsGroup, group-owned and setgid.
                path.mkdir()
                if self.gid is not None:
                    os.chown(path, 0, self.gid)
                    path.chmod(0o2777)
                else:
                    path.chmod(0o777)
            elif "secret" in v:
                name = v["secret"]["secretName"]
                assert name in secrets, f"the test provides no data for Secret {name}"
                vol = SecretVolume(path, v["secret"].get("defaultMode", 0o644), self.gid)
                vol.publish(secrets[name])
                self.secrets[name] = vol
            else:
                raise AssertionError(f"volume {v['name']}: only emptyDir and Secret volumes are mapped")
            self.volumes[v["name"]] = path

    def path_map(self, container: dict[str, Any]) -> PathMap:
        prefixes = {m["mountPath"]: self.volumes[m["name"]] for m in container.get("volumeMounts", [])}
        for m in container.get("volumeMounts", []):
            assert "subPath" not in m, f"{container['name']}: subPath mounts are not mapped"
        prefixes[str(Path(IMAGE_BINARY).parent)] = self.binary.parent
        return PathMap(prefixes)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class SidecarRun:
    """The pod's reqstate container as a process."""

    def __init__(self, layout: PodLayout, ports: dict[int, int]) -> None:
        self.layout = layout
        pod = layout.pod
        self.container = c = reqstate_container(pod)
        self.paths = layout.path_map(c)
        self.ports = ports
        self.uid = effective(pod, c, "runAsUser")
        self.gid = effective(pod, c, "runAsGroup")
        self.groups = [layout.gid] if layout.gid is not None else []
        # The container's environment: the manifest's variables, paths and
        # ports mapped, nothing inherited from the test.
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        for name, value in env_of(c).items():
            self.env[name] = map_ports(self.paths.value(value), ports)
        argv = list(c["command"]) + list(c.get("args", []))
        self.argv = [self.paths.path(argv[0])] + [map_ports(self.paths.value(a), ports) for a in argv[1:]]
        self.process: Process | None = None

    def user_kwargs(self, uid: int | None = None) -> dict[str, Any]:
        return {"user": uid if uid is not None else self.uid, "group": self.gid, "extra_groups": self.groups}

    def start(self) -> Process:
        self.process = Process(self.argv, self.env, self.layout.root / "sidecar.log", umask=0o022, **self.user_kwargs())
        return self.process

    def probe_command(self, kind: str) -> list[str]:
        cmd = self.container[kind]["exec"]["command"]
        return [self.paths.path(cmd[0])] + [map_ports(self.paths.value(a), self.ports) for a in cmd[1:]]

    def probe(self, kind: str, uid: int | None = None) -> subprocess.CompletedProcess[str]:
        """Runs a probe once, as kubelet does: in the container's environment,
        as its user, killed after timeoutSeconds."""
        spec = self.container[kind]
        return run(
            self.probe_command(kind),
            check=False,
            timeout=spec.get("timeoutSeconds", 1) + 5,
            env=self.env,
            **self.user_kwargs(uid),
        )

    def wait_started(self) -> None:
        """The startupProbe, repeated as kubelet repeats it."""
        spec = self.container["startupProbe"]
        last = None
        for _ in range(spec.get("failureThreshold", 3)):
            assert self.process is not None
            self.process.assert_running()
            last = self.probe("startupProbe")
            if last.returncode == 0:
                assert last.stdout.strip() == "SERVING", last.stdout
                return
            time.sleep(spec.get("periodSeconds", 10))
        raise AssertionError(f"startupProbe never passed: {last}\n{self.process.log() if self.process else ''}")
