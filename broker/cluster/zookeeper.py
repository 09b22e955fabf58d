"""A broker's part in a cluster coordinated through Apache ZooKeeper, in Kafka's ZooKeeper-mode layout.

``ZooKeeperCluster.run`` connects (``zookeeper.connect``, creating its chroot path when there is one),
reads the cluster id from ``/cluster/id`` (or writes a new one), registers this broker as the ephemeral
``/brokers/ids/<id>`` and takes part in the controller election: the first broker to create the
ephemeral ``/controller`` is the controller, and each new controller bumps ``/controller_epoch`` with a
version-checked write, so that a stale controller can be told by its epoch. It then follows the
cluster: live brokers come and go with their registrations, a controller that goes away is replaced,
and after its ZooKeeper session expired a broker registers again and rejoins the election.

kazoo runs the ZooKeeper session in its own threads. Its calls are made from Trio worker threads, and
its watches only wake the Trio task that follows the cluster, which reads what changed.
"""
from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)

from broker.cluster import BrokerRegistration

log = logging.getLogger(__name__)

BROKER_IDS = "/brokers/ids"
CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DEFAULT_SESSION_TIMEOUT_MS = 18_000  # Kafka's zookeeper.session.timeout.ms


class CoordinationError(RuntimeError):
    """This broker cannot take its part in the cluster (ZooKeeper unreachable, its id taken ...)."""


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` -> (hosts, chroot or "")."""
    hosts, slash, chroot = connect.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    if not hosts:
        raise CoordinationError(f"zookeeper.connect={connect!r}: no ZooKeeper host")
    return hosts, chroot


class ZooKeeperCluster:
    """The cluster as this broker sees it, kept current while ``run`` runs."""

    def __init__(
        self,
        connect: str,
        registration: BrokerRegistration,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
    ) -> None:
        self.connect = connect
        self.registration = registration
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        self.cluster_id = ""
        self.brokers: dict[int, BrokerRegistration] = {}
        self.controller_id: int | None = None
        self.controller_epoch = 0
        self._client: KazooClient | None = None
        self._wakeup = trio.Event()
        self._changed = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None

    @property
    def node_id(self) -> int:
        return self.registration.node_id

    @property
    def is_controller(self) -> bool:
        return self.controller_id == self.node_id

    # -- life --------------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Join the cluster and follow it until cancelled; then leave it (the session is closed, so this
        broker's registration and, if it was the controller, ``/controller`` go at once)."""
        self._token = trio.lowlevel.current_trio_token()
        hosts, chroot = split_connect(self.connect)
        client = self._client = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000)
        try:
            await trio.to_thread.run_sync(self._join, client, chroot)
            task_status.started()
            while True:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
                try:
                    await trio.to_thread.run_sync(self._refresh, client)
                except (ConnectionLoss, SessionExpiredError, ConnectionClosedError) as exc:
                    # Between sessions: the state listener wakes this task again once reconnected.
                    log.debug("broker %d: ZooKeeper unavailable while following the cluster: %r", self.node_id, exc)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_close, client)

    async def wait_for(self, condition: Callable[[ZooKeeperCluster], object]) -> None:
        """Until ``condition(self)`` holds (checked after every change this broker sees)."""
        while not condition(self):
            await self._changed.wait()

    # -- in worker threads -------------------------------------------------------------------------

    def _join(self, client: KazooClient, chroot: str) -> None:
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except Exception as exc:  # kazoo's timeout, or a refused connection
            raise CoordinationError(
                f"cannot reach ZooKeeper at {self.connect} (zookeeper.connection.timeout.ms="
                f"{self.connection_timeout_ms}): {exc}"
            ) from None
        if chroot:
            client.ensure_path(chroot)
            client.chroot = chroot
        client.ensure_path(BROKER_IDS)
        self.cluster_id = _cluster_id(client)
        try:
            self._register(client)
        except NodeExistsError:
            data, _ = client.get(f"{BROKER_IDS}/{self.node_id}")
            other = BrokerRegistration.from_json(self.node_id, data)
            raise CoordinationError(
                f"broker.id {self.node_id} is already registered in ZooKeeper at {self.connect}, by the broker "
                f"at {other.host}:{other.port}"
            ) from None
        client.add_listener(self._on_state)
        self._refresh(client)
        log.info("joined cluster %s through ZooKeeper at %s as broker %d", self.cluster_id, self.connect,
                 self.node_id)

    def _register(self, client: KazooClient) -> None:
        client.create(f"{BROKER_IDS}/{self.node_id}", self.registration.to_json(_now_ms()), ephemeral=True)

    def _refresh(self, client: KazooClient) -> None:
        """Read the live brokers and the controller, standing for election when there is none; register
        again when the registration went with an expired session. Watches are set again each time."""
        path = f"{BROKER_IDS}/{self.node_id}"
        stat = client.exists(path)
        if stat is None:
            try:
                self._register(client)
                log.info("registered broker %d again after its ZooKeeper session expired", self.node_id)
            except NodeExistsError:
                pass
        elif stat.ephemeralOwner != client.client_id[0]:
            log.error("broker %d: another session holds %s", self.node_id, path)
        brokers = {}
        for child in client.get_children(BROKER_IDS, watch=self._watch):
            try:
                data, _ = client.get(f"{BROKER_IDS}/{child}")
                brokers[int(child)] = BrokerRegistration.from_json(int(child), data)
            except (NoNodeError, ValueError):
                continue
        controller_id = self._controller(client)
        self._publish(brokers, controller_id, _read_epoch(client, self._watch))

    def _controller(self, client: KazooClient) -> int | None:
        """The controller's id, after this broker stood for election if the post was free."""
        for _ in range(3):
            try:
                data, _ = client.get(CONTROLLER, watch=self._watch)
                return int(json.loads(data)["brokerid"])
            except NoNodeError:
                pass
            document = {"version": 2, "brokerid": self.node_id, "timestamp": str(_now_ms()),
                        "kraftControllerEpoch": -1}
            try:
                client.create(CONTROLLER, json.dumps(document, separators=(",", ":")).encode(), ephemeral=True)
            except NodeExistsError:
                continue
            epoch = _bump_epoch(client)
            log.info("broker %d is the controller (controller epoch %d)", self.node_id, epoch)
            client.exists(CONTROLLER, watch=self._watch)
            return self.node_id
        return None

    def _watch(self, event: object) -> None:
        self._wake()

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            log.warning("broker %d: ZooKeeper session lost; registering again once reconnected", self.node_id)
        self._wake()

    # -- back on the Trio thread -------------------------------------------------------------------

    def _wake(self) -> None:
        """From kazoo's threads: have the following task read the cluster again."""
        if self._token is not None:
            try:
                trio.from_thread.run_sync(self._wakeup.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass

    def _publish(self, brokers: dict[int, BrokerRegistration], controller_id: int | None, epoch: int) -> None:
        """From the worker thread that read the cluster: the new view, on the Trio thread."""

        def publish() -> None:
            self.brokers, self.controller_id, self.controller_epoch = brokers, controller_id, epoch
            changed, self._changed = self._changed, trio.Event()
            changed.set()

        trio.from_thread.run_sync(publish, trio_token=self._token)


def _cluster_id(client: KazooClient) -> str:
    """The id in ``/cluster/id``, written first by whichever broker gets there first."""
    new = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    try:
        client.create(CLUSTER_ID, json.dumps({"version": "1", "id": new}).encode(), makepath=True)
    except NodeExistsError:
        pass
    data, _ = client.get(CLUSTER_ID)
    return str(json.loads(data)["id"])


def _read_epoch(client: KazooClient, watch: Callable[[object], None]) -> int:
    try:
        data, _ = client.get(CONTROLLER_EPOCH, watch=watch)
    except NoNodeError:
        return 0
    return int(data)


def _bump_epoch(client: KazooClient) -> int:
    """``/controller_epoch`` + 1, by a version-checked write (or its creation at 1)."""
    while True:
        try:
            data, stat = client.get(CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                client.create(CONTROLLER_EPOCH, b"1")
                return 1
            except NodeExistsError:
                continue
        epoch = int(data) + 1
        try:
            client.set(CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
            return epoch
        except BadVersionError:
            continue


def _close(client: KazooClient) -> None:
    try:
        client.stop()
        client.close()
    except Exception:  # already closed, or never connected
        pass


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
