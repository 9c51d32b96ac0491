"""Separate hosts on one machine: Linux network, mount and UTS namespaces joined by a bridge.

A `Net` is a bridge in the test's own namespace (so the test reaches every host, as an
operator's laptop would) with one veth pair per `Host`. Each host is a network namespace
with its own address on the bridge's /24, and one long-lived keeper process (`sleep
infinity`) that holds its mount and UTS namespaces: its host name, and its own folder
bind-mounted at one path that is the same on every host (its home and build root lie in
it), so the same path names a different, private folder on each. Every process of a host is started with
`nsenter` into the keeper's namespaces, so a host's processes share one filesystem view
and `ip netns pids` lists them all.

Faults: `partition()` sets the host's end of the bridge down (its traffic is dropped both
ways, the test's included) and `heal()` sets it up again; `kill()` SIGKILLs every process
in the host's network namespace, keeper included. `close()` undoes everything and is
called from the fixture's finalizer, also when a test fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.support import Proc, wait_for

PREFIX = "bp"  # every namespace and link the harness makes starts with it (cleanup finds them)
TOOLS = ("ip", "unshare", "nsenter", "mount")
SUBNET_LOCK = Path("/tmp/bph-subnets.lock")


class NamespacesUnavailable(RuntimeError):
    """This machine cannot make the hosts: not root, a tool missing, or the kernel refused."""


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        raise NamespacesUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def probe() -> None:
    """Make and delete one namespace; raise NamespacesUnavailable saying why it cannot."""
    if os.geteuid() != 0:
        raise NamespacesUnavailable("the host tests make network namespaces, which needs root")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise NamespacesUnavailable(
            f"{', '.join(missing)} not found: install iproute2 and util-linux (see .ci/run)"
        )
    name = f"{PREFIX}probe{secrets.token_hex(3)}"
    _ip("netns", "add", name)
    _ip("netns", "del", name)


def _free_subnet() -> str:
    """A 10.213.X.0/24 no address of this machine lies in: 'a.b.c' without the last octet."""
    taken = _ip("-4", "-o", "addr", "show") + _ip("-4", "route", "show")
    for _ in range(200):
        subnet = f"10.213.{secrets.randbelow(250) + 1}"
        if f"{subnet}." not in taken:
            return subnet
    raise NamespacesUnavailable("no free 10.213.X.0/24 for the test bridge")


class Host:
    """One simulated machine: its own address, host name and filesystem view."""

    def __init__(self, net: Net, name: str, index: int) -> None:
        self.net = net
        self.name = name
        self.netns = f"{PREFIX}{net.tag}{name}"
        self.index = index
        self.link = f"{PREFIX}{net.tag}v{index}"  # the bridge's end (≤ 15 characters)
        self.address = f"{net.subnet}.{10 + index}"
        self.folder = net.root / name  # this host's own files, seen at net.shared on it
        self.keeper: subprocess.Popen[bytes] | None = None
        self.procs: list[Proc] = []

    def create(self) -> None:
        peer = f"{PREFIX}{self.net.tag}p{self.index}"
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.link, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", self.netns)
        _ip("-n", self.netns, "link", "set", peer, "name", "eth0")
        _ip("-n", self.netns, "addr", "add", f"{self.address}/24", "dev", "eth0")
        _ip("-n", self.netns, "link", "set", "eth0", "up")
        _ip("-n", self.netns, "link", "set", "lo", "up")
        _ip("link", "set", self.link, "master", self.net.bridge)
        _ip("link", "set", self.link, "up")
        self.boot()

    def boot(self) -> None:
        """Start the keeper: host name set, the host's folder bind-mounted at the shared
        path, then `sleep infinity`."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.net.shared.mkdir(parents=True, exist_ok=True)
        script = [
            f"hostname {self.name}",
            f"mount --bind '{self.folder}' '{self.net.shared}'",
            "exec sleep infinity",
        ]
        unshare = ["unshare", "--mount", "--uts", "--propagation", "private"]
        self.keeper = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, *unshare, "--", "sh", "-ec", " && ".join(script)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        keeper = self.keeper

        def settled() -> bool:
            if keeper.poll() is not None:
                assert keeper.stderr is not None
                raise NamespacesUnavailable(
                    f"host {self.name}'s keeper exited: {keeper.stderr.read().decode()}"
                )
            with contextlib.suppress(OSError):
                return Path(f"/proc/{keeper.pid}/cmdline").read_bytes() == b"sleep\0infinity\0"
            return False

        wait_for(settled, 20, f"host {self.name} to set up its namespaces")

    def own(self, name: str) -> Path:
        """Where the test finds what this host sees at `net.seen_at(name)`."""
        return self.folder / name

    def argv(self, *command: str) -> list[str]:
        """`command` run on this host: in its network, mount and UTS namespaces."""
        assert self.keeper is not None, f"host {self.name} is not running"
        enter = ["nsenter", f"--target={self.keeper.pid}", "--net", "--mount", "--uts"]
        return [*enter, f"--wd={os.getcwd()}", "--", *command]

    def spawn(self, log: Path, *command: str, env: dict[str, str] | None = None) -> Proc:
        """A long-running process on this host, its output in `log`; stopped at cleanup."""
        proc = Proc(self.argv(*command), log, env)
        self.procs.append(proc)
        return proc

    def run(
        self, *command: str, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*command), capture_output=True, text=True, timeout=timeout, input=input
        )

    def pids(self) -> list[int]:
        out = subprocess.run(
            ["ip", "netns", "pids", self.netns], capture_output=True, text=True, timeout=20
        ).stdout
        return [int(pid) for pid in out.split()]

    def kill(self) -> None:
        """Every process of this host dies at once (SIGKILL), as when the machine is cut off
        the power: nothing it had not yet sent or written gets out."""
        deadline = time.monotonic() + 20
        while pids := self.pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise AssertionError(f"host {self.name}: processes {pids} outlived SIGKILL")
            time.sleep(0.05)
        for proc in self.procs:
            proc.stop(1)
        self.procs.clear()
        if self.keeper is not None:
            self.keeper.wait(10)
            self.keeper = None

    def partition(self) -> None:
        """Drop all of this host's traffic: its link to the bridge goes down."""
        _ip("link", "set", self.link, "down")

    def heal(self) -> None:
        _ip("link", "set", self.link, "up")

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop(5)
        with contextlib.suppress(NamespacesUnavailable, AssertionError):
            self.kill()
        with contextlib.suppress(NamespacesUnavailable):
            _ip("netns", "del", self.netns)
        with contextlib.suppress(NamespacesUnavailable):
            _ip("link", "del", self.link)  # gone with the namespace already, normally


class Net:
    """A bridge and the hosts on it; `close()` removes every namespace, link and process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tag = secrets.token_hex(2)
        self.bridge = f"{PREFIX}{self.tag}br"
        self.shared = Path(f"/tmp/{PREFIX}h-{self.tag}")  # mount points: same path on each host
        self.hosts: list[Host] = []
        # One test at a time picks a subnet and takes it (pytest-xdist runs two side by side).
        with open(SUBNET_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.subnet = _free_subnet()
            _ip("link", "add", self.bridge, "type", "bridge", "forward_delay", "0")
            try:
                _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
                _ip("link", "set", self.bridge, "up")
            except NamespacesUnavailable:
                self.close()
                raise

    def seen_at(self, name: str) -> Path:
        """The path at which every host sees its own `name` (the test: `Host.own(name)`)."""
        return self.shared / name

    def add_host(self, name: str) -> Host:
        """Host `name`, its own folder `<root>/<name>` seen at `shared` on it."""
        host = Host(self, name, len(self.hosts) + 1)
        self.hosts.append(host)
        host.create()
        return host

    def close(self) -> None:
        for host in reversed(self.hosts):
            host.close()
        with contextlib.suppress(NamespacesUnavailable):
            _ip("link", "del", self.bridge)
        shutil.rmtree(self.shared, ignore_errors=True)
