"""`bullpen trust check` flags every seat, command or MCP agent that reaches a model around the gateway."""

from __future__ import annotations

import sys

from tests.gateway.helpers import GatewayHome
from tests.support import add_nick, run_cli, set_seat


def test_direct_clients_are_flagged_only_with_a_gateway(gw: GatewayHome) -> None:
    """Without [gateway] nothing is flagged; with it, the direct openai seat, the cmd seat and the
    command aimed at a model server are, and the via-gateway seat is not."""
    root = gw.society.root
    set_seat(root, "direct", 'kind = "openai"\nbase_url = "http://127.0.0.1:8012/v1"\nmodel = "m"')
    set_seat(root, "good", 'kind = "openai"\nvia = "gateway"\nmodel = "qwen-7b"')
    set_seat(
        root,
        "tool",
        f'kind = "cmd"\ncommand = ["{sys.executable}", "-c", "pass"]\n'
        'env = { OPENAI_BASE_URL = "http://gpu-box:8000/v1" }',
    )
    add_nick(root, "coder", command=["agent-cli", "--base-url", "https://api.example.com/v1"])
    before = run_cli(root, "trust", "check", "--static")
    assert "gateway bypass" not in before.stdout
    gw.configure({"local": {"base_url": "http://127.0.0.1:8012/v1", "prefixes": ["qwen"]}})
    after = run_cli(root, "trust", "check", "--static")
    assert after.returncode == 1
    flagged = [line for line in after.stdout.splitlines() if "gateway bypass" in line]
    assert any("[seats.direct] calls http://127.0.0.1:8012/v1 directly" in f for f in flagged)
    assert any("[seats.tool]" in f and "gpu-box:8000" in f for f in flagged)
    assert any("[nicks.coder] command" in f and "api.example.com" in f for f in flagged)
    assert not any("[seats.good]" in f for f in flagged)
    assert all("bypasses its stop strings" in f for f in flagged)
