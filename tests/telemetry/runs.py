"""A recorded expedition for the trace tests: a demo home whose three judged roles go
through the real gateway to a real program (tests/fakes/openai_bridge.py in front of
tests/fakes/expedition_model.py), started with `bullpen up`, one run to its Dig Report."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.gateway.helpers import GatewayHome, start_printing_port
from tests.support import Proc, Society, run_cli, set_seat, start_up

FAKES = Path(__file__).resolve().parents[1] / "fakes"
TITLE = ("--title", "Waiting Is Part of the Work", "--keyword", "patience", "--wait-timeout", "300")
JUDGED = ("termgen", "score", "scotoma")


@dataclass
class Recorded:
    society: Society
    gateway: GatewayHome
    thread: str
    bridge: subprocess.Popen[str]
    up: Proc

    def ledger(self) -> list[dict[str, Any]]:
        return self.gateway.ledger()

    def stop(self) -> None:
        self.up.stop()
        self.bridge.terminate()
        self.bridge.wait(10)
        if self.bridge.stdout is not None:
            self.bridge.stdout.close()
        self.society.stop_all()


def start_bridge() -> tuple[subprocess.Popen[str], int]:
    command = [sys.executable, str(FAKES / "openai_bridge.py"), "--port", "0", "--"]
    command += [sys.executable, str(FAKES / "expedition_model.py")]
    return start_printing_port(command, "openai_bridge", 15)


def record_expedition(
    root: Path,
    extra_toml: str = "",
    tries: int = 3,
    args: tuple[str, ...] = (),
    exits: tuple[int, ...] = (0,),
) -> Recorded:
    """A demo home's expedition with its model calls through the gateway, to its Dig Report
    (with `args` added to the command: `--yes` to its end, `--budget`; `exits` the exit codes
    it may end with); when a port it was handed is taken meanwhile (the machine is shared),
    again on new ones."""
    for attempt in range(tries):
        try:
            where = root.with_name(f"{root.name}{attempt or ''}")
            return _attempt(where, extra_toml, args, exits)
        except AssertionError as exc:
            if "already in use" not in str(exc) or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def _attempt(
    root: Path, extra_toml: str, args: tuple[str, ...], exits: tuple[int, ...]
) -> Recorded:
    society = Society(root, demo=True)
    bridge, port = start_bridge()
    try:
        return _record(society, bridge, port, extra_toml, args, exits)
    except BaseException:
        bridge.kill()
        bridge.wait(10)
        society.stop_all()
        raise


def _record(
    society: Society,
    bridge: subprocess.Popen[str],
    port: int,
    extra_toml: str,
    args: tuple[str, ...],
    exits: tuple[int, ...],
) -> Recorded:
    root = society.root
    gateway = GatewayHome(society)
    gateway.configure(
        {"bridge": {"base_url": f"http://127.0.0.1:{port}/v1", "prefixes": ["fake"]}},
    )
    for role in JUDGED:
        set_seat(root, role, 'kind = "openai"\nvia = "gateway"\nmodel = "fake-bridge"')
    if extra_toml:
        toml = root / "society.toml"
        toml.write_text(toml.read_text() + "\n" + extra_toml)
    for nick in society.home.society.nicks:
        gateway.token(nick)
    up = start_up(society)
    done = run_cli(root, "expedition", *TITLE, *args, timeout=400)
    assert done.returncode in exits, done.stdout + done.stderr
    found = re.search(r"expedition (exp-[0-9a-f]+) started", done.stderr)
    assert found is not None, done.stderr
    return Recorded(society, gateway, found.group(1), bridge, up)
