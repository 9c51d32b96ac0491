from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import Society


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak", action="store_true", default=False, help="run the long reliability suites in full"
    )


@pytest.fixture
def soak(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--soak"))


@pytest.fixture
def society(tmp_path: Path) -> Iterator[Society]:
    """A fresh home on free ports; every process it started is stopped afterwards."""
    made = Society(tmp_path / "home")
    try:
        yield made
    finally:
        made.stop_all()
