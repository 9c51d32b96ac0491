"""Fixtures for JetStream tests that stop, break or misconfigure their own nats-server."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.jetstream.servers import NatsCluster, NatsMissing


@pytest.fixture
def own_nats(tmp_path: Path) -> Iterator[Callable[..., NatsCluster]]:
    """Start nats-server(s) of the test's own (`own_nats(size, **options)`); all stopped after."""
    made: list[NatsCluster] = []

    def start(size: int = 1, *, wait: bool = True, **options: Any) -> NatsCluster:
        try:
            cluster = NatsCluster(tmp_path / f"nats-{len(made)}", size, **options)
        except NatsMissing as exc:
            if os.environ.get("CI"):
                pytest.fail(f"{exc} (CI must install it: see .ci/run)")
            pytest.skip(str(exc))
        made.append(cluster)
        if wait:
            cluster.start()
        return cluster

    try:
        yield start
    finally:
        for cluster in made:
            cluster.stop()
