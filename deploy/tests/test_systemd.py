"""deploy/systemd/: `systemd-analyze verify` and `systemd-analyze security
--offline=true` on the shipped unit, the sysusers.d and tmpfiles.d files
applied to a scratch root, and the unit's ExecStart started for real (its
Environment= and LoadCredential=, RuntimeDirectory= and UMask=, as the user
the sysusers file creates), probed with `reqstate health`, rotated the way the
unit's comments say (the keys tool as the service user, then ExecReload), and
stopped with its KillSignal."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import stat
import time
from pathlib import Path

import pytest
from support import (
    REPO,
    SYSTEMD,
    Api,
    PathMap,
    Process,
    figure,
    free_port,
    http_get,
    install_binary,
    map_ports,
    primary_key,
    private_tempdir,
    reqstate_bin,
    run,
    wait_until,
)

UNIT = SYSTEMD / "reqstate.service"
SYSUSERS = SYSTEMD / "reqstate.sysusers"
TMPFILES = SYSTEMD / "reqstate.tmpfiles"
MAX_EXPOSURE = 2.0


def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    assert path, "systemd-analyze is missing: deploy/run-tests.sh installs the `systemd` package"
    return path


def parse_unit(path: Path) -> dict[str, list[str]]:
    """The [Service] section: directive -> values in order."""
    section, out = None, {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def exec_start_binary(unit: dict[str, list[str]]) -> str:
    return shlex.split(unit["ExecStart"][-1])[0]


def with_binary_at(path: str, cmd: list[str]) -> list[str]:
    """`cmd` in a private mount namespace where `path` (the unit's ExecStart
    binary, /usr/local/bin/reqstate) is a copy of $REQSTATE_BIN: verify checks
    that ExecStart exists, and the shipped unit stays as it is."""
    directory = os.path.dirname(path)
    script = (
        f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(directory)} && touch {shlex.quote(path)} && "
        f"mount --bind {shlex.quote(str(reqstate_bin()))} {shlex.quote(path)} && exec \"$@\""
    )
    return ["unshare", "--mount", "--", "sh", "-c", script, "sh", *cmd]


def verify(unit_file: Path) -> tuple[int, str]:
    proc = run(with_binary_at(exec_start_binary(parse_unit(UNIT)), [systemd_analyze(), "verify", str(unit_file)]), check=False)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def exposure(unit_file: Path) -> tuple[float, str, int]:
    proc = run([systemd_analyze(), "security", "--offline=true", f"--threshold={int(MAX_EXPOSURE * 10)}", str(unit_file)], check=False)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\S+)", proc.stdout)
    assert m, f"no exposure level in:\n{proc.stdout}\n{proc.stderr}"
    return float(m.group(1)), m.group(2), proc.returncode


def syscall_groups() -> dict[str, list[str]]:
    """systemd's system-call groups (`systemd-analyze syscall-filter`)."""
    groups: dict[str, list[str]] = {}
    current = None
    for line in run([systemd_analyze(), "syscall-filter"]).stdout.splitlines():
        if line.startswith("@"):
            current = line.strip()
            groups[current] = []
        elif current and line.strip() and not line.strip().startswith("#"):
            groups[current].append(line.strip())
    assert "@system-service" in groups and "@default" in groups
    return groups


def expand(names: list[str], groups: dict[str, list[str]]) -> set[str]:
    out: set[str] = set()
    for name in names:
        out |= expand(groups[name], groups) if name.startswith("@") else {name}
    return out


def allowed_syscalls(unit: dict[str, list[str]]) -> set[str]:
    """What the unit's SystemCallFilter= lines let through: an allow list
    (plus @default, which systemd always adds), less every later `~` list."""
    groups = syscall_groups()
    allowed: set[str] | None = None
    for value in unit["SystemCallFilter"]:
        deny = value.startswith("~")
        names = value.removeprefix("~").split()
        if deny:
            assert allowed is not None, "a deny list alone: expected an allow list first"
            allowed -= expand(names, groups)
        else:
            allowed = (allowed or expand(["@default"], groups)) | expand(names, groups)
    assert allowed is not None
    return allowed


SYSCALL_LINE = re.compile(r"^\d+\s+(\w+)\((.*)")


class NotifySocket:
    """systemd's side of sd_notify(3): a datagram socket whose messages are
    `KEY=value` lines. Owned by the service user so that it may send."""

    def __init__(self, path: Path, uid: int, gid: int) -> None:
        self.path = path
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(str(path))
        os.chown(path, uid, gid)

    def next(self, timeout: float, process: Process | None = None) -> dict[str, str]:
        """The next notification as {key: value} (READY=1 is {"READY": "1"}).
        Fails if the process ends first."""
        deadline = time.monotonic() + timeout
        while True:
            if process is not None:
                process.assert_running()
            left = deadline - time.monotonic()
            assert left > 0, f"no notification within {timeout} s"
            self.socket.settimeout(min(left, 0.2))
            try:
                data = self.socket.recv(4096).decode()
            except TimeoutError:
                continue
            assert data.endswith("\n"), data
            return dict(line.split("=", 1) for line in data.splitlines())

    def close(self) -> None:
        self.socket.close()


def check_trace(trace: Path, unit: dict[str, list[str]]) -> None:
    """The sandbox, against what the sidecar really did (strace -f): every
    system call in the unit's SystemCallFilter=, every socket of a family in
    RestrictAddressFamilies=, no writable and executable memory
    (MemoryDenyWriteExecute=)."""
    allowed = allowed_syscalls(unit)
    families = set(unit["RestrictAddressFamilies"][-1].split())
    used: set[str] = set()
    problems = []
    for line in trace.read_text(errors="replace").splitlines():
        m = SYSCALL_LINE.match(line)
        if not m:
            continue
        name, args = m.groups()
        used.add(name)
        if name == "socket":
            family = args.split(",")[0].strip()
            if family not in families:
                problems.append(f"socket family {family}: {line}")
        if name in ("mmap", "mprotect", "pkey_mprotect") and "PROT_WRITE" in args and "PROT_EXEC" in args:
            problems.append(f"writable and executable memory: {line}")
    assert len(used) > 20, f"the trace has too few system calls to mean anything: {sorted(used)}"
    outside = sorted(used - allowed)
    if outside:
        problems.append(f"system calls outside SystemCallFilter=: {outside}")
    assert problems == [], "\n".join(problems)
    figure(f"{UNIT.name}: the sidecar made {len(used)} distinct system calls, all within its SystemCallFilter=")


def test_systemd_analyze_verify_passes() -> None:
    code, output = verify(UNIT)
    assert code == 0 and output == "", f"systemd-analyze verify: exit {code}\n{output}"


def test_systemd_analyze_verify_catches_a_bad_value(tmp_path: Path) -> None:
    broken = tmp_path / "reqstate.service"
    broken.write_text(UNIT.read_text().replace("ProtectSystem=strict", "ProtectSystem=strictly"))
    code, output = verify(broken)
    # verify exits 0 on a value it ignores, but says so: the check above
    # requires silence.
    assert "strictly" in output, f"a bad value passed verify (exit {code}): {output!r}"


def test_exposure_is_at_most_2() -> None:
    score, verdict, code = exposure(UNIT)
    figure(f"systemd-analyze security --offline=true {UNIT.name}: exposure {score} {verdict}")
    assert score <= MAX_EXPOSURE, f"exposure {score} {verdict} is above {MAX_EXPOSURE}"
    assert code == 0


def test_exposure_check_fails_without_the_sandbox(tmp_path: Path) -> None:
    text = UNIT.read_text()
    loose = tmp_path / "reqstate.service"
    loose.write_text(text[: text.index("# Sandbox.")] + "\n[Install]\nWantedBy=multi-user.target\n")
    score, verdict, code = exposure(loose)
    figure(f"{UNIT.name} without its sandbox section: exposure {score} {verdict}")
    assert score > MAX_EXPOSURE and code != 0


REQUIRED = {
    "User": "reqstate",
    "RuntimeDirectory": "reqstate",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "PrivateTmp": "yes",
    "ProtectHome": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "MemoryDenyWriteExecute": "yes",
    "CapabilityBoundingSet": "",
    "ExecReload": "/bin/kill -HUP $MAINPID",
    "UMask": "0077",
}


def missing_hardening(unit: dict[str, list[str]]) -> list[str]:
    out = [f"{k}={v}" for k, v in REQUIRED.items() if unit.get(k, [None])[-1] != v]
    filters = unit.get("SystemCallFilter", [])
    if "@system-service" not in filters:
        out.append("SystemCallFilter=@system-service")
    if unit.get("DynamicUser", ["no"])[-1] == "yes":
        out.append("a static User= (the keyring must stay owned by the service user)")
    return out


def test_hardening_directives_are_present() -> None:
    assert missing_hardening(parse_unit(UNIT)) == []


@pytest.mark.parametrize("directive", sorted([*REQUIRED, "SystemCallFilter"]))
def test_removing_a_hardening_directive_fails(directive: str, tmp_path: Path) -> None:
    copy = tmp_path / "reqstate.service"
    copy.write_text("\n".join(l for l in UNIT.read_text().splitlines() if not l.startswith(directive + "=")) + "\n")
    assert missing_hardening(parse_unit(copy)), f"removing {directive}= went unnoticed"


def test_no_socket_unit_without_socket_activation() -> None:
    """A reqstate.socket only if the sidecar can take sockets from systemd."""
    sources = "".join(p.read_text() for p in (REPO / "crates" / "reqstate-sidecar" / "src").rglob("*.rs"))
    activation = '"LISTEN_FDS"' in sources  # the variable read by the code, not a comment
    assert (SYSTEMD / "reqstate.socket").exists() == activation, (
        "socket activation is supported: add deploy/systemd/reqstate.socket" if activation
        else "the sidecar binds its own sockets (no LISTEN_FDS): a reqstate.socket unit could not work"
    )


# --------------------------------------------------------------- for real


def traced_child(tracer: int) -> int:
    """The sidecar's pid under strace (its MAINPID)."""
    children = Path(f"/proc/{tracer}/task/{tracer}/children")
    found: list[int] = []

    def started() -> bool:
        found[:] = [int(x) for x in children.read_text().split()]
        return bool(found)

    wait_until("strace to start the sidecar", started, timeout=10, period=0.05)
    return found[0]


def scratch_root() -> tuple[Path, int, int]:
    """A scratch root with the sysusers.d and tmpfiles.d files applied: the
    user's uid and gid."""
    root = private_tempdir("rqsd-")
    (root / "etc").mkdir(mode=0o755)
    run(["systemd-sysusers", f"--root={root}", str(SYSUSERS)])
    entry = next(l for l in (root / "etc" / "passwd").read_text().splitlines() if l.startswith("reqstate:"))
    _, _, uid, gid, *_ = entry.split(":")
    run(["systemd-tmpfiles", f"--root={root}", "--create", str(TMPFILES)])
    return root, int(uid), int(gid)


def test_sysusers_and_tmpfiles_make_the_user_and_the_keyring_directory() -> None:
    root, uid, gid = scratch_root()
    try:
        assert uid != 0 and gid != 0
        st = (root / "etc" / "reqstate").stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o700, uid, gid)
    finally:
        shutil.rmtree(root)


def test_unit_runs_as_written() -> None:
    unit = parse_unit(UNIT)
    root, uid, gid = scratch_root()
    process = None
    try:
        paths = PathMap({"/": root})
        # The binary where ExecStart names it.
        binary = Path(paths.path(exec_start_binary(unit)))
        binary.parent.mkdir(parents=True, mode=0o755)
        install_binary(binary)
        service = {"user": uid, "group": gid, "extra_groups": []}
        umask = int(unit["UMask"][-1], 8)

        # The keyring, made as the service user (`runuser -u reqstate -- reqstate keys new …`).
        env_unit: dict[str, str] = {}
        for value in unit["Environment"]:
            for assignment in shlex.split(value):
                name, _, v = assignment.partition("=")
                env_unit[name] = v
        keyring = paths.path(env_unit["REQSTATE_KEYRING"])
        run([str(binary), "keys", "new", "--keyring", keyring], umask=umask, **service)

        # LoadCredential=token:/etc/reqstate/token: root's file, and the copy
        # systemd hands the service in $CREDENTIALS_DIRECTORY (%d).
        [credential] = unit["LoadCredential"]
        cred_name, _, cred_source = credential.partition(":")
        token = "bearer-" + os.urandom(16).hex()
        source = Path(paths.path(cred_source))
        source.write_text(token + "\n")
        source.chmod(0o600)
        cred_dir = Path(paths.path("/run/credentials/reqstate.service"))
        cred_dir.mkdir(parents=True)
        (cred_dir / cred_name).write_bytes(source.read_bytes())
        for p, mode in ((cred_dir / cred_name, 0o400), (cred_dir, 0o500)):
            os.chown(p, uid, gid)
            p.chmod(mode)

        # RuntimeDirectory=, owned by the user, RuntimeDirectoryMode=.
        runtime = Path(paths.path("/run/" + unit["RuntimeDirectory"][-1]))
        runtime.mkdir(parents=True)
        os.chown(runtime, uid, gid)
        runtime.chmod(int(unit["RuntimeDirectoryMode"][-1], 8))

        ports = {9464: free_port()}
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        for name, value in env_unit.items():
            value = value.replace("%d", "/run/credentials/reqstate.service")
            assert "%" not in value, f"unmapped specifier in {name}={value}"
            env[name] = map_ports(paths.value(value), ports)
        argv = [paths.path(a) if a.startswith("/") else a for a in shlex.split(unit["ExecStart"][-1])]
        # Under strace, to hold the sandbox directives against what the
        # sidecar really does (systemd itself is not running here).
        strace = shutil.which("strace")
        assert strace, "strace is missing: deploy/run-tests.sh installs it"
        trace = root / "strace.out"
        trace.touch(mode=0o600)
        os.chown(trace, uid, gid)
        traced = [strace, "-f", "-qq", "-s", "0", "-o", str(trace), "--", *argv]
        # Type=notify: systemd's notification socket, a datagram socket the
        # service user may send to, named by NOTIFY_SOCKET.
        assert unit["Type"][-1] == "notify"
        notify = NotifySocket(root / "notify", uid, gid)
        env["NOTIFY_SOCKET"] = str(notify.path)
        process = Process(traced, env, root / "sidecar.log", umask=umask, **service)
        main_pid = traced_child(process.pid)

        # The unit is active when READY=1 comes (systemd waits up to
        # TimeoutStartSec=); the socket must answer at that moment.
        start_timeout = float(unit["TimeoutStartSec"][-1].removesuffix("s"))
        ready = notify.next(timeout=start_timeout, process=process)
        assert ready.get("READY") == "1" and ready["STATUS"].startswith("serving on unix:"), ready
        # `reqstate health` with the unit's environment finds the socket by itself.
        health = run([str(binary), "health"], check=False, env=env, **service)
        assert health.returncode == 0, f"READY=1 before the socket served: {health}"
        [listen] = [x for x in env["REQSTATE_LISTEN"].split(",") if x.startswith("unix:")]
        sock = Path(listen.removeprefix("unix:"))
        probe = run([str(binary), "health", "--listen", listen], check=False)
        assert probe.returncode == 0 and probe.stdout.strip() == "SERVING", probe
        other = run([str(binary), "health", "--listen", listen], check=False, user=uid + 1000, group=gid + 1000, extra_groups=[])
        assert other.returncode == 1, "another user reached the socket"
        st = sock.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, uid)
        for path, body in (("/live", "live"), ("/ready", "ready")):
            status, text = http_get(f"http://{env['REQSTATE_METRICS']}{path}")
            assert (status, text.strip()) == (200, body)

        api = Api(listen, token=token)
        first = api.mint("increase-counter", "confirm", '{"current":10}')
        assert first.key_id == 1 and api.verify(first.token, "increase-counter", "confirm").valid

        # Rotation on the host: the keys tool as the service user; the
        # sidecar sees the change by itself, and ExecReload forces a reload.
        generation = api.list_keys().keyring_generation
        run([str(binary), "keys", "new", "--keyring", keyring], umask=umask, **service)
        wait_until("key 2 loaded", lambda: {k.id for k in api.list_keys().keys} == {1, 2})
        run([str(binary), "keys", "promote", "2", "--force", "--keyring", keyring], umask=umask, **service)
        wait_until("key 2 promoted", lambda: primary_key(api.list_keys()) == 2)
        st = Path(keyring).stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, uid), "the keys tool must keep the owner"
        settled = api.list_keys().keyring_generation
        assert settled == generation + 2
        reload = [a.replace("$MAINPID", str(main_pid)) for a in shlex.split(unit["ExecReload"][-1])]
        run(reload)
        # `systemctl reload`: "reloading" until READY=1 again.
        reloading = notify.next(timeout=10, process=process)
        assert reloading.get("RELOADING") == "1" and int(reloading["MONOTONIC_USEC"]) > 0, reloading
        reloaded = notify.next(timeout=10, process=process)
        assert reloaded.get("READY") == "1", reloaded
        assert reloaded["STATUS"] == f"serving; keyring generation {settled + 1}, primary key 2", reloaded
        assert api.list_keys().keyring_generation == settled + 1
        second = api.mint("increase-counter", "confirm", '{"current":10}')
        assert second.key_id == 2
        assert api.verify(first.token, "increase-counter", "confirm").valid
        api.close()

        assert unit["KillSignal"][-1] == "SIGTERM"
        timeout = float(unit["TimeoutStopSec"][-1].removesuffix("s"))
        code = process.terminate(timeout=timeout, pid=main_pid)
        assert code == 0, f"exit {code}:\n{process.log()}"
        assert notify.next(timeout=1).get("STOPPING") == "1", "no STOPPING=1 on SIGTERM"
        notify.close()
        assert not sock.exists()
        assert token not in process.log()
        check_trace(trace, unit)
    finally:
        if process is not None:
            process.kill()
            print(process.log()[-3000:])
        shutil.rmtree(root, ignore_errors=True)
