"""`python -m reqstate mint|verify`: the command line every reqstate
implementation shares (docs/CLI.md), on the in-process core.

The flags, the JSON printed and the exit codes are the contract's; the JSON
to CBOR mapping of `--state-json` and the `state` printed by `verify` are the
Rust binary's own code (compiled into the native module), so the three
implementations agree byte for byte (tests/conformance/ checks it).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from . import _native
from ._errors import KeyringError, ReqstateError, TokenRefused
from ._native import Binding, Codec, Keyring, MemoryReplayStore, Verified

if TYPE_CHECKING:
    from .redis import RedisReplayStore

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 64

_U64_MAX = 2**64 - 1

_SHARED = """\
  --keyring FILE              the keyring file (docs/KEYRING.md), required
  --tool TEXT                 the tool the token is bound to, required
  --context TEXT              context bound into the token: these UTF-8 bytes
  --context-hex HEX           context as hex bytes
  --context-file FILE         context: the bytes of this file, exactly
  --now UNIX_SECONDS          the clock reading to use (default: the system clock)
  --max-token-len CHARS       policy: longest token, 64-1048576 (default 8192)
  --clock-leeway SECONDS      policy: clock leeway, 0-600 (default 60)
  --max-lifetime SECONDS      policy: longest lifetime, 1-2592000 (default 86400)
  --allow-insecure-keyring-permissions
                              read a keyring file that group or others may read
  --help                      print this help
"""

_MINT_HELP = (
    """\
usage: python -m reqstate mint --keyring FILE --tool TEXT --step TEXT
         [--state-json JSON | --state-cbor-hex HEX] [--ttl SECONDS] [--single-use]
         [--context TEXT | --context-hex HEX | --context-file FILE]
         [--now UNIX_SECONDS] [policy flags]

Mints a token and prints {"token","key_id","issued_at","expires_at"} (exit 0),
or {"reason","message"} when the core refuses (exit 1). Usage errors exit 64.

  --step TEXT                 the step the token is for, required
  --state-json JSON           the state as JSON (default null)
  --state-cbor-hex HEX        the state as one CBOR item, embedded as given
  --ttl SECONDS               lifetime (default 600)
  --single-use                mint a single-use token (accepted once, by verify --consume)
"""
    + _SHARED
)

_VERIFY_HELP = (
    """\
usage: python -m reqstate verify --keyring FILE --tool TEXT [--expected-step TEXT]
         [--consume [--replay-store URL [--replay-key-prefix P] [--replay-timeout-ms N]
                     [--replay-max-skew-ms N]]]
         [--context TEXT | --context-hex HEX | --context-file FILE]
         [--now UNIX_SECONDS] [policy flags] (TOKEN | --token TOKEN)

Verifies a token and prints {"valid":true,"step","state","state_cbor_hex",
"key_id","issued_at","expires_at"} (exit 0), or {"valid":false,"reason",
"message"} (exit 1). Usage errors exit 64. TOKEN `-` reads standard input.

  --expected-step TEXT        the step the token must be for (default: any)
  --consume                   accept a single-use token (a record for this run only,
                              or in the Redis of --replay-store)
  --replay-store URL          with --consume: spend the token in this Redis (>= 7.0), by the
                              rule every reqstate store shares: redis://[user:password@]host:port[/db],
                              rediss://..., unix:///path/redis.sock (needs reqstate[redis])
  --replay-key-prefix P       with --replay-store: the records' prefix (default reqstate:)
  --replay-timeout-ms N       with --replay-store: the store call's deadline, 1-60000 (default 1000)
  --replay-max-skew-ms N      with --replay-store: how far this clock may be from Redis's,
                              1-60000 (default 2000)
  --token TOKEN               the token (or give it as the positional argument)
"""
    + _SHARED
)

_USAGE = (
    "usage: python -m reqstate (mint | verify | keys new) [flags]; `python -m reqstate mint --help`, "
    "`python -m reqstate keys new --help`"
)

_KEYS_NEW_HELP = """\
usage: python -m reqstate keys new [--id N] [--status primary|active]
           [--algorithm xchacha20-poly1305|hmac-sha256] [--secret-bytes N] [--compact]

Prints a fresh key, from the operating system's CSPRNG, to standard output only:
by default a whole TOML keyring (docs/KEYRING.md) of one primary key, for
`python -m reqstate keys new > keyring.toml && chmod 600 keyring.toml`; with
--compact, the one-line compact form that @reqstate/codec reads (REQSTATE_KEYS,
a Worker secret). --status active prints a key to add to a keyring for a
rotation (docs/ROTATION.md): its [[key]] table, or its compact entry to append
after a comma.

  --id N                 the key id, 0-4294967295 without leading zeros (default 1)
  --status S             primary (default) or active
  --algorithm A          xchacha20-poly1305 (default) or hmac-sha256
  --secret-bytes N       random bytes of the secret, 32-1024 (default 32)
  --compact              the compact form instead of TOML
  --help                 print this help
"""

_SWITCHES = {"--single-use", "--consume", "--allow-insecure-keyring-permissions", "--help"}
_COMMON_VALUES = {
    "--keyring",
    "--tool",
    "--context",
    "--context-hex",
    "--context-file",
    "--now",
    "--max-token-len",
    "--clock-leeway",
    "--max-lifetime",
}
_FLAGS = {
    "keys new": {"--id", "--status", "--algorithm", "--secret-bytes"},
    "mint": _COMMON_VALUES | {"--step", "--state-json", "--state-cbor-hex", "--ttl"},
    "verify": _COMMON_VALUES
    | {"--expected-step", "--token", "--replay-store", "--replay-key-prefix", "--replay-timeout-ms", "--replay-max-skew-ms"},
}
_COMMAND_SWITCHES = {
    "keys new": {"--compact", "--help"},
    "mint": {"--single-use", "--allow-insecure-keyring-permissions", "--help"},
    "verify": {"--consume", "--allow-insecure-keyring-permissions", "--help"},
}


class UsageError(Exception):
    """A usage or configuration error: exit 64, the message on stderr."""


@dataclass
class Parsed:
    """The flags given (by name, without the dashes' meaning) and positionals."""

    values: dict[str, str] = field(default_factory=dict)
    switches: set[str] = field(default_factory=set)
    positional: list[str] = field(default_factory=list)


def _parse(command: str, args: Sequence[str]) -> Parsed:
    """GNU long options: `--flag VALUE` or `--flag=VALUE`, each at most once;
    `--` ends the flags. A value is taken as is, even if it starts with `-`."""
    parsed = Parsed()
    flags, switches = _FLAGS[command], _COMMAND_SWITCHES[command]
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            parsed.positional.extend(args[i:])
            break
        if arg == "-" or not arg.startswith("-"):
            parsed.positional.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        if name in switches:
            if eq:
                raise UsageError(f"{name} takes no value")
            if name in parsed.switches:
                raise UsageError(f"{name} given twice")
            parsed.switches.add(name)
            continue
        if name not in flags:
            if name in _SWITCHES or name in _FLAGS["mint"] | _FLAGS["verify"]:
                raise UsageError(f"{name} is not a flag of {command}")
            raise UsageError(f"unknown flag {name}")
        if name in parsed.values:
            raise UsageError(f"{name} given twice")
        if eq:
            value = inline
        else:
            if i >= len(args):
                raise UsageError(f"{name} needs a value")
            value = args[i]
            i += 1
        parsed.values[name] = value
    return parsed


def _u64(parsed: Parsed, name: str, default: int | None) -> int | None:
    text = parsed.values.get(name)
    if text is None:
        return default
    if not text or not text.isascii() or not text.isdigit():
        raise UsageError(f"{name} {text!r}: not an unsigned decimal integer")
    value = int(text)
    if value > _U64_MAX:
        raise UsageError(f"{name} {text}: out of range (at most {_U64_MAX})")
    return value


def _hex(name: str, text: str) -> bytes:
    if len(text) % 2:
        raise UsageError(f"{name}: odd number of hex digits ({len(text)})")
    if not all(c in "0123456789abcdefABCDEF" for c in text):
        raise UsageError(f"{name}: not hex")
    return bytes.fromhex(text)


def _context(parsed: Parsed) -> bytes:
    given = [name for name in ("--context", "--context-hex", "--context-file") if name in parsed.values]
    if len(given) > 1:
        raise UsageError("only one of --context, --context-hex and --context-file can be used")
    if "--context" in parsed.values:
        return parsed.values["--context"].encode("utf-8")
    if "--context-hex" in parsed.values:
        return _hex("--context-hex", parsed.values["--context-hex"])
    if "--context-file" in parsed.values:
        path = parsed.values["--context-file"]
        try:
            with open(path, "rb") as file:
                return file.read()
        except OSError as error:
            raise UsageError(f"--context-file {path}: {error.strerror or error}") from None
    return b""


def _in_flags(message: str) -> str:
    """A `Keyring.from_file` error in this command line's terms: the keyword
    that accepts a readable keyring file (`allow_insecure_permissions=True`,
    which the native module names) becomes the flag that does it here."""
    return message.replace("allow_insecure_permissions=True to Keyring.from_file", "--allow-insecure-keyring-permissions").replace(
        "allow_insecure_permissions=True", "--allow-insecure-keyring-permissions"
    )


def _codec(parsed: Parsed) -> Codec:
    """The keyring file (checked as the Rust binary checks it) and the policy."""
    policy = {
        "max_token_len": _u64(parsed, "--max-token-len", 8192),
        "clock_leeway": _u64(parsed, "--clock-leeway", 60),
        "max_lifetime": _u64(parsed, "--max-lifetime", 86400),
    }
    path = parsed.values["--keyring"]
    try:
        keyring = Keyring.from_file(
            path, allow_insecure_permissions="--allow-insecure-keyring-permissions" in parsed.switches
        )
    except KeyringError as error:
        raise UsageError(_in_flags(error.message)) from None
    try:
        return Codec(keyring, **{k: v for k, v in policy.items() if v is not None})
    except KeyringError as error:  # a schedule this policy refuses (docs/KEYRING.md)
        raise UsageError(f"keyring {path}: invalid keyring: {error.message}") from None
    except (ReqstateError, OverflowError) as error:
        raise UsageError(f"policy: {error}") from None


_REPLAY_FLAGS = ("--replay-store", "--replay-key-prefix", "--replay-timeout-ms", "--replay-max-skew-ms")


def _ranged(parsed: Parsed, name: str, low: int, high: int, default: int) -> int:
    value = _u64(parsed, name, default)
    assert value is not None
    if not low <= value <= high:
        raise UsageError(f"{name} must be in {low}..={high}")
    return value


def _replay_store(parsed: Parsed) -> RedisReplayStore | None:
    """The Redis store of `--replay-store` (docs/CLI.md), or None: the
    --replay-* flags only with --consume, the others only with
    --replay-store. Connects on first use."""
    given = [name for name in _REPLAY_FLAGS if name in parsed.values]
    if not given:
        return None
    if "--consume" not in parsed.switches:
        raise UsageError(f"{given[0]} needs --consume")
    url = parsed.values.get("--replay-store")
    if url is None:
        raise UsageError(f"{given[0]} needs --replay-store")
    timeout_ms = _ranged(parsed, "--replay-timeout-ms", 1, 60_000, 1000)
    max_skew_ms = _ranged(parsed, "--replay-max-skew-ms", 1, 60_000, 2000)
    try:
        from .redis import RedisReplayStore, redact_url
    except ImportError:
        raise UsageError("--replay-store needs redis-py: pip install 'reqstate[redis]'") from None
    if re.search(r",\s*[a-z][a-z0-9+.-]*://", url, re.IGNORECASE):
        raise UsageError(f"--replay-store takes one Redis URL, not a list: {redact_url(url)}")
    try:
        return RedisReplayStore(
            url,
            prefix=parsed.values.get("--replay-key-prefix", "reqstate:"),
            timeout=timeout_ms / 1000,
            max_skew_ms=max_skew_ms,
        )
    except ValueError as error:
        raise UsageError(f"--replay-store {error}") from None


def _consume_in_redis(
    codec: Codec, token: str, binding: Binding, store: RedisReplayStore, step: str | None, now: int | None
) -> Verified:
    """`--consume --replay-store`: the record kept in Redis by the shared
    rule, reached only by a token that passed every other check."""
    try:
        return codec.consume(token, binding, store, expected_step=step, now=now, decode=False)
    except TokenRefused as refused:
        if store.pending_retries:
            # The store's advice (retry through the same store object) cannot
            # be followed across runs: the attempt ends with this process.
            detail = refused.message.split("; the token may")[0]
            raise TokenRefused(
                "replay_store_unavailable",
                f"the token is refused and may have been recorded ({detail}): if it was, a later "
                "consume is refused as replayed",
            ) from None
        raise
    finally:
        store.close()


def _require(parsed: Parsed, *names: str) -> None:
    for name in names:
        if name not in parsed.values:
            raise UsageError(f"{name} is required")


def _check_utf8(args: Sequence[str]) -> None:
    """Arguments that were not UTF-8 arrive as lone surrogates (surrogateescape)."""
    for arg in args:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError("an argument is not valid UTF-8") from None


def _print(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def mint(args: Sequence[str], out: TextIO) -> int:
    """`mint` (docs/CLI.md)."""
    parsed = _parse("mint", args)
    if "--help" in parsed.switches:
        _print(out, _MINT_HELP)
        return EXIT_OK
    if parsed.positional:
        raise UsageError(f"unexpected argument {parsed.positional[0]!r}")
    _require(parsed, "--keyring", "--tool", "--step")
    now = _u64(parsed, "--now", None)
    ttl = _u64(parsed, "--ttl", 600)
    assert ttl is not None
    if "--state-json" in parsed.values and "--state-cbor-hex" in parsed.values:
        raise UsageError("--state-json and --state-cbor-hex cannot be used together")
    try:
        if "--state-cbor-hex" in parsed.values:
            state = _hex("--state-cbor-hex", parsed.values["--state-cbor-hex"])
            _native._cli_check_state_cbor(state)
        else:
            state = _native._cli_state_from_json(parsed.values.get("--state-json", "null"))
    except ValueError as error:
        flag = "--state-cbor-hex" if "--state-cbor-hex" in parsed.values else "--state-json"
        raise UsageError(f"{flag}: {error}") from None
    context = _context(parsed)
    codec = _codec(parsed)
    try:
        binding = Binding(parsed.values["--tool"], context)
        minted = codec.mint_cbor(
            binding, parsed.values["--step"], state, ttl=ttl, single_use="--single-use" in parsed.switches, now=now
        )
    except ReqstateError as error:
        _print(out, _dumps({"reason": error.reason, "message": error.message}))
        return EXIT_REFUSED
    _print(
        out,
        _dumps(
            {
                "token": minted.token,
                "key_id": minted.key_id,
                "issued_at": minted.issued_at,
                "expires_at": minted.expires_at,
            }
        ),
    )
    return EXIT_OK


def _stdin_token(stdin: TextIO) -> str:
    data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read().encode("utf-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("the token on standard input is not UTF-8") from None
    return text.strip(" \t\r\n\x0b\x0c")


def verify(args: Sequence[str], out: TextIO, stdin: TextIO) -> int:
    """`verify` (docs/CLI.md)."""
    parsed = _parse("verify", args)
    if "--help" in parsed.switches:
        _print(out, _VERIFY_HELP)
        return EXIT_OK
    tokens = parsed.positional + ([parsed.values["--token"]] if "--token" in parsed.values else [])
    if len(tokens) != 1:
        raise UsageError("exactly one token is needed: TOKEN, --token TOKEN or -")
    _require(parsed, "--keyring", "--tool")
    now = _u64(parsed, "--now", None)
    store = _replay_store(parsed)
    token = _stdin_token(stdin) if tokens[0] == "-" else tokens[0]
    context = _context(parsed)
    codec = _codec(parsed)
    step = parsed.values.get("--expected-step")
    try:
        binding = Binding(parsed.values["--tool"], context)
        if store is not None:
            verified = _consume_in_redis(codec, token, binding, store, step, now)
        elif "--consume" in parsed.switches:
            # A spent-token record for this run only (docs/CLI.md `--consume`).
            verified = codec.consume(token, binding, MemoryReplayStore(64), expected_step=step, now=now, decode=False)
        else:
            verified = codec.verify_cbor(token, binding, expected_step=step, now=now)
    except ReqstateError as error:
        _print(out, _dumps({"valid": False, "reason": error.reason, "message": error.message}))
        return EXIT_REFUSED
    fields = {
        "valid": True,
        "step": verified.step,
        "state_cbor_hex": _native._hex(verified.state_cbor),
        "key_id": verified.key_id,
        "issued_at": verified.issued_at,
        "expires_at": verified.expires_at,
    }
    line = _dumps(fields)
    state = _native._cli_state_json(verified.state_cbor)
    if state is not None:
        # The Rust binary's own JSON text of the state (docs/CLI.md "state").
        line = line[:-1] + ',"state":' + state + "}"
    _print(out, line)
    return EXIT_OK


def keys_new(args: Sequence[str], out: TextIO) -> int:
    """`keys new`: a fresh key, as a TOML keyring (or table) or a compact entry."""
    parsed = _parse("keys new", args)
    if "--help" in parsed.switches:
        _print(out, _KEYS_NEW_HELP.rstrip("\n"))
        return EXIT_OK
    if parsed.positional:
        raise UsageError("keys new takes no positional argument")
    id_text = parsed.values.get("--id", "1")
    if not re.fullmatch(r"0|[1-9][0-9]{0,9}", id_text) or int(id_text) > 4294967295:
        raise UsageError("--id must be a key id in 0..=4294967295, without leading zeros")
    status = parsed.values.get("--status", "primary")
    if status not in ("primary", "active"):
        raise UsageError("--status must be primary (a keyring of this one key) or active (a key to add to a keyring)")
    algorithm = parsed.values.get("--algorithm", "xchacha20-poly1305")
    if algorithm not in ("xchacha20-poly1305", "hmac-sha256"):
        raise UsageError("--algorithm must be xchacha20-poly1305 or hmac-sha256")
    size_text = parsed.values.get("--secret-bytes", "32")
    if not re.fullmatch(r"[0-9]{1,5}", size_text) or not 32 <= int(size_text) <= 1024:
        raise UsageError("--secret-bytes must be in 32..=1024")
    import base64
    import secrets
    import time

    secret = base64.b64encode(secrets.token_bytes(int(size_text))).decode("ascii")
    if "--compact" in parsed.switches:
        _print(out, f"{id_text}:{status}:{algorithm}:{secret}")
        return EXIT_OK
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    table = (
        f'[[key]]\nid = {id_text}\nstatus = "{status}"\nalgorithm = "{algorithm}"\n'
        f'created = {created}\nsecret = "{secret}"\n'
    )
    if status == "primary":
        text = "version = 1\n\n" + table
        Keyring.from_toml(text)  # what is printed loads
    else:
        text = table
    out.write(text)
    out.flush()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else ""
    try:
        _check_utf8(args)
        if command == "mint":
            return mint(args[1:], sys.stdout)
        if command == "verify":
            return verify(args[1:], sys.stdout, sys.stdin)
        if command == "keys":
            sub = args[1] if len(args) > 1 else ""
            if sub != "new":
                raise UsageError(
                    "keys needs a subcommand: keys new" if not sub else
                    "unknown keys subcommand; expected keys new (the Rust binary manages a keyring file: reqstate keys)"
                )
            return keys_new(args[2:], sys.stdout)
        if command in ("--help", "-h", "help"):
            _print(sys.stdout, _USAGE)
            return EXIT_OK
        raise UsageError(f"unknown command {command!r}" if command else "a command is needed")
    except UsageError as error:
        print(f"python -m reqstate {command or ''}: {error}".replace("  ", " "), file=sys.stderr)
        if not command or command not in ("mint", "verify", "keys"):
            print(_USAGE, file=sys.stderr)
        return EXIT_USAGE
    except RecursionError:
        print(f"python -m reqstate {command}: input nested too deeply", file=sys.stderr)
        return EXIT_USAGE


