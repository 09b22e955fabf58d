"""Ports for the servers the tests start: trafka brokers, Apache Kafka, ZooKeeper, listeners, metrics.

Every port comes from below the kernel's range of ephemeral ports. A port the kernel handed out for a
bind to port 0 would be in that range, free for any outgoing connection to take as its own from the moment
the probe lets go: between the probe and the server's bind (seconds for a JVM), and again while a server
killed by a test is down before its restart on the same port. No outgoing connection is given a port below
the range, so a port found free here stays free for its server.
"""
from __future__ import annotations

import random

from trafka.broker.testing import port_is_free

_CHANCE = random.Random()


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port a server may listen on at ``host``, from the upper half of the ports below the ephemeral
    range (drawn at random, so that test processes running side by side rarely draw the same one)."""
    low = ephemeral_low()
    for _ in range(1000):
        port = _CHANCE.randrange(max(1024, low // 2), low)
        if port_is_free(port, host):
            return port
    raise RuntimeError(f"no free port below {low} on {host}")
