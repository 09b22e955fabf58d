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
  hosts crosses the bridge, so dropping it there cuts the link, for every host alike, this process included.

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
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

PREFIX = "trnet"
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

    def heal(self) -> None:
        """Every link carries every packet again."""
        if self._faults:
            self._nft(f"flush chain bridge {TABLE} forward\n")
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

    def _nft(self, script: str) -> None:
        done = subprocess.run(["ip", "netns", "exec", self.hub, "nft", "-f", "-"], input=script, capture_output=True,
                              text=True, timeout=30)
        if done.returncode:
            raise NetworkError(f"nft: {done.stderr.strip()}")


def pause(pid: int) -> None:
    """Stop a process where it stands (SIGSTOP): its sockets stay open, it answers nothing."""
    os.kill(pid, signal.SIGSTOP)


def resume(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)
