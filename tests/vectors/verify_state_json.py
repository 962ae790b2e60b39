"""Independent check of tests/vectors/state_json.json, written from
docs/CLI.md alone ("JSON to CBOR: the one mapping", `--state-cbor-hex`, "The
JSON form of a state"), with no project code: it maps every JSON text itself
and checks each case's outcome, bytes and JSON form.

    .venv/bin/python -m pytest tests/vectors/verify_state_json.py

tests/vectors/mutation/state_json_mutants.py breaks its rules one at a time;
tests/vectors/mutation/run.py requires the vectors to catch every mutant.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
MAX_DEPTH = 16
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
WHITESPACE = " \t\n\r"


class Usage(Exception):
    """Refused by the mapping: exit 64."""


class TooDeep(Exception):
    """JSON nested deeper than 16 levels: the core refuses it (state_encoding)."""


# ---------------------------------------------------------------- JSON reader
# Values: ("null"|"true"|"false", None), ("int", text), ("float", text),
# ("str", str), ("array", [values]), ("object", [(key, value)]).

ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def read_string(text: str, pos: int) -> tuple[str, int]:
    """The string starting at text[pos] == '"'; returns it and the position after."""
    pos += 1
    out: list[str] = []
    while True:
        if pos >= len(text):
            raise Usage("unterminated string")
        c = text[pos]
        if c == '"':
            return "".join(out), pos + 1
        if ord(c) < 0x20:
            raise Usage("control character in a string")
        if c != "\\":
            out.append(c)
            pos += 1
            continue
        e = text[pos + 1 : pos + 2]
        if e in ESCAPES:
            out.append(ESCAPES[e])
            pos += 2
            continue
        if e != "u":
            raise Usage("bad escape")
        unit = hex4(text, pos + 2)
        pos += 6
        if 0xD800 <= unit < 0xDC00:
            if text[pos : pos + 2] != "\\u":
                raise Usage("lone surrogate")
            low = hex4(text, pos + 2)
            if not 0xDC00 <= low < 0xE000:
                raise Usage("lone surrogate")
            pos += 6
            out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)))
        elif 0xDC00 <= unit < 0xE000:
            raise Usage("lone surrogate")
        else:
            out.append(chr(unit))


def hex4(text: str, pos: int) -> int:
    digits = text[pos : pos + 4]
    if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
        raise Usage("bad \\u escape")
    return int(digits, 16)


def read_number(text: str, pos: int) -> tuple[tuple[str, str], int]:
    start = pos
    if text[pos : pos + 1] == "-":
        pos += 1
    if text[pos : pos + 1] == "0":
        pos += 1
    elif text[pos : pos + 1].isdigit() and text[pos] in "123456789":
        while text[pos : pos + 1] and text[pos] in "0123456789":
            pos += 1
    else:
        raise Usage("bad number")
    is_float = False
    if text[pos : pos + 1] == ".":
        pos += 1
        if not (text[pos : pos + 1] and text[pos] in "0123456789"):
            raise Usage("bad fraction")
        while text[pos : pos + 1] and text[pos] in "0123456789":
            pos += 1
        is_float = True
    if text[pos : pos + 1] in ("e", "E"):
        pos += 1
        if text[pos : pos + 1] in ("+", "-"):
            pos += 1
        if not (text[pos : pos + 1] and text[pos] in "0123456789"):
            raise Usage("bad exponent")
        while text[pos : pos + 1] and text[pos] in "0123456789":
            pos += 1
        is_float = True
    return ("float" if is_float else "int", text[start:pos]), pos


def skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in WHITESPACE:
        pos += 1
    return pos


def parse(text: str) -> tuple[Any, int]:
    """Parses one JSON text, iteratively; returns the value and its depth."""
    pos = skip_ws(text, 0)
    stack: list[tuple[str, list[Any], str | None]] = []  # kind, items, pending key
    depth = 0
    while True:
        # A value is expected at pos.
        c = text[pos : pos + 1]
        value: Any = None
        if c in ("[", "{"):
            pos = skip_ws(text, pos + 1)
            kind = "array" if c == "[" else "object"
            if text[pos : pos + 1] == ("]" if c == "[" else "}"):
                value = (kind, [])
                pos += 1
                depth = max(depth, len(stack) + 1)
            else:
                key = None
                if kind == "object":
                    key, pos = read_key(text, pos)
                stack.append((kind, [], key))
                depth = max(depth, len(stack))
                continue
        elif c == '"':
            s, pos = read_string(text, pos)
            value = ("str", s)
        elif text.startswith("null", pos):
            value, pos = ("null", None), pos + 4
        elif text.startswith("true", pos):
            value, pos = ("true", None), pos + 4
        elif text.startswith("false", pos):
            value, pos = ("false", None), pos + 5
        else:
            value, pos = read_number(text, pos)
        # Place the value; close what closes.
        while True:
            pos = skip_ws(text, pos)
            if not stack:
                if pos != len(text):
                    raise Usage("text after the value")
                return value, depth
            kind, items, key = stack[-1]
            items.append((key, value) if kind == "object" else value)
            nxt = text[pos : pos + 1]
            if nxt == ",":
                pos = skip_ws(text, pos + 1)
                if kind == "object":
                    key, pos = read_key(text, pos)
                    stack[-1] = (kind, items, key)
                break
            if nxt != ("]" if kind == "array" else "}"):
                raise Usage("expected , or a close")
            pos += 1
            stack.pop()
            value = (kind, items)


def read_key(text: str, pos: int) -> tuple[str, int]:
    if text[pos : pos + 1] != '"':
        raise Usage("object key not a string")
    key, pos = read_string(text, pos)
    pos = skip_ws(text, pos)
    if text[pos : pos + 1] != ":":
        raise Usage("expected :")
    return key, skip_ws(text, pos + 1)


# ---------------------------------------------------------------- CBOR writer


def head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for ai, width in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * width):
            return bytes([major << 5 | ai]) + n.to_bytes(width, "big")
    raise Usage("integer too large for CBOR")


def encode_float(x: float) -> bytes:
    if math.isnan(x):
        return bytes.fromhex("f97e00")
    try:
        half = struct.pack(">e", x)
        if struct.unpack(">e", half)[0] == x:
            return b"\xf9" + half
    except OverflowError:
        pass
    try:
        single = struct.pack(">f", x)
        if struct.unpack(">f", single)[0] == x:
            return b"\xfa" + single
    except OverflowError:
        pass
    return b"\xfb" + struct.pack(">d", x)


def number_value(kind: str, literal: str) -> Any:
    if kind == "int":
        n = int(literal)
        if not INT_MIN <= n <= INT_MAX:
            raise Usage("integer out of range")
        return n
    x = float(literal)
    if math.isinf(x):
        raise Usage("not finite")
    return x


def check_numbers(value: Any) -> None:
    """Every number in range (iterative: any depth)."""
    todo = [value]
    while todo:
        kind, payload = todo.pop()
        if kind in ("int", "float"):
            number_value(kind, payload)
        elif kind == "array":
            todo.extend(payload)
        elif kind == "object":
            todo.extend(v for _, v in payload)


def to_cbor(value: Any) -> bytes:
    kind, payload = value
    if kind == "null":
        return b"\xf6"
    if kind == "true":
        return b"\xf5"
    if kind == "false":
        return b"\xf4"
    if kind in ("int", "float"):
        n = number_value(kind, payload)
        if kind == "float":
            return encode_float(n)
        return head(0, n) if n >= 0 else head(1, -1 - n)
    if kind == "str":
        b = payload.encode("utf-8")
        return head(3, len(b)) + b
    if kind == "array":
        return head(4, len(payload)) + b"".join(to_cbor(v) for v in payload)
    keys = [k.encode("utf-8") for k, _ in payload]
    if len(set(keys)) != len(keys):
        raise Usage("repeated key")
    entries = sorted(((k, to_cbor(v)) for k, (_, v) in zip(keys, payload)), key=lambda e: e[0])
    return head(5, len(entries)) + b"".join(head(3, len(k)) + k + v for k, v in entries)


def map_json(text: str) -> bytes:
    """The one mapping: CBOR bytes, or raises Usage or TooDeep."""
    value, depth = parse(text)
    if depth > MAX_DEPTH:
        check_numbers(value)
        raise TooDeep()
    return to_cbor(value)


# ---------------------------------------------------------------- CBOR reader

NO_FORM = object()


class Tag:
    def __init__(self, number: int, inner: Any) -> None:
        self.number, self.inner = number, inner


def decode(data: bytes, pos: int) -> tuple[Any, int, int]:
    """One item: its value, the position after it, its depth."""
    if pos >= len(data):
        raise Usage("truncated")
    ib = data[pos]
    major, ai = ib >> 5, ib & 31
    pos += 1
    if ai == 31:
        raise Usage("indefinite length")
    if ai > 27:
        raise Usage("reserved additional information")
    if major == 7:
        if ai == 25:
            return struct.unpack(">e", need(data, pos, 2))[0], pos + 2, 0
        if ai == 26:
            return struct.unpack(">f", need(data, pos, 4))[0], pos + 4, 0
        if ai == 27:
            return struct.unpack(">d", need(data, pos, 8))[0], pos + 8, 0
        simple = {20: False, 21: True, 22: None}
        if ai in simple:
            return simple[ai], pos, 0
        raise Usage("a simple value other than false, true, null")
    if ai < 24:
        n = ai
    else:
        width = 1 << (ai - 24)
        n = int.from_bytes(need(data, pos, width), "big")
        pos += width
    if major == 0:
        return n, pos, 0
    if major == 1:
        return -1 - n, pos, 0
    if major in (2, 3):
        raw = need(data, pos, n)
        if major == 2:
            return ("bytes", raw), pos + n, 0
        try:
            return raw.decode("utf-8"), pos + n, 0
        except UnicodeDecodeError:
            raise Usage("text not UTF-8") from None
    if major == 4:
        items, depth = [], 0
        for _ in range(n):
            item, pos, d = decode(data, pos)
            items.append(item)
            depth = max(depth, d)
        return items, pos, depth + 1
    if major == 5:
        entries, depth = [], 0
        for _ in range(n):
            k, pos, dk = decode(data, pos)
            v, pos, dv = decode(data, pos)
            entries.append((k, v))
            depth = max(depth, dk, dv)
        return ("map", entries), pos, depth + 1
    inner, pos, d = decode(data, pos)
    return Tag(n, inner), pos, d + 1


def need(data: bytes, pos: int, n: int) -> bytes:
    if pos + n > len(data):
        raise Usage("truncated")
    return data[pos : pos + n]


def encode(value: Any) -> bytes:
    if value is None:
        return b"\xf6"
    if value is True:
        return b"\xf5"
    if value is False:
        return b"\xf4"
    if isinstance(value, int):
        return head(0, value) if value >= 0 else head(1, -1 - value)
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, str):
        b = value.encode("utf-8")
        return head(3, len(b)) + b
    if isinstance(value, list):
        return head(4, len(value)) + b"".join(encode(v) for v in value)
    if isinstance(value, Tag):
        return head(6, value.number) + encode(value.inner)
    kind, payload = value
    if kind == "bytes":
        return head(2, len(payload)) + payload
    return head(5, len(payload)) + b"".join(encode(k) + encode(v) for k, v in payload)


def check_cbor_hex(hex_text: str) -> Any:
    """`--state-cbor-hex`: the decoded item, or raises Usage or TooDeep."""
    if len(hex_text) % 2 or any(c not in "0123456789abcdefABCDEF" for c in hex_text):
        raise Usage("not hex")
    data = bytes.fromhex(hex_text)
    if not data:
        raise Usage("empty")
    value, end, depth = decode(data, 0)
    if end != len(data):
        raise Usage("bytes after the item")
    if encode(value) != data:
        raise Usage("not in preferred serialization")
    if depth > MAX_DEPTH:
        raise TooDeep()
    return value


def json_form(value: Any) -> Any:
    """The JSON form as a Python value (floats stay floats), or NO_FORM."""
    if value is None or isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if INT_MIN <= value <= INT_MAX else NO_FORM
    if isinstance(value, float):
        return value if math.isfinite(value) else NO_FORM
    if isinstance(value, list):
        items = [json_form(v) for v in value]
        return NO_FORM if any(i is NO_FORM for i in items) else items
    if isinstance(value, Tag) or value[0] == "bytes":
        return NO_FORM
    out: dict[str, Any] = {}
    for k, v in value[1]:
        if not isinstance(k, str) or k in out:
            return NO_FORM
        f = json_form(v)
        if f is NO_FORM:
            return NO_FORM
        out[k] = f
    return out


def form_text(form: Any) -> str:
    """A JSON text of a form: floats always with '.' or an exponent."""
    if isinstance(form, float):
        r = repr(form)
        return r if any(c in r for c in ".e") else r + ".0"
    if isinstance(form, list):
        return "[" + ",".join(form_text(v) for v in form) + "]"
    if isinstance(form, dict):
        keys = sorted(form, key=lambda k: k.encode("utf-8"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + form_text(form[k]) for k in keys) + "}"
    return json.dumps(form, ensure_ascii=False)


def outcome_of(fn: Any, arg: str) -> tuple[str, Any]:
    try:
        return "ok", fn(arg)
    except Usage:
        return "usage", None
    except TooDeep:
        return "state_encoding", None


# ---------------------------------------------------------------- the tests

FILE = json.loads((HERE / "state_json.json").read_text(encoding="utf-8"))


def test_file_shape() -> None:
    assert set(FILE) == {"description", "json_cases", "cbor_hex_cases"}
    names = [c["name"] for c in FILE["json_cases"]]
    assert len(names) == len(set(names))
    assert {c["outcome"] for c in FILE["json_cases"]} == {"ok", "usage", "state_encoding"}


@pytest.mark.parametrize("case", FILE["json_cases"], ids=lambda c: c["name"])
def test_json_case(case: dict[str, Any]) -> None:
    outcome, cbor = outcome_of(map_json, case["json"])
    assert outcome == case["outcome"]
    if outcome == "ok":
        assert cbor.hex() == case["cbor_hex"]
        # The JSON form printed back maps to the same bytes, and is ours.
        assert map_json(case["state"]).hex() == case["cbor_hex"]
        form = json_form(check_cbor_hex(case["cbor_hex"]))
        assert form is not NO_FORM
        assert map_json(form_text(form)) == cbor


@pytest.mark.parametrize("case", FILE["cbor_hex_cases"], ids=lambda c: c["name"])
def test_cbor_hex_case(case: dict[str, Any]) -> None:
    outcome, value = outcome_of(check_cbor_hex, case["cbor_hex"])
    assert outcome == case["outcome"]
    if outcome == "ok":
        form = json_form(value)
        if form is NO_FORM:
            assert "state" not in case
        else:
            assert map_json(case["state"]) == map_json(form_text(form))


def test_the_checker_refuses_what_it_should() -> None:
    # The checker's own sanity, independent of the file.
    assert map_json('{"b":1,"a":2}').hex() == "a2616102616201"
    with pytest.raises(Usage):
        map_json('{"a":1,"a":2}')
    with pytest.raises(TooDeep):
        map_json("[" * 17 + "]" * 17)
