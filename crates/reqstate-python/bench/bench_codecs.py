"""Round trips of MCP `requestState` from Python: the figures of
docs/BENCHMARKS.md, "Python in-process". A benchmark, not a test.

    bash crates/reqstate-python/run-tests.sh --install-only   # the package, in .venv
    cargo build --release --bin reqstate                       # the sidecar measured
    crates/reqstate-python/.venv/bin/python crates/reqstate-python/bench/bench_codecs.py
    # or without the sidecar (no release build): ... bench_codecs.py --no-sidecar

1. The official `mcp` SDK's own envelope (built with the SDK's own
   `compact_json` and `_request_identity`, as `RequestStateBoundary._seal`
   builds it) sealed and opened by:
   - the SDK's built-in `AESGCMRequestStateCodec`;
   - `reqstate_client.mcp.SidecarCodec`, over a Unix socket to a real
     `reqstate serve` (release build) on the same machine;
   - `reqstate.mcp.InProcessCodec` (this package), same keyring file.
2. reqstate's own compact tokens for the reference claims
   (benches/data/reference-claims.json: `increase-counter`, step `confirm`,
   `{"current":10,"amount":5}`, 600 s, the reference context bytes):
   `Codec.mint` + `Codec.verify`, under HMAC-SHA256 and XChaCha20-Poly1305;
   with the binding built once, and with `call_context` computed each round
   as a handler does; and `verify_many` per token.

3. The call context alone (`call_context` of the reference arguments
   `{"current":10}` as a dict and as JSON text, `Binding.for_call`, and the
   way the package computed it before: `json.dumps`, then `call_context` on
   its text), and the bound round trip each of those makes: the context
   computed each round, as a handler that binds its arguments does.

The summary lines say each issue-28 target met or missed: `call_context`
of a dict <= 1 µs, the bound round trip >= 2x the SDK codec's speed.

Each figure is the median of 7 runs of N calls, in microseconds per round
trip (seal + unseal, or mint + verify), on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from mcp.server.request_state import AESGCMRequestStateCodec, _request_identity, compact_json

from reqstate import Binding, Codec, Keyring, call_context, call_context_from_text
from reqstate.mcp import InProcessCodec

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

from reqstate_client.mcp import SidecarCodec  # noqa: E402  (the client is used from its source tree)

# The reference claims every reqstate benchmark uses.
CLAIMS: dict[str, Any] = json.loads((REPO / "benches" / "data" / "reference-claims.json").read_text(encoding="utf-8"))
TOOL: str = CLAIMS["tool"]
STEP: str = CLAIMS["step"]
STATE: dict[str, int] = CLAIMS["state"]
TTL: int = CLAIMS["ttl_seconds"]
CONTEXT: bytes = CLAIMS["context"].encode()
ARGS = {"current": 10}


CALL = ("user-42", "counter-server", "tools/call")
# How the package printed parsed arguments before it read them in Rust.
ARGUMENTS_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
ARGUMENTS_TEXT = ARGUMENTS_JSON.encode(ARGS)


def context_of_value() -> object:
    return call_context(*CALL, ARGS)


def context_of_text() -> object:
    return call_context_from_text(*CALL, ARGUMENTS_TEXT)


def context_dumped() -> object:
    return call_context_from_text(*CALL, ARGUMENTS_JSON.encode(ARGS))


def binding_for_call() -> object:
    return Binding.for_call(TOOL, *CALL, ARGS)


def sidecar_support() -> ModuleType:
    """clients/python/tests/conftest.py: starts a real `reqstate serve` with
    a 0600 keyring (XChaCha20-Poly1305 key 1) on a Unix socket."""
    path = REPO / "clients" / "python" / "tests" / "conftest.py"
    spec = importlib.util.spec_from_file_location("reqstate_sidecar_support", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sdk_envelope() -> bytes:
    """The SDK's envelope for round 2 of increase-counter, as its boundary builds it."""
    target, digest = _request_identity("tools/call", {"name": TOOL, "arguments": ARGS})
    now = time.time()
    claims: dict[str, Any] = {
        "v": 1,
        "iat": now,
        "exp": now + TTL,
        "m": "tools/call",
        "t": target,
        "a": digest,
        "s": json.dumps({"step": STEP, **STATE}),
        "aud": "counter-server",
    }
    return compact_json(claims).encode()


class Bench:
    """Everything to measure, measured round-robin: each of `rounds` rounds
    times `n` calls of every item in turn, so that a machine whose load
    changes during the run slows every item alike; the figure is the median
    round, in microseconds per call."""

    def __init__(self, rounds: int = 7) -> None:
        self.rounds = rounds
        self.items: list[tuple[str, str, Callable[[], object], int, int]] = []

    def add(self, what: str, label: str, call: Callable[[], object], n: int, per: int = 1) -> None:
        """`per`: the operations one call makes (a batch), to report per operation."""
        self.items.append((what, label, call, n, per))

    def run(self) -> list[tuple[str, str, float]]:
        for _, _, call, n, _ in self.items:
            for _ in range(max(1, n // 10)):  # warm-up
                call()
        samples: list[list[float]] = [[] for _ in self.items]
        for _ in range(self.rounds):
            for i, (_, _, call, n, per) in enumerate(self.items):
                start = time.perf_counter_ns()
                for _ in range(n):
                    call()
                samples[i].append((time.perf_counter_ns() - start) / n / per / 1000)
        return [(what, label, statistics.median(samples[i])) for i, (what, label, _, _, _) in enumerate(self.items)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20000, help="calls per run, in-process (default 20000)")
    parser.add_argument("--n-sidecar", type=int, default=2000, help="calls per run, sidecar (default 2000)")
    parser.add_argument(
        "--reqstate-bin",
        default=str(REPO / "target" / "release" / "reqstate"),
        help="the sidecar binary (default target/release/reqstate)",
    )
    parser.add_argument(
        "--no-sidecar", action="store_true", help="leave the sidecar out (no release build of it needed)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    os.environ["REQSTATE_BIN"] = args.reqstate_bin
    support = sidecar_support()
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())

    bench = Bench()
    envelope = sdk_envelope()

    sidecar = None if args.no_sidecar else support.Sidecar()
    try:
        keyring = Keyring.ephemeral("xchacha20-poly1305") if sidecar is None else Keyring.from_file(sidecar.keyring)
        sdk = AESGCMRequestStateCodec([os.urandom(32)])
        local = InProcessCodec(Codec(keyring))
        with contextlib.ExitStack() as stack:
            sealers: list[tuple[str, AESGCMRequestStateCodec | SidecarCodec | InProcessCodec, int]] = [
                ("SDK AESGCMRequestStateCodec", sdk, args.n),
            ]
            if sidecar is not None:
                remote = stack.enter_context(SidecarCodec(sidecar.unix_target, support.AUTH_TOKEN))
                sealers.append(("SidecarCodec, Unix socket", remote, args.n_sidecar))
            sealers.append(("InProcessCodec (XChaCha20-Poly1305)", local, args.n))
            for name, sealer, n in sealers:
                sealed = sealer.seal(envelope)
                assert sealer.unseal(sealed) == envelope

                def seal_and_unseal(c: AESGCMRequestStateCodec | SidecarCodec | InProcessCodec = sealer) -> object:
                    return c.unseal(c.seal(envelope))

                bench.add("SDK envelope, seal + unseal", f"{name} ({len(sealed)} chars)", seal_and_unseal, n)

            bench.add("call context alone", "call_context(principal, audience, method, dict)", context_of_value, args.n)
            bench.add("call context alone", "call_context_from_text(principal, audience, method, JSON text)", context_of_text,
                      args.n)  # fmt: skip
            bench.add("call context alone", "json.dumps, then call_context on its text (before)", context_dumped,
                      args.n)  # fmt: skip
            bench.add("call context alone", "Binding.for_call(tool, principal, audience, method, dict)",
                      binding_for_call, args.n)  # fmt: skip
            algorithms: list[Literal["hmac-sha256", "xchacha20-poly1305"]] = ["hmac-sha256", "xchacha20-poly1305"]
            for algorithm in algorithms:
                codec = Codec(Keyring.ephemeral(algorithm))
                binding = Binding(TOOL, CONTEXT)
                token = codec.mint(binding, STEP, STATE, ttl=TTL).token
                batch = [token] * 1000

                def round_trip(c: Codec = codec, b: Binding = binding) -> object:
                    return c.verify(c.mint(b, STEP, STATE, ttl=TTL).token, b, expected_step=STEP)

                def with_context(c: Codec = codec) -> object:
                    b = Binding(TOOL, call_context(*CALL, ARGS))
                    return c.verify(c.mint(b, STEP, STATE, ttl=TTL).token, b, expected_step=STEP)

                def with_binding_for_call(c: Codec = codec) -> object:
                    b = Binding.for_call(TOOL, *CALL, ARGS)
                    return c.verify(c.mint(b, STEP, STATE, ttl=TTL).token, b, expected_step=STEP)

                def with_dumped_context(c: Codec = codec) -> object:
                    b = Binding(TOOL, call_context_from_text(*CALL, ARGUMENTS_JSON.encode(ARGS)))
                    return c.verify(c.mint(b, STEP, STATE, ttl=TTL).token, b, expected_step=STEP)

                def mint(c: Codec = codec, b: Binding = binding) -> object:
                    return c.mint(b, STEP, STATE, ttl=TTL)

                def verify(c: Codec = codec, b: Binding = binding, t: str = token) -> object:
                    return c.verify(t, b, expected_step=STEP)

                def verify_many(c: Codec = codec, b: Binding = binding, ts: list[str] = batch) -> object:
                    return c.verify_many(ts, b, expected_step=STEP)

                label = f"{algorithm} ({len(token)} chars)"
                bench.add("reqstate compact, mint + verify", label, round_trip, args.n)
                bench.add("reqstate compact, mint + verify + call_context", label, with_context, args.n)
                bench.add("reqstate compact, mint + verify + Binding.for_call", label, with_binding_for_call, args.n)
                bench.add("reqstate compact, mint + verify + json.dumps then call_context (before)", label,
                          with_dumped_context, args.n)  # fmt: skip
                bench.add("reqstate compact, mint", label, mint, args.n)
                bench.add("reqstate compact, verify", label, verify, args.n)
                bench.add("reqstate compact, verify_many (per token, batches of 1000)", label, verify_many,
                          max(1, args.n // 1000), per=1000)  # fmt: skip
            rows = bench.run()
    finally:
        if sidecar is not None:
            sidecar.stop()

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.python_implementation()} "
          f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{load_before} before the run, {load} at the end; median of {bench.rounds} round-robin rounds")
    print("| what | codec | µs per call |")
    print("|---|---|---|")
    for what, codec_name, us in rows:
        print(f"| {what} | {codec_name} | {us:.2f} |")
    sdk_us = rows[0][2]
    for what, codec_name, us in rows:
        if what.startswith("reqstate compact, mint + verify") or "InProcessCodec" in codec_name:
            print(f"  {codec_name}, {what}: {sdk_us / us:.2f}x the SDK codec's speed")
    figure = {(what, codec_name): us for what, codec_name, us in rows}
    alone = figure[("call context alone", "call_context(principal, audience, method, dict)")]
    before = figure[("call context alone", "json.dumps, then call_context on its text (before)")]
    print(f"  call_context of a dict: {alone:.2f} µs (target <= 1 µs: {'met' if alone <= 1 else 'missed'}), "
          f"{before / alone:.2f}x faster than json.dumps then call_context")
    for what, codec_name, us in rows:
        if what in ("reqstate compact, mint + verify + call_context", "reqstate compact, mint + verify + Binding.for_call"):
            ratio = sdk_us / us
            print(f"  bound round trip, {codec_name}, {what.split(' + ')[-1]}: {ratio:.2f}x the SDK codec's speed "
                  f"(target >= 2x: {'met' if ratio >= 2 else 'missed'})")
    if args.json:
        print(json.dumps([{"what": w, "codec": c, "us": round(u, 3)} for w, c, u in rows]))


if __name__ == "__main__":
    main()
