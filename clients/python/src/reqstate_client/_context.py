"""The call context (docs/FORMAT.md §7): the 32 bytes that bind a token to one
caller, one server, one method and one call's exact arguments.

    args    = SHA-256(JCS(arguments))
    context = SHA-256("reqstate/v1 call-context-jcs" ‖ lp(principal) ‖ lp(audience) ‖ lp(method) ‖ args)
    lp(x)   = u32 big-endian byte length of UTF-8 x ‖ x

JCS is RFC 8785, serialized by the `rfc8785` package; this module parses the
arguments' JSON text strictly first and refuses what JCS cannot represent
exactly, byte for byte as the core crate's `reqstate::call_context` does
(checked against tests/vectors/call_context.json).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from typing import Any

import rfc8785

LABEL = b"reqstate/v1 call-context-jcs"
"""The domain label of the context digest."""

MAX_ARGUMENTS_DEPTH = 128
"""Deepest nesting of arrays and objects accepted in the arguments."""

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


class InvalidArgumentError(ValueError):
    """Arguments that JCS cannot represent exactly, or that are not JSON.

    `code` is always ``"invalid_argument"`` (the core crate's error code);
    `reason` names the rule: ``not_json``, ``duplicate_key``,
    ``inexact_number``, ``lone_surrogate`` or ``too_deep``.
    """

    code = "invalid_argument"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _not_json(detail: str = "arguments are not valid JSON") -> InvalidArgumentError:
    return InvalidArgumentError("not_json", detail)


def _decimal_value(text: str) -> tuple[bool, str, int]:
    """The exact value of a decimal number text as (negative, significant digits
    without leading or trailing zeros, exponent of the last digit); zero is
    ``(False, "", 0)`` whatever its sign."""
    negative = text.startswith("-")
    rest = text[1:] if negative else text
    mantissa, _, exponent = rest.lower().partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    if not digits.strip("0"):
        return (False, "", 0)
    # An exponent beyond 18 digits only comes with a double that overflowed
    # or underflowed (refused either way): saturate it, as the core crate does.
    magnitude = exponent.lstrip("+-").lstrip("0")
    exp = int(magnitude) if len(magnitude) <= 18 and magnitude else (10**18 if magnitude else 0)
    exp = (-exp if exponent.startswith("-") else exp) - len(frac)
    stripped = digits.rstrip("0")
    return (negative, stripped, exp + len(digits) - len(stripped))


def _number(literal: str) -> float:
    """The FORMAT.md §7 number rule: the literal rounds to the nearest double,
    which must be finite and whose JCS text denotes exactly the literal's value."""
    if not _NUMBER.fullmatch(literal):
        raise _not_json()
    # float() rounds to nearest, ties to even, and gives inf on overflow.
    double = float(literal)
    if math.isinf(double):
        raise InvalidArgumentError("inexact_number", f"number {literal} overflows an IEEE double")
    jcs = rfc8785.dumps(double).decode("ascii")
    if _decimal_value(jcs) != _decimal_value(literal):
        raise InvalidArgumentError(
            "inexact_number", f"number {literal} is not exactly an IEEE double (JCS would print {jcs})"
        )
    return double


def _refuse_constant(name: str) -> Any:
    raise _not_json(f"arguments are not valid JSON ({name})")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidArgumentError("duplicate_key", f"arguments have a duplicate object key {key!r}")
        out[key] = value
    return out


def _check(value: Any, depth: int) -> None:
    """Refuses lone surrogates (escaped or raw) and nesting beyond the limit."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError("lone_surrogate", "arguments have a string with a lone surrogate") from None
    elif isinstance(value, (list, dict)):
        if depth + 1 > MAX_ARGUMENTS_DEPTH:
            raise InvalidArgumentError("too_deep", "arguments are nested too deeply")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str):
                _check(key, depth + 1)
            _check(item, depth + 1)


def _parse(arguments_json: str | bytes) -> Any:
    if isinstance(arguments_json, (bytes, bytearray)):
        try:
            arguments_json = bytes(arguments_json).decode("utf-8")
        except UnicodeDecodeError:
            raise _not_json("arguments are not UTF-8") from None
    if not isinstance(arguments_json, str):
        raise TypeError("arguments_json must be str or bytes (JSON text); use call_context_from_value for values")
    if arguments_json.startswith("\ufeff"):
        raise _not_json()
    try:
        value = json.loads(
            arguments_json,
            object_pairs_hook=_pairs,
            parse_int=_number,
            parse_float=_number,
            parse_constant=_refuse_constant,
        )
    except InvalidArgumentError:
        raise
    except RecursionError:
        raise InvalidArgumentError("too_deep", "arguments are nested too deeply") from None
    except ValueError:
        raise _not_json() from None
    _check(value, 0)
    return value


def canonical_json(arguments_json: str | bytes) -> str:
    """The JCS (RFC 8785) text of the JSON value `arguments_json` (the text as
    received: any spacing and key order). Raises `InvalidArgumentError` for text
    that is not one JSON value and for what JCS cannot represent exactly:
    duplicate keys, numbers whose JCS form is another number (``9007199254740993``,
    ``1e400``, ``0.10000000000000001``), lone surrogates, nesting deeper than 128."""
    value = _parse(arguments_json)
    try:
        return rfc8785.dumps(value).decode("utf-8")
    except rfc8785.CanonicalizationError as e:  # pragma: no cover - refused above
        raise InvalidArgumentError("inexact_number", str(e)) from None


def _digest(principal: str, audience: str, method: str, canonical: str) -> bytes:
    h = hashlib.sha256(LABEL)
    for part in (principal, audience, method):
        data = part.encode("utf-8")
        h.update(struct.pack(">I", len(data)))
        h.update(data)
    h.update(hashlib.sha256(canonical.encode("utf-8")).digest())
    return h.digest()


def call_context(principal: str, audience: str, method: str, arguments_json: str | bytes) -> bytes:
    """The 32-byte call context of one call, identical to the core crate's
    `reqstate::call_context`. `arguments_json` is the arguments' JSON text as
    received; see `canonical_json` for what is refused (`InvalidArgumentError`)."""
    return _digest(principal, audience, method, canonical_json(arguments_json))


def call_context_from_value(principal: str, audience: str, method: str, arguments: Any) -> bytes:
    """`call_context` for arguments already parsed (dicts, lists, str, int,
    float, bool, None): the value is printed with `json.dumps` and that text
    goes through `call_context`, so integers whose JCS form would be another
    integer (beyond 2**53, such as 2**64) are refused, and so are NaN and
    infinities. A parsed value no longer shows duplicate keys or how its
    numbers were written: when you hold the request's JSON text, pass it to
    `call_context` instead."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError as e:
        raise InvalidArgumentError("inexact_number", f"arguments cannot be JSON: {e}") from None
    except (TypeError, RecursionError) as e:
        raise _not_json(f"arguments cannot be JSON: {e}") from None
    return call_context(principal, audience, method, text)
