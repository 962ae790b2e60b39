from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_UNSPECIFIED: _ClassVar[Reason]
    REASON_TOO_LARGE: _ClassVar[Reason]
    REASON_MALFORMED: _ClassVar[Reason]
    REASON_UNSUPPORTED_VERSION: _ClassVar[Reason]
    REASON_UNSUPPORTED_ALGORITHM: _ClassVar[Reason]
    REASON_WRONG_KIND: _ClassVar[Reason]
    REASON_UNKNOWN_KEY: _ClassVar[Reason]
    REASON_RETIRED_KEY: _ClassVar[Reason]
    REASON_ALGORITHM_MISMATCH: _ClassVar[Reason]
    REASON_AUTHENTICATION_FAILED: _ClassVar[Reason]
    REASON_EXPIRED: _ClassVar[Reason]
    REASON_NOT_YET_VALID: _ClassVar[Reason]
    REASON_WRONG_STEP: _ClassVar[Reason]
    REASON_LIFETIME_TOO_LONG: _ClassVar[Reason]
    REASON_STATE_ENCODING: _ClassVar[Reason]
    REASON_STATE_DECODING: _ClassVar[Reason]
    REASON_INVALID_ARGUMENT: _ClassVar[Reason]
    REASON_RANDOMNESS_UNAVAILABLE: _ClassVar[Reason]
    REASON_INVALID_KEYRING: _ClassVar[Reason]
    REASON_SINGLE_USE: _ClassVar[Reason]
    REASON_REPLAYED: _ClassVar[Reason]
    REASON_REPLAY_STORE_FULL: _ClassVar[Reason]
    REASON_REPLAY_STORE_UNAVAILABLE: _ClassVar[Reason]

class Algorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALGORITHM_UNSPECIFIED: _ClassVar[Algorithm]
    ALGORITHM_HMAC_SHA256: _ClassVar[Algorithm]
    ALGORITHM_XCHACHA20_POLY1305: _ClassVar[Algorithm]

class KeyStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_STATUS_UNSPECIFIED: _ClassVar[KeyStatus]
    KEY_STATUS_PRIMARY: _ClassVar[KeyStatus]
    KEY_STATUS_ACTIVE: _ClassVar[KeyStatus]
    KEY_STATUS_RETIRED: _ClassVar[KeyStatus]

class TransitionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSITION_KIND_UNSPECIFIED: _ClassVar[TransitionKind]
    TRANSITION_KIND_STARTS_MINTING: _ClassVar[TransitionKind]
    TRANSITION_KIND_RETIRES: _ClassVar[TransitionKind]
REASON_UNSPECIFIED: Reason
REASON_TOO_LARGE: Reason
REASON_MALFORMED: Reason
REASON_UNSUPPORTED_VERSION: Reason
REASON_UNSUPPORTED_ALGORITHM: Reason
REASON_WRONG_KIND: Reason
REASON_UNKNOWN_KEY: Reason
REASON_RETIRED_KEY: Reason
REASON_ALGORITHM_MISMATCH: Reason
REASON_AUTHENTICATION_FAILED: Reason
REASON_EXPIRED: Reason
REASON_NOT_YET_VALID: Reason
REASON_WRONG_STEP: Reason
REASON_LIFETIME_TOO_LONG: Reason
REASON_STATE_ENCODING: Reason
REASON_STATE_DECODING: Reason
REASON_INVALID_ARGUMENT: Reason
REASON_RANDOMNESS_UNAVAILABLE: Reason
REASON_INVALID_KEYRING: Reason
REASON_SINGLE_USE: Reason
REASON_REPLAYED: Reason
REASON_REPLAY_STORE_FULL: Reason
REASON_REPLAY_STORE_UNAVAILABLE: Reason
ALGORITHM_UNSPECIFIED: Algorithm
ALGORITHM_HMAC_SHA256: Algorithm
ALGORITHM_XCHACHA20_POLY1305: Algorithm
KEY_STATUS_UNSPECIFIED: KeyStatus
KEY_STATUS_PRIMARY: KeyStatus
KEY_STATUS_ACTIVE: KeyStatus
KEY_STATUS_RETIRED: KeyStatus
TRANSITION_KIND_UNSPECIFIED: TransitionKind
TRANSITION_KIND_STARTS_MINTING: TransitionKind
TRANSITION_KIND_RETIRES: TransitionKind

class MintRequest(_message.Message):
    __slots__ = ("tool", "step", "state", "state_json", "ttl_seconds", "context", "single_use")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SINGLE_USE_FIELD_NUMBER: _ClassVar[int]
    tool: str
    step: str
    state: bytes
    state_json: str
    ttl_seconds: int
    context: bytes
    single_use: bool
    def __init__(self, tool: _Optional[str] = ..., step: _Optional[str] = ..., state: _Optional[bytes] = ..., state_json: _Optional[str] = ..., ttl_seconds: _Optional[int] = ..., context: _Optional[bytes] = ..., single_use: _Optional[bool] = ...) -> None: ...

class MintResponse(_message.Message):
    __slots__ = ("token", "key_id", "expires_at", "issued_at")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    token: str
    key_id: int
    expires_at: int
    issued_at: int
    def __init__(self, token: _Optional[str] = ..., key_id: _Optional[int] = ..., expires_at: _Optional[int] = ..., issued_at: _Optional[int] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ("token", "tool", "expected_step", "context", "consume")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STEP_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FIELD_NUMBER: _ClassVar[int]
    token: str
    tool: str
    expected_step: str
    context: bytes
    consume: bool
    def __init__(self, token: _Optional[str] = ..., tool: _Optional[str] = ..., expected_step: _Optional[str] = ..., context: _Optional[bytes] = ..., consume: _Optional[bool] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ("valid", "reason", "step", "state", "state_json", "key_id", "issued_at", "expires_at", "detail")
    VALID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    reason: Reason
    step: str
    state: bytes
    state_json: str
    key_id: int
    issued_at: int
    expires_at: int
    detail: str
    def __init__(self, valid: _Optional[bool] = ..., reason: _Optional[_Union[Reason, str]] = ..., step: _Optional[str] = ..., state: _Optional[bytes] = ..., state_json: _Optional[str] = ..., key_id: _Optional[int] = ..., issued_at: _Optional[int] = ..., expires_at: _Optional[int] = ..., detail: _Optional[str] = ...) -> None: ...

class MintBatchRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[MintRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[MintRequest, _Mapping]]] = ...) -> None: ...

class ItemError(_message.Message):
    __slots__ = ("reason", "detail")
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    reason: Reason
    detail: str
    def __init__(self, reason: _Optional[_Union[Reason, str]] = ..., detail: _Optional[str] = ...) -> None: ...

class MintResult(_message.Message):
    __slots__ = ("minted", "error")
    MINTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    minted: MintResponse
    error: ItemError
    def __init__(self, minted: _Optional[_Union[MintResponse, _Mapping]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class MintBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[MintResult]
    def __init__(self, results: _Optional[_Iterable[_Union[MintResult, _Mapping]]] = ...) -> None: ...

class VerifyBatchRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[VerifyRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[VerifyRequest, _Mapping]]] = ...) -> None: ...

class VerifyBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[VerifyResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[VerifyResponse, _Mapping]]] = ...) -> None: ...

class SealRequest(_message.Message):
    __slots__ = ("payload", "aad")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    AAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    aad: bytes
    def __init__(self, payload: _Optional[bytes] = ..., aad: _Optional[bytes] = ...) -> None: ...

class SealResponse(_message.Message):
    __slots__ = ("token", "key_id")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    token: str
    key_id: int
    def __init__(self, token: _Optional[str] = ..., key_id: _Optional[int] = ...) -> None: ...

class UnsealRequest(_message.Message):
    __slots__ = ("token", "aad")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    AAD_FIELD_NUMBER: _ClassVar[int]
    token: str
    aad: bytes
    def __init__(self, token: _Optional[str] = ..., aad: _Optional[bytes] = ...) -> None: ...

class UnsealResponse(_message.Message):
    __slots__ = ("valid", "reason", "payload", "key_id", "detail")
    VALID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    reason: Reason
    payload: bytes
    key_id: int
    detail: str
    def __init__(self, valid: _Optional[bool] = ..., reason: _Optional[_Union[Reason, str]] = ..., payload: _Optional[bytes] = ..., key_id: _Optional[int] = ..., detail: _Optional[str] = ...) -> None: ...

class ListKeysRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KeyInfo(_message.Message):
    __slots__ = ("id", "algorithm", "status", "created_at", "file_status", "mint_from", "retire_at", "last_verified_at", "minted", "verified")
    ID_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FILE_STATUS_FIELD_NUMBER: _ClassVar[int]
    MINT_FROM_FIELD_NUMBER: _ClassVar[int]
    RETIRE_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_VERIFIED_AT_FIELD_NUMBER: _ClassVar[int]
    MINTED_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    id: int
    algorithm: Algorithm
    status: KeyStatus
    created_at: int
    file_status: KeyStatus
    mint_from: int
    retire_at: int
    last_verified_at: int
    minted: int
    verified: int
    def __init__(self, id: _Optional[int] = ..., algorithm: _Optional[_Union[Algorithm, str]] = ..., status: _Optional[_Union[KeyStatus, str]] = ..., created_at: _Optional[int] = ..., file_status: _Optional[_Union[KeyStatus, str]] = ..., mint_from: _Optional[int] = ..., retire_at: _Optional[int] = ..., last_verified_at: _Optional[int] = ..., minted: _Optional[int] = ..., verified: _Optional[int] = ...) -> None: ...

class ListKeysResponse(_message.Message):
    __slots__ = ("keys", "keyring_generation", "now", "minting_key_id", "next_transition", "keyring_sha256", "max_ttl_seconds", "clock_leeway_seconds")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    KEYRING_GENERATION_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    MINTING_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_TRANSITION_FIELD_NUMBER: _ClassVar[int]
    KEYRING_SHA256_FIELD_NUMBER: _ClassVar[int]
    MAX_TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_LEEWAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[KeyInfo]
    keyring_generation: int
    now: int
    minting_key_id: int
    next_transition: Transition
    keyring_sha256: str
    max_ttl_seconds: int
    clock_leeway_seconds: int
    def __init__(self, keys: _Optional[_Iterable[_Union[KeyInfo, _Mapping]]] = ..., keyring_generation: _Optional[int] = ..., now: _Optional[int] = ..., minting_key_id: _Optional[int] = ..., next_transition: _Optional[_Union[Transition, _Mapping]] = ..., keyring_sha256: _Optional[str] = ..., max_ttl_seconds: _Optional[int] = ..., clock_leeway_seconds: _Optional[int] = ...) -> None: ...

class Transition(_message.Message):
    __slots__ = ("at", "key_id", "kind")
    AT_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    at: int
    key_id: int
    kind: TransitionKind
    def __init__(self, at: _Optional[int] = ..., key_id: _Optional[int] = ..., kind: _Optional[_Union[TransitionKind, str]] = ...) -> None: ...
