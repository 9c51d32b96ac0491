"""Fixtures of the reliability suites."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.helpers import Seeded, seed_for
from tests.support import Society, set_hub

# The loaders post as nicks outside [privileged], so their posts are unverified and, at full
# speed, over the hub's stranger limits (room/limits.py): on a fast machine a load test got
# 429s. These suites measure writers, crashes and faults, not those limits (tests/room/
# test_flood.py and test_authentication.py do, setting their own), so they turn them off.
UNTHROTTLED = {
    "unverified_nick_posts_per_s": 0,
    "unverified_total_posts_per_s": 0,
    "unverified_nick_bytes_per_s": 0,
    "unverified_total_bytes_per_s": 0,
}


@pytest.fixture
def society(tmp_path: Path) -> Iterator[Society]:
    """A fresh home on free ports whose hub does not rate-limit unverified posters."""
    made = Society(tmp_path / "home")
    set_hub(made.root, **UNTHROTTLED)
    try:
        yield made
    finally:
        made.stop_all()


SHM = Path("/dev/shm")


@pytest.fixture
def memory_tmp(tmp_path: Path) -> Iterator[Path]:
    """A folder on tmpfs (/dev/shm, with 32 MB free), else tmp_path: for suites that model
    the disk themselves (these need a few MB).

    The power-loss suite decides what a crash keeps with its own layer (powerloss.py); the
    real fsyncs and unlinks of its thousands of rooms only cost it the disk's time (about a
    third of its 34 s on the 2-core CI machine), and tmpfs makes them free.
    """
    if not (SHM.is_dir() and shutil.disk_usage(SHM).free > 32 * 1024 * 1024):
        yield tmp_path
        return
    made = Path(tempfile.mkdtemp(prefix="bullpen-test-", dir=SHM))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


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
