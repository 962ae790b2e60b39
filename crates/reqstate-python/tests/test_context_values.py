"""`call_context` and `canonical_json` of parsed arguments (dicts, lists, str,
int, float, bool, None), walked in Rust (src/context.rs) instead of printed
with `json.dumps` first: the same bytes and the same refusals as the text
path on `json.dumps`'s text (what the package did before), checked here
against that path, the shared corpus (tests/vectors/call_context.json) and
the edge cases of FORMAT.md §7."""

from __future__ import annotations

import enum
import hashlib
import json
import random
import struct
import subprocess
from collections import OrderedDict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, need

import reqstate
from reqstate import (
    Binding,
    Codec,
    InvalidArgument,
    Keyring,
    call_context,
    call_context_from_text,
    canonical_json,
    canonical_json_from_text,
)

VECTORS = Path(__file__).resolve().parents[3] / "tests" / "vectors"
CALL = ("user-42", "counter-server", "tools/call")


def dumped(value: Any) -> str:
    """The text the package printed a value as before: `json.dumps`."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except InvalidArgument as refused:
        assert refused.reason == "invalid_argument"
        return ("refused", refused.rule)


def assert_same_as_dumped(value: Any) -> None:
    """The value's context and JCS text are those of its `json.dumps` text,
    or both are refused for the same rule."""
    text = dumped(value)
    assert outcome(lambda: call_context(*CALL, value)) == outcome(lambda: call_context_from_text(*CALL, text)), text
    assert outcome(lambda: canonical_json(value)) == outcome(lambda: canonical_json_from_text(text)), text


def rule_of(value: Any) -> tuple[str | None, str]:
    with pytest.raises(InvalidArgument) as refused:
        call_context(*CALL, value)
    with pytest.raises(InvalidArgument) as again:
        canonical_json(value)
    assert again.value.rule == refused.value.rule
    assert refused.value.reason == "invalid_argument"
    return refused.value.rule, refused.value.message


def strict_loads(text: str) -> Any:
    def no_constant(name: str) -> Any:
        raise ValueError(name)

    return json.loads(text, parse_constant=no_constant)


def test_the_corpus_parsed_gives_the_corpus_contexts() -> None:
    corpus = json.loads((VECTORS / "call_context.json").read_text(encoding="utf-8"))
    checked = 0
    for case in corpus["cases"]:
        try:
            value = strict_loads(case["arguments_json"])
        except (ValueError, RecursionError):
            continue  # not JSON for Python either
        args = (case["principal"], case["audience"], case["method"])
        if "context" in case:
            # json.loads keeps integers exact and rounds a literal to the
            # double the core rounds it to: the same context as the text.
            assert call_context(*args, value).hex() == case["context"], case["name"]
            assert canonical_json(value) == case["canonical"], case["name"]
            assert Binding.for_call("t", *args, value).context.hex() == case["context"], case["name"]
            checked += 1
        # Refused or not (json.loads resolves duplicates and rounds
        # literals), the value gives what its json.dumps text gives.
        try:
            text = dumped(value)
        except ValueError:  # json.loads read 1e400 as inf
            assert rule_of(value)[0] == "inexact_number", case["name"]
            continue
        assert outcome(lambda: call_context(*args, value)) == outcome(
            lambda: call_context_from_text(*args, text)  # noqa: B023
        ), case["name"]
    assert checked > 40


def test_random_doubles_as_json_dumps_prints_them() -> None:
    rng = random.Random(20261202)
    values: list[float] = []
    while len(values) < 20000:
        (x,) = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))
        if x == x and abs(x) != float("inf"):
            values.append(x)
    values += [rng.uniform(-1e6, 1e6) for _ in range(5000)] + [rng.random() / 10**rng.randint(0, 30) for _ in range(5000)]
    texts = canonical_json(values)
    assert texts == canonical_json_from_text(dumped(values))
    assert call_context(*CALL, values) == call_context_from_text(*CALL, dumped(values))


@pytest.mark.parametrize(
    ("value", "canonical"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (-0.0, "0"),
        (0.0, "0"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.1, "0.1"),
        # Ties between two shortest forms go to the even digit, as repr and
        # the core print them (Rust's "{:e}" prints ...5313 and ...368.3).
        (-1053556335433.5312, "-1053556335433.5312"),
        (1052798984162368.2, "1052798984162368.2"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (100.0, "100"),
        (123456789012345680000.0, "123456789012345680000"),
        (2**53, "9007199254740992"),
        (-(2**53), "-9007199254740992"),
        (2**54, "18014398509481984"),
        (10**22, "1e+22"),
        (10**30, "1e+30"),
        (-(10**30), "-1e+30"),
        (True, "true"),
        (False, "false"),
        (1, "1"),
        (0, "0"),
        (None, "null"),
    ],
)
def test_numbers_and_literals(value: Any, canonical: str) -> None:
    assert canonical_json(value) == canonical
    assert canonical_json([value]) == f"[{canonical}]"
    assert_same_as_dumped({"x": value})


@pytest.mark.parametrize(
    "value",
    [2**53 + 1, -(2**53) - 1, 2**63, 2**64, 2**64 + 1, -(2**64), 2**63 + 1, 2**127 + 1, 10**308 + 1, 2**1024, -(2**1100)],
)
def test_integers_no_double_is_are_refused_as_their_text_is(value: int) -> None:
    assert rule_of({"x": value})[0] == "inexact_number"
    assert_same_as_dumped({"x": value})


def test_integers_at_every_size_as_json_dumps_prints_them() -> None:
    rng = random.Random(7)
    for bits in range(1, 1100, 3):
        for n in (rng.getrandbits(bits), 1 << bits, (1 << bits) - 1, 10 ** (bits // 3)):
            for v in (n, -n):
                assert_same_as_dumped([v])


def test_an_int_too_long_to_print_is_refused_not_raised() -> None:
    # json.dumps raises ValueError for it (sys.get_int_max_str_digits).
    assert rule_of({"x": 10**5000})[0] == "inexact_number"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinities_are_refused_with_a_clear_error(value: float) -> None:
    rule, message = rule_of({"a": [1, value]})
    assert rule == "inexact_number"
    assert "JSON cannot represent" in message and 'arguments["a"][1]' in message, message


@pytest.mark.parametrize("key", [1, 1.5, True, None, (1, 2)])
def test_dict_keys_that_are_not_str_are_refused(key: Any) -> None:
    # json.dumps would print 1 as "1": {1: ..} and {"1": ..} would be one call.
    rule, message = rule_of({"ok": {key: 1}})
    assert rule == "not_json"
    assert f"a dict key of type {type(key).__name__}" in message and 'arguments["ok"]' in message, message


@pytest.mark.parametrize("value", [{1, 2}, b"bytes", object(), Decimal("1.5"), 1j, bytearray(b"x")])
def test_other_types_are_refused_naming_type_and_path(value: Any) -> None:
    rule, message = rule_of({"to": [0, value]})
    assert rule == "not_json"
    assert f"a value of type {type(value).__name__}" in message and 'arguments["to"][1]' in message, message


def test_surrogates() -> None:
    # A real astral character: the same context as the text with its escaped pair.
    assert call_context(*CALL, {"s": "\U0001f600"}) == call_context_from_text(*CALL, '{"s":"\\ud83d\\ude00"}')
    assert canonical_json({"s": "\U0001f600"}) == '{"s":"\U0001f600"}'
    # Surrogates in a str are not a character, even as a pair, nor in a key.
    for value in ({"s": "\ud83d\ude00"}, {"s": "a\ud800"}, {"s": "\udc00"}, {"\ud800": 1}, ["\ud800"]):
        assert rule_of(value)[0] == "lone_surrogate"
        assert outcome(lambda: canonical_json_from_text(dumped(value)))[1] == "lone_surrogate"  # noqa: B023


def test_strings_are_escaped_as_jcs_escapes_them() -> None:
    tricky = "q\"b\\s/\b\f\n\r\t\x00\x1f\x7f\u2028\u00e9\U0001f600"
    value = {tricky: [tricky, "", "plain"]}
    assert_same_as_dumped(value)
    assert canonical_json(value) == canonical_json_from_text(json.dumps(value))
    assert canonical_json(["\x1f"]) == '["\\u001f"]'


def test_keys_sort_by_utf16_code_units() -> None:
    # U+1F600 is D83D DE00 in UTF-16, before U+E000 (code points say after).
    value = {"\ue000": 1, "\U0001f600": 2, "b": 3, "a": 4, "": 5, "\u00e9": 6}
    assert canonical_json(value) == '{"":5,"a":4,"b":3,"\u00e9":6,"\U0001f600":2,"\ue000":1}'
    assert_same_as_dumped(value)


def test_nesting_limit_is_the_cores() -> None:
    limit = reqstate.MAX_ARGUMENTS_DEPTH
    assert limit == 128

    def nested(depth: int, leaf: Any = 1) -> Any:
        value: Any = leaf
        for i in range(depth):
            value = [value] if i % 2 else {"k": value}
        return value

    assert_same_as_dumped(nested(limit))
    assert call_context(*CALL, nested(limit)) == call_context_from_text(*CALL, dumped(nested(limit)))
    assert rule_of(nested(limit + 1))[0] == "too_deep"
    assert rule_of(nested(5000))[0] == "too_deep"  # json.dumps: RecursionError
    assert_same_as_dumped(nested(limit + 1))
    # A value that contains itself is refused, not a RecursionError.
    cycle: list[Any] = []
    cycle.append(cycle)
    assert rule_of(cycle)[0] == "too_deep"


def test_bool_is_not_int() -> None:
    assert call_context(*CALL, {"x": True}) != call_context(*CALL, {"x": 1})
    assert canonical_json([True, 1, False, 0]) == "[true,1,false,0]"


def test_subclasses_print_as_json_dumps_prints_them() -> None:
    class Color(enum.IntEnum):
        RED = 1

    class Loud(int):
        def __repr__(self) -> str:
            return "LOUD"

        __str__ = __repr__

    class Name(str):
        pass

    class Ratio(float):
        def __repr__(self) -> str:
            return "ratio"

    value = {
        "color": Color.RED,
        "loud": Loud(10**30),
        "name": Name("x"),
        "ratio": Ratio(0.5),
        "ordered": OrderedDict([("b", 1), ("a", 2)]),
        "tuple": (1, [2, (3,)]),
    }
    assert canonical_json(value) == (
        '{"color":1,"loud":1e+30,"name":"x","ordered":{"a":2,"b":1},"ratio":0.5,"tuple":[1,[2,[3]]]}'
    )
    assert_same_as_dumped(value)


def format_context(principal: str, audience: str, method: str, jcs: str) -> bytes:
    """docs/FORMAT.md §7 written out: the label, each part length-prefixed,
    then SHA-256 of the arguments' JCS text."""

    def lp(x: str) -> bytes:
        data = x.encode("utf-8")
        return len(data).to_bytes(4, "big") + data

    args = hashlib.sha256(jcs.encode("utf-8")).digest()
    return hashlib.sha256(b"reqstate/v1 call-context-jcs" + lp(principal) + lp(audience) + lp(method) + args).digest()


def typescript_call_context(arguments: Any) -> bytes:
    """@reqstate/codec's `callContext({..., arguments})` (clients/typescript/dist)."""
    module = need(REPO / "clients" / "typescript" / "dist" / "index.js", "run clients/typescript/build.sh")
    script = (
        f"import({json.dumps(module.as_uri())}).then((m) => {{"
        "const [principal, audience, method, args] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(Buffer.from(m.callContext({principal, audience, method, arguments: args})).toString('hex'));"
        "})"
    )
    node = subprocess.run(["node", "-e", script], input=json.dumps([*CALL, arguments]), capture_output=True, text=True)
    assert node.returncode == 0, node.stderr
    return bytes.fromhex(node.stdout)


def test_a_str_is_a_json_string_never_json_text() -> None:
    # Issue 37: a str was read as JSON text, so '{"n":1}' bound the context
    # of the object {"n":1}, where the TypeScript drop-in binds the string.
    text = '{"n":1}'
    as_string = format_context(*CALL, '"{\\"n\\":1}"')
    as_object = format_context(*CALL, text)
    assert as_string != as_object
    assert canonical_json(text) == '"{\\"n\\":1}"'
    assert call_context(*CALL, text) == as_string
    assert Binding.for_call("increase-counter", *CALL, text).context == as_string
    assert call_context(*CALL, {"n": 1}) == as_object == call_context_from_text(*CALL, text)
    assert typescript_call_context(text) == as_string
    assert typescript_call_context({"n": 1}) == as_object
    # Text that is not JSON is a string like any other; as text it is refused.
    assert call_context(*CALL, "not json") == format_context(*CALL, '"not json"')
    with pytest.raises(InvalidArgument) as refused:
        call_context_from_text(*CALL, "not json")
    assert refused.value.rule == "not_json"


def test_binding_for_call_is_binding_of_call_context() -> None:
    args = {"current": 10, "to": ["bob", 1.5, None, True]}
    bound = Binding.for_call("increase-counter", *CALL, args)
    assert bound.tool == "increase-counter"
    assert bound.context == call_context(*CALL, args) == call_context_from_text(*CALL, dumped(args))
    assert Binding.for_call("increase-counter", *CALL, dumped(args)).context != bound.context  # a JSON string
    codec = Codec(Keyring.ephemeral("hmac-sha256"))
    token = codec.mint(bound, "confirm", {"n": 1}, ttl=60).token
    assert codec.verify(token, Binding("increase-counter", bound.context), expected_step="confirm").state == {"n": 1}
    with pytest.raises(InvalidArgument) as refused:
        Binding.for_call("increase-counter", *CALL, {"x": float("nan")})
    assert refused.value.rule == "inexact_number"
    with pytest.raises(InvalidArgument):
        Binding.for_call("", *CALL, {})
    with pytest.raises(InvalidArgument):
        Binding.for_call(b"tool", *CALL, {})  # type: ignore[arg-type]
