"""The home's secret screen, applied to every request before it may leave for a backend.

trust/screen.py's HomeSecrets notices a secret file added or changed by
walking and stat-ing the home's secret folders; on the gateway's hot path
that walk cost more than everything else it does per call (about 0.8 ms of
0.9), so the gateway looks at the folders again at most once a second and
screens with the Screen it got in between. A token issued or a key made is
screened within a second of its file appearing.
"""

from __future__ import annotations

import time
from typing import Any

from trust.screen import HomeSecrets, Screen

__all__ = ["RequestScreen"]

REFRESH_S = 1.0


class RequestScreen:
    def __init__(self, secrets: HomeSecrets, refresh_s: float = REFRESH_S) -> None:
        self.secrets = secrets
        self.refresh_s = refresh_s
        self._screen: Screen | None = None
        self._next = 0.0

    def screen(self) -> Screen:
        now = time.monotonic()
        if self._screen is None or now >= self._next:
            self._screen = self.secrets.screen()
            self._next = now + self.refresh_s
        return self._screen

    def check_json(self, value: Any, where: str) -> None:
        """Raise SecretFound (naming the kind of secret, never the secret) when `value` holds one."""
        self.screen().check_json(value, where)
