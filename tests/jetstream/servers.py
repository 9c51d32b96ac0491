"""Real nats-server processes for the tests: one node or a 3-node cluster on loopback.

Each node gets a config file written here, free ports, its own store folder
and log; readiness is its monitoring endpoint's /healthz answering 200.
Every process started is stopped (SIGTERM, then SIGKILL) by `stop()`, also
when a test fails. The binary is $BULLPEN_NATS_SERVER, else `nats-server`
on PATH (the Debian package). Servers ≥ 2.10 get `sync_interval: always`
(fsync before every acknowledgement); 2.9 rejects that key, so it is left
out there — docs/scaling.md says what each choice survives.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support import HTTP, free_port, wait_for


class NatsMissing(RuntimeError):
    """No nats-server binary could be found."""


def server_binary() -> str:
    """The nats-server to run; raise NatsMissing with what to install."""
    chosen = os.environ.get("BULLPEN_NATS_SERVER") or shutil.which("nats-server")
    if not chosen or not Path(chosen).exists():
        raise NatsMissing(
            "nats-server not found: install the Debian package (apt-get install nats-server) "
            "or point $BULLPEN_NATS_SERVER at a nats-server binary"
        )
    return chosen


def server_version(binary: str) -> tuple[int, int, int]:
    """The binary's version, from `nats-server --version` (`nats-server: v2.9.10`)."""
    text = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        raise NatsMissing(f"cannot read the version of {binary} from {text!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def syncs_always(version: tuple[int, int, int]) -> bool:
    """`sync_interval: always` exists from nats-server 2.10 on."""
    return version >= (2, 10, 0)


class NatsNode:
    """One nats-server process; restartable on the same ports and store."""

    def __init__(
        self,
        binary: str,
        root: Path,
        name: str,
        cluster: str | None,
        sync_always: bool,
        *,
        jetstream: bool = True,
        token: str | None = None,
    ) -> None:
        self.binary = binary
        self.jetstream = jetstream
        self.token = token
        self.name = name
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.monitor_port = free_port()
        self.cluster_port = free_port() if cluster else 0
        self.cluster = cluster
        self.sync_always = sync_always
        self.address = "127.0.0.1"  # where it listens (a test host's own address elsewhere)
        self.routes: list[str] = []  # the other nodes' cluster listeners, host:port
        self.config = self.root / "nats.conf"
        self.log = self.root / "nats.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.address}:{self.port}"

    def write_config(self) -> None:
        lines = [
            f"server_name: {self.name}",
            f"listen: {self.address}:{self.port}",
            f"http: {self.address}:{self.monitor_port}",
        ]
        if self.token:
            lines.append(f'authorization {{ token: "{self.token}" }}')
        if self.jetstream:
            lines += [
                "jetstream {",
                f'  store_dir: "{self.root / "store"}"',
                "  max_memory_store: 64MB",
                "  max_file_store: 1GB",
            ]
            if self.sync_always:
                lines.append("  sync_interval: always")
            lines.append("}")
        if self.cluster:
            routes = ", ".join(f"nats-route://{route}" for route in self.routes)
            lines += [
                "cluster {",
                f"  name: {self.cluster}",
                f"  listen: {self.address}:{self.cluster_port}",
                f"  routes: [{routes}]",
                "}",
            ]
        self.config.write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        self.write_config()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def argv(self) -> list[str]:
        return [self.binary, "-c", str(self.config)]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def healthy(self) -> bool:
        try:
            answer = HTTP.get(f"http://{self.address}:{self.monitor_port}/healthz", timeout=1)
        except httpx.HTTPError:
            return False
        return answer.status_code == 200

    def kill(self) -> None:
        """SIGKILL: the process dies with whatever it had not written."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class NatsCluster:
    """One node, or several routed into one JetStream cluster, on loopback ports."""

    def __init__(
        self,
        root: Path,
        size: int = 1,
        binary: str | None = None,
        *,
        jetstream: bool = True,
        token: str | None = None,
    ) -> None:
        self.binary = binary or server_binary()
        self.version = server_version(self.binary)
        self.sync_always = syncs_always(self.version)
        cluster = f"bullpen-{os.getpid()}-{free_port()}" if size > 1 else None
        self.nodes = [
            NatsNode(
                self.binary,
                root,
                f"n{i + 1}",
                cluster,
                self.sync_always,
                jetstream=jetstream,
                token=token,
            )
            for i in range(size)
        ]
        for node in self.nodes:
            node.routes = [
                f"{other.address}:{other.cluster_port}" for other in self.nodes if other is not node
            ]

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def replicas(self) -> int:
        return len(self.nodes)

    def start(self, timeout: float = 30.0) -> NatsCluster:
        try:
            for node in self.nodes:
                node.start()
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = 30.0, nodes: list[NatsNode] | None = None) -> None:
        """Wait until every (given) node answers /healthz with JetStream ready."""
        waiting = nodes or self.nodes

        def ready() -> bool:
            for node in waiting:
                if not node.alive():
                    raise AssertionError(f"nats-server {node.name} exited:\n{node.output()}")
            return all(node.healthy() for node in waiting)

        wait_for(ready, timeout, "nats-server to report healthy")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def describe(self) -> str:
        version = ".".join(str(part) for part in self.version)
        sync = "sync_interval always" if self.sync_always else "default sync (2 min)"
        return f"nats-server {version}, {len(self.nodes)} node(s), {sync}"


def settle(seconds: float) -> None:
    """A plain pause, only where a test must let time pass (never to wait for a condition)."""
    time.sleep(seconds)


def make_cluster(
    root: Path, size: int, *, jetstream: bool = True, token: str | None = None
) -> NatsCluster:
    """A cluster not yet started; the test skips when nats-server is not installed, except
    in CI, which installs it (.ci/run) and so fails instead."""
    try:
        return NatsCluster(root, size, jetstream=jetstream, token=token)
    except NatsMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (CI must install it: see .ci/run)")
        pytest.skip(str(exc))
