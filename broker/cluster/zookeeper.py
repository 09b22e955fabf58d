"""A broker's part in a cluster coordinated through Apache ZooKeeper, in Kafka's ZooKeeper-mode layout.

``ZooKeeperCluster.run`` connects (``zookeeper.connect``, creating its chroot path when there is one),
reads the cluster id from ``/cluster/id`` (or writes a new one), registers this broker as the ephemeral
``/brokers/ids/<id>`` and takes part in the controller election: the first broker to create the
ephemeral ``/controller`` is the controller, and each new controller bumps ``/controller_epoch`` with a
version-checked write, so that a stale controller can be told by its epoch. It then follows the
cluster: live brokers come and go with their registrations, a controller that goes away is replaced,
and after its ZooKeeper session expired a broker registers again and rejoins the election.

Every broker also follows the topics, as Kafka lays them out:

``/brokers/topics/<t>``                         the replicas of each partition and the topic id (TopicAssignment)
``/brokers/topics/<t>/partitions/<p>/state``    the partition's leader, leader epoch and ISR (PartitionState)
``/config/topics/<t>``                          the topic's configs
``/admin/delete_topics/<t>``                    a request to delete the topic, carried out by the controller
``/config/users/<u>``                           the user's SCRAM credentials (and its quotas)

It keeps ``topics``, ``partition_states``, ``topic_configs`` and ``user_credentials`` current and tells its listeners what
changed (a ``ClusterChange``). A watch is set on each of these znodes, and a watch that fires has only
its znode read again: clusters have thousands of partitions.

The controller keeps the partitions led: when a broker goes it elects new leaders for the partitions it
led and takes it out of the ISRs, when a broker comes back offline partitions it can lead get it as
leader, and a new controller does the same for every partition (the decisions are
``trafka.broker.cluster.controller``'s). Each of its writes is a ZooKeeper transaction that also checks the
version of ``/controller_epoch`` it saw when elected, so that a controller that has been replaced can no
longer write; such a controller resigns (it deletes its ``/controller``, if it is still its own) and
stands for election again. It also deletes the topics marked for deletion.

kazoo runs the ZooKeeper session in its own threads. Its calls are made from Trio worker threads, and
its watches only note what changed and wake the Trio task that follows the cluster, which reads it.
The state this broker sees changes on the Trio thread only, and only by the holder of ``_lock``, which
every read and write of the cluster's state takes: a worker thread started by the holder may read the
state, and a write made by this broker is never undone by an older read.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)

from trafka.broker.cluster import (
    BrokerRegistration,
    ClusterChange,
    CoordinationError,
    PartitionState,
    TopicAssignment,
    _dumps,
    decode_topic_config,
    encode_topic_config,
)
from trafka.broker.cluster.controller import (
    initial_partition_state,
    next_partition_state,
    requested_election,
    settle_replicas,
    start_reassignment,
)
from trafka.broker.security.credentials import (
    ScramCredential,
    decode_zk_user_config,
    desanitize,
    encode_zk_user_config,
    zk_user_change_notification,
    zk_user_path,
)
from trafka.broker.topics import check_reassignment_target
from trafka.wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
_T = TypeVar("_T")

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_USERS = "/config/users"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
DELETE_TOPICS = "/admin/delete_topics"
CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DEFAULT_SESSION_TIMEOUT_MS = 18_000  # Kafka's zookeeper.session.timeout.ms
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
#: The largest transaction written, under ZooKeeper's default request limit (jute.maxbuffer, 1 MiB).
MAX_TRANSACTION_BYTES = 1_000_000
#: How many reads are in flight at once when many znodes are read.
READ_PIPELINE = 512
#: How many times the controller decides again for partitions whose state changed under its write.
CONTROLLER_ATTEMPTS = 5
#: How long following the cluster waits before it reads everything again after an unexpected failure.
RETRY_DELAY_S = 1.0

_CONNECTION_ERRORS = (ConnectionLoss, SessionExpiredError, ConnectionClosedError, OperationTimeoutError)
#: Not a znode: the session's state changed (connected again), so the brokers are read again.
_SESSION = "session"


class TopicExistsError(CoordinationError):
    """The topic exists already (``/brokers/topics/<t>`` is there, perhaps marked for deletion)."""


class UnknownTopicError(CoordinationError):
    """The cluster has no such topic."""


class ConcurrentChangeError(CoordinationError):
    """The topic changed since this broker read it; the change was not made."""


class _Fenced(Exception):
    """``/controller_epoch`` moved since this broker became the controller: its write was refused."""


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def deletion_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def classify(path: str) -> tuple[str, str | None, int | None]:
    """What a watched znode is: ("brokers" | "topics" | "topic" | "state" | "config" | "deletions" |
    "other", topic, partition)."""
    if path in (BROKER_IDS, CONTROLLER, CONTROLLER_EPOCH, _SESSION) or path.startswith(BROKER_IDS + "/"):
        return "brokers", None, None
    if path == BROKER_TOPICS:
        return "topics", None, None
    if path == DELETE_TOPICS:
        return "deletions", None, None
    if path.startswith(CONFIG_TOPICS + "/") and "/" not in path[len(CONFIG_TOPICS) + 1:]:
        return "config", path[len(CONFIG_TOPICS) + 1:], None
    if path == CONFIG_USERS or path.startswith(CONFIG_USERS + "/"):
        return "users", None, None
    if path.startswith(BROKER_TOPICS + "/"):
        parts = path[len(BROKER_TOPICS) + 1:].split("/")
        if len(parts) == 1:
            return "topic", parts[0], None
        if len(parts) == 4 and parts[1] == "partitions" and parts[3] == "state" and parts[2].isdigit():
            return "state", parts[0], int(parts[2])
    return "other", None, None


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` -> (hosts, chroot or "")."""
    hosts, slash, chroot = connect.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    if not hosts:
        raise CoordinationError(f"zookeeper.connect={connect!r}: no ZooKeeper host")
    return hosts, chroot


@dataclass
class _Reading:
    """What a worker thread read (or wrote) of the cluster, to be applied on the Trio thread."""

    full: bool = False
    brokers: dict[int, BrokerRegistration] | None = None
    controller_id: int | None = None
    controller_epoch: int = 0
    #: (epoch, version of /controller_epoch) when this broker was elected controller by this reading.
    elected: tuple[int, int] | None = None
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    topics_gone: set[str] = field(default_factory=set)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    states_gone: set[tuple[str, int]] = field(default_factory=set)
    #: State znodes to read at the end of the reading, all at once.
    state_keys: list[tuple[str, int]] = field(default_factory=list)
    #: Every user's SCRAM credentials (``/config/users``), when they were read.
    users: dict[str, dict[str, ScramCredential]] | None = None


class ZooKeeperCluster:
    """The cluster as this broker sees it, kept current while ``run`` runs: ``brokers``, ``controller_id``,
    ``controller_epoch``, ``topics``, ``partition_states`` and ``topic_configs``."""

    def __init__(
        self,
        connect: str,
        registration: BrokerRegistration,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        unclean_leader_election_enable: bool = False,
        delete_topic_enable: bool = True,
        inter_broker_listener: str = "PLAINTEXT",
    ) -> None:
        self.connect = connect
        self.registration = registration
        #: The listener every broker of the cluster reaches the others on.
        self.inter_broker_listener = inter_broker_listener
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self.delete_topic_enable = delete_topic_enable
        self.cluster_id = ""
        self.brokers: dict[int, BrokerRegistration] = {}
        self.controller_id: int | None = None
        self.controller_epoch = 0
        self.topics: dict[str, TopicAssignment] = {}
        self.partition_states: dict[tuple[str, int], PartitionState] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        #: SCRAM credentials, user -> mechanism -> credential, as ``/config/users`` holds them.
        self.user_credentials: dict[str, dict[str, ScramCredential]] = {}
        self._listeners: list[Callable[[ClusterChange], object]] = []
        self._client: KazooClient | None = None
        self._wakeup = trio.Event()
        self._changed = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._lock = trio.Lock()
        self._dirty: set[str] = set()
        self._full = False
        self._rescan = False
        self._leaving = False
        #: While this broker acts as the controller: its epoch, and the version of /controller_epoch
        #: its writes are conditional on.
        self._epoch_as_controller = 0
        self._epoch_version: int | None = None

    @property
    def node_id(self) -> int:
        return self.registration.node_id

    @property
    def is_controller(self) -> bool:
        return self.controller_id == self.node_id

    @property
    def acting_as_controller(self) -> bool:
        """This broker is the controller and has not been told of a newer one by a refused write."""
        return self.is_controller and self._epoch_version is not None

    def add_listener(self, callback: Callable[[ClusterChange], object]) -> None:
        """Have ``callback(change)`` called, on the Trio thread, after each change this broker sees."""
        self._listeners.append(callback)

    # -- life --------------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Join the cluster and follow it until cancelled; started once the whole cluster has been read
        (the first change published reports every topic as created). Then leave it: the session is
        closed, so this broker's registration and, if it was the controller, ``/controller`` go at once."""
        self._token = trio.lowlevel.current_trio_token()
        hosts, chroot = split_connect(self.connect)
        client = self._client = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000)
        try:
            await trio.to_thread.run_sync(self._join, client, chroot, abandon_on_cancel=True)
            self._full = True
            while not await self._follow(client):
                await self._next_wakeup()
            task_status.started()
            while True:
                await self._next_wakeup()
                await self._follow(client)
        finally:
            # A call still waiting in a worker thread for a ZooKeeper out of reach was abandoned by the
            # cancellation (kazoo's calls wait for a reconnection): closing the client fails it.
            self._leaving = True
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_close, client)

    async def wait_for(self, condition: Callable[[ZooKeeperCluster], object]) -> None:
        """Until ``condition(self)`` holds (checked after every change this broker sees)."""
        while not condition(self):
            await self._changed.wait()

    async def _next_wakeup(self) -> None:
        await self._wakeup.wait()
        self._wakeup = trio.Event()

    async def _follow(self, client: KazooClient) -> bool:
        """Read what changed, apply it and, as the controller, act on it; False when that failed: when
        ZooKeeper could not be reached, what was to be read is read at the next wake-up (the session's
        listener gives one); after another failure, everything is read again a moment later."""
        try:
            async with self._lock:
                return await self._follow_locked(client)
        except Exception:
            log.exception("broker %d: following the cluster failed; reading it all again in %.0f s", self.node_id,
                          RETRY_DELAY_S)
            self._full = self._rescan = True
            await trio.sleep(RETRY_DELAY_S)
            self._wakeup.set()
            return False

    async def _follow_locked(self, client: KazooClient) -> bool:
        paths, full, rescan = self._dirty, self._full, self._rescan
        self._dirty, self._full, self._rescan = set(), False, False
        try:
            reading = await trio.to_thread.run_sync(self._read, client, paths, full, abandon_on_cancel=True)
        except _CONNECTION_ERRORS as exc:
            # Between sessions: the state listener wakes this task again once reconnected.
            log.debug("broker %d: ZooKeeper unavailable while following the cluster: %r", self.node_id, exc)
            self._dirty |= paths
            self._full |= full
            self._rescan |= rescan
            return False
        live = frozenset(self.brokers)
        elected = self._take_office(reading)
        self._apply(reading)
        if self.acting_as_controller:
            rescan = rescan or elected or full or live != frozenset(self.brokers)
            await self._control(client, reading, rescan, deletions=rescan or DELETE_TOPICS in paths)
        return True

    # -- changes -----------------------------------------------------------------------------------

    async def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """Create a topic in one ZooKeeper transaction: its configs, its assignment and every partition's
        first state (the first live replica leads, the live replicas are the ISR, leader epoch 0, the
        current controller epoch). Kafka's admin writes the assignment and leaves the states to the
        controller; writing them together makes the creation atomic: the topic is either there whole,
        with leaders, or not at all. Raises TopicExistsError if ``/brokers/topics/<t>`` exists.

        A topic too large for one transaction (some thousands of partitions, MAX_TRANSACTION_BYTES) is
        written in several, the first creating it with its first partitions, each next one adding
        partitions with their states as ``add_partitions`` does: every partition the cluster sees has its
        state, but a creation cut short leaves a topic with fewer partitions.

        When it returns, this broker's ``topics``, ``partition_states`` and ``topic_configs`` have the
        topic (and its listeners have been told)."""
        client = self._joined()
        async with self._lock:
            reading = await _in_worker(f"creating topic {assignment.name}", self._create_topic, client, assignment,
                                       dict(configs), frozenset(self.brokers), self.controller_epoch)
            self._apply(reading)

    async def add_partitions(self, name: str, new_replicas: Sequence[Sequence[int]]) -> None:
        """Add partitions to a topic, ``new_replicas[i]`` the replicas of partition ``len(replicas) + i``: one
        transaction (several for thousands, as in ``create_topic``) writing the assignment, conditional on
        the version this broker read, and the new partitions' states. Raises ConcurrentChangeError when the topic changed since (this broker's view
        is brought up to date by its watch), UnknownTopicError when there is no such topic. When it
        returns, this broker's view has the new partitions."""
        client = self._joined()
        if not new_replicas:
            return
        async with self._lock:
            assignment = self.topics.get(name)
            if assignment is None:
                raise UnknownTopicError(f"no topic {name}")
            grown = dataclasses.replace(
                assignment, replicas=assignment.replicas + tuple(tuple(r) for r in new_replicas))
            reading = await _in_worker(f"adding partitions to topic {name}", self._add_partitions, client,
                                       assignment, grown, frozenset(self.brokers), self.controller_epoch)
            self._apply(reading)

    async def delete_topic(self, name: str) -> None:
        """Mark a topic for deletion (``/admin/delete_topics/<t>``), as Kafka's admin does; the controller
        then deletes its znodes and every broker sees it leave ``topics``: wait for that with
        ``wait_for(lambda c: name not in c.topics)``. Marking a topic already marked does nothing;
        UnknownTopicError when there is no such topic."""
        client = self._joined()
        async with self._lock:
            await _in_worker(f"marking topic {name} for deletion", self._mark_for_deletion, client, name)

    async def update_partition_state(self, topic: str, partition: int,
                                     state: PartitionState) -> PartitionState | None:
        """Write a partition's state on condition that its znode is still at ``state.version``, as a
        leader changing its ISR does (same leader epoch, the controller epoch as read). Returns the state
        as written, with its new version, or None when the znode moved on (or went): this broker's
        view then gets the newer state through its watch."""
        client = self._joined()
        async with self._lock:
            written = await _in_worker(f"writing the state of {topic}-{partition}", self._write_state, client,
                                       topic, partition, state)
            if written is not None:
                self._apply(_Reading(states={(topic, partition): written}))
            return written

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's config overrides (``/config/topics/<t>``), and leave the change notification
        Kafka's brokers and tools look for (``/config/changes/config_change_<n>``). Every broker of this
        cluster watches the topic's config, so its view follows at once; this one's has it on return.
        UnknownTopicError when there is no such topic."""
        client = self._joined()
        async with self._lock:
            if name not in self.topics:
                raise UnknownTopicError(f"no topic {name}")
            await _in_worker(f"changing the configs of topic {name}", _write_topic_configs, client, name,
                             dict(configs))
            self.topic_configs[name] = dict(configs)
            self._publish(ClusterChange(topics_changed=frozenset({name})))

    async def elect_leaders(self, keys: Sequence[tuple[str, int]] | None, *,
                            unclean: bool) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """As the controller, the elections ElectLeaders asks for (all partitions for None): per
        partition the outcome (broker.cluster.controller.requested_election), the new states written
        with the controller's fenced, version-checked writes. NOT_CONTROLLER on another broker."""
        client = self._joined()
        async with self._lock:
            if not self.acting_as_controller:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.node_id} is not the controller")
            if keys is None:
                keys = [(name, p) for name, a in self.topics.items() for p in range(len(a.replicas))]
            outcomes: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
            decisions = []
            for key in keys:
                assignment, state = self.topics.get(key[0]), self.partition_states.get(key)
                if assignment is None or state is None or key[1] >= len(assignment.replicas):
                    outcomes[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"The partition {key[0]}-{key[1]} does not exist.")
                    continue
                new, code, message = requested_election(state, assignment.replicas[key[1]], self.brokers.keys(),
                                                        self._epoch_as_controller, unclean=unclean)
                outcomes[key] = (code, message)
                if new is not None:
                    decisions.append((key, new, False))
            written = _Reading()
            try:
                conflicts = await _in_worker("electing leaders", self._write_states, client, decisions, written)
            except _Fenced:
                self._epoch_version = None
                self._mark(CONTROLLER)
                raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.node_id} is no longer the controller")
            for key in conflicts:
                outcomes[key] = (ErrorCode.UNKNOWN_SERVER_ERROR,
                                 "The partition's state changed during the election: ask again.")
            self._apply(written)
            return outcomes

    async def reassign_partitions(self, changes: Mapping[tuple[str, int], Sequence[int] | None]
                                  ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """As the controller, AlterPartitionReassignments: each partition's replicas set on their way to
        the target (None: back to the original replicas), written to the topics' znodes (their
        ``adding_replicas`` and ``removing_replicas``, as Kafka keeps them). The move completes as the
        controller sees the new replicas join the ISR (:meth:`_settle`). NOT_CONTROLLER on another
        broker."""
        client = self._joined()
        async with self._lock:
            if not self.acting_as_controller:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.node_id} is not the controller")
            outcomes: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
            moved: dict[str, TopicAssignment] = {}
            for key, target in changes.items():
                name, partition = key
                assignment = moved.get(name) or self.topics.get(name)
                if assignment is None or not 0 <= partition < len(assignment.replicas):
                    outcomes[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"The partition {name}-{partition} does not exist.")
                    continue
                if target is None:
                    if partition not in assignment.adding and partition not in assignment.removing:
                        outcomes[key] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                         f"Unable to cancel reassignment of {name}-{partition}: it is not being "
                                         "reassigned.")
                        continue
                    target = assignment.original(partition)
                else:
                    code, message = check_reassignment_target(target, self.brokers)
                    if code != ErrorCode.NONE:
                        outcomes[key] = (code, message)
                        continue
                moved[name] = start_reassignment(assignment, partition, target)
                outcomes[key] = (ErrorCode.NONE, None)
            try:
                reading, refused = await _in_worker(
                    "reassigning partitions", self._write_assignments, client, list(moved.values()),
                    [key for key, (code, _) in outcomes.items() if code == ErrorCode.NONE])
            except _Fenced:
                self._epoch_version = None
                self._mark(CONTROLLER)
                raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.node_id} is no longer the controller")
            for key in outcomes:
                if key[0] in refused and outcomes[key][0] == ErrorCode.NONE:
                    outcomes[key] = (ErrorCode.UNKNOWN_SERVER_ERROR, "The topic changed meanwhile: ask again.")
            self._apply(reading)
            for name in moved:
                if name not in refused:
                    log.info("topic %s: reassigning %s", name, {
                        p: (list(self.topics[name].adding.get(p, ())), list(self.topics[name].removing.get(p, ())))
                        for p in sorted(set(self.topics[name].adding) | set(self.topics[name].removing))})
            return outcomes

    def _write_assignments(self, client: KazooClient, assignments: Sequence[TopicAssignment],
                           keys: Sequence[tuple[str, int]]) -> tuple[_Reading, set[str]]:
        """Write each topic's new assignment on condition of the version it was read at and of the
        controller epoch, and settle at once the partitions of ``keys`` with nothing to wait for (a
        replica removed, a move cancelled); the topics read back, and the names of those that changed
        meanwhile."""
        refused: set[str] = set()
        for assignment in assignments:
            transaction = self._controller_transaction(client)
            transaction.set_data(topic_path(assignment.name), assignment.to_json(), version=assignment.version)
            failure = _failure(_commit(transaction, f"reassigning partitions of {assignment.name}"))
            if failure is not None and failure[0] == 0:
                raise _Fenced
            if failure is not None:
                refused.add(assignment.name)
        reading = _Reading()
        for assignment in assignments:
            self._read_topic(client, assignment.name, reading, whole=False)
        self._read_states(client, reading)
        self._settle(client, [key for key in keys if key[0] not in refused], reading)
        return reading, refused

    def _settle(self, client: KazooClient, keys: Sequence[tuple[str, int]], written: _Reading) -> None:
        """As the controller: partitions whose move is complete (every target replica in the ISR) get
        their final assignment and state, in one transaction each."""
        for key in keys:
            name, partition = key
            assignment = written.topics.get(name) or self.topics.get(name)
            state = written.states.get(key) or self.partition_states.get(key)
            if assignment is None or state is None or partition >= len(assignment.replicas):
                continue
            settled = settle_replicas(assignment, partition, state, self.brokers.keys(), self._epoch_as_controller)
            if settled is None:
                continue
            new_assignment, new_state = settled
            transaction = self._controller_transaction(client)
            transaction.set_data(topic_path(name), new_assignment.to_json(), version=assignment.version)
            if new_state is not None:
                transaction.set_data(state_path(*key), new_state.to_json(), version=state.version)
            results = _commit(transaction, f"completing the reassignment of {name}-{partition}")
            failure = _failure(results)
            if failure is not None and failure[0] == 0:
                raise _Fenced
            if failure is not None:
                continue  # changed meanwhile: the watch brings it back here
            written.topics[name] = dataclasses.replace(new_assignment, version=results[1].version)
            if new_state is not None:
                written.states[key] = dataclasses.replace(new_state, version=results[2].version)
            log.info("partition %s-%d: replicas now %s (leader %d, ISR %s)", name, partition,
                     list(new_assignment.replicas[partition]), (new_state or state).leader,
                     list((new_state or state).isr))

    async def claim_producer_id_block(self, size: int) -> tuple[int, int]:
        """A block of ``size`` producer ids no other broker of the cluster has: the first id and the id
        after the last, claimed with a version-checked write of ``/latest_producer_id_block``, as Kafka's
        brokers claim theirs."""
        client = self._joined()
        return await _in_worker("claiming a block of producer ids", _claim_producer_id_block, client,
                                self.node_id, size)

    @property
    def client(self) -> KazooClient:
        """The ZooKeeper session, for the parts of the broker that keep their own znodes (quotas); kazoo's calls
        block: make them from worker threads."""
        return self._joined()

    def _joined(self) -> KazooClient:
        if self._client is None or not self._client.connected:
            raise CoordinationError(f"broker {self.node_id} is not connected to ZooKeeper at {self.connect}")
        return self._client

    # -- in worker threads: joining and reading ----------------------------------------------------

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
        for path in (BROKER_IDS, BROKER_TOPICS, CONFIG_TOPICS, DELETE_TOPICS):
            client.ensure_path(path)
        self.cluster_id = _cluster_id(client)
        try:
            self._register(client)
        except NodeExistsError:
            data, _ = client.get(f"{BROKER_IDS}/{self.node_id}")
            other = BrokerRegistration.from_json(self.node_id, data, self.inter_broker_listener)
            raise CoordinationError(
                f"broker.id {self.node_id} is already registered in ZooKeeper at {self.connect}, by the broker "
                f"at {other.host}:{other.port}"
            ) from None
        client.add_listener(self._on_state)
        log.info("joined cluster %s through ZooKeeper at %s as broker %d", self.cluster_id, self.connect,
                 self.node_id)

    def _register(self, client: KazooClient) -> None:
        client.create(f"{BROKER_IDS}/{self.node_id}", self.registration.to_json(_now_ms()), ephemeral=True)

    def _read(self, client: KazooClient, paths: set[str], full: bool) -> _Reading:
        """Read what the watches said changed (everything when ``full``), setting the watches again."""
        reading = _Reading(full=full)
        kinds: dict[str, list[tuple[str | None, int | None]]] = {}
        for path in paths:
            kind, topic, partition = classify(path)
            kinds.setdefault(kind, []).append((topic, partition))
        if full or "brokers" in kinds:
            self._read_brokers(client, reading)
        if full or "topics" in kinds:
            self._read_topic_names(client, reading, whole=full)
        for topic, _ in kinds.get("topic", []):
            if topic not in reading.topics and topic not in reading.topics_gone:
                self._read_topic(client, topic, reading, whole=False)
        for topic, _ in kinds.get("config", []):
            if topic not in reading.configs and topic in self.topics and topic not in reading.topics_gone:
                reading.configs[topic] = self._read_config(client, topic)
        if full or "users" in kinds:
            reading.users = self._read_users(client)
        for topic, partition in kinds.get("state", []):
            if topic not in reading.topics_gone and (topic in self.topics or topic in reading.topics):
                reading.state_keys.append((topic, partition))  # type: ignore[arg-type]
        self._read_states(client, reading)
        return reading

    def _read_brokers(self, client: KazooClient, reading: _Reading) -> None:
        """Read the live brokers and the controller, standing for election when there is none; register
        again when the registration went with an expired session."""
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
                data, stat = client.get(f"{BROKER_IDS}/{child}")
                brokers[int(child)] = BrokerRegistration.from_json(int(child), data, self.inter_broker_listener,
                                                                   stat.czxid)
            except (NoNodeError, ValueError):
                continue
        reading.brokers = brokers
        reading.controller_id, reading.elected = self._controller(client)
        reading.controller_epoch = _read_epoch(client, self._watch)

    def _read_users(self, client: KazooClient) -> dict[str, dict[str, ScramCredential]]:
        """Every user's SCRAM credentials, watching ``/config/users`` and each user's node."""
        users: dict[str, dict[str, ScramCredential]] = {}
        try:
            children = client.get_children(CONFIG_USERS, watch=self._watch)
        except NoNodeError:
            client.exists(CONFIG_USERS, watch=self._watch)
            return users
        for child in children:
            try:
                data, _ = client.get(f"{CONFIG_USERS}/{child}", watch=self._watch)
                credentials, _other = decode_zk_user_config(data)
            except NoNodeError:
                continue
            except ValueError as exc:
                log.error("cannot read the credentials of user %s at %s/%s: %s", desanitize(child), CONFIG_USERS,
                          child, exc)
                continue
            if credentials:
                users[desanitize(child)] = credentials
        return users

    async def set_user_credentials(self, changes: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        """Replace users' SCRAM credentials (an empty mapping removes them) where Kafka keeps them,
        ``/config/users/<user>`` (other settings of the user, quotas, are kept), each with the change
        notification Kafka's brokers look for. Every broker of the cluster watches them: a user created on
        one broker authenticates on the others at once; this broker's view has it on return."""
        client = self._joined()
        async with self._lock:
            await _in_worker("changing SCRAM credentials", _write_user_credentials, client, dict(changes))
            for user, credentials in changes.items():
                if credentials:
                    self.user_credentials[user] = dict(credentials)
                else:
                    self.user_credentials.pop(user, None)

    def _controller(self, client: KazooClient) -> tuple[int | None, tuple[int, int] | None]:
        """The controller's id, after this broker stood for election if the post was free, with this
        broker's (epoch, version of /controller_epoch) if it was elected now. A ``/controller`` naming
        this broker while it does not act as the controller (its write was refused) is given up first."""
        for _ in range(3):
            try:
                data, stat = client.get(CONTROLLER, watch=self._watch)
            except NoNodeError:
                pass
            else:
                controller_id = int(json.loads(data)["brokerid"])
                if controller_id != self.node_id or self._epoch_version is not None:
                    return controller_id, None
                if not self._resign(client, stat):
                    return controller_id, None
                continue
            document = {"version": 2, "brokerid": self.node_id, "timestamp": str(_now_ms()),
                        "kraftControllerEpoch": -1}
            try:
                client.create(CONTROLLER, json.dumps(document, separators=(",", ":")).encode(), ephemeral=True)
            except NodeExistsError:
                continue
            epoch, version = _bump_epoch(client)
            log.info("broker %d is the controller (controller epoch %d)", self.node_id, epoch)
            client.exists(CONTROLLER, watch=self._watch)
            return self.node_id, (epoch, version)
        return None, None

    def _resign(self, client: KazooClient, stat) -> bool:
        """Delete ``/controller`` if this broker's session holds it, so that a controller is elected
        anew; False when another session holds it (it goes with that session)."""
        if stat.ephemeralOwner != client.client_id[0]:
            return False
        try:
            client.delete(CONTROLLER, version=stat.version)
            log.warning("broker %d resigns as the controller: a newer controller epoch was written", self.node_id)
        except (NoNodeError, BadVersionError):
            pass
        return True

    def _read_topic_names(self, client: KazooClient, reading: _Reading, *, whole: bool) -> None:
        """The topics' names: new topics (every topic when ``whole``) are read, those gone noted."""
        names = set(client.get_children(BROKER_TOPICS, watch=self._watch))
        reading.topics_gone |= self.topics.keys() - names
        for name in sorted(names):
            if whole or name not in self.topics:
                self._read_topic(client, name, reading, whole=True)

    def _read_topic(self, client: KazooClient, name: str, reading: _Reading, *, whole: bool) -> None:
        """A topic's assignment, and its configs and partition states when ``whole`` or new to this broker
        (else only the states of added partitions)."""
        try:
            data, stat = client.get(topic_path(name), watch=self._watch)
        except NoNodeError:
            reading.topics_gone.add(name)
            return
        try:
            assignment = TopicAssignment.from_json(name, data, stat.version)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("topic %s: cannot read %s: %r", name, topic_path(name), exc)
            return
        reading.topics[name] = assignment
        old = self.topics.get(name)
        first = 0
        if whole or old is None or old.topic_id != assignment.topic_id:
            reading.configs[name] = self._read_config(client, name)
        else:
            first = len(old.replicas)
        reading.state_keys.extend((name, p) for p in range(first, len(assignment.replicas)))

    def _read_config(self, client: KazooClient, name: str) -> dict[str, str]:
        for _ in range(3):
            try:
                data, _ = client.get(config_path(name), watch=self._watch)
            except NoNodeError:
                if not _topic_stays(client, name) or client.exists(config_path(name), watch=self._watch) is None:
                    return {}
                continue
            try:
                return decode_topic_config(data)
            except (ValueError, AttributeError) as exc:
                log.error("topic %s: cannot read %s: %r", name, config_path(name), exc)
                return {}
        return {}

    def _read_states(self, client: KazooClient, reading: _Reading) -> None:
        """Read the states of ``reading.state_keys``, many at once; a state that is not there yet (of a
        topic that stays) is watched for its creation."""
        keys, reading.state_keys = list(dict.fromkeys(reading.state_keys)), []
        missing: dict[str, list[tuple[str, int]]] = {}
        for start in range(0, len(keys), READ_PIPELINE):
            batch = keys[start:start + READ_PIPELINE]
            pending = [(key, client.get_async(state_path(*key), watch=self._watch)) for key in batch]
            for key, result in pending:
                try:
                    data, stat = result.get()
                except NoNodeError:
                    missing.setdefault(key[0], []).append(key)
                    continue
                self._parse_state(key, data, stat.version, reading)
        for topic, absent in missing.items():
            if not _topic_stays(client, topic):
                reading.states_gone.update(absent)  # (no watch: it would outlive the znode that never comes)
                continue
            for key in absent:
                self._read_missing_state(client, key, reading)

    def _read_missing_state(self, client: KazooClient, key: tuple[str, int], reading: _Reading) -> None:
        for _ in range(3):
            if client.exists(state_path(*key), watch=self._watch) is None:
                reading.states_gone.add(key)
                return
            try:
                data, stat = client.get(state_path(*key), watch=self._watch)
            except NoNodeError:
                continue
            self._parse_state(key, data, stat.version, reading)
            return

    @staticmethod
    def _parse_state(key: tuple[str, int], data: bytes, version: int, reading: _Reading) -> None:
        try:
            reading.states[key] = PartitionState.from_json(data, version)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("cannot read %s: %r", state_path(*key), exc)

    # -- in worker threads: writing ----------------------------------------------------------------

    def _create_topic(self, client: KazooClient, assignment: TopicAssignment, configs: dict[str, str],
                      live: frozenset[int], controller_epoch: int) -> _Reading:
        name = assignment.name
        states = [initial_partition_state(replicas, live, controller_epoch) for replicas in assignment.replicas]
        batches = _batches(assignment, states, len(encode_topic_config(configs)), client.chroot)
        for _ in range(3):
            transaction = client.transaction()
            stat = client.exists(config_path(name))
            if stat is None:
                transaction.create(config_path(name), encode_topic_config(configs))
            else:  # left by a Kafka that created the configs first
                transaction.set_data(config_path(name), encode_topic_config(configs), version=stat.version)
            transaction.create(topic_path(name), _first(assignment, batches[0]).to_json())
            transaction.create(partitions_path(name), b"")
            _create_partitions(transaction, name, states, range(batches[0]))
            failure = _failure(_commit(transaction, f"creating topic {name}"))
            if failure is None:
                break
            index, error = failure
            if index == 1 and isinstance(error, NodeExistsError):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            if index != 0:
                raise CoordinationError(f"creating topic {name} in ZooKeeper failed: {error!r}")
        else:
            raise ConcurrentChangeError(f"the configs of topic {name} kept changing while it was created")
        self._grow(client, assignment, states, batches, 0, f"creating topic {name}")
        log.info("created topic %s (%d partitions) in ZooKeeper", name, len(assignment.replicas))
        return self._read_back(client, name, whole=True)

    def _add_partitions(self, client: KazooClient, assignment: TopicAssignment, grown: TopicAssignment,
                        live: frozenset[int], controller_epoch: int) -> _Reading:
        name = assignment.name
        states = [initial_partition_state(replicas, live, controller_epoch) for replicas in grown.replicas]
        batches = [len(assignment.replicas), *_batches(grown, states, 0, client.chroot, first=len(assignment.replicas))]
        try:
            self._grow(client, grown, states, batches, assignment.version, f"adding partitions to topic {name}")
        except ConcurrentChangeError:
            if client.exists(topic_path(name)) is None:
                raise UnknownTopicError(f"no topic {name}") from None
            raise
        log.info("topic %s: partitions %d to %d added in ZooKeeper", name, len(assignment.replicas),
                 len(grown.replicas) - 1)
        return self._read_back(client, name, whole=False)

    def _grow(self, client: KazooClient, assignment: TopicAssignment, states: Sequence[PartitionState],
              batches: Sequence[int], version: int, what: str) -> None:
        """Write the partitions of ``assignment`` from ``batches[0]`` on, each transaction taking the
        assignment up to the next batch end, on condition of the topic's version, with the batch's states."""
        name = assignment.name
        for done, end in zip(batches, batches[1:]):
            transaction = client.transaction()
            transaction.set_data(topic_path(name), _first(assignment, end).to_json(), version=version)
            _create_partitions(transaction, name, states, range(done, end))
            failure = _failure(_commit(transaction, what))
            if failure is not None and failure[0] == 0:
                raise ConcurrentChangeError(f"{what}: the topic changed meanwhile")
            if failure is not None:
                raise CoordinationError(f"{what} in ZooKeeper failed: {failure[1]!r}")
            version += 1

    def _read_back(self, client: KazooClient, name: str, *, whole: bool) -> _Reading:
        """Read a topic this broker just wrote, watches and all, as the follower would have."""
        reading = _Reading()
        self._read_topic(client, name, reading, whole=whole)
        self._read_states(client, reading)
        return reading

    def _mark_for_deletion(self, client: KazooClient, name: str) -> None:
        transaction = client.transaction()
        transaction.check(topic_path(name), -1)
        transaction.create(deletion_path(name), b"")
        failure = _failure(transaction.commit())
        if failure is None:
            log.info("topic %s marked for deletion", name)
        elif failure[0] == 0:
            raise UnknownTopicError(f"no topic {name}")
        elif not isinstance(failure[1], NodeExistsError):
            raise CoordinationError(f"marking topic {name} for deletion failed: {failure[1]!r}")

    def _write_state(self, client: KazooClient, topic: str, partition: int,
                     state: PartitionState) -> PartitionState | None:
        try:
            stat = client.set(state_path(topic, partition), state.to_json(), version=state.version)
        except (BadVersionError, NoNodeError):
            return None
        return dataclasses.replace(state, version=stat.version)

    # -- the controller ----------------------------------------------------------------------------

    def _take_office(self, reading: _Reading) -> bool:
        """Note this broker's election as the controller (True), or that another broker is."""
        if reading.brokers is None:
            return False
        if reading.elected is not None:
            self._epoch_as_controller, self._epoch_version = reading.elected
            return True
        if reading.controller_id != self.node_id and self._epoch_version is not None:
            log.info("broker %d is no longer the controller", self.node_id)
            self._epoch_version = None
        return False

    async def _control(self, client: KazooClient, reading: _Reading, rescan: bool, *, deletions: bool) -> None:
        """As the controller: decide and write the states of the partitions that need it (all of them
        on ``rescan``), and carry out the topic deletions asked for. The partitions of a topic whose
        configs changed are decided again, as Kafka's controller does when a topic's
        ``unclean.leader.election.enable`` is set: an offline partition may now be led."""
        if rescan:
            keys: list[tuple[str, int]] | None = None
        else:
            keys = sorted(set(reading.states) | {
                (name, p) for name, assignment in reading.topics.items() for p in range(len(assignment.replicas))
                if (name, p) not in self.partition_states} | {
                (name, p) for name in reading.configs if name in self.topics
                for p in range(len(self.topics[name].replicas))})
            if not keys and not deletions:
                return
        try:
            written = await trio.to_thread.run_sync(self._control_round, client, keys, deletions,
                                                    abandon_on_cancel=True)
        except _Fenced:
            log.error("broker %d: its controller epoch %d is stale (/controller_epoch moved): its write was "
                      "refused; it stops acting as the controller", self.node_id, self._epoch_as_controller)
            self._epoch_version = None
            self._mark(CONTROLLER)
            return
        except _CONNECTION_ERRORS as exc:
            log.debug("broker %d: ZooKeeper unavailable while acting as the controller: %r", self.node_id, exc)
            self._rescan = True
            return
        self._apply(written)

    def _control_round(self, client: KazooClient, keys: list[tuple[str, int]] | None,
                       deletions: bool) -> _Reading:
        """Carry out the deletions, then write the partition states the live brokers call for, deciding
        again for partitions whose state changed meanwhile. Raises _Fenced if a write was refused for
        the controller epoch."""
        written = _Reading()
        deleting: set[str] = set()
        if deletions:
            client.ensure_path(DELETE_TOPICS)
            marked = client.get_children(DELETE_TOPICS, watch=self._watch)
            for name in sorted(marked):
                self._delete_topic(client, name)
            if self.delete_topic_enable:
                deleting = set(marked)
        if keys is None:
            keys = [(name, p) for name, assignment in self.topics.items() for p in range(len(assignment.replicas))]
        todo = [key for key in keys if key[0] not in deleting]
        moving = [key for key in keys if key[0] not in deleting]
        for _ in range(CONTROLLER_ATTEMPTS):
            decisions = [decision for key in todo if (decision := self._decide(key, written)) is not None]
            conflicts = self._write_states(client, decisions, written)
            if not conflicts:
                break
            written.state_keys = conflicts
            self._read_states(client, written)
            todo = conflicts
        self._settle(client, moving, written)
        return written

    def _decide(self, key: tuple[str, int], written: _Reading) -> tuple[tuple[str, int], PartitionState, bool] | None:
        """(key, the state to write, whether its znode is to be created), or None to leave it."""
        topic, partition = key
        assignment = self.topics.get(topic)
        if assignment is None or partition >= len(assignment.replicas):
            return None
        replicas = assignment.replicas[partition]
        live = self.brokers.keys()
        state = written.states.get(key) if key in written.states else (
            None if key in written.states_gone else self.partition_states.get(key))
        if state is None:  # a partition created by an admin that left its state to the controller
            new = initial_partition_state(replicas, live, self._epoch_as_controller)
            return (key, new, True) if new.isr else None
        new = next_partition_state(state, replicas, live, self._epoch_as_controller, unclean=self._unclean(topic))
        return None if new is None else (key, new, False)

    def _unclean(self, topic: str) -> bool:
        value = self.topic_configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
        if value is None:
            return self.unclean_leader_election_enable
        return value.strip().lower() == "true"

    def _write_states(self, client: KazooClient, decisions: Sequence[tuple[tuple[str, int], PartitionState, bool]],
                      written: _Reading) -> list[tuple[str, int]]:
        """Write the decided states, each in a transaction checking the controller epoch, many at once;
        the partitions whose state changed under the write (to decide again)."""
        conflicts: list[tuple[str, int]] = []
        fenced = False
        for start in range(0, len(decisions), READ_PIPELINE):
            pending = []
            for key, state, create in decisions[start:start + READ_PIPELINE]:
                transaction = self._controller_transaction(client)
                if create:
                    self._add_state_creation(client, transaction, key, state)
                else:
                    transaction.set_data(state_path(*key), state.to_json(), version=state.version)
                pending.append((key, state, create, transaction.commit_async()))
            for key, state, create, result in pending:
                results = result.get()
                failure = _failure(results)
                if failure is None:
                    version = 0 if create else results[-1].version
                    written.states[key] = dataclasses.replace(state, version=version)
                    written.states_gone.discard(key)
                    log.info("partition %s-%d: leader %d, leader epoch %d, ISR %s (controller epoch %d)", *key,
                             state.leader, state.leader_epoch, list(state.isr), state.controller_epoch)
                elif failure[0] == 0:
                    fenced = True
                elif not (create and failure[0] == 1):  # (a created state's topic went: nothing to do)
                    conflicts.append(key)
        if fenced:
            raise _Fenced
        return conflicts

    def _controller_transaction(self, client: KazooClient):
        """A transaction that holds only while ``/controller_epoch`` is as this controller wrote it."""
        transaction = client.transaction()
        transaction.check(CONTROLLER_EPOCH, self._epoch_version if self._epoch_version is not None else -2)
        return transaction

    @staticmethod
    def _add_state_creation(client: KazooClient, transaction, key: tuple[str, int], state: PartitionState) -> None:
        topic, partition = key
        transaction.check(topic_path(topic), -1)
        if client.exists(partitions_path(topic)) is None:
            transaction.create(partitions_path(topic), b"")
        if client.exists(partition_path(topic, partition)) is None:
            transaction.create(partition_path(topic, partition), b"")
        transaction.create(state_path(topic, partition), state.to_json())

    def _delete_topic(self, client: KazooClient, name: str) -> None:
        """Delete a topic marked for deletion: its znodes (children first), its configs and the mark, in
        transactions checking the controller epoch (several for a topic too large for one, the mark
        last, so that a new controller finishes the work). With topic deletion disabled
        (``delete.topic.enable=false``), only the mark goes, as Kafka's controller does."""
        if not self.delete_topic_enable:
            log.warning("topic %s was marked for deletion, but topic deletion is disabled: mark removed", name)
            self._delete_all(client, [deletion_path(name)])
            return
        for _ in range(3):
            paths = _topic_znodes(client, name)
            if client.exists(config_path(name)) is not None:
                paths.append(config_path(name))
            paths.append(deletion_path(name))
            if self._delete_all(client, paths):
                log.info("deleted topic %s (marked for deletion)", name)
                return
        log.warning("topic %s: its znodes kept changing while it was deleted; trying again", name)
        self._notify(DELETE_TOPICS)

    def _delete_all(self, client: KazooClient, paths: Sequence[str]) -> bool:
        chunk: list[str] = []
        size = 0
        for index, path in enumerate(paths):
            chunk.append(path)
            size += len(path) + 32
            if size > MAX_TRANSACTION_BYTES // 2 or index == len(paths) - 1:
                transaction = self._controller_transaction(client)
                for doomed in chunk:
                    transaction.delete(doomed)
                failure = _failure(transaction.commit())
                if failure is not None and failure[0] == 0:
                    raise _Fenced
                if failure is not None:
                    return False
                chunk, size = [], 0
        return True

    # -- kazoo's threads ---------------------------------------------------------------------------

    def _watch(self, event) -> None:
        self._notify(event.path)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST and not self._leaving:
            log.warning("broker %d: ZooKeeper session lost; registering again once reconnected", self.node_id)
            self._notify(None)
        elif not self._leaving:
            self._notify(_SESSION)

    def _notify(self, path: str | None) -> None:
        """From kazoo's threads: note that ``path`` changed (None: everything, the session was lost) and
        wake the following task."""
        if self._token is not None:
            try:
                self._token.run_sync_soon(self._mark, path)
            except trio.RunFinishedError:
                pass

    # -- on the Trio thread ------------------------------------------------------------------------

    def _mark(self, path: str | None) -> None:
        if path is None:
            self._full = True
        else:
            self._dirty.add(path)
        self._wakeup.set()

    def _apply(self, reading: _Reading) -> None:
        """Make what was read this broker's view, and tell the listeners what changed."""
        brokers_changed = False
        if reading.brokers is not None:
            view = (reading.brokers, reading.controller_id, reading.controller_epoch)
            brokers_changed = view != (self.brokers, self.controller_id, self.controller_epoch)
            self.brokers, self.controller_id, self.controller_epoch = view
        created: set[str] = set()
        deleted: set[str] = set()
        changed: set[str] = set()
        partitions: set[tuple[str, int]] = set()
        for name in reading.topics_gone:
            if name in self.topics and name not in reading.topics:
                deleted.add(name)
                self._forget(name)
        for name, assignment in reading.topics.items():
            old = self.topics.get(name)
            if old is not None and old.topic_id != assignment.topic_id:
                deleted.add(name)
                self._forget(name)
                old = None
            if old is None:
                created.add(name)
                self.topic_configs.setdefault(name, {})
            elif old != assignment:
                changed.add(name)
            self.topics[name] = assignment
        if reading.users is not None:
            self.user_credentials = reading.users
        for name, configs in reading.configs.items():
            if name in self.topics and self.topic_configs.get(name) != configs:
                if name not in created:
                    changed.add(name)
                self.topic_configs[name] = configs
        for key, state in reading.states.items():
            if key[0] in self.topics and self.partition_states.get(key) != state:
                self.partition_states[key] = state
                partitions.add(key)
        for key in reading.states_gone:
            if key not in reading.states and self.partition_states.pop(key, None) is not None:
                partitions.add(key)
        self._publish(ClusterChange(brokers_changed, frozenset(created), frozenset(deleted), frozenset(changed),
                                    frozenset(partitions)))

    def _forget(self, name: str) -> None:
        assignment = self.topics.pop(name)
        self.topic_configs.pop(name, None)
        for partition in range(len(assignment.replicas)):
            self.partition_states.pop((name, partition), None)

    def _publish(self, change: ClusterChange) -> None:
        if not change:
            return
        for callback in list(self._listeners):
            try:
                callback(change)
            except Exception:
                log.exception("broker %d: a listener of the cluster's changes failed", self.node_id)
        changed, self._changed = self._changed, trio.Event()
        changed.set()


async def _in_worker(what: str, function: Callable[..., _T], *args: object) -> _T:
    """``function(*args)`` in a worker thread, ZooKeeper out of reach a CoordinationError (a write whose
    answer was lost may or may not have been made)."""
    try:
        return await trio.to_thread.run_sync(function, *args, abandon_on_cancel=True)
    except _CONNECTION_ERRORS as exc:
        raise CoordinationError(f"{what}: ZooKeeper unavailable: {exc!r}") from exc


def _topic_stays(client: KazooClient, name: str) -> bool:
    """Whether a topic exists and is not marked for deletion: whether a missing znode of it may still
    come (a watch for it is set only then, for ZooKeeper keeps a watch on a missing znode until it comes)."""
    return client.exists(topic_path(name)) is not None and client.exists(deletion_path(name)) is None


def _topic_znodes(client: KazooClient, name: str) -> list[str]:
    """A topic's znodes under ``/brokers/topics``, children before parents (none if it is gone)."""
    if client.exists(topic_path(name)) is None:
        return []
    paths: list[str] = []
    try:
        partitions = client.get_children(partitions_path(name))
    except NoNodeError:
        partitions = None
    for partition in sorted(partitions or [], key=lambda p: (len(p), p)):
        base = f"{partitions_path(name)}/{partition}"
        try:
            paths.extend(f"{base}/{child}" for child in client.get_children(base))
        except NoNodeError:
            continue
        paths.append(base)
    if partitions is not None:
        paths.append(partitions_path(name))
    paths.append(topic_path(name))
    return paths


def _batches(assignment: TopicAssignment, states: Sequence[PartitionState], extra: int, chroot: str, *,
             first: int = 0) -> list[int]:
    """Where the transactions writing partitions ``first ..`` of a topic end, so that each holds its
    assignment and its partitions under MAX_TRANSACTION_BYTES (usually one: the whole topic)."""
    name = assignment.name
    fixed = (_op_size(chroot + topic_path(name), assignment.to_json()) + _op_size(chroot + partitions_path(name), b"")
             + _op_size(chroot + config_path(name), b"") + extra)
    ends: list[int] = []
    size = fixed
    for partition in range(first, len(assignment.replicas)):
        cost = (_op_size(chroot + partition_path(name, partition), b"")
                + _op_size(chroot + state_path(name, partition), states[partition].to_json()))
        if size > fixed and size + cost > MAX_TRANSACTION_BYTES:
            ends.append(partition)
            size = fixed
        size += cost
    ends.append(len(assignment.replicas))
    return ends


def _op_size(path: str, data: bytes | None) -> int:
    """An operation's size in a ZooKeeper transaction, over-estimated: its header, path, data and ACL."""
    return len(path.encode()) + len(data or b"") + 96


def _first(assignment: TopicAssignment, count: int) -> TopicAssignment:
    return dataclasses.replace(assignment, replicas=assignment.replicas[:count])


def _create_partitions(transaction, topic: str, states: Sequence[PartitionState], partitions: range) -> None:
    for partition in partitions:
        transaction.create(partition_path(topic, partition), b"")
        transaction.create(state_path(topic, partition), states[partition].to_json())


def _commit(transaction, what: str) -> list[object]:
    """Commit a transaction that is refused if larger than ZooKeeper takes."""
    size = sum(_op_size(op.path, getattr(op, "data", None)) for op in transaction.operations)
    if size > MAX_TRANSACTION_BYTES:
        raise CoordinationError(f"{what}: {size} bytes, more than one ZooKeeper transaction may hold "
                                f"({MAX_TRANSACTION_BYTES})")
    return transaction.commit()


def _failure(results: Iterable[object]) -> tuple[int, Exception] | None:
    """The failed operation of a transaction's results (its index and error), or None if it held."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return index, result
    return None


def _write_topic_configs(client: KazooClient, name: str, configs: dict[str, str]) -> None:
    if client.exists(config_path(name)) is None:
        client.create(config_path(name), encode_topic_config(configs), makepath=True)
    else:
        client.set(config_path(name), encode_topic_config(configs))
    notification = _dumps({"version": 2, "entity_path": f"topics/{name}"})
    client.create(f"{CONFIG_CHANGES}/config_change_", notification, sequence=True, makepath=True)


def _write_user_credentials(client: KazooClient, changes: dict[str, Mapping[str, ScramCredential]]) -> None:
    for user, credentials in changes.items():
        path = zk_user_path(user)
        try:
            data, stat = client.get(path)
        except NoNodeError:
            if credentials:
                client.create(path, encode_zk_user_config(credentials), makepath=True)
        else:
            _old, other = decode_zk_user_config(data)
            client.set(path, encode_zk_user_config(credentials, other), version=stat.version)
        client.create(f"{CONFIG_CHANGES}/config_change_", zk_user_change_notification(user), sequence=True,
                      makepath=True)


def _claim_producer_id_block(client: KazooClient, node_id: int, size: int) -> tuple[int, int]:
    """Kafka's ``/latest_producer_id_block``: ``{"version":1,"broker":id,"block_start":"s","block_end":"e"}``,
    the block's last id included."""
    while True:
        try:
            data, stat = client.get(PRODUCER_ID_BLOCK)
        except NoNodeError:
            data, stat = b"", None
        start = int(json.loads(data)["block_end"]) + 1 if data else 0
        document = _dumps({"version": 1, "broker": node_id, "block_start": str(start),
                           "block_end": str(start + size - 1)})
        try:
            if stat is None:
                client.create(PRODUCER_ID_BLOCK, document)
            else:
                client.set(PRODUCER_ID_BLOCK, document, version=stat.version)
        except (BadVersionError, NodeExistsError):
            continue  # another broker claimed one meanwhile
        return start, start + size


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


def _bump_epoch(client: KazooClient) -> tuple[int, int]:
    """``/controller_epoch`` + 1, by a version-checked write (or its creation at 1): (the epoch, the
    znode's version)."""
    while True:
        try:
            data, stat = client.get(CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                client.create(CONTROLLER_EPOCH, b"1")
                return 1, 0
            except NodeExistsError:
                continue
        epoch = int(data) + 1
        try:
            written = client.set(CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
            return epoch, written.version
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
