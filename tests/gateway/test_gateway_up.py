"""`bullpen up` starts the gateway when [gateway] is configured, and stops it with the rest."""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.gateway.helpers import FakeBackend, GatewayHome
from tests.support import start_up, wait_for

StartFake = Callable[..., FakeBackend]


def test_up_starts_and_stops_the_gateway(gw: GatewayHome, fake: StartFake) -> None:
    """With [gateway] configured, up reports the gateway running, it answers calls, and it stops."""
    backend = fake()
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    token = gw.token("operator")
    up = start_up(gw.society)
    assert re.search(r"up: gateway +pid \d+ +running", up.output())
    assert gw.healthy()
    assert gw.chat(token, "fake-model").status_code == 200
    assert (gw.society.root / "logs" / "gateway.log").exists()
    up.stop()
    wait_for(lambda: not gw.healthy(), 15, "the gateway to stop with up")


def test_up_refuses_to_go_on_when_the_gateway_cannot_start(gw: GatewayHome) -> None:
    """A [gateway] without backends is a configuration error: up says so and exits 78."""
    gw.configure({})
    up = gw.society.spawn("up", "up")
    wait_for(lambda: not up.alive(), 60, "up to give up")
    assert up.proc.returncode == 78, up.output()
    assert "the gateway did not start" in up.output()
    assert "[gateway] has no backends" in up.output()
