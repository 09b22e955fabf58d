"""Cluster coordination: which brokers are alive, which one is the controller, the cluster's id, and its
topics: their partitions' replicas, configs, and each partition's leader and ISR.

Brokers in separate processes coordinate through Apache ZooKeeper in Kafka's own ZooKeeper-mode layout
(``trafka.broker.cluster.zookeeper``), so that the state can be read with ZooKeeper's tools as Kafka engineers
know it. A broker without ``zookeeper.connect`` is a cluster of one and needs none of this. With it, the
broker takes its part in the cluster here: the controller's decisions (``cluster.controller``), the topics as
the cluster has them (``cluster.topics``), and each partition's leader, epoch and ISR, by which the replica
manager (``trafka.broker.replication``) leads or follows. This module holds what they share: a broker's
registration, a partition's state, a topic's assignment, a change of the cluster's state, and the error
that keeps a broker out of the cluster.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a broker as it registers it: name, security protocol, advertised address."""

    name: str
    security_protocol: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker as it registers itself: its id, the address of each of its listeners, and its rack.

    ``host`` and ``port`` are where the other brokers reach it: the endpoint of the inter-broker listener
    (every broker of a cluster names the same one)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()
    #: The broker's epoch, as Kafka's: the ZooKeeper transaction that created the registration (its znode's
    #: czxid), new each time the broker registers (after a restart, after its session expired); -1 unknown.
    epoch: int = -1

    def address(self, listener: str) -> tuple[str, int] | None:
        """The advertised address of the broker's listener named ``listener``; None if it has none."""
        for endpoint in self.endpoints:
            if endpoint.name == listener:
                return endpoint.host, endpoint.port
        return None

    def to_json(self, timestamp_ms: int) -> bytes:
        """The registration as Kafka writes ``/brokers/ids/<id>`` (version 5): every endpoint with the
        security protocol of its listener; the legacy ``host`` and ``port`` fields hold the PLAINTEXT
        listener's address (null and -1 without one), as Kafka's do."""
        endpoints = self.endpoints or (Endpoint("PLAINTEXT", "PLAINTEXT", self.host, self.port),)
        plaintext = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
        document: dict[str, object] = {
            "features": {},
            "listener_security_protocol_map": {e.name: e.security_protocol for e in endpoints},
            "endpoints": [f"{e.name}://{e.host}:{e.port}" for e in endpoints],
            "jmx_port": -1,
            "port": plaintext.port if plaintext is not None else -1,
            "host": plaintext.host if plaintext is not None else None,
            "version": 5,
            "timestamp": str(timestamp_ms),
        }
        if self.rack is not None:
            document["rack"] = self.rack
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, node_id: int, data: bytes, inter_broker_listener: str = "PLAINTEXT",
                  epoch: int = -1) -> BrokerRegistration:
        """A registration read from ``/brokers/ids/<id>`` (created at ZooKeeper transaction ``epoch``); ``host`` and
        ``port`` are the endpoint of the ``inter_broker_listener`` (else the first PLAINTEXT one, or the legacy
        host and port fields)."""
        document = json.loads(data)
        protocols = document.get("listener_security_protocol_map") or {}
        endpoints = []
        for entry in document.get("endpoints") or []:
            name, _, address = entry.partition("://")
            host, _, port = address.rpartition(":")
            endpoints.append(Endpoint(name, protocols.get(name, name), host.strip("[]"), int(port)))
        chosen = next((e for e in endpoints if e.name == inter_broker_listener), None) or next(
            (e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
        if chosen is not None:
            host, port = chosen.host, chosen.port
        else:
            host, port = document.get("host") or "", int(document.get("port", -1))
        return cls(node_id, host, port, document.get("rack"), tuple(endpoints), epoch)


class CoordinationError(RuntimeError):
    """This broker cannot take its part in the cluster (ZooKeeper unreachable, its id taken, a data
    directory of another cluster ...): the message says which."""


# -- topics and partitions -------------------------------------------------------------------------

NO_LEADER = -1
#: ``leader_recovery_state``: the leader holds every record the ISR acknowledged ...
RECOVERED = 0
#: ... or it was elected from outside the ISR (unclean election) and has not said otherwise since.
RECOVERING = 1


def _dumps(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's leader and ISR as ``/brokers/topics/<t>/partitions/<p>/state`` holds them.

    ``leader`` is -1 (NO_LEADER) while the partition is offline. ``leader_epoch`` grows with every
    change the controller makes; a leader changing its own ISR keeps it. ``controller_epoch`` is the
    epoch of the controller that elected the leader (kept as read by an ISR change). ``version`` is the
    znode's version, the condition of the next write, and is not part of the JSON.
    ``leader_recovery_state`` is RECOVERING after an unclean election, until the leader writes RECOVERED
    (Kafka 3.x writes the field only while RECOVERING)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = -1
    leader_recovery_state: int = RECOVERED

    def to_json(self) -> bytes:
        """The state as Kafka 3.9 writes it (version 1)."""
        document: dict[str, object] = {
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": 1,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state != RECOVERED:
            document["leader_recovery_state"] = self.leader_recovery_state
        return _dumps(document)

    @classmethod
    def from_json(cls, data: bytes, version: int) -> PartitionState:
        """The state read from its znode, at znode version ``version``."""
        document = json.loads(data)
        return cls(int(document["leader"]), int(document["leader_epoch"]), tuple(int(r) for r in document["isr"]),
                   int(document["controller_epoch"]), version,
                   int(document.get("leader_recovery_state", RECOVERED)))

    @property
    def online(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """A topic as ``/brokers/topics/<t>`` holds it: its id and, for each partition p, ``replicas[p]``,
    the brokers holding a replica in assignment order (the first is the preferred leader). ``version``
    is the znode's version, the condition of a change such as added partitions."""

    name: str
    topic_id: uuid.UUID
    replicas: tuple[tuple[int, ...], ...]
    version: int = -1
    #: Partitions being reassigned (KIP-455): the replicas joining, and those to leave once the
    #: joining ones are in the ISR. ``replicas[p]`` holds both during the move.
    adding: Mapping[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)

    def to_json(self) -> bytes:
        """The assignment as Kafka 3.9 writes it (version 3)."""
        return _dumps({
            "partitions": {str(p): list(replicas) for p, replicas in enumerate(self.replicas)},
            "topic_id": encode_uuid(self.topic_id),
            "adding_replicas": {str(p): list(r) for p, r in sorted(self.adding.items())},
            "removing_replicas": {str(p): list(r) for p, r in sorted(self.removing.items())},
            "version": 3,
        })

    def target(self, partition: int) -> tuple[int, ...]:
        """Where partition's replicas are going: its replicas without those being removed."""
        removing = self.removing.get(partition, ())
        return tuple(r for r in self.replicas[partition] if r not in removing)

    def original(self, partition: int) -> tuple[int, ...]:
        """Where the partition's replicas were before its reassignment: without those being added."""
        adding = self.adding.get(partition, ())
        return tuple(r for r in self.replicas[partition] if r not in adding)

    @classmethod
    def from_json(cls, name: str, data: bytes, version: int) -> TopicAssignment:
        """The assignment read from ``/brokers/topics/<name>`` at znode version ``version``. A topic
        written by a Kafka older than 2.8 has no id: it reads as the zero id."""
        document = json.loads(data)
        partitions = {int(p): tuple(int(r) for r in replicas)
                      for p, replicas in (document.get("partitions") or {}).items()}
        topic_id = document.get("topic_id")

        def moving(field: str) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(int(r) for r in replicas) for p, replicas in (document.get(field) or {}).items()
                    if replicas}

        return cls(name, decode_uuid(topic_id) if topic_id else uuid.UUID(int=0),
                   tuple(partitions[p] for p in sorted(partitions)), version,
                   moving("adding_replicas"), moving("removing_replicas"))


def encode_uuid(value: uuid.UUID) -> str:
    """A Uuid as Kafka prints it: URL-safe base64 of its 16 bytes, without padding (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def decode_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def encode_topic_config(configs: Mapping[str, str]) -> bytes:
    """``/config/topics/<t>`` as Kafka writes it: ``{"version":1,"config":{...}}``."""
    return _dumps({"version": 1, "config": dict(configs)})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    """The configs in ``/config/topics/<t>`` (none for an empty znode)."""
    if not data:
        return {}
    document = json.loads(data)
    return {str(k): str(v) for k, v in ((document or {}).get("config") or {}).items()}


@dataclass(frozen=True, slots=True)
class ClusterChange:
    """What one publication of the cluster's state changed, as a broker's listener receives it.

    ``brokers_changed``: the live brokers or the controller. ``topics_created`` and ``topics_deleted``:
    topics that appeared or went (a topic deleted and created again between two looks is in both; the
    deletion comes first). ``topics_changed``: partitions added or configs changed. ``partitions_changed``:
    partitions whose state is new or changed, those of created topics and added partitions included."""

    brokers_changed: bool = False
    topics_created: frozenset[str] = frozenset()
    topics_deleted: frozenset[str] = frozenset()
    topics_changed: frozenset[str] = frozenset()
    partitions_changed: frozenset[tuple[str, int]] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.brokers_changed or self.topics_created or self.topics_deleted or self.topics_changed
                    or self.partitions_changed)
