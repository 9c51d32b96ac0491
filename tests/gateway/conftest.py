"""Fixtures for the gateway's tests: fake backends and gateway homes, stopped afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.gateway.helpers import FakeBackend, GatewayHome, start_fake
from tests.support import Society


@pytest.fixture
def fake() -> Iterator[Callable[..., FakeBackend]]:
    """Start fake llama.cpp servers with given behaviours; each is stopped after the test."""
    started: list[FakeBackend] = []

    def start(**behave: Any) -> FakeBackend:
        backend = start_fake(**behave)
        started.append(backend)
        return backend

    yield start
    for backend in started:
        backend.stop()


@pytest.fixture
def gw(society: Society) -> GatewayHome:
    """A home on free ports with a gateway port of its own (configure, then start)."""
    return GatewayHome(society)
