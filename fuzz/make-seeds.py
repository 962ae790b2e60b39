#!/usr/bin/env python3
"""Regenerate the checked-in seed corpus fuzz/corpus/<target>/seed-* from
tests/vectors/v1.json and docs/KEYRING.md. Standard library only.

    python3 fuzz/make-seeds.py

Old seed-* files are removed first; other corpus files (the committed min-*
files of fuzz/grow-corpus.sh, and the fuzzer's own, ignored by git) are left
alone.
"""

import base64
import json
import pathlib
import re

FUZZ = pathlib.Path(__file__).resolve().parent
ROOT = FUZZ.parent
VECTORS = json.loads((ROOT / "tests" / "vectors" / "v1.json").read_text())
KEYRING_MD = (ROOT / "docs" / "KEYRING.md").read_text()
TARGETS = ["verify_token", "token_decoders", "keyring_toml", "keyring_schedule", "claims_cbor",
           "sidecar_request"]


def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60]


def b64url_decode(token):
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


# ---- CBOR and protobuf, just enough for the seeds.

def cbor_head(major, value):
    m = major << 5
    if value < 24:
        return bytes([m | value])
    for ai, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if value < 1 << (8 * size):
            return bytes([m | ai]) + value.to_bytes(size, "big")
    raise ValueError(value)


def envelope(issued_at, lifetime, step, state):
    step = step.encode()
    return (b"\xa4\x01" + cbor_head(0, issued_at) + b"\x02" + cbor_head(0, lifetime)
            + b"\x03" + cbor_head(3, len(step)) + step + b"\x04" + state)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_bytes(field, value):
    if isinstance(value, str):
        value = value.encode()
    return varint(field << 3 | 2) + varint(len(value)) + value


def pb_varint(field, value):
    return varint(field << 3) + varint(value)


def verify_request(token, tool, context, step=None):
    msg = pb_bytes(1, token) + pb_bytes(2, tool)
    if step is not None:
        msg += pb_bytes(3, step)
    return msg + pb_bytes(4, context)


def mint_request(tool, step, context, ttl, state=None, state_json=None):
    msg = pb_bytes(1, tool) + pb_bytes(2, step)
    if state is not None:
        msg += pb_bytes(3, state)
    if state_json is not None:
        msg += pb_bytes(4, state_json)
    return msg + pb_varint(5, ttl) + pb_bytes(6, context)


# ---- The seeds of each target.

def verify_token_seeds():
    for v in VECTORS["valid"]:
        yield "valid-" + slug(v["name"]), v["token"].encode()
    for v in VECTORS["sealed"]:
        yield "sealed-" + slug(v["name"]), v["token"].encode()
    for v in VECTORS["invalid"]:
        yield "invalid-" + slug(v["name"]), v["token"].encode()


def keyring_toml_seeds():
    for i, block in enumerate(re.findall(r"```toml\n(.*?)```", KEYRING_MD, re.S)):
        yield f"keyring-md-{i}", block.encode()
    lines = ["# tests/vectors/v1.json keys", "version = 1", ""]
    for k in VECTORS["keys"]:
        lines += ["[[key]]", f"id = {k['id']}", f'algorithm = "{k["algorithm"]}"',
                  f'status = "{k["status"]}"', "created = 2026-11-30T12:00:00Z",
                  f'secret = "{k["secret"]}"', ""]
    vectors = "\n".join(lines)
    yield "vectors-keyring", vectors.encode()
    first = VECTORS["keys"][1]
    one = (f'[[key]]\nid = {first["id"]}\nstatus = "primary"\nsecret = "{first["secret"]}"\n')
    yield "one-primary", one.encode()
    yield "secret-env", b'[[key]]\nid = 7\nstatus = "primary"\nsecret_env = "REQSTATE_FUZZ_UNSET"\n'
    yield "secret-file-missing", b'[[key]]\nid = 7\nstatus = "primary"\nsecret_file = "/nonexistent/key"\n'
    yield "two-primaries", (one + one.replace(f"id = {first['id']}", "id = 9")).encode()
    yield "duplicate-id", (one + one.replace('"primary"', '"active"')).encode()
    yield "short-secret", b'[[key]]\nid = 1\nstatus = "primary"\nsecret = "AAAA"\n'
    yield "bad-version", b"version = 2\n" + one.encode()
    yield "unknown-field", one.encode() + b'colour = "blue"\n'
    yield "created-offset", one.replace("id =", 'created = 1969-12-31T23:59:59+01:30\nid =').encode()
    # The scheduled keyrings the vectors pin (docs/KEYRING.md, "Keys on a schedule").
    for v in VECTORS.get("keyring_texts", []):
        yield "keyring-text-" + slug(v["name"]), v["toml"].encode()


def token_decoders_seeds():
    """The target's three modes (fuzz_targets/token_decoders.rs): 0, the
    vectors' tokens as text; 1, minted tokens of state sizes around the
    768-byte stack buffer and the 8192-character limit, unedited and edited;
    2, bodies under the target's own tag: the vectors' HMAC bodies, and
    envelopes with padded states, times and steps of the target's choosing."""
    for v in VECTORS["valid"] + VECTORS["sealed"] + VECTORS["invalid"]:
        yield "raw-" + slug(v["name"]), b"\x00" + v["token"].encode()
    for algorithm, choice in (("hmac", 0), ("xchacha", 1)):
        for size in (0, 16, 500, 700, 730, 744, 745, 760, 800, 1200, 1535):
            mint = bytes([1, choice]) + size.to_bytes(2, "little") + b"\x5a" + (600).to_bytes(2, "little")
            yield f"minted-{algorithm}-{size}", mint + b"\x00"
            # One edit: a character replaced in the middle (kind 0).
            at = (size * 4 // 3) // 2
            yield f"minted-{algorithm}-{size}-edited", mint + b"\x01" + at.to_bytes(2, "little") + b"A\x00"
            # One edit: truncated to two thirds (kind 3).
            yield f"minted-{algorithm}-{size}-truncated", mint + b"\x01" + (size * 8 // 9).to_bytes(2, "little") + b"A\x03"
    for v in VECTORS["valid"]:
        if b64url_decode(v["token"])[0] == 0x11:  # version 1, state, HMAC
            yield "tagged-body-" + slug(v["name"]), bytes([2, 0]) + hmac_body(v["token"])
    for pad in (0, 1, 690, 720, 740, 1100):
        for when, lifetime in ((b"\x00", b"\x00"), (b"\x01\x00\x90", b"\x00"), (b"\x00", b"\x01\x00\x00")):
            step = b"\x07confirm"
            yield (f"tagged-envelope-pad{pad}-t{when.hex()}-l{lifetime.hex()}",
                   bytes([2, 130]) + when + lifetime + step + pad.to_bytes(2, "little") + b"\xa1\x61a\x01")
    yield "tagged-envelope-single-use", bytes([2, 2]) + envelope(1764460800, 600, "confirm", b"\x01")
    yield "tagged-envelope-sealed", bytes([2, 3]) + b"payload"


def splitmix(seed):
    """SplitMix64, as keyring-eval's `random` (fuzz/differential/src/main.rs)."""
    state = seed
    mask = (1 << 64) - 1
    while True:
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        yield z ^ (z >> 31)


def keyring_schedule_seeds():
    """The first inputs of `keyring-eval random N 1` (the differential
    runner's stream), then one input per key count and layout: the target
    builds the TOML from the bytes (fuzz/src/schedule.rs)."""
    rng = splitmix(1)
    for i in range(64):
        length = 4 + next(rng) % 120
        yield f"random-{i:02d}", bytes(next(rng) & 0xFF for _ in range(length))
    for shape in range(5):
        for layout in (0x00, 0x40, 0x80, 0xC0):
            # Key i: flags (status from i), when = mint_from + retire_at.
            keys = b"".join(bytes([0 if i == 0 else 1, 0x05, 1, 0x00]) for i in range(shape + 1))
            yield f"shape-{shape + 1}-keys-{layout:02x}", bytes([shape | layout]) + keys


def hmac_body(token):
    raw = b64url_decode(token)
    i = 1
    while raw[i] & 0x80:
        i += 1
    return raw[i + 1:-16]


def claims_cbor_seeds():
    for v in VECTORS["valid"]:
        state = bytes.fromhex(v["state_cbor"])
        yield "body-" + slug(v["name"]), envelope(v["issued_at"], v["ttl"], v["step"], state)
        yield "state-" + slug(v["name"]), state
    for v in VECTORS["invalid"]:
        if "key holder's body" in v["name"] and v["name"].startswith("hmac"):
            yield "body-invalid-" + slug(v["name"]), hmac_body(v["token"])
    yield "state-tagged", bytes.fromhex("c1 1a 69 2b 89 00".replace(" ", ""))
    yield "state-bignum", bytes.fromhex("c2 49 01 00 00 00 00 00 00 00 00".replace(" ", ""))
    yield "state-indefinite", bytes.fromhex("9f 5f 41 01 ff 7f 61 61 ff bf 61 61 01 ff ff".replace(" ", ""))
    yield "state-floats", bytes.fromhex("84 f9 7e 00 f9 80 00 fa 47 c3 50 00 fb 7f f0 00 00 00 00 00 00".replace(" ", ""))
    yield "state-nested-16", b"\x81" * 15 + b"\xa1\x00\x00"
    yield "state-simple", bytes.fromhex("83 f4 f7 f8 20".replace(" ", ""))
    # The inputs of README.md "Findings" 1 (also in fuzz/artifacts-found/).
    yield "regression-bignum-tag-becomes-integer", bytes.fromhex("c25f4101ff")
    yield "regression-bignum-2p127", bytes([0xC3, 0x5F, 0x50, 0x80] + [0] * 15 + [0xFF])


def sidecar_request_seeds():
    for v in VECTORS["valid"]:
        context = bytes.fromhex(v["context"])
        yield "verify-" + slug(v["name"]), verify_request(v["token"], v["tool"], context, v["step"])
        yield "mint-json-" + slug(v["name"]), mint_request(
            v["tool"], v["step"], context, v["ttl"], state_json=json.dumps(v["state_json"]))
        yield "mint-bytes-" + slug(v["name"]), mint_request(
            v["tool"], v["step"], context, v["ttl"], state=bytes.fromhex(v["state_cbor"]))
    for v in VECTORS["invalid"][:12]:
        yield "verify-invalid-" + slug(v["name"]), verify_request(
            v["token"], v["tool"], bytes.fromhex(v.get("context", "")), v.get("expected_step"))
    for v in VECTORS["sealed"]:
        yield "unseal-" + slug(v["name"]), pb_bytes(1, v["token"]) + pb_bytes(2, bytes.fromhex(v["aad"]))
        yield "seal-" + slug(v["name"]), pb_bytes(1, bytes.fromhex(v["payload"])) + pb_bytes(2, bytes.fromhex(v["aad"]))
    items = [verify_request(v["token"], v["tool"], bytes.fromhex(v["context"])) for v in VECTORS["valid"]]
    yield "verify-batch", b"".join(pb_bytes(1, i) for i in items)
    mints = [mint_request(v["tool"], v["step"], bytes.fromhex(v["context"]), 0,
                          state_json=json.dumps(v["state_json"])) for v in VECTORS["valid"]]
    yield "mint-batch", b"".join(pb_bytes(1, m) for m in mints)


def main():
    makers = {
        "verify_token": verify_token_seeds,
        "token_decoders": token_decoders_seeds,
        "keyring_toml": keyring_toml_seeds,
        "keyring_schedule": keyring_schedule_seeds,
        "claims_cbor": claims_cbor_seeds,
        "sidecar_request": sidecar_request_seeds,
    }
    for target in TARGETS:
        directory = FUZZ / "corpus" / target
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("seed-*"):
            old.unlink()
        seen = {}
        for name, data in makers[target]():
            if name in seen:
                name = f"{name}-{seen[name]}"
            seen[name] = seen.get(name, 0) + 1
            (directory / f"seed-{name}").write_bytes(data)
        print(f"{target}: {len(list(directory.glob('seed-*')))} seeds")


if __name__ == "__main__":
    main()
