"""Fork safety: a pre-forking server (gunicorn, multiprocessing) forks after
the codec was used; parent and child must never draw the same nonce
randomness, so never share an XChaCha20-Poly1305 nonce, even when they mint
the very same message at the very same second."""

from __future__ import annotations

import base64
import multiprocessing
import os
import threading
from collections.abc import Callable

from conftest import NOW, key_toml

from reqstate import Binding, Codec, Keyring

TOKENS = 300


def nonce(token: str) -> bytes:
    """The 24-byte nonce: after the header byte and the one-byte key id (key 1)."""
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert raw[1] == 1, "key id 1 is one byte"
    return raw[2:26]


def codec() -> Codec:
    return Codec(Keyring.from_toml("version = 1\n" + key_toml(1, "xchacha20-poly1305", "primary")))


BINDING = Binding("increase-counter", b"user-42")


def mint_nonces(c: Codec, count: int = TOKENS) -> list[bytes]:
    """The same message every time: only the drawn randomness tells the nonces apart."""
    return [nonce(c.mint(BINDING, "confirm", {"current": 10, "amount": 5}, now=NOW).token) for _ in range(count)]


def in_forked_child(work: Callable[[], list[bytes]]) -> list[bytes]:
    """Runs `work` in a child made by os.fork; returns what it produced."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read)
            payload = b"".join(work())
            with os.fdopen(write, "wb") as out:
                out.write(payload)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return [data[i : i + 24] for i in range(0, len(data), 24)]


def test_parent_and_child_never_share_a_nonce() -> None:
    c = codec()
    before = mint_nonces(c, 10)  # first use: the parent's pool is filled
    child = in_forked_child(lambda: mint_nonces(c))
    parent = mint_nonces(c)
    assert len(child) == len(parent) == TOKENS
    assert len(set(parent)) == len(set(child)) == TOKENS
    assert not set(parent) & set(child), "a forked child repeated its parent's nonce"
    assert not set(before) & (set(parent) | set(child))


def test_grandchildren_and_siblings_never_share_a_nonce() -> None:
    c = codec()
    mint_nonces(c, 1)
    first = in_forked_child(lambda: mint_nonces(c))
    second = in_forked_child(lambda: mint_nonces(c))
    grandchild = in_forked_child(lambda: in_forked_child(lambda: mint_nonces(c)))
    seen = [set(first), set(second), set(grandchild), set(mint_nonces(c))]
    for i, a in enumerate(seen):
        assert len(a) == TOKENS
        for b in seen[i + 1 :]:
            assert not a & b


def test_forking_from_a_worker_thread() -> None:
    """The pool is per thread: the thread that forks carries its pool into the child."""
    c = codec()
    out: dict[str, list[bytes]] = {}

    def worker() -> None:
        mint_nonces(c, 5)
        out["child"] = in_forked_child(lambda: mint_nonces(c))
        out["parent"] = mint_nonces(c)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(out["child"]) == TOKENS and not set(out["child"]) & set(out["parent"])


def _pool_worker(_: int) -> list[bytes]:
    return mint_nonces(SHARED, 50)


SHARED = codec()


def test_multiprocessing_fork_pool() -> None:
    """A multiprocessing pool (the fork start method) after first use in the parent."""
    mint_nonces(SHARED, 5)
    with multiprocessing.get_context("fork").Pool(3) as pool:
        batches = pool.map(_pool_worker, range(6))
    everyone = [n for batch in batches for n in batch] + mint_nonces(SHARED, 50)
    assert len(everyone) == 350 and len(set(everyone)) == 350
