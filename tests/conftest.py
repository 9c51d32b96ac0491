from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Society

pytest_plugins = [
    "tests.stopsignal",  # SIGTERM tears the run down as Ctrl-C does
    "tests.bytecode",  # bullpen compiled once for the run's processes, when they may not write it
]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak", action="store_true", default=False, help="run the long reliability suites in full"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding one of the longest tests (`soak`, `long`) run first, whole and in their
    order (a module's shared fixtures are still made once): under `pytest -n 4` xdist deals
    whole files in this order (pyproject's `--dist loadfile`), so each long file starts on the
    next free worker at the start, and a 60 s test dealt out last never keeps a worker busy
    alone at the end of the run."""
    first = {item.path for item in items if item.get_closest_marker("soak") is not None}
    first |= {item.path for item in items if item.get_closest_marker("long") is not None}
    items.sort(key=lambda item: item.path not in first)


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


# --- the room on NATS JetStream: real nats-server processes ------------------------

ENGINES = ("jsonl", "jetstream")


def _nats_or_skip(root: Path, size: int) -> Any:
    """A started nats-server cluster (tests/jetstream/servers.py says when it skips)."""
    from tests.jetstream.servers import make_cluster

    return make_cluster(root, size).start()


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One JetStream server for the whole run; every test home gets a stream of its own."""
    cluster = _nats_or_skip(tmp_path_factory.mktemp("nats-single"), 1)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A 3-node JetStream cluster on loopback for the whole run (tests that kill nodes make their own)."""
    cluster = _nats_or_skip(tmp_path_factory.mktemp("nats-cluster"), 3)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=ENGINES)
def engine_society(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Society]:
    """A fresh home on each engine in turn: the room's behaviour, whatever holds it."""
    from tests.support import society_on

    made = society_on(
        request.param, tmp_path / "home", lambda: request.getfixturevalue("nats_server")
    )
    try:
        yield made
    finally:
        made.stop_all()


# --- the session-wide secret scan (tests/reliability/secretscan.py) -------------------


def pytest_configure(config: pytest.Config) -> None:
    """Every secret of every home the run made must appear in no file, output or log.

    Code a test runs in this process logs as every bullpen process does (room/logs.py,
    JSON lines), not through structlog's unconfigured default: that renders each logged
    exception as a rich traceback with every frame's locals, which cost the power-loss
    suite over a second per simulated crash, and shows values no bullpen log would.
    """
    import structlog

    from room import logs
    from tests.reliability.secretscan import SecretScan

    logs.configure(json=True)
    # Not cached: structlog.testing.capture_logs must still see loggers used before it.
    structlog.configure(cache_logger_on_first_use=False)
    config.pluginmanager.register(SecretScan(), "bullpen-secret-scan")


@pytest.fixture(autouse=True)
def _stop_what_the_test_started() -> Iterator[None]:
    """Stop the processes of every Society a test made itself, even when it failed midway.

    Societies that wider-scoped fixtures made earlier are theirs to stop.
    """
    from tests.support import LIVE

    before = len(LIVE)
    yield
    made = LIVE[before:]
    del LIVE[before:]
    for society in reversed(made):
        society.stop_all()
