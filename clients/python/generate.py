#!/usr/bin/env python3
"""Regenerate the checked-in gRPC stubs of reqstate_client from proto/.

    python clients/python/generate.py            # rewrite src/reqstate_client/_pb/
    python clients/python/generate.py --check    # exit 1 if the checked-in stubs are stale

Needs grpcio-tools (pinned in requirements-dev.txt: the generated code names
the generator's version, so another version gives other bytes). protoc runs
with `-I <repo>/proto`, so the descriptor keeps its canonical name
`reqstate/v1/reqstate.proto`; the one absolute import in the `_grpc` module
is then made package-relative, so the stubs live inside `reqstate_client._pb`
and never claim a top-level `reqstate` package.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROTO_ROOT = REPO / "proto"
PROTO = Path("reqstate/v1/reqstate.proto")
OUT = HERE / "src" / "reqstate_client" / "_pb"
FILES = ("reqstate_pb2.py", "reqstate_pb2.pyi", "reqstate_pb2_grpc.py")

_ABSOLUTE_IMPORT = re.compile(r"^from reqstate\.v1 import (\w+) as (\w+)$", re.MULTILINE)


def _fix_imports(text: str) -> str:
    return _ABSOLUTE_IMPORT.sub(r"from . import \1 as \2", text)


def generate(out_dir: Path, proto_root: Path = PROTO_ROOT) -> dict[str, str]:
    """Runs protoc into a scratch dir, fixes imports, writes FILES into out_dir.

    Returns {file name: text}.
    """
    # Imported late: only needed to generate. grpcio-tools ships no type information.
    from grpc_tools import protoc  # type: ignore[import-untyped]

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        include = Path(protoc.__file__).resolve().parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{proto_root}",
            f"-I{include}",
            f"--python_out={scratch}",
            f"--pyi_out={scratch}",
            f"--grpc_python_out={scratch}",
            str(proto_root / PROTO),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed: {' '.join(args)}")
        texts = {}
        for name in FILES:
            text = (Path(scratch) / PROTO.parent / name).read_text(encoding="utf-8")
            text = _fix_imports(text)
            if "from reqstate" in text or "import reqstate." in text:
                raise RuntimeError(f"{name}: an absolute import of reqstate was left in the generated code")
            texts[name] = text
            (out_dir / name).write_text(text, encoding="utf-8")
    return texts


def stale_files(checked_in: Path = OUT) -> list[str]:
    """The stub files whose checked-in text differs from a fresh generation."""
    with tempfile.TemporaryDirectory() as fresh_dir:
        fresh = generate(Path(fresh_dir))
    stale = []
    for name, text in fresh.items():
        path = checked_in / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when the stubs are stale")
    args = parser.parse_args()
    if args.check:
        stale = stale_files()
        if stale:
            print(f"stale stubs: {', '.join(stale)}; run python clients/python/generate.py", file=sys.stderr)
            return 1
        print("stubs are up to date")
        return 0
    generate(OUT)
    print(f"wrote {', '.join(FILES)} to {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
