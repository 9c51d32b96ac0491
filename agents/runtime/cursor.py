"""A lurker's saved place in the room: written after each handled message.

Saved atomically (write, fsync, rename) so a crash leaves either the old or
the new cursor, never a torn one. A read failure never resets it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from room.errors import ConfigError
from room.tail import Position


class Cursor:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> Position | None:
        """The saved position, or None when this nick has never read the room."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return Position(int(raw["seq"]), int(raw.get("offset", -1)))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            raise ConfigError(
                f"the cursor file {self.path} is damaged; look at it, then delete it to make the "
                "lurker start from the end of the room (answered messages are not answered again)"
            ) from None

    def save(self, position: Position) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        payload = json.dumps({"seq": position.seq, "offset": position.offset}).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
