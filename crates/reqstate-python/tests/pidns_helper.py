"""The review's reproduction of a clone that keeps the pid (security review 3,
finding 7), run by tests/test_fork.py as pid 1 of a new PID namespace
(`unshare -Urpf --mount-proc python pidns_helper.py`), as the Rust test
crates/reqstate/tests/core/random.rs `clone_in_a_new_pid_namespace_never_shares_a_nonce` does.

It warms the codec (the random pool of this thread is filled), moves its
future children into another new PID namespace (unshare(CLONE_NEWPID)) and
forks: the child is pid 1 again, so a pid check cannot tell it from its
parent. Parent and child then each mint an XChaCha20-Poly1305 token of a
different message and a single-use token; the parent reports on one line,
`PIDNS {json}`, whether their nonces and their single-use token ids differ.

Standalone (no pytest): it runs under whatever interpreter has `reqstate`.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import sys

from reqstate import Binding, Codec, Keyring, MemoryReplayStore, TokenRefused

CLONE_NEWPID = 0x20000000
KEYRING = (
    'version = 1\n[[key]]\nid = 7\nalgorithm = "xchacha20-poly1305"\nstatus = "primary"\n'
    f'secret = "{base64.b64encode(bytes([0x42]) * 32).decode()}"\n'
)


def nonce(token: str) -> str:
    """The 24-byte nonce (after the header byte and the one-byte key id 7), in hex."""
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert raw[1] == 7, "key id 7 is one byte"
    return raw[2:26].hex()


def main() -> int:
    if os.getpid() != 1:
        print(f"pidns_helper: runs as pid 1 of its PID namespace, not {os.getpid()}", file=sys.stderr)
        return 2
    codec = Codec(Keyring.from_toml(KEYRING))
    binding = Binding("increase-counter", b"ctx")
    # Warm this thread's randomness: a plain token and a single-use one.
    codec.mint(Binding("increase-counter", b"warm"), "amount", 0)
    codec.mint(binding, "amount", 0, single_use=True)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID)")
    read, write = os.pipe()
    pid = os.fork()
    who = "child" if pid == 0 else "parent"
    token = codec.mint(binding, "confirm", who).token
    single = codec.mint(binding, "confirm", "same", single_use=True).token
    if pid == 0:
        try:
            os.close(read)
            os.write(write, json.dumps({"pid": os.getpid(), "token": token, "single": single}).encode())
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        print("pidns_helper: the child failed", file=sys.stderr)
        return 1
    child = json.loads(b"".join(chunks))
    assert codec.verify(child["token"], binding).state == "child"
    # One spent-token store for both: a token id minted twice is `replayed`.
    # Room enough: the store has 64 shards of capacity/64 (at least 1) each,
    # chosen by token id, so with 4 two ids shared a shard 1 time in 64 and
    # the second consume was `replay_store_full` (seen once in a test run).
    store = MemoryReplayStore(1024)
    codec.consume(single, binding, store)
    try:
        codec.consume(child["single"], binding, store)
        ids_differ = True
    except TokenRefused as refused:
        if refused.reason != "replayed":
            raise
        ids_differ = False
    report = {
        "parent_pid": os.getpid(),
        "child_pid": child["pid"],
        "nonces_differ": nonce(token) != nonce(child["token"]),
        "single_use_nonces_differ": nonce(single) != nonce(child["single"]),
        "token_ids_differ": ids_differ,
    }
    print("PIDNS " + json.dumps(report, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
