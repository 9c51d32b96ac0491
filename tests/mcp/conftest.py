from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.helpers import add_key_nick
from tests.support import Society


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Society]:
    """One running hub for a module's tool tests, with two more privileged nicks:

    signer   proves with its own key, held in this home
    keyless  privileged by a key this home does not hold: it cannot prove itself
    """
    made = Society(Path(tmp_path_factory.mktemp("mcp")) / "home")
    add_key_nick(made.root, "signer")
    add_key_nick(made.root, "keyless", keep_private=False)
    try:
        made.start_hub()
        yield made
    finally:
        made.stop_all()
