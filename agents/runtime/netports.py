"""Free ports for listeners a program starts itself (the demo's hub), picked where no race is.

A port from `bind(0)` comes from the kernel's ephemeral range, the same range every
outgoing connection draws its local port from. Between closing the probe socket and the
hub binding it, any connection on the machine may take that port, and the hub fails with
"Address already in use". Ports below the ephemeral range are never handed to outgoing
connections, so a probe there only races another program picking listeners, which
`BULLPEN_PORT_RANGE` (`LOW-HIGH`) keeps apart: each such program gets its own range.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
from pathlib import Path

RANGE_VARIABLE = "BULLPEN_PORT_RANGE"
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # below this sit many services' usual ports (5432, 8080, …): leave them be


class PortRangeError(ValueError):
    """BULLPEN_PORT_RANGE is not `LOW-HIGH` within 1024..65535."""


class NoFreePorts(OSError):
    """Too few ports in the range nobody listens on."""


def ephemeral_start() -> int | None:
    """The first port of the kernel's ephemeral range, or None where it cannot be read."""
    try:
        return int(EPHEMERAL.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def parse_range(text: str) -> range:
    low, dash, high = text.strip().partition("-")
    try:
        first, last = int(low), int(high)
    except ValueError:
        first = last = 0
    if not dash or not 1024 <= first <= last <= 65535:
        raise PortRangeError(
            f"{RANGE_VARIABLE}={text!r} is not a port range: write LOW-HIGH, both between "
            "1024 and 65535, for example 20000-20999"
        )
    return range(first, last + 1)


def below_ephemeral() -> range | None:
    """The ports from LOWEST up to the ephemeral range, or None where that leaves too few."""
    start = ephemeral_start()
    if start is None or start - LOWEST < 1000:
        return None
    return range(LOWEST, start)


def listener_range() -> range | None:
    """Where to pick: BULLPEN_PORT_RANGE if set, else below the ephemeral range (None: nowhere
    safe, so let the kernel choose)."""
    configured = os.environ.get(RANGE_VARIABLE)
    return parse_range(configured) if configured else below_ephemeral()


def bound_probe(port: int) -> socket.socket | None:
    """A socket bound to 127.0.0.1:`port`, or None if something holds that port."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        return None
    return sock


def free_ports(count: int, span: range | None = None, *, start: int | None = None) -> list[int]:
    """`count` distinct ports nobody listens on, from `span` (default `listener_range()`),
    looking from its `start`th port on (default: a random one) and wrapping round.

    Every probe socket stays bound until all are picked, so the ports are distinct.
    """
    span = span if span is not None else listener_range()
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        if span is None:
            for _ in range(count):
                sock = stack.enter_context(socket.socket())
                sock.bind(("127.0.0.1", 0))
                ports.append(int(sock.getsockname()[1]))
            return ports
        offset = random.randrange(len(span)) if start is None else start % len(span)
        for step in range(len(span)):
            port = span[(offset + step) % len(span)]
            probe = bound_probe(port)
            if probe is not None:
                stack.enter_context(probe)
                ports.append(port)
                if len(ports) == count:
                    return ports
        raise NoFreePorts(
            f"only {len(ports)} of {count} ports are free in {span.start}-{span.stop - 1}; "
            f"stop what holds them, or set {RANGE_VARIABLE}=LOW-HIGH to a range with free ports"
        )
