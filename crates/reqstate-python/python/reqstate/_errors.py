"""The exceptions of `reqstate`: one per kind of core error, each with the
core's reason name (`reqstate::Error::reason()`, the sidecar's wire enum and
docs/CLI.md's `reason`) in `.reason`.

The native module raises these; they are plain Python exceptions (picklable,
catchable by kind), defined here rather than in Rust.
"""

from __future__ import annotations

__all__ = ["InvalidArgument", "KeyringError", "MintRefused", "ReqstateError", "TokenRefused"]


class ReqstateError(Exception):
    """Any reqstate error. `reason` is the core's snake_case reason name,
    `message` a sentence for people (never key material)."""

    reason: str
    message: str

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(reason, message)
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        # The core's messages often start with the reason in words
        # ("invalid argument: ..."): say it once, as the reason's name.
        words = self.reason.replace("_", " ") + ": "
        body = self.message[len(words):] if self.message.startswith(words) else self.message
        return f"{self.reason}: {body}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason!r}, {self.message!r})"


class TokenRefused(ReqstateError):
    """A token was refused by verify, unseal or consume (FORMAT.md §8): the
    client's fault or an attacker's. Answer MCP with `-32602`."""


class MintRefused(ReqstateError):
    """The core made no token: `lifetime_too_long`, `state_encoding`,
    `too_large` or `randomness_unavailable`."""


class InvalidArgument(ReqstateError, ValueError):
    """An argument out of range (`invalid_argument`): an empty tool or step,
    a zero ttl, a policy value out of bounds, arguments JCS cannot represent.

    For arguments refused by `call_context` or `canonical_json` (their JSON
    text), `rule` names the FORMAT.md §7 rule they broke: ``not_json``,
    ``duplicate_key``, ``inexact_number``, ``lone_surrogate`` or ``too_deep``
    (the names of tests/vectors/call_context.json); otherwise it is None."""

    rule: str | None = None


class KeyringError(ReqstateError):
    """A keyring was refused (`invalid_keyring`): its text, or its file (which
    cannot be read, or is not safely owned or private). Nothing of it was
    loaded; a failed reload keeps the keyring in use."""
