"""Fork safety: a pre-forking server (gunicorn, multiprocessing) forks after
the codec was used, and a process may even be cloned keeping its pid (a child
in a new PID namespace). The package uses the core's default randomness
(`BufferedRandom`, as the Rust `Codec::new`): single-use token ids come from
the OS on every draw, so they never repeat across a clone; nonce hedges come
from a per-thread pool that a clone may repeat, which the hedge (FORMAT.md
§4.2) turns into the same nonce only for the very same message, that is, the
very same token. These tests pin that invariant (the Rust one is
crates/reqstate/tests/core/random.rs)."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import NOW, key_toml

from reqstate import Binding, Codec, Keyring, MemoryReplayStore

TOKENS = 300
HERE = Path(__file__).resolve().parent


def nonce(token: str) -> bytes:
    """The 24-byte nonce: after the header byte and the one-byte key id (key 1)."""
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert raw[1] == 1, "key id 1 is one byte"
    return raw[2:26]


def codec() -> Codec:
    return Codec(Keyring.from_toml("version = 1\n" + key_toml(1, "xchacha20-poly1305", "primary")))


BINDING = Binding("increase-counter", b"user-42")


def mint_tokens(c: Codec, who: str, count: int = TOKENS) -> list[str]:
    """Per round: a message of this process only, the same message every
    process mints (only the drawn randomness tells those apart), and a
    single-use token of that same message (its id comes from `fill`)."""
    out: list[str] = []
    for i in range(count // 3):
        out.append(c.mint(BINDING, "confirm", {"who": who, "i": i}, now=NOW).token)
        out.append(c.mint(BINDING, "confirm", {"current": 10, "amount": 5}, now=NOW).token)
        out.append(c.mint(BINDING, "confirm", {"current": 10, "amount": 5}, single_use=True, now=NOW).token)
    return out


def in_forked_child(work: Callable[[], list[str]]) -> list[str]:
    """Runs `work` in a child made by os.fork; returns what it produced."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read)
            payload = "\n".join(work()).encode()
            with os.fdopen(write, "wb") as out:
                out.write(payload)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return data.split("\n") if data else []


def single_use(tokens: list[str]) -> list[str]:
    """The single-use tokens of `mint_tokens`'s output: every third."""
    return tokens[2::3]


def assert_apart(c: Codec, *groups: list[str]) -> None:
    """Within a process no two tokens share a nonce; across processes only
    the very same token does (same message, same drawn bytes), never two
    different tokens; and no single-use token id appears twice anywhere (one
    spent-token store for all: a repeated id would be `replayed`)."""
    by_nonce: dict[bytes, str] = {}
    for group in groups:
        assert len({nonce(t) for t in group}) == len(group), "a process repeated a nonce"
        for token in group:
            assert by_nonce.setdefault(nonce(token), token) == token, "two different tokens share a nonce"
    every = [t for group in groups for t in single_use(group)]
    store = MemoryReplayStore(100_000)  # 64 shards: room in every one
    for token in every:
        assert c.consume(token, BINDING, store, now=NOW).state == {"current": 10, "amount": 5}
    assert len(store) == len(every) == sum(len(g) for g in groups) // 3


def test_parent_and_child_share_a_nonce_only_for_the_same_token() -> None:
    c = codec()
    before = mint_tokens(c, "before", 30)  # first use: the parent's pool is filled
    child = in_forked_child(lambda: mint_tokens(c, "child"))
    parent = mint_tokens(c, "parent")
    assert len(child) == len(parent) == TOKENS
    assert_apart(c, before, parent, child)


def test_grandchildren_and_siblings_share_a_nonce_only_for_the_same_token() -> None:
    c = codec()
    mint_tokens(c, "warm", 3)
    first = in_forked_child(lambda: mint_tokens(c, "first"))
    second = in_forked_child(lambda: mint_tokens(c, "second"))
    grandchild = in_forked_child(lambda: in_forked_child(lambda: mint_tokens(c, "grandchild")))
    assert_apart(c, first, second, grandchild, mint_tokens(c, "parent"))


def test_forking_from_a_worker_thread() -> None:
    """The pool is per thread: the thread that forks carries its pool into the child."""
    c = codec()
    out: dict[str, list[str]] = {}

    def worker() -> None:
        mint_tokens(c, "warm", 6)
        out["child"] = in_forked_child(lambda: mint_tokens(c, "child"))
        out["parent"] = mint_tokens(c, "parent")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(out["child"]) == TOKENS
    assert_apart(c, out["child"], out["parent"])


def _pool_worker(n: int) -> list[str]:
    return mint_tokens(SHARED, f"worker-{n}", 48)


SHARED = codec()


def test_multiprocessing_fork_pool() -> None:
    """A multiprocessing pool (the fork start method) after first use in the parent."""
    mint_tokens(SHARED, "warm", 6)
    with multiprocessing.get_context("fork").Pool(3) as pool:
        batches = pool.map(_pool_worker, range(6))
    everyone = [*batches, mint_tokens(SHARED, "parent", 48)]
    assert [len(b) for b in everyone] == [48] * 7
    assert_apart(SHARED, *everyone)


def test_clone_in_a_new_pid_namespace_never_shares_a_nonce_or_a_token_id() -> None:
    """Security review 3, finding 7: a process that is pid 1 of its PID
    namespace warms its randomness, then forks a child into a new PID
    namespace, where the child is pid 1 again (tests/pidns_helper.py). Their
    tokens of different messages must have different nonces, and their
    single-use tokens different ids (two tokens with one id would share one
    spent-token record). The package's own pid-checked pool repeated the ids."""
    try:
        probe = subprocess.run(["unshare", "-Urpf", "--mount-proc", "true"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError as missing:
        raise AssertionError("unshare (util-linux) must be installed") from missing
    if probe.returncode != 0:
        pytest.skip(f"user and PID namespaces are unavailable here (unshare: {probe.stderr.strip()})")
    done = subprocess.run(
        ["unshare", "-Urpf", "--mount-proc", sys.executable, str(HERE / "pidns_helper.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("PIDNS ")]
    assert len(lines) == 1, done.stdout + done.stderr
    report = json.loads(lines[0][len("PIDNS ") :])
    assert (report["parent_pid"], report["child_pid"]) == (1, 1), report
    assert report["token_ids_differ"], f"parent and child minted single-use tokens with one id: {report}"
    assert report["nonces_differ"], f"parent and child minted with the same nonce: {report}"
    assert report["single_use_nonces_differ"], f"parent and child minted with the same nonce: {report}"
