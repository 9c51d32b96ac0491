"""The hub's tree is derived data: lost or damaged files are rebuilt from the room at start.

The rebuilt tree must give the very root the hub signed before, so the old
checkpoint still verifies against the new one (consistency), and the hub says
in its log that it rebuilt.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from room.tree import tree_dir
from tests.support import Society
from tests.tlog.helpers import checkpoint_of, fill, prepare
from trust import note


@pytest.mark.parametrize("damage", ["deleted", "flipped"])
def test_the_hub_rebuilds_its_tree_from_the_room(tmp_path: Path, damage: str) -> None:
    """Level files deleted, or a leaf hash flipped in the middle: rebuilt, same signed root."""
    society = Society(tmp_path / "home")
    prepare(society)
    society.start_hub()
    try:
        fill(society, 37)
        before = note.parse(checkpoint_of(society, 37)).head()
    finally:
        society.stop_all()
    folder = tree_dir(society.home.room_path)
    if damage == "deleted":
        for level in folder.glob("level-*"):
            level.unlink()
    else:
        leaves = bytearray((folder / "level-00").read_bytes())
        leaves[32 * 11] ^= 0xFF  # leaf 11's hash: the files no longer give the signed root
        (folder / "level-00").write_bytes(bytes(leaves))
    hub = society.start_hub()
    try:
        after = note.parse(checkpoint_of(society, 37)).head()
        assert after.root == before.root and after.size == 37
        fill(society, 3, start=37)
        grown = note.parse(checkpoint_of(society, 40)).head()
        assert grown.size == 40
    finally:
        society.stop_all()
    assert "rebuilt the room's Merkle tree from the room" in hub.output()
