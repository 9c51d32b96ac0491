"""Fixtures for JetStream tests that stop, break or misconfigure their own nats-server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.jetstream.servers import NatsCluster, make_cluster


@pytest.fixture
def own_nats(tmp_path: Path) -> Iterator[Callable[..., NatsCluster]]:
    """Start nats-server(s) of the test's own (`own_nats(size, **options)`); all stopped after."""
    made: list[NatsCluster] = []

    def start(size: int = 1, *, wait: bool = True, **options: Any) -> NatsCluster:
        cluster = make_cluster(tmp_path / f"nats-{len(made)}", size, **options)
        made.append(cluster)
        if wait:
            cluster.start()
        return cluster

    try:
        yield start
    finally:
        for cluster in made:
            cluster.stop()
