"""The real model for the whole session: one llama-server (per xdist worker), stopped after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.helpers import GatewayHome
from tests.realmodel.server import LlamaServer, start_llama
from tests.support import Society


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-server with SmolLM2-135M-Instruct and its own ChatML template."""
    server = start_llama(tmp_path_factory.mktemp("llama"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gw(society: Society) -> GatewayHome:
    """A home on free ports with a gateway port of its own (configure, then start)."""
    return GatewayHome(society)


@pytest.fixture
def demo_gw(tmp_path: Path) -> Iterator[GatewayHome]:
    """The demo home (its knowledge base, traces and memories) with a gateway port of its own."""
    made = Society(tmp_path / "home", demo=True)
    try:
        yield GatewayHome(made)
    finally:
        made.stop_all()
