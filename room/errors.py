"""Every error bullpen raises on purpose, in one tree.

    BullpenError                 anything bullpen reports to a person or a peer
    ├── ConfigError              a home, society.toml or trust.toml is wrong (exit 78)
    │   └── SecretFileError      a secret or key file is missing, loose, a symlink or foreign
    ├── UsageError               a command was given an argument it cannot use (exit 2)
    ├── PostRejected             the hub refused a request; carries the HTTP status
    │   ├── BadPost              malformed, oversized or forged fields (400, 413)
    │   ├── BadRequest           a malformed query, e.g. /read?limit=abc (400)
    │   └── Unauthorized         missing or wrong proof, token, stale or replayed (401)
    ├── LogError                 the room's log cannot do what was asked
    │   ├── RoomLocked           another hub already holds the room
    │   ├── RoomCorrupt          the room's bytes are not a valid chain of lines
    │   ├── DurabilityError      a write or fsync failed: the hub stops acknowledging
    │   └── CursorAhead          a reader's cursor points past the end of the room
    ├── HubUnavailable           the hub could not be reached or answered 5xx
    ├── SeatError                a model seat failed to give a valid answer
    └── StepFailed               a step agent could not do its work; becomes a room flag
        └── SecretFound          text bound to leave the home holds its secret material

Every message is a full sentence that says what was wrong and what to do, and
never contains a secret. `to_dict()` is the form a failure takes in a room
post's `data` or an HTTP error body.
"""

from __future__ import annotations

from typing import Any


class BullpenError(Exception):
    """Base of every error bullpen raises on purpose."""

    code = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.details}


class ConfigError(BullpenError):
    """A home, society.toml or trust.toml is missing or wrong."""

    code = "config"
    exit_code = 78  # EX_CONFIG: systemd units stop restarting on it


class SecretFileError(ConfigError):
    """A secret or key file is missing, readable by others, a symlink or not ours."""

    code = "secret_file"


class UsageError(BullpenError):
    """A command-line argument the command cannot use; like argparse's own errors, exit 2."""

    code = "usage"
    exit_code = 2


class PostRejected(BullpenError):
    """The hub refused a post; nothing was written."""

    code = "rejected"
    status = 400


class BadPost(PostRejected):
    """The post is malformed, oversized or sets a field only the hub may set."""

    code = "bad_post"

    def __init__(self, message: str, *, status: int = 400, **details: Any) -> None:
        super().__init__(message, **details)
        self.status = status


class BadRequest(PostRejected):
    """A request other than a post is malformed: an unknown or out-of-range parameter."""

    code = "bad_request"


class Unauthorized(PostRejected):
    """The proof, signature or bearer token is missing, wrong, stale or replayed."""

    code = "unauthorized"
    status = 401


class LogError(BullpenError):
    """The room's log cannot do what was asked."""

    code = "log"


class RoomLocked(LogError):
    """Another hub already holds the room's lock."""

    code = "room_locked"


class RoomCorrupt(LogError):
    """The room's bytes are not a valid chain of lines."""

    code = "room_corrupt"


class DurabilityError(LogError):
    """A write or fsync failed; the hub stops acknowledging and exits."""

    code = "durability"


class CursorAhead(LogError):
    """A reader's saved position is beyond the end of the room."""

    code = "cursor_ahead"


class HubUnavailable(BullpenError):
    """The hub could not be reached, or answered with a server error."""

    code = "hub_unavailable"


class SeatError(BullpenError):
    """A model seat failed to produce a valid answer."""

    code = "seat"


class StepFailed(BullpenError):
    """A step agent could not do its work; the lurker posts it as a FAILED flag."""

    code = "step_failed"


class SecretFound(StepFailed):
    """Text about to leave the home (a prompt, a post, a commit) holds secret material.

    The message names where the text came from and what kind of secret it
    held, never the secret; nothing was sent.
    """

    code = "secret_found"
