"""Topics: creation, deletion, partition growth, and the lookups every handler makes.

Topic names follow Kafka's rules (1-249 characters from ``[a-zA-Z0-9._-]``, not ``.`` or ``..``, and
not colliding with an existing topic once ``.`` and ``_`` are treated alike). Each topic has a UUID
topic id, a partition count and its own configs over the broker's defaults, all kept in the storage
catalog so they survive restarts. This broker is the only one, so it leads every partition.
New partitions must fit in the process's file descriptor limit (``trafka.broker.descriptors``): a change
that would not fit is refused whole, before anything is created.

Creating, growing and deleting topics are serialized, one change at a time. The catalog and the
files of new partitions are written and synced in a worker thread (a thousand partitions take about
a second on a small VM), so that no other client waits for them; the topic appears once they are
durable. A deleted topic's catalog entry and directories go the same way.
"""
from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import trio

from trafka.broker.config import BrokerConfig
from trafka.broker.descriptors import DESCRIPTORS_PER_PARTITION, check_new_partitions, descriptors_in_use
from trafka.broker.partition import Partition
from trafka.storage.config import LogConfig
from trafka.storage.log import Log as StorageLog
from trafka.storage.manager import LogManager
from trafka.storage.topics import TopicCatalog, TopicRecord, new_topic_id
from trafka.wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")

#: The group coordinator's topic (see broker.groups.coordinator).
OFFSETS_TOPIC = "__consumer_offsets"
#: The transaction coordinator's topic (see broker.txn.coordinator).
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: The share coordinator's topic (see broker.share.coordinator).
SHARE_STATE_TOPIC = "__share_group_state"
#: How often a topic change lists the process's descriptors (see TopicManager._check_descriptors).
DESCRIPTOR_COUNT_INTERVAL_S = 1.0
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})


def _partitions(count: int) -> str:
    return "1 partition" if count == 1 else f"{count} partitions"


def _unknown_partition(key: tuple[str, int]) -> tuple[ErrorCode, str]:
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The partition {key[0]}-{key[1]} does not exist."


def check_reassignment_target(target: Sequence[int], live: Mapping[int, object]) -> tuple[ErrorCode, str | None]:
    """A reassignment's target replicas: not empty, each broker once, every one registered."""
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The replica list is empty."
    if len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The replica list {list(target)} names a broker twice."
    missing = sorted(set(target) - set(live))
    if missing:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The replica list names brokers not registered: {missing}."
    return ErrorCode.NONE, None


def validate_topic_name(name: str | None) -> None:
    """Raises INVALID_TOPIC_EXCEPTION, with Kafka's message, for a name Kafka refuses."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length "
            f"{MAX_TOPIC_NAME_LENGTH}",
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is invalid: '{name}' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    log_config: LogConfig
    partitions: list[Partition] = field(default_factory=list)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicLookup(Protocol):
    """What a service that reads partitions needs of the broker's topics (TopicManager is one)."""

    def get(self, name: str) -> Topic | None: ...


class TopicCreator(TopicLookup, Protocol):
    """A topic lookup that also creates topics: the coordinators create their internal topic."""

    async def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str | None] | None = None) -> Topic: ...


class TopicManager:
    def __init__(
        self, config: BrokerConfig, default_log_config: LogConfig, log_manager: LogManager, catalog: TopicCatalog
    ) -> None:
        self.config = config
        self.default_log_config = default_log_config
        self.log_manager = log_manager
        self.catalog = catalog
        self._topics: dict[str, Topic] = {}
        #: When the process's descriptors were last listed, how many there were, and the partitions then.
        self._descriptors_counted: tuple[float, int, int] | None = None
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._changes = trio.Lock()  # held by create, create_partitions and delete

    # -- lookups -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self._topics.values()))

    def __len__(self) -> int:
        return len(self._topics)

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def lookup(self, name: str | None, topic_id: uuid.UUID, *, by_id: bool) -> tuple[Topic | None, ErrorCode]:
        """The topic a request names, by id (Produce and Fetch v13+) or by name, and the error
        code that says it is not there."""
        if by_id:
            return self._by_id.get(topic_id), ErrorCode.UNKNOWN_TOPIC_ID
        return self._topics.get(name), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def partition(self, name: str, index: int) -> Partition | None:
        topic = self._topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    # -- start-up ------------------------------------------------------------------------------

    def load(self) -> None:
        """Recover every log with its topic's config, then build the topics from the catalog."""
        topics = [
            Topic(record.name, record.topic_id, dict(record.configs),
                  LogConfig.from_properties(record.configs, self.default_log_config))
            for record in self.catalog.topics.values()
        ]
        self.log_manager.load({topic.name: topic.log_config for topic in topics})
        # Logs of a topic the catalog no longer has were being deleted when the broker stopped.
        on_disk = {storage_log.topic for storage_log in self.log_manager.logs()}
        for orphan in sorted(on_disk - self.catalog.topics.keys()):
            log.warning("deleting the logs of %s, a topic deleted before the last stop", orphan)
            self.log_manager.delete_logs(orphan)
        for topic in topics:
            count = self.catalog.topics[topic.name].partitions
            self._attach(topic, self.log_manager.create_logs(self._log_specs(topic, count)))
            self._add(topic)
        log.info("loaded %d topics", len(self._topics))

    async def _open_partitions(self, topic: Topic, count: int) -> None:
        """Grow ``topic`` to ``count`` partitions over their logs, once the catalog (changed by the
        caller without saving) says so. In a worker thread the catalog is written, then the missing
        logs are created and made durable together; existing ones get the topic's config (and its
        id, if theirs was lost). Not cancellable: a client that leaves does not leave half a topic."""
        log_config = topic.log_config
        creation = self.log_manager.prepare_logs(self._log_specs(topic, count))
        try:
            await self._write_files(creation.run)
        except OSError as exc:
            log.error("creating the logs of %s failed: %s", topic.name, exc)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"Creating the logs of {topic.name} failed: {exc}"
            ) from exc
        logs = self.log_manager.add_created(creation)
        if topic.log_config is not log_config:  # altered meanwhile
            for storage_log in logs:
                storage_log.update_config(topic.log_config)
        self._attach(topic, logs)

    async def _write_files(self, *steps: Callable[[], object]) -> None:
        """Write the catalog as it stands, then run ``steps``, in a worker thread. Not cancellable:
        the change is made in memory already."""
        catalog = self.catalog.state()

        def write() -> None:
            self.catalog.write(catalog)
            for step in steps:
                step()

        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(write)

    def _check_descriptors(self, name: str, new_partitions: int) -> None:
        """Refuse new partitions of ``name`` that the descriptor limit has no room for, keeping room
        for ``__consumer_offsets`` until it exists."""
        kept = self.config.offsets_topic_num_partitions
        if name == OFFSETS_TOPIC or OFFSETS_TOPIC in self._topics:
            kept = 0
        partitions = sum(len(topic.partitions) for topic in self._topics.values())
        # Listing the process's descriptors costs one entry each: it is done at most once a second, and
        # the partitions opened since are added to what it found.
        now = time.monotonic()
        if self._descriptors_counted is None or now - self._descriptors_counted[0] > DESCRIPTOR_COUNT_INTERVAL_S:
            self._descriptors_counted = (now, descriptors_in_use(), partitions)
        _, counted, partitions_then = self._descriptors_counted
        in_use = counted + (partitions - partitions_then) * DESCRIPTORS_PER_PARTITION
        check_new_partitions(new_partitions, partitions=partitions, kept_for_offsets=kept, in_use=in_use)

    async def _restore_catalog(self) -> None:
        """Write the catalog back as it was before a change whose logs could not all be created
        (out of file descriptors, say): the change is refused whole. Logs it did create are
        closed; their directories are loaded by a later change, or removed at the next start."""
        try:
            await self._write_files()
        except OSError as exc:
            log.error("cannot write the topic catalog back: %s", exc)

    @staticmethod
    def _log_specs(topic: Topic, count: int) -> list[tuple[str, int, LogConfig, uuid.UUID]]:
        return [(topic.name, index, topic.log_config, topic.topic_id) for index in range(len(topic.partitions), count)]

    def _attach(self, topic: Topic, logs: list[StorageLog]) -> None:
        for index, storage_log in enumerate(logs, start=len(topic.partitions)):
            topic.partitions.append(Partition(topic.name, topic.topic_id, index, storage_log, self.config.node_id))

    def _add(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    # -- changes -------------------------------------------------------------------------------

    async def create(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> Topic:
        """Create a topic as CreateTopics does; raises KafkaError with Kafka's code and message.
        ``replica_assignment`` (checked by the caller) gives each partition's replicas; on a single
        node they are this node."""
        async with self._changes:
            num_partitions, _, topic_configs, log_config = self._check_new_topic(
                name, num_partitions, replication_factor, configs)
            topic = Topic(name, new_topic_id(), topic_configs, log_config)
            if validate_only:
                return topic
            self.catalog.add(TopicRecord(name, topic.topic_id, num_partitions, topic_configs), save=False)
            try:
                await self._open_partitions(topic, num_partitions)
            except KafkaError:
                self.catalog.remove(name, save=False)
                await self._restore_catalog()
                raise
            self._add(topic)
            log.info("created topic %s with %s (id %s)", name, _partitions(num_partitions), topic.topic_id)
            return topic

    def _check_new_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str | None] | None
    ) -> tuple[int, int, dict[str, str], LogConfig]:
        """CreateTopics' checks, in Kafka's order; returns the partition count and replication factor
        (defaults applied), the config overrides and the topic's effective log config."""
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        colliding = self._colliding_topic(name)
        if colliding is not None:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {colliding}",
            )
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if num_partitions <= 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        if replication_factor <= 0:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        self._check_replication_factor(replication_factor)
        topic_configs = {k: v for k, v in (configs or {}).items() if v is not None}
        log_config = LogConfig.from_properties(topic_configs, self.default_log_config)
        self._check_descriptors(name, num_partitions)
        return num_partitions, replication_factor, topic_configs, log_config

    def _check_replication_factor(self, replication_factor: int) -> None:
        live = self.live_brokers()
        if replication_factor > len(live):
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                f"factor of {replication_factor} cannot be reached because only {len(live)} broker(s) are "
                "registered or some brokers have all their log directories cordoned.",
            )

    def live_brokers(self, listener: str | None = None) -> dict[int, tuple[str, int, str | None]]:
        """The live brokers: id -> (host, port, rack), the address of their listener named ``listener``
        (by default the inter-broker one). On a single node, this one."""
        config = self.config
        name = listener if listener is not None else config.inter_broker_listener_name
        served = next((served for served in config.listeners if served.name == name), None)
        if served is None:
            return {}
        host, port = served.advertised_address
        return {config.node_id: (host, port, None)}

    # -- leadership and placement (a cluster's controller acts; a single node has nothing to move) ---

    async def elect_leaders(self, partitions: Sequence[tuple[str, int]] | None, *,
                            unclean: bool) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders: per partition, the election's outcome (see broker.handlers.elect_leaders)."""
        keys = partitions if partitions is not None else [
            (topic.name, partition.index) for topic in self for partition in topic.partitions]
        return {key: (ErrorCode.ELECTION_NOT_NEEDED, None) if self.partition(*key) is not None
                else _unknown_partition(key) for key in keys}

    async def alter_partition_reassignments(
        self, changes: Mapping[tuple[str, int], Sequence[int] | None], *, timeout_ms: int
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: per partition, whether the reassignment (or its cancellation,
        for None) was accepted. A single node's partitions can only stay where they are."""
        outcomes: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        for key, target in changes.items():
            partition = self.partition(*key)
            if partition is None:
                outcomes[key] = _unknown_partition(key)
            elif target is None:
                outcomes[key] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                 f"Unable to cancel reassignment of {key[0]}-{key[1]}: it is not being reassigned.")
            else:
                outcomes[key] = check_reassignment_target(target, self.live_brokers())
        return outcomes

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[Sequence[int], Sequence[int], Sequence[int]]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each partition being moved."""
        return {}

    @property
    def controller_id(self) -> int:
        """The controller's broker id: on a single node, this one."""
        return self.config.node_id

    async def auto_create(self, name: str) -> Topic:
        """Create ``name`` with the defaults when auto.create.topics.enable allows it (or return it,
        created by another request meanwhile)."""
        if not self.config.auto_create_topics_enable:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        try:
            return await self.create(name)
        except KafkaError as exc:
            topic = self._topics.get(name)
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS and topic is not None:
                return topic
            raise

    async def delete(self, name: str) -> Topic:
        """Delete a topic as DeleteTopics does. Its directories are removed, and the offsets
        checkpoints written without it, in a worker thread, after the catalog; should removing them
        fail, the next start removes what is left (the catalog no longer has the topic)."""
        async with self._changes:
            topic = self._delete(name)
            deletion = self.log_manager.remove_logs(name)
            checkpoints = self.log_manager.offsets_checkpoints()
            try:
                await self._write_files(deletion.run, lambda: self.log_manager.write_checkpoints(checkpoints))
            except OSError as exc:
                log.error("deleting topic %s: its files could not all be written or removed: %s", name, exc)
            log.info("deleted topic %s", name)
            return topic

    def _delete(self, name: str) -> Topic:
        """Check and forget the topic; the caller removes its logs."""
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not self.config.delete_topic_enable:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        del self._topics[name]
        del self._by_id[topic.topic_id]
        self.catalog.remove(name, save=False)
        return topic

    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                                replica_assignment: Sequence[Sequence[int]] | None = None) -> Topic:
        async with self._changes:
            return await self._create_partitions(name, count, validate_only)

    def _check_growth(self, name: str, count: int) -> Topic:
        """CreatePartitions' checks: the topic exists and ``count`` is more partitions than it has, and
        the new ones fit in the descriptor limit."""
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {current} partition(s); {count} would not be an increase.",
            )
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        self._check_descriptors(name, count - current)
        return topic

    async def _create_partitions(self, name: str, count: int, validate_only: bool) -> Topic:
        topic = self._check_growth(name, count)
        current = len(topic.partitions)
        if validate_only:
            return topic
        self.catalog.set_partitions(name, count, save=False)
        try:
            await self._open_partitions(topic, count)
        except KafkaError:
            self.catalog.set_partitions(name, current, save=False)
            await self._restore_catalog()
            raise
        log.info("topic %s now has %s", name, _partitions(count))
        return topic

    async def set_default_log_config(self, default_log_config: LogConfig) -> None:
        """New broker-wide topic defaults: every topic's effective config follows, at once (after a
        topic change in progress, which made its topic with the defaults it started with)."""
        async with self._changes:
            self._set_default_log_config(default_log_config)

    def _set_default_log_config(self, default_log_config: LogConfig) -> None:
        self.default_log_config = default_log_config
        for topic in self._topics.values():
            log_config = LogConfig.from_properties(topic.configs, default_log_config)
            if log_config != topic.log_config:
                topic.log_config = log_config
                for partition in topic.partitions:
                    partition.log.update_config(log_config)

    async def alter_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> Topic:
        """Replace the topic's config overrides with ``configs``, as AlterConfigs does.

        Raises KafkaError(INVALID_CONFIG) for an unknown config or a bad value, and
        UNKNOWN_TOPIC_OR_PARTITION when there is no such topic (configs are checked first, as in Kafka).
        The new configs apply to the partitions' logs at once and survive restarts.
        """
        log_config = LogConfig.from_properties(configs, self.default_log_config)
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if validate_only:
            return topic
        self.catalog.set_configs(name, configs)
        topic.configs = dict(configs)
        topic.log_config = log_config
        for partition in topic.partitions:
            partition.log.update_config(log_config)
        log.info("topic %s configs are now %s", name, topic.configs)
        return topic

    def _colliding_topic(self, name: str) -> str | None:
        if "." not in name and "_" not in name:
            return None
        key = name.replace(".", "_")
        for existing in self._topics:
            if existing.replace(".", "_") == key:
                return existing
        return None
