"""The checked-in gRPC stubs match a fresh generation from proto/."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from conftest import PACKAGE_ROOT, REPO

import reqstate_client._pb as installed_pb


def _generate_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reqstate_generate", PACKAGE_ROOT / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_checked_in_stubs_are_fresh(tmp_path: Path) -> None:
    generate = _generate_module()
    fresh = generate.generate(tmp_path, REPO / "proto")
    checked_in = PACKAGE_ROOT / "src" / "reqstate_client" / "_pb"
    assert sorted(fresh) == sorted(generate.FILES)
    for name, text in fresh.items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text
        current = (checked_in / name).read_text(encoding="utf-8")
        assert current == text, f"{name} is stale: run python clients/python/generate.py"
    assert generate.stale_files(checked_in) == []


def test_staleness_is_detected(tmp_path: Path) -> None:
    """A changed proto gives other stubs, so the check above can fail."""
    generate = _generate_module()
    proto_root = tmp_path / "proto"
    proto = proto_root / "reqstate" / "v1" / "reqstate.proto"
    proto.parent.mkdir(parents=True)
    text = (REPO / "proto" / "reqstate" / "v1" / "reqstate.proto").read_text(encoding="utf-8")
    proto.write_text(text.replace("message ListKeysRequest {}", "message ListKeysRequest { bool verbose = 1; }"))
    changed = generate.generate(tmp_path / "out", proto_root)
    checked_in = PACKAGE_ROOT / "src" / "reqstate_client" / "_pb"
    assert changed["reqstate_pb2.py"] != (checked_in / "reqstate_pb2.py").read_text(encoding="utf-8")


def test_stubs_are_package_relative_and_installed() -> None:
    text = (PACKAGE_ROOT / "src" / "reqstate_client" / "_pb" / "reqstate_pb2_grpc.py").read_text(encoding="utf-8")
    assert re.search(r"^from \. import reqstate_pb2 as ", text, re.MULTILINE)
    assert not re.search(r"^(from|import) reqstate\b", text, re.MULTILINE)
    # The installed package carries them (not the source tree).
    assert Path(installed_pb.__file__).parent.joinpath("reqstate_pb2_grpc.py").is_file()
    from reqstate_client._pb import reqstate_pb2, reqstate_pb2_grpc

    assert reqstate_pb2.DESCRIPTOR.name == "reqstate/v1/reqstate.proto"
    assert hasattr(reqstate_pb2_grpc, "RequestStateStub")
