"""Fixtures of the reliability suites."""

from __future__ import annotations

import pytest

from tests.reliability.helpers import Seeded, seed_for


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> Seeded:
    """Seeded randomness; the seed is printed, so a failure's output says how to replay it."""
    seed = seed_for(request.node.nodeid)
    print(f"seed {seed} (replay with BULLPEN_SEED={seed})")
    return Seeded(seed)


SOAK_TIMEOUT_S = 3600


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --soak, the full-size suites may run for many minutes: lift the 300 s timeout for them."""
    if not config.getoption("--soak"):
        return
    for item in items:
        if item.get_closest_marker("soak") and "tests/reliability/" in item.nodeid:
            item.add_marker(pytest.mark.timeout(SOAK_TIMEOUT_S))
