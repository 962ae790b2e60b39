"""`ReplayStore`: what `Codec.consume` asks of a spent-token store written
in Python (FORMAT.md §8 step 15). `MemoryReplayStore` (native, in this
process) and `reqstate.redis.RedisReplayStore` (shared by a fleet) are the
two the package has."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ._native import SpentRecord

__all__ = ["ReplayStore"]


@runtime_checkable
class ReplayStore(Protocol):
    """A record of spent single-use tokens that `Codec.consume` calls once
    every other check of the token has passed, decoding its state included.

    `insert_if_absent(record)` records `record.name` atomically across
    everything that shares the store: of any number of concurrent calls for
    one name, exactly one returns True. It returns False if the name was
    recorded before (the token is then refused `replayed`), and raises
    `TokenRefused("replay_store_unavailable" | "replay_store_full", message)`
    when it cannot tell or cannot record: the token is refused, never
    accepted unrecorded. It keeps a record at least until
    `record.record_until` (unix seconds, this verifier's clock), longer if
    verifiers with other clocks or leeways share it, and never drops a live
    record to make room."""

    def insert_if_absent(self, record: SpentRecord) -> bool: ...
