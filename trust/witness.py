"""A witness's judgement: cosign a checkpoint only if it extends the last one cosigned.

A hub could show one history to one reader and another to the next; each
would verify on its own. A witness remembers, per origin, the last tree it
cosigned (size and root, in a state file it fsyncs *before* it hands out
the cosignature), and cosigns a new checkpoint only when

- it is the first it sees of that origin (trust on first use), or
- it has the same size and the same root (cosigned again), or
- it is larger and the hub's consistency proof shows it extends the old one.

Two different roots for one size, a consistency proof that fails, or a
smaller tree than one already cosigned is refused with a `Refusal` that
says which; the witness process reports it in the room. It never cosigns
two different trees of one size: the state names the size it signed.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trust import merkle
from trust.note import TreeHead


class Refusal(Exception):
    """The hub showed a checkpoint this witness must not cosign; `kind` says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "fork" (two histories) or "rollback" (an older tree)
        self.message = message


@dataclass(frozen=True)
class Cosigned:
    size: int
    root: bytes


class WitnessState:
    """What this witness last cosigned, per origin, in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            self._seen = {
                origin: Cosigned(int(v["size"]), base64.b64decode(v["root"]))
                for origin, v in raw.items()
            }
        except FileNotFoundError:
            self._seen = {}
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(
                f"the witness state {path} is not what a witness wrote; restore it from a "
                "backup (starting over would let a hub roll this witness back)"
            ) from None

    def last(self, origin: str) -> Cosigned | None:
        return self._seen.get(origin)

    def record(self, head: TreeHead) -> None:
        """Remember `head` as cosigned, durably, before the cosignature leaves."""
        self._seen[head.origin] = Cosigned(head.size, head.root)
        data = {
            origin: {"size": c.size, "root": base64.b64encode(c.root).decode()}
            for origin, c in self._seen.items()
        }
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, json.dumps(data, indent=1).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)


def judge(
    state: WitnessState, head: TreeHead, consistency: Callable[[int, int], list[bytes]]
) -> None:
    """Return when `head` may be cosigned; raise Refusal when it must not be."""
    last = state.last(head.origin)
    if last is None:
        return
    if head.size < last.size:
        raise Refusal(
            "rollback",
            f"the hub showed a tree of {head.size} lines, but this witness already cosigned "
            f"{last.size}: a log never shrinks",
        )
    if head.size == last.size:
        if head.root != last.root:
            raise Refusal(
                "fork",
                f"the hub showed a tree of {head.size} lines whose root differs from the one "
                "this witness cosigned at that size: two histories of one room",
            )
        return
    proof = consistency(last.size, head.size)
    if not merkle.verify_consistency(last.size, head.size, last.root, head.root, proof):
        raise Refusal(
            "fork",
            f"the hub's tree of {head.size} lines does not extend the tree of {last.size} this "
            "witness cosigned: the room's history was rewritten",
        )
