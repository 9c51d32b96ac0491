"""The hosts are separate where it matters: address, host name, filesystem view, fate."""

from __future__ import annotations

import sys

from tests.hosts.netns import Net
from tests.support import wait_for

PROBE = "import socket,sys; socket.create_connection((sys.argv[1], 8000), timeout=2); print('ok')"


def reaches(net: Net, source: str, target: str) -> bool:
    host = next(h for h in net.hosts if h.name == source)
    address = next(h for h in net.hosts if h.name == target).address
    return host.run(sys.executable, "-c", PROBE, address, timeout=20).stdout.strip() == "ok"


def test_hosts_have_their_own_address_name_and_folders(net: Net) -> None:
    """The same path holds each host's own file; each host names itself; a partitioned
    host is unreachable until healed, and a killed host leaves no process behind."""
    a, b = net.add_host("a"), net.add_host("b")
    seen = net.seen_at("home")
    for host in (a, b):
        host.own("home").mkdir()
        (host.own("home") / "who").write_text(host.name)
    for host in (a, b):
        done = host.run("sh", "-c", f"hostname; cat {seen}/who")
        assert done.stdout.split() == [host.name, host.name], done.stderr
    assert not (seen / "who").exists()  # the test's own view has neither

    serve = (sys.executable, "-m", "http.server", "--bind", b.address, "8000")
    listener = b.spawn(net.root / "listen.log", *serve)

    wait_for(lambda: reaches(net, "a", "b"), 20, "host a to reach host b's listener")
    b.partition()
    assert not reaches(net, "a", "b")
    b.heal()
    wait_for(lambda: reaches(net, "a", "b"), 20, "host a to reach host b again once healed")

    assert listener.pid in b.pids() and listener.pid not in a.pids()
    b.kill()
    assert b.pids() == [] and not listener.alive()
    assert a.pids() != []
