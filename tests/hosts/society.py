"""A society spread over the test hosts: a NATS node, a hub and lurkers on each host.

Each host runs a nats-server of one 3-node JetStream cluster (routes between the hosts'
addresses), and a home of its own, seen at the same path on every host: its own
society.toml and secrets, a hub listening on the host's address, the room on one R3
stream. The homes share the one secret a hub checks a privileged nick's proof with (the
HMAC secret of trust.toml, as `bullpen init` makes it): a post proved on one host must
verify on every hub. Every other secret (the hub's signing key, its tokens) stays on its
host.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from agents.cli.init import InitOptions, init_home
from agents.home import Home
from tests.build.helpers import set_build
from tests.hosts.netns import Host, Net
from tests.jetstream.servers import NatsNode, make_cluster
from tests.support import HTTP, Proc, bullpen_argv, record_output, set_room_engine, wait_for

NATS_PORT, CLUSTER_PORT, MONITOR_PORT = 4222, 6222, 8222
STRICT_PORT, RELAXED_PORT = 8080, 8081  # every host has its own address: no port is shared


class HostNats(NatsNode):
    """A cluster node listening on its host's address, run inside that host."""

    def __init__(self, node: NatsNode, host: Host) -> None:
        super().__init__(node.binary, node.root.parent, host.name, node.cluster, node.sync_always)
        self.host = host
        self.address = host.address
        self.port, self.cluster_port, self.monitor_port = NATS_PORT, CLUSTER_PORT, MONITOR_PORT

    def argv(self) -> list[str]:
        return self.host.argv(*super().argv())


class HostHome:
    """One host's bullpen home: made and read by the test at `root`, seen by the host's
    processes at `path` (the same path on every host)."""

    def __init__(
        self, net: Net, host: Host, stream: str, servers: list[str], replicas: int
    ) -> None:
        self.host = host
        self.path = net.seen_at("home")
        self.root = host.own("home")
        init_home(
            self.root,
            InitOptions(
                strict=f"{host.address}:{STRICT_PORT}",
                relaxed=f"{host.address}:{RELAXED_PORT}",
                demo=True,
            ),
        )
        set_room_engine(self.root, servers, stream, replicas)
        set_build(self.root, root=str(net.seen_at("build")), alias=str(net.seen_at("sandbox")))
        self.procs: list[Proc] = []

    @property
    def home(self) -> Home:
        return Home(self.root)

    @property
    def strict_url(self) -> str:
        return f"http://{self.host.address}:{STRICT_PORT}"

    def secret(self) -> bytes:
        return self.home.secret()

    def read_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.home.read_token().decode()}"}

    def share_secret_of(self, other: HostHome) -> None:
        """Take the proof secret of `other`'s home (the operator copies that one file)."""
        mine = self.home.trust.secret_file
        mine.write_bytes(other.home.trust.secret_file.read_bytes())
        os.chmod(mine, 0o600)

    def argv(self, *args: str) -> list[str]:
        return bullpen_argv(self.path, *args)

    def spawn(self, name: str, *args: str) -> Proc:
        logs = self.root.parent / "test-logs"
        logs.mkdir(exist_ok=True)
        return self.host.spawn(logs / f"{name}.log", *self.argv(*args))

    def up(self, nicks: tuple[str, ...], *, wait: bool = True) -> Proc:
        """`bullpen up` on this host: its hub and these nicks' lurkers (waited on, unless
        `wait` is false: then `until_up` waits)."""
        up = self.spawn("up", "up", *(("--nicks", ",".join(nicks)) if nicks else ()))
        return self.until_up(up, nicks) if wait else up

    def until_up(self, up: Proc, nicks: tuple[str, ...], tries: int = 3) -> Proc:
        """Wait for `up` to say "lurkers up". A hub that exits 1 at its start (NATS did not
        answer in time: transient, docs/scaling.md) is started again, as systemd would."""
        for attempt in range(1, tries + 1):
            wait_for(
                lambda up=up: "lurkers up" in up.own_output() or not up.alive(),
                90,
                f"bullpen up on host {self.host.name}",
            )
            transient = "the hub did not start (it exited with status 1)" in up.own_output()
            if up.alive() or not transient or attempt == tries:
                break
            up.stop()
            up = self.up(nicks, wait=False)
        assert up.alive(), up.output()
        return up

    def hub(self, tries: int = 3) -> Proc:
        """This host's hub alone, waited on until it answers (started again if it exits 1 at
        its start, as `until_up` does)."""
        for attempt in range(1, tries + 1):
            hub = self.spawn("hub", "hub")
            wait_for(
                lambda hub=hub: self.healthy() or not hub.alive(),
                60,
                f"the hub on host {self.host.name}",
            )
            if hub.alive() or attempt == tries:
                break
        assert hub.alive(), hub.output()
        return hub

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A `bullpen` command run on this host, as its operator would at its terminal."""
        done = self.host.run(*self.argv(*args), timeout=timeout)
        record_output(
            f"bullpen on {self.host.name}: {' '.join(args)[:200]}", done.stdout + done.stderr
        )
        return done

    def health_on_host(self) -> int:
        """The status of /health asked from this host itself (0: no answer): the test's own
        path to it is cut while the host is partitioned."""
        probe = (
            "import httpx,sys\n"
            "try: print(httpx.get(sys.argv[1], timeout=3).status_code)\n"
            "except httpx.HTTPError: print(0)"
        )
        done = self.host.run(sys.executable, "-c", probe, f"{self.strict_url}/health", timeout=30)
        return int(done.stdout.strip() or 0)

    def healthy(self) -> bool:
        try:
            return HTTP.get(f"{self.strict_url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def lines(self) -> list[dict[str, Any]]:
        """Every line of the room as this host's hub serves it."""
        found: list[dict[str, Any]] = []
        after = 0
        while True:
            answer = HTTP.get(
                f"{self.strict_url}/read",
                params={"after": after, "limit": 1000},
                headers=self.read_headers(),
                timeout=10,
            ).json()
            found += answer["messages"]
            if len(answer["messages"]) < 1000:
                return found
            after = answer["last_seq"]


class Spread:
    """Three hosts, one JetStream cluster across them, a home on each; `close()` ends all."""

    def __init__(self, net: Net, root: Path, names: tuple[str, ...] = ("a", "b", "c")) -> None:
        self.net = net
        self.hosts = {name: net.add_host(name) for name in names}
        template = make_cluster(root / "nats", len(names))
        self.nats = {
            name: HostNats(node, self.hosts[name])
            for name, node in zip(names, template.nodes, strict=True)
        }
        for node in self.nats.values():
            node.routes = [
                f"{other.address}:{CLUSTER_PORT}"
                for other in self.nats.values()
                if other is not node
            ]
        stream = f"T{uuid.uuid4().hex[:12]}"
        self.homes = {
            name: HostHome(net, host, stream, [self.nats[name].url], len(names))
            for name, host in self.hosts.items()
        }
        first = self.homes[names[0]]
        for home in list(self.homes.values())[1:]:
            home.share_secret_of(first)

    def start_nats(self) -> None:
        for node in self.nats.values():
            node.start()

        def ready() -> bool:
            for node in self.nats.values():
                if not node.alive():
                    raise AssertionError(f"nats-server on {node.name} exited:\n{node.output()}")
            return all(node.healthy() for node in self.nats.values())

        wait_for(ready, 30, "the NATS cluster across the hosts to report healthy")
        wait_for(self._meta_leader, 60, "the NATS cluster to elect its JetStream meta leader")

    def _meta_leader(self) -> bool:
        """Whether every node names one JetStream meta leader (streams can be made then)."""
        leaders = set()
        for node in self.nats.values():
            try:
                jsz = HTTP.get(f"http://{node.address}:{MONITOR_PORT}/jsz", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                return False
            leaders.add((jsz.get("meta_cluster") or {}).get("leader"))
        return len(leaders) == 1 and None not in leaders and "" not in leaders

    def up(self, nicks: dict[str, tuple[str, ...]]) -> None:
        """`bullpen up` on each named host with its nicks, all started before any is waited
        on (the hubs of an R3 stream start side by side, as hosts boot)."""
        started = {name: self.homes[name].up(on_it, wait=False) for name, on_it in nicks.items()}
        for name, up in started.items():
            self.homes[name].until_up(up, nicks[name])

    def home(self, name: str) -> HostHome:
        return self.homes[name]

    def close(self) -> None:
        for node in self.nats.values():
            with contextlib.suppress(Exception):
                node.stop()
