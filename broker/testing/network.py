"""A test network on this machine: hosts in Linux network namespaces joined by a bridge, and the faults a real
network has — hosts cut off from each other (both ways or one way), packets lost at random — made with the kernel's
own tools and always healed. ``TrafkaCluster(network=True)`` runs its ZooKeeper and brokers on one, so that a test
can cut a broker off from the others or from ZooKeeper; the nemesis tests and ``bench --nemesis`` do too. It needs
Linux, root, iproute2 and nftables (:func:`available` says what is missing).

Layout (``ip netns``, veth pairs, nftables; the tests run as root):

- a hub namespace holding a bridge, ``br0``, and nothing else: no route leaves it, so no packet leaves the machine;
- one namespace per host (a broker, ZooKeeper), with one veth into the bridge and an address of the test network,
  ``198.18.N.H/24`` (RFC 2544's range for network tests, ``N`` chosen free for each network);
- this process's own namespace joins too, as the clients' host ``client`` (``198.18.N.1``): the test's clients
  reach the brokers over the bridge, and the harness's readiness checks do;
- the faults are rules of one nftables table in the hub, on the bridge's forward hook: a packet between two
  hosts crosses the bridge, so dropping it there cuts the link, for every host alike, this process included;
- a slow link (delay and jitter; this kernel has no ``tc netem``) is a relay in the namespace of the host whose
  port it slows (trafka.broker.testing.relay), to which an nftables redirect there steers the chosen peers.

Every fault is healed by :meth:`TestNetwork.heal` (all at once), at the end of a :meth:`TestNetwork.fault` block
or its duration, and by :meth:`TestNetwork.close`, which also removes the namespaces and the client's veth. A
network left behind by a killed run is removed by the next one (:func:`remove_stale`).
"""
from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

PREFIX = "trnet"
#: The ports the relays of slow links listen on, in their host's namespace.
RELAY_PORT_BASE = 47000
SUBNET = "198.18"
CLIENT = "client"
TABLE = "trafka_faults"


class NetworkError(RuntimeError):
    """A command of the harness failed (its stderr says why)."""


def available() -> str | None:
    """None when this machine can make test networks, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            return f"{tool} is not installed (iproute2, nftables)"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode:
        raise NetworkError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _run("ip", "netns", "list").stdout.splitlines() if line.strip()]


def remove_stale() -> None:
    """Remove the namespaces and veths of networks whose process is gone."""
    for namespace in _namespaces():
        parts = namespace.split("-")
        if parts[0] == PREFIX and len(parts) >= 3 and parts[1].isdigit() and not _alive(int(parts[1])):
            _run("ip", "netns", "del", namespace, check=False)
    for line in _run("ip", "-o", "link", "show").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(PREFIX) and name[len(PREFIX):].split("x")[0].isdigit() \
                and not _alive(int(name[len(PREFIX):].split("x")[0])):
            _run("ip", "link", "del", name, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Host:
    name: str
    #: Its namespace (None for the client: this process's own).
    namespace: str | None
    address: str


class TestNetwork:
    """Hosts ``names`` (besides ``client``, this process) on a bridge of their own. A context manager."""

    __test__ = False  # (not a test class, for pytest)
    _serial = iter(range(1, 1 << 30))
    _lock = threading.Lock()

    def __init__(self, names: Sequence[str]) -> None:
        if CLIENT in names:
            raise ValueError(f"{CLIENT!r} is this process's host")
        with TestNetwork._lock:
            serial = next(TestNetwork._serial)
        self.tag = f"{os.getpid()}-{serial}"
        self.hub = f"{PREFIX}-{self.tag}-hub"
        self.client_link = f"{PREFIX}{os.getpid()}x{serial}"  # (an interface name is at most 15 characters)
        self.subnet = f"{SUBNET}.{self._free_octet()}"
        self.hosts: dict[str, Host] = {CLIENT: Host(CLIENT, None, f"{self.subnet}.1")}
        for number, name in enumerate(names, start=2):
            self.hosts[name] = Host(name, f"{PREFIX}-{self.tag}-{name}", f"{self.subnet}.{number}")
        self._faults: list[str] = []
        #: The relays slowing links (host, process), and the hosts with a redirect table.
        self._relays: list[tuple[str, subprocess.Popen[str]]] = []
        self._slowed: set[str] = set()
        self._timers: list[threading.Timer] = []
        self._started = False

    @staticmethod
    def _free_octet() -> int:
        taken = _run("ip", "-4", "-o", "addr", "show").stdout
        free = [n for n in range(1, 255) if f" {SUBNET}.{n}." not in taken]
        if not free:
            raise NetworkError(f"no free {SUBNET}.N.0/24 for a test network")
        return random.choice(free)

    # -- life-cycle ---------------------------------------------------------------------------------

    def start(self) -> TestNetwork:
        remove_stale()
        self._started = True
        try:
            _run("ip", "netns", "add", self.hub)
            hub = ("ip", "-n", self.hub)
            _run(*hub, "link", "add", "br0", "type", "bridge")
            _run(*hub, "link", "set", "br0", "up")
            for index, host in enumerate(self.hosts.values()):
                port = f"p{index}"
                if host.namespace is None:
                    _run("ip", "link", "add", self.client_link, "type", "veth", "peer", "name", port, "netns",
                         self.hub)
                    _run("ip", "addr", "add", f"{host.address}/24", "dev", self.client_link)
                    _run("ip", "link", "set", self.client_link, "up")
                else:
                    _run("ip", "netns", "add", host.namespace)
                    inside = ("ip", "-n", host.namespace)
                    _run(*inside, "link", "set", "lo", "up")
                    _run(*inside, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", self.hub)
                    _run(*inside, "addr", "add", f"{host.address}/24", "dev", "eth0")
                    _run(*inside, "link", "set", "eth0", "up")
                _run(*hub, "link", "set", port, "master", "br0")
                _run(*hub, "link", "set", port, "up")
            self._nft(f"add table bridge {TABLE}\n"
                      f"add chain bridge {TABLE} forward {{ type filter hook forward priority 0; policy accept; }}\n")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Heal every fault and remove the network (safe to call twice)."""
        if not self._started:
            return
        self._started = False
        for timer in self._timers:
            timer.cancel()
        for _, relay in self._relays:
            relay.kill()
        _run("ip", "link", "del", self.client_link, check=False)
        for host in self.hosts.values():
            if host.namespace is not None:
                _run("ip", "netns", "del", host.namespace, check=False)
        _run("ip", "netns", "del", self.hub, check=False)

    def __enter__(self) -> TestNetwork:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- hosts --------------------------------------------------------------------------------------

    def address(self, name: str) -> str:
        return self.hosts[name].address

    def command(self, name: str, argv: Sequence[str]) -> list[str]:
        """``argv`` as run on host ``name`` (in its namespace)."""
        namespace = self.hosts[name].namespace
        return list(argv) if namespace is None else ["ip", "netns", "exec", namespace, *argv]

    # -- faults -------------------------------------------------------------------------------------

    def cut(self, a: str, b: str, *, one_way: bool = False) -> None:
        """No packet from ``a`` reaches ``b``, and (unless ``one_way``) none from ``b`` reaches ``a``."""
        self._drop(a, b)
        if not one_way:
            self._drop(b, a)

    def isolate(self, name: str, from_: Sequence[str] | None = None) -> None:
        """Cut ``name`` off from ``from_`` (every other host, the client included, when not given)."""
        for other in (from_ if from_ is not None else [h for h in self.hosts if h != name]):
            self.cut(name, other)

    def split(self, *sides: Sequence[str]) -> None:
        """Hosts on different ``sides`` reach each other no more (a host on no side keeps its links)."""
        for i, side in enumerate(sides):
            for other in sides[i + 1:]:
                for a in side:
                    for b in other:
                        self.cut(a, b)

    def lose(self, a: str, b: str, percent: int) -> None:
        """Drop ``percent`` of the packets between ``a`` and ``b``, both ways, at random (nftables' numgen)."""
        if not 0 < percent <= 100:
            raise ValueError("percent: 1-100")
        for src, dst in ((a, b), (b, a)):
            self._rule(f"ip saddr {self.address(src)} ip daddr {self.address(dst)} numgen random mod 100 < {percent} "
                       "drop")

    def slow(self, name: str, port: int, delay_ms: float, *, jitter_ms: float = 0.0,
             from_: Sequence[str] | None = None) -> None:
        """Make the connections to ``port`` on host ``name`` from ``from_`` (every other host when not given) slow:
        each piece of data either way held ``delay_ms`` plus up to ``jitter_ms``, by a relay in ``name``'s
        namespace (trafka.broker.testing.relay; this kernel has no ``tc netem``) that an nftables redirect there
        steers their new connections to; their connections open before are reset, so that they come back slow."""
        host = self.hosts[name]
        if host.namespace is None:
            raise ValueError(f"{CLIENT!r} is this process's host: slow a link to a host of the network")
        sources = [self.address(other) for other in (from_ if from_ is not None else self.hosts) if other != name]
        relay_port = RELAY_PORT_BASE + len(self._relays)
        relay = subprocess.Popen(self.command(name, [
            sys.executable, "-m", "trafka.broker.testing.relay", "--listen", f"0.0.0.0:{relay_port}",
            "--to", f"{host.address}:{port}", "--delay-ms", str(delay_ms), "--jitter-ms", str(jitter_ms)]),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._relays.append((name, relay))
        if relay.stdout is None or relay.stdout.readline().strip() != "relaying":
            raise NetworkError(f"the relay for {name}:{port} did not start")
        addresses = ", ".join(sources)
        script = ""
        if name not in self._slowed:
            script += (f"add table ip {TABLE}\n"
                       f"add chain ip {TABLE} prerouting {{ type nat hook prerouting priority dstnat; }}\n"
                       f"add chain ip {TABLE} input {{ type filter hook input priority 0; }}\n")
            self._slowed.add(name)
        script += (f"add rule ip {TABLE} prerouting ip saddr {{ {addresses} }} tcp dport {port} "
                   f"redirect to :{relay_port}\n"
                   f"add rule ip {TABLE} input ip saddr {{ {addresses} }} tcp dport {port} ct status & dnat == 0 "
                   f"reject with tcp reset\n")
        self._nft(script, namespace=host.namespace)
        self._faults.append(f"{name}:{port} slowed by {delay_ms:g} ms (+{jitter_ms:g}) from {', '.join(sources)}")

    def heal(self) -> None:
        """Every link carries every packet again, as fast as it can."""
        if self._faults:
            self._nft(f"flush chain bridge {TABLE} forward\n")
            for name in self._slowed:
                self._nft(f"delete table ip {TABLE}\n", namespace=self.hosts[name].namespace)
            self._slowed.clear()
            for _, relay in self._relays:
                relay.kill()
                relay.wait()
            self._relays.clear()
            self._faults.clear()

    @contextlib.contextmanager
    def fault(self, seconds: float | None = None) -> Iterator[TestNetwork]:
        """``with net.fault(): net.cut(...)``: healed when the block ends (and after ``seconds``, if given,
        whatever the block is doing)."""
        if seconds is not None:
            timer = threading.Timer(seconds, self.heal)
            timer.daemon = True
            self._timers.append(timer)
            timer.start()
        try:
            yield self
        finally:
            self.heal()

    def rules(self) -> list[str]:
        return list(self._faults)

    def _drop(self, src: str, dst: str) -> None:
        self._rule(f"ip saddr {self.address(src)} ip daddr {self.address(dst)} drop")

    def _rule(self, rule: str) -> None:
        self._nft(f"add rule bridge {TABLE} forward {rule}\n")
        self._faults.append(rule)

    def _nft(self, script: str, namespace: str | None = None) -> None:
        done = subprocess.run(["ip", "netns", "exec", namespace or self.hub, "nft", "-f", "-"], input=script,
                              capture_output=True, text=True, timeout=30)
        if done.returncode:
            raise NetworkError(f"nft: {done.stderr.strip()}")


def pause(pid: int) -> None:
    """Stop a process where it stands (SIGSTOP): its sockets stay open, it answers nothing."""
    os.kill(pid, signal.SIGSTOP)


def resume(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)
