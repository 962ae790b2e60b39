"""Python client for the reqstate sidecar: mint, verify, seal and unseal MCP
`requestState` tokens over gRPC (`reqstate.v1.RequestState`).

    from reqstate_client import Client

    with Client("unix:///run/reqstate/reqstate.sock", token="...") as sidecar:
        minted = sidecar.mint("increase-counter", "confirm", state_json={"amount": 5})
        result = sidecar.verify(minted.token, "increase-counter", expected_step="confirm")
        assert result.valid and result.json() == {"amount": 5}

`reqstate_client.mcp.SidecarCodec` plugs the sidecar into the official `mcp`
SDK's `RequestStateSecurity`.
"""

from ._client import DEFAULT_TIMEOUT, Client, grpc_target
from ._types import (
    Algorithm,
    ItemError,
    KeyInfo,
    KeyList,
    KeyStatus,
    Minted,
    MintItem,
    Reason,
    Sealed,
    Unsealed,
    Verified,
    VerifyItem,
)
from .errors import (
    AuthenticationError,
    InvalidRequestError,
    OverloadedError,
    PermissionDeniedError,
    ReqstateError,
    TransportError,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TIMEOUT",
    "Algorithm",
    "AuthenticationError",
    "Client",
    "InvalidRequestError",
    "ItemError",
    "KeyInfo",
    "KeyList",
    "KeyStatus",
    "MintItem",
    "Minted",
    "OverloadedError",
    "PermissionDeniedError",
    "Reason",
    "ReqstateError",
    "Sealed",
    "TransportError",
    "Unsealed",
    "Verified",
    "VerifyItem",
    "grpc_target",
]
