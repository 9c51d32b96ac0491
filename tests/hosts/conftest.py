"""Fixtures for the host tests: namespaces made for each test and removed after it.

Making hosts needs root, iproute2 and util-linux. Without them the tests skip, except
under CI (CI=true), which runs as root and installs iproute2 (.ci/run): there they fail,
saying what is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hosts.netns import NamespacesUnavailable, Net, probe
from tests.hosts.society import Spread


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    """A bridge for hosts; every namespace, link and process on it is removed afterwards."""
    try:
        probe()
        made = Net(tmp_path / "hosts")
    except NamespacesUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"cannot make test hosts: {exc}")
        pytest.skip(f"cannot make test hosts: {exc}")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def spread(net: Net, tmp_path: Path) -> Iterator[Spread]:
    """Hosts a, b and c, a NATS node of one JetStream cluster running on each, a home on
    each (no hub or lurker started yet)."""
    made = Spread(net, tmp_path)
    try:
        made.start_nats()
        yield made
    finally:
        made.close()
