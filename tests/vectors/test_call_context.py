"""An independent check of tests/vectors/call_context.json (FORMAT.md §7),
written from the spec, not from the Rust code: strict parse with Python's
json module, the number rule with decimal.Decimal, JCS with the `rfc8785`
package (Trail of Bits), the context with hashlib.

    .venv/bin/python -m pytest tests/vectors/test_call_context.py
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest
import rfc8785

HERE = Path(__file__).resolve().parent
CORPUS = json.loads((HERE / "call_context.json").read_text(encoding="utf-8"))
CASES = CORPUS["cases"]
LABEL = b"reqstate/v1 call-context-jcs"
MAX_DEPTH = 128


class Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def number(literal: str) -> float:
    """§7: round to the nearest double; refuse infinity, and refuse when the
    double's JCS text is not exactly the literal's decimal value."""
    d = float(literal)
    if math.isinf(d):
        raise Refused("inexact_number")
    jcs = rfc8785.dumps(d).decode()
    try:
        same = Decimal(literal) == Decimal(jcs)
    except InvalidOperation:
        # An exponent beyond Decimal's range: exact only for a zero literal.
        mantissa = literal.lower().split("e")[0]
        same = d == 0 and set(mantissa) <= set("-0.")
    if not same:
        raise Refused("inexact_number")
    return d


def pairs(items):
    keys = [k for k, _ in items]
    if len(set(keys)) != len(keys):
        raise Refused("duplicate_key")
    return dict(items)


def walk(value, depth: int = 0) -> None:
    if isinstance(value, str):
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise Refused("lone_surrogate")
    elif isinstance(value, (list, dict)):
        if depth >= MAX_DEPTH:
            raise Refused("too_deep")
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            walk(k, depth + 1) if isinstance(k, str) else None
            walk(v, depth + 1)


def bad_constant(_name):
    raise Refused("not_json")


def jcs(text: str) -> str:
    if text.startswith("\ufeff"):
        raise Refused("not_json")
    try:
        value = json.loads(
            text, object_pairs_hook=pairs, parse_int=number, parse_float=number, parse_constant=bad_constant
        )
    except Refused:
        raise
    except ValueError:
        raise Refused("not_json") from None
    walk(value)
    return rfc8785.dumps(value).decode("utf-8")


def lp(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">I", len(b)) + b


def context(principal: str, audience: str, method: str, canonical: str) -> bytes:
    args = hashlib.sha256(canonical.encode("utf-8")).digest()
    return hashlib.sha256(LABEL + lp(principal) + lp(audience) + lp(method) + args).digest()


def test_corpus_shape():
    assert CORPUS["label"] == LABEL.decode()
    assert len(CASES) >= 40
    assert {c.get("reason") for c in CASES} >= {
        "not_json",
        "duplicate_key",
        "inexact_number",
        "lone_surrogate",
        "too_deep",
    }


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case):
    if "refused" in case:
        assert case["refused"] == "invalid_argument"
        with pytest.raises(Refused) as e:
            jcs(case["arguments_json"])
        assert e.value.reason == case["reason"]
        return
    canonical = jcs(case["arguments_json"])
    assert canonical == case["canonical"]
    # Canonical text is a fixed point.
    assert jcs(canonical) == canonical
    got = context(case["principal"], case["audience"], case["method"], canonical)
    assert got.hex() == case["context"]
