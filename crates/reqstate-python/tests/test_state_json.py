"""tests/vectors/state_json.json through the Python package: the one JSON ->
CBOR mapping of a state (docs/CLI.md, "JSON to CBOR: the one mapping"), by
`state_cbor_from_json` and minted with `Codec.mint_cbor`, and the JSON form
back by `state_json_from_cbor`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import VECTORS

from reqstate import (
    Binding,
    Codec,
    InvalidArgument,
    Keyring,
    MintRefused,
    state_cbor_from_json,
    state_json_from_cbor,
)

FILE = json.loads((VECTORS / "state_json.json").read_text(encoding="utf-8"))
KEYRING = Keyring.ephemeral("hmac-sha256")


def _id(case: dict[str, Any]) -> str:
    return str(case["name"])


@pytest.mark.parametrize("case", FILE["json_cases"], ids=_id)
def test_json_case(case: dict[str, Any]) -> None:
    text = case["json"]
    if case["outcome"] == "ok":
        cbor = state_cbor_from_json(text)
        assert cbor.hex() == case["cbor_hex"]
        assert state_json_from_cbor(cbor) == case["state"]
        codec = Codec(KEYRING)
        binding = Binding("t")
        token = codec.mint_cbor(binding, "s", cbor).token
        assert codec.verify_cbor(token, binding).state_cbor == cbor
    elif case["outcome"] == "usage":
        with pytest.raises(InvalidArgument) as usage:
            state_cbor_from_json(text)
        assert usage.value.reason == "invalid_argument"
    else:
        assert case["outcome"] == "state_encoding"
        with pytest.raises(MintRefused) as too_deep:
            state_cbor_from_json(text)
        assert too_deep.value.reason == "state_encoding"


@pytest.mark.parametrize("case", [c for c in FILE["cbor_hex_cases"] if c["outcome"] == "ok"], ids=_id)
def test_cbor_hex_case_json_form(case: dict[str, Any]) -> None:
    # The JSON form of the accepted items (python -m reqstate's `state`);
    # acceptance itself is the command line's, run by tests/conformance.
    cbor = bytes.fromhex(case["cbor_hex"])
    assert state_json_from_cbor(cbor) == case.get("state")


@pytest.mark.parametrize("cbor", [b"", b"\x00\x00", b"\x18", b"\xff"], ids=bytes.hex)
def test_state_json_from_cbor_refuses_what_is_not_one_item(cbor: bytes) -> None:
    with pytest.raises(InvalidArgument) as refused:
        state_json_from_cbor(cbor)
    assert refused.value.reason == "invalid_argument"


def test_the_file_has_every_outcome() -> None:
    outcomes = {c["outcome"] for c in FILE["json_cases"]}
    assert outcomes == {"ok", "usage", "state_encoding"}
