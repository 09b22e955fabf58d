"""The group coordinator: the consumer groups this broker coordinates, and their committed offsets.

Group state and offsets are kept in memory and made durable in the internal compacted topic
``__consumer_offsets``, written through the same log as user data with Kafka's own record schemas (see
:mod:`trafka.broker.groups.records`). A group maps to the partition ``abs(java hashCode(group_id)) % partitions``
of that topic, as in Kafka, so all of a group's records are ordered in one partition.

**Coordination follows leadership**, as in Kafka's group coordinator (onElection / onResignation): this
broker coordinates the groups of the ``__consumer_offsets`` partitions it leads, and FindCoordinator
names a partition's leader as its groups' coordinator. The coordinator runtime
(:mod:`trafka.broker.coordinator_runtime`) follows the leadership, loads the partitions (requests for
their groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile; NOT_COORDINATOR for a group of a partition not
led here; COORDINATOR_NOT_AVAILABLE while the broker stops) and writes to them; this module keeps the
groups' state machines. On resignation the partition's groups and offsets are dropped from memory, their
timers cancelled, and JoinGroup/SyncGroup requests parked on them answered NOT_COORDINATOR.

**Writes are acknowledged once replicated** (acks=all, as Kafka writes to ``__consumer_offsets``): a
change is applied in memory when its records are appended to the leader's log, and a response that
depends on it waits until the partition's high watermark covers them, within
``offsets.commit.timeout.ms`` (see :meth:`GroupCoordinator.await_written`). On a single node the high
watermark moves with the append, so nothing waits and nothing is recorded.

Groups are typed: the classic protocol's groups (:mod:`trafka.broker.groups.classic`) live here side by side
with consumer-protocol (KIP-848) groups; the offset store (:mod:`trafka.broker.groups.offsets`) is shared and
does not care which kind of group committed. A group with members can change type online
(:mod:`trafka.broker.groups.migration`): the records that delete the old type's metadata and create the new
one are written in one batch, so a restart replays the group as it was converted.

Offsets of a group that has been empty for ``offsets.retention.minutes`` expire (checked every
``offsets.retention.check.interval.ms``); an empty group without offsets is then deleted. Deletions
are written as tombstones, which compaction eventually drops.

**Transactional offset commits** (TxnOffsetCommit; KIP-98, KIP-447): the offsets are written as a
transactional batch of the producer (its producer id and epoch, sequence 0, appended as a coordinator
write, as Kafka's coordinator does) and held pending per producer id (:mod:`trafka.broker.groups.offsets`).
When the transaction's COMMIT or ABORT marker has been appended to the group's partition of
``__consumer_offsets``, :meth:`GroupCoordinator.complete_transaction` makes them committed or drops
them; replaying the partition does the same with the transactional batches and markers it reads, and a
transaction still open at the end of the log stays pending. OffsetFetch with ``require_stable``
answers UNSTABLE_OFFSET_COMMIT for a partition with pending offsets; their partitions do not expire,
and a group with an open transaction is not deleted by expiry.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass

import trio

from trafka.broker.config import BrokerConfig
from trafka.broker.coordinator_runtime import CoordinatorRuntime, InternalTopic
from trafka.broker.groups.classic import ClassicGroup, ClassicGroupMember, GroupType
from trafka.broker.groups.classic_protocol import ClassicGroupProtocol
from trafka.broker.groups.consumer import ConsumerGroup
from trafka.broker.groups.consumer_protocol import ConsumerGroupProtocol
from trafka.broker.groups.group_configs import GroupConfigStore
from trafka.broker.groups.offsets import NO_OFFSET, OffsetAndMetadata, OffsetStore
from trafka.broker.groups.share import ShareGroup, ShareGroupProtocol
from trafka.broker.groups.share_records import SHARE_GROUP_KEY_TYPES, decode_share_group_value
from trafka.broker.groups.records import (
    MAX_STRING_BYTES,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    decode_consumer_group_value,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from trafka.broker.groups.state import ClassicGroupState
from trafka.broker.groups.timers import Timers
from trafka.broker.topics import OFFSETS_TOPIC, TopicCreator
from trafka.storage import clock
from trafka.storage.log import AppendInfo, AppendOrigin
from trafka.wire.compression import Compression
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.primitives import DecodeError
from trafka.wire.records import (
    NO_PRODUCER_ID,
    ControlRecordType,
    RecordBatch,
    build_batch,
    parse_control_record_key,
)

log = logging.getLogger(__name__)

#: Topic configs of ``__consumer_offsets``, besides ``segment.bytes`` (``offsets.topic.segment.bytes``).
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "producer",
}


Group = ClassicGroup | ConsumerGroup | ShareGroup

_GROUP_ERROR_MESSAGES = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is stopping.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading the offsets and metadata of group {}.",
    ErrorCode.NOT_COORDINATOR: "This broker is not the coordinator of group {}.",
}


@dataclass(slots=True)
class CommitRequestOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    type: GroupType


def offsets_topic(config: BrokerConfig) -> InternalTopic:
    """``__consumer_offsets`` as the broker's ``offsets.*`` settings make it."""
    return InternalTopic(
        name=OFFSETS_TOPIC,
        partitions=config.offsets_topic_num_partitions,
        replication_factor=config.offsets_topic_replication_factor,
        configs={**OFFSETS_TOPIC_CONFIGS, "segment.bytes": str(config.offsets_topic_segment_bytes)},
        settings=f"offsets.topic.num.partitions={config.offsets_topic_num_partitions}, "
                 f"offsets.topic.replication.factor={config.offsets_topic_replication_factor}",
        key_name="group",
        users="groups",
        load_buffer_bytes=config.offsets_load_buffer_size,
        write_timeout_s=config.offsets_commit_timeout_ms / 1000,
    )


class GroupCoordinator:
    """The groups of the ``__consumer_offsets`` partitions led here, and their offsets.

    It is given what it uses: the broker's settings, its topics (subscriptions are matched against
    them, and ``__consumer_offsets`` is looked up and created there), and whether it is a single node.
    The protocol objects (``classic``, ``consumer``) reach it through the members documented as theirs:
    ``groups``, ``topics``, ``append``, ``remove_group``, ``store_group``, ``drop_group_metadata``,
    ``check_group``, ``check_group_id``, ``is_serving``, ``stopping``, ``now_ms`` and its settings."""

    def __init__(self, config: BrokerConfig, topics: TopicCreator, *, single_node: bool) -> None:
        self.config = config
        self.topics = topics
        self._single_node = single_node
        self.initial_rebalance_delay_ms = config.group_initial_rebalance_delay_ms
        self.group_max_size = config.group_max_size
        self.offset_metadata_max_bytes = config.offset_metadata_max_bytes
        self.retention_check_interval_ms = config.offsets_retention_check_interval_ms
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.timers = Timers()
        self.classic = ClassicGroupProtocol(self)
        self.consumer = ConsumerGroupProtocol(self)
        self.share = ShareGroupProtocol(self)
        #: Groups' own configs (GROUP config resources), read by share groups for their settings: in ZooKeeper
        #: for a broker of a cluster (every broker serves the same ones), in the data directory otherwise.
        cluster = getattr(topics, "cluster", None)
        if cluster is not None:
            from trafka.broker.cluster.group_configs import ClusterGroupConfigs

            self.group_configs: GroupConfigStore | ClusterGroupConfigs = ClusterGroupConfigs(
                lambda: cluster.client, cluster.node_id)
        else:
            self.group_configs = GroupConfigStore.load(config.data_dir)
        self.share.group_configs = self.group_configs.configs
        self.runtime = CoordinatorRuntime(offsets_topic(config), self, topics, single_node=single_node)
        # A single node leads every partition of __consumer_offsets: load them all (as a broker of a
        # cluster loads those it leads now, and is told of the others as leadership moves).
        self.runtime.lead_existing()

    @property
    def stopping(self) -> bool:
        return self.runtime.stopping

    @property
    def active(self) -> bool:
        """Serving every partition led here: not stopping, and no partition loading."""
        return not self.runtime.stopping and not self.runtime.loading

    # ============================================================================ life-cycle

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Group timers, loads of the partitions this broker is elected to lead, and offset expiry."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.timers.run)
            await nursery.start(self.runtime.run)
            await nursery.start(self.share.run)
            if hasattr(self.group_configs, "run"):
                await nursery.start(self.group_configs.run)
            task_status.started()
            while True:
                await trio.sleep(self.retention_check_interval_ms / 1000)
                self.expire_offsets()

    def stop(self) -> None:
        """Stop coordinating: parked JoinGroup and SyncGroup requests are answered
        COORDINATOR_NOT_AVAILABLE, so clients look for the coordinator again."""
        self.runtime.stop()
        for group in list(self.groups.values()):
            self._protocol_of(group).on_removed(group)

    def now_ms(self) -> int:
        return clock.now_ms()

    # ============================================================================ leadership and loading

    def on_partition_leadership(self, index: int, leading: bool) -> None:
        """This broker became (``leading``) or stopped being the leader of ``__consumer_offsets``
        partition ``index``: load its groups and offsets (its groups get COORDINATOR_LOAD_IN_PROGRESS
        meanwhile), or drop them (parked requests are answered NOT_COORDINATOR, timers cancelled).
        Called on the Trio thread; idempotent."""
        self.runtime.on_partition_leadership(index, leading)

    def unloaded(self, index: int) -> int:
        """Forget the groups and offsets of partition ``index``; returns how many groups there were."""
        dropped = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) == index:
                self.remove_group(group, ErrorCode.NOT_COORDINATOR)
                dropped += 1
        for group_id in self.offsets.groups():
            if self.partition_for(group_id) == index:
                self.offsets.forget_group(group_id)
        return dropped

    def loaded(self, index: int) -> None:
        """Partition ``index`` is replayed: its groups resume (their timers start again)."""
        for group in [g for g in self.groups.values() if self.partition_for(g.group_id) == index]:
            self._protocol_of(group).on_loaded(group)

    def replay(self, index: int, batch: RecordBatch, log_start_offset: int) -> int:
        """One batch of partition ``index``. Transactional offset commits become pending offsets of
        their producer, and the COMMIT and ABORT markers complete them, as :meth:`complete_transaction`
        does in live operation (a load reads to the log end as it is when the load finishes, so the
        markers of transactions appended meanwhile, which :meth:`complete_transaction` leaves to the
        load, are replayed too)."""
        producer_id = batch.producer_id
        if batch.is_control:
            if producer_id != NO_PRODUCER_ID:
                self._replay_control_batch(index, batch)
            return 0
        count = 0
        for record in batch.records():
            if record.offset >= log_start_offset:
                self._replay(record.key, record.value, record.offset, producer_id)
                count += 1
        return count

    def group_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates ``group_id`` now; otherwise why not, as Kafka says it:
        COORDINATOR_NOT_AVAILABLE (stopping), COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR."""
        return self.runtime.error(self.partition_for(group_id))

    def check_group(self, group_id: str) -> None:
        """Raises KafkaError unless this broker coordinates ``group_id`` now (see :meth:`group_error`)."""
        code = self.group_error(group_id)
        if code is not ErrorCode.NONE:
            raise KafkaError(code, _GROUP_ERROR_MESSAGES[code].format(group_id))

    def is_serving(self, group_id: str) -> bool:
        return self.group_error(group_id) is ErrorCode.NONE

    def _is_loaded(self, group_id: str) -> bool:
        return self.runtime.is_loaded(self.partition_for(group_id))

    # ============================================================================ __consumer_offsets

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def coordinator_id(self, group_id: str) -> int | None:
        """The broker that coordinates ``group_id``: the leader of its partition (None: no leader, or
        no ``__consumer_offsets`` yet)."""
        return self.runtime.coordinator_id(group_id)

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist yet (FindCoordinator does this, as in Kafka).
        A failure (too few live brokers for offsets.topic.replication.factor, say) is logged once."""
        await self.runtime.ensure_topic()

    async def prepare_to_store(self) -> None:
        """Before a request that may store something (JoinGroup, OffsetCommit, ConsumerGroupHeartbeat):
        ``__consumer_offsets`` in place. Should it not be creatable, the failure is logged (once) and the
        request goes on to get its group's error (NOT_COORDINATOR in a cluster, where the partition is
        led by no one here; COORDINATOR_NOT_AVAILABLE on a single node, when it comes to writing)."""
        if self.topics.get(OFFSETS_TOPIC) is None:
            try:
                await self.ensure_offsets_topic()
            except KafkaError:
                pass

    def append(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> AppendInfo | None:
        """Write records for ``group_id`` to its partition of ``__consumer_offsets``, as one batch;
        returns where they went (None when there was nothing to write).

        With a ``producer_id`` the batch is the producer's transactional batch (TxnOffsetCommit):
        written as Kafka's coordinator writes it (its producer id and epoch, base sequence 0) and
        appended as a coordinator write, so that the log checks the producer's epoch (a fenced one gets
        INVALID_PRODUCER_EPOCH) but not its sequence.

        The change they make is applied by the caller once this returns; whoever answers a request
        that depends on it awaits :meth:`await_written` first, which waits for replication."""
        if not records:
            return None
        compression = Compression(self.config.offsets_topic_compression_codec)
        if producer_id == NO_PRODUCER_ID:
            return self.runtime.append(group_id, bytearray(build_batch(records, compression=compression)))
        batch = build_batch(
            records, compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
            base_sequence=0, is_transactional=True,
        )
        return self.runtime.append(group_id, bytearray(batch), origin=AppendOrigin.COORDINATOR)

    async def await_written(self, group_id: str) -> ErrorCode:
        """Wait until what has been written for ``group_id`` is replicated (the high watermark of its
        partition covers it), within ``offsets.commit.timeout.ms``. Returns NONE, REQUEST_TIMED_OUT,
        or NOT_COORDINATOR when this broker stopped leading the partition meanwhile; the caller maps
        them to its API's error as Kafka does. Nothing pending (always on a single node): no wait."""
        return await self.runtime.await_written(group_id)

    def store_group(self, group: ClassicGroup) -> None:
        """Write the group's metadata (generation, protocol, members and assignments)."""
        self.append(group.group_id, [self.group_metadata_record(group)])

    @staticmethod
    def group_metadata_record(group: ClassicGroup) -> tuple[bytes, bytes]:
        """The GroupMetadata record of a classic group, encoded."""
        members = [
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=m.assignment,
            )
            for m in group.members.values()
        ]
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp_ms if group.state_timestamp_ms is not None else -1,
            members=members,
        )
        return encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(value)

    def _replay_control_batch(self, index: int, batch: RecordBatch) -> None:
        """A transaction marker read from partition ``index``: complete its producer's offsets."""
        try:
            for record in batch.records():
                kind = parse_control_record_key(record.key)
                if kind is ControlRecordType.COMMIT or kind is ControlRecordType.ABORT:
                    self._complete_transaction(index, batch.producer_id, kind is ControlRecordType.COMMIT)
        except KafkaError as exc:
            log.warning("skipping a %s control batch that cannot be read: %s", OFFSETS_TOPIC, exc)

    def _replay(
        self, key_bytes: bytes | None, value_bytes: bytes | None, record_offset: int = -1,
        producer_id: int = NO_PRODUCER_ID,
    ) -> None:
        if key_bytes is None:
            return
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetCommitKey):
                value = None if value_bytes is None else decode_offset_commit_value(value_bytes)
                if value is not None and key.group not in self.groups:
                    # Offsets committed outside group management (a "simple" group).
                    self.groups[key.group] = ClassicGroup(key.group, self.now_ms())
                self.offsets.replay(key, value, record_offset=record_offset, producer_id=producer_id)
            elif isinstance(key, GroupMetadataKey):
                if value_bytes is None:
                    if isinstance(self.groups.get(key.group), ClassicGroup):
                        self.groups.pop(key.group, None)
                else:
                    self.groups[key.group] = _group_from_metadata(
                        key.group, decode_group_metadata_value(value_bytes), self.now_ms()
                    )
            elif type(key) in SHARE_GROUP_KEY_TYPES.values():  # -- share groups (KIP-932) --
                share_value = None if value_bytes is None else decode_share_group_value(key, value_bytes)
                self.share.replay(key, share_value)
            else:  # -- consumer groups (KIP-848) --
                value = None if value_bytes is None else decode_consumer_group_value(key, value_bytes)
                self.consumer.replay(key, value)
        except (DecodeError, ValueError, IndexError) as exc:
            log.warning("skipping a %s record that cannot be read: %s", OFFSETS_TOPIC, exc)

    # ============================================================================ groups

    def check_group_id(self, group_id: str) -> None:
        """Group ids must fit the records that store them."""
        if len(group_id.encode()) > MAX_STRING_BYTES:
            raise KafkaError(
                ErrorCode.INVALID_GROUP_ID, f"Group id is longer than {MAX_STRING_BYTES} bytes"
            )

    def create_classic_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.now_ms())
        self.groups[group_id] = group
        return group

    def remove_group(self, group: Group, error: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> None:
        """Forget ``group``: requests parked on it are answered ``error``, its timers cancelled."""
        if isinstance(group, ClassicGroup):
            group.transition_to(ClassicGroupState.DEAD, self.now_ms())
        self._protocol_of(group).on_removed(group, error)
        self.groups.pop(group.group_id, None)

    # -- consumer groups (KIP-848) next to classic ones --
    def _protocol_of(self, group: Group) -> ClassicGroupProtocol | ConsumerGroupProtocol | ShareGroupProtocol:
        if isinstance(group, ShareGroup):
            return self.share
        return self.consumer if isinstance(group, ConsumerGroup) else self.classic

    def _group_tombstones(self, group: Group) -> list[tuple[bytes, bytes | None]]:
        """The records that delete a group's metadata (its offsets are separate)."""
        if isinstance(group, ConsumerGroup):
            return list(self.consumer.tombstones(group))
        if isinstance(group, ShareGroup):
            return list(self.share.tombstones(group))
        return [(encode_key(GroupMetadataKey(group.group_id)), None)]

    def drop_group_metadata(self, group: Group) -> None:
        """Forget an empty group but keep its offsets: its id is taken over by the other protocol."""
        self.append(group.group_id, self._group_tombstones(group))
        self.remove_group(group)

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        """The groups of the partitions led and loaded here, as Kafka's ListGroups gives them: with
        COORDINATOR_LOAD_IN_PROGRESS while some partition loads, none while the broker stops."""
        if self.runtime.stopping:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        listed = []
        every_partition = not self.runtime.loading and self._single_node
        for group in self.groups.values():
            if not every_partition and not self._is_loaded(group.group_id):
                continue
            state = str(group.state)
            if wanted_states and state.lower() not in wanted_states:
                continue
            if wanted_types and group.type.value not in wanted_types:
                continue
            listed.append(ListedGroup(group.group_id, group.protocol_type or "", state, group.type))
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.loading else ErrorCode.NONE), listed

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group and its offsets; raises GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP (and
        NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE). The caller awaits
        :meth:`await_written` before answering."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        group.validate_delete()
        # Kafka deletes pending transactional offsets too: a tombstone for each partition with one
        # (one tombstone per partition), which drops it; the open transactions end with their markers.
        deleted = dict.fromkeys(self.offsets.partitions(group_id))
        deleted.update(dict.fromkeys(self.offsets.pending_partitions(group_id)))
        records = [(encode_key(OffsetCommitKey(group_id, topic, partition)), None) for topic, partition in deleted]
        records += self._group_tombstones(group)
        self.append(group_id, records)
        for topic, partition in deleted:
            self.offsets.remove(group_id, topic, partition)
        self.remove_group(group)
        log.info("deleted group %s", group_id)

    # ============================================================================ share groups (KIP-932)

    def share_group(self, group_id: str) -> ShareGroup | None:
        """The share group ``group_id`` coordinated here (its state, members, target assignment, subscribed
        topics and share state partitions), or None."""
        group = self.groups.get(group_id)
        return group if isinstance(group, ShareGroup) else None

    def on_share_member_left(self, callback) -> None:
        """Register ``callback(group_id, member_id)``: called when a member of a share group coordinated here
        leaves the group or its session expires."""
        self.share.add_member_left_listener(callback)

    def share_group_config(self, group_id: str) -> dict[str, object]:
        """The share settings of ``group_id``: the group's own configs over the broker's defaults."""
        return self.share.effective_config(group_id)

    # ============================================================================ offsets

    def commit_offsets(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        retention_ms: int,
        offsets: list[CommitRequestOffset],
        api_version: int,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Commit offsets; raises KafkaError for an error that applies to every partition. The caller
        awaits :meth:`await_written` before answering."""
        self.check_group(group_id)
        self.check_group_id(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # v9+ says the group is gone; older clients only understand ILLEGAL_GENERATION.
                code = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
                raise KafkaError(code, f"Group {group_id} not found.")
            group = None
        elif isinstance(group, ConsumerGroup):
            group.validate_offset_commit(member_id, group_instance_id, generation_id, api_version=api_version)
        else:
            group.validate_offset_commit(member_id, group_instance_id, generation_id)
            self.classic.keep_alive(group, member_id)

        now = self.now_ms()
        expire_timestamp = now + retention_ms if retention_ms >= 0 else -1
        results, records, accepted = self._offset_commit_records(group_id, offsets, now, expire_timestamp)
        if group is None:
            log.info("group %s: created by an offset commit outside group management", group_id)
            group = self.create_classic_group(group_id)
        info = self.append(group_id, records)
        for i, (entry, value) in enumerate(accepted):
            value = dataclasses.replace(value, record_offset=info.first_offset + i)
            self.offsets.put(group_id, entry.topic, entry.partition, value)
        return results

    def _offset_commit_records(
        self, group_id: str, offsets: list[CommitRequestOffset], now: int, expire_timestamp: int = -1
    ) -> tuple[dict[tuple[str, int], ErrorCode], list[tuple[bytes, bytes | None]],
               list[tuple[CommitRequestOffset, OffsetAndMetadata]]]:
        """The records of an offset commit, the offsets they store, and each partition's code
        (OFFSET_METADATA_TOO_LARGE for metadata over offset.metadata.max.bytes, which is not stored)."""
        results: dict[tuple[str, int], ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        accepted: list[tuple[CommitRequestOffset, OffsetAndMetadata]] = []
        for entry in offsets:
            metadata = entry.metadata if entry.metadata is not None else ""
            if len(metadata) > self.offset_metadata_max_bytes:
                results[(entry.topic, entry.partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            value = OffsetAndMetadata(entry.offset, entry.leader_epoch, metadata, now, expire_timestamp)
            records.append((encode_key(OffsetCommitKey(group_id, entry.topic, entry.partition)),
                            encode_offset_commit_value(value.to_value())))
            accepted.append((entry, value))
            results[(entry.topic, entry.partition)] = ErrorCode.NONE
        return results, records, accepted

    def commit_transactional_offsets(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: list[CommitRequestOffset],
        api_version: int,
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: write the offsets as the producer's transactional batch and hold them
        pending until its transaction's marker (:meth:`complete_transaction`). Raises KafkaError for an
        error of the whole request: the coordinator's, ILLEGAL_GENERATION (a group that does not exist
        with a generation, or an older generation), UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, and the
        log's (INVALID_PRODUCER_EPOCH for a fenced producer). The caller awaits :meth:`await_written`."""
        self.check_group(group_id)
        self.check_group_id(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION, f"Group {group_id} not found.")
        elif isinstance(group, ConsumerGroup):
            group.validate_offset_commit(
                member_id, group_instance_id, generation_id, api_version=api_version, transactional=True
            )
        else:
            group.validate_offset_commit(member_id, group_instance_id, generation_id, transactional=True)

        results, records, accepted = self._offset_commit_records(group_id, offsets, self.now_ms())
        info = self.append(group_id, records, producer_id=producer_id, producer_epoch=producer_epoch)
        if group is None:
            log.info("group %s: created by a transactional offset commit outside group management", group_id)
            group = self.create_classic_group(group_id)
        if info is not None:
            # Where the producer's transaction began in the log: an offset it has pending from before
            # belongs to its previous transaction, whose marker is not applied yet.
            state = self.runtime.partition(self.partition_for(group_id)).log.producer_state.last_entry(producer_id)
            start = state.current_txn_first_offset if state is not None else None
            for i, (entry, value) in enumerate(accepted):
                value = dataclasses.replace(value, record_offset=info.first_offset + i)
                self.offsets.put_pending(
                    producer_id, group_id, entry.topic, entry.partition, value, transaction_start=start
                )
        return results

    def complete_transaction(self, offsets_partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT (``committed``) or ABORT marker of ``producer_id`` has just been appended to
        partition ``offsets_partition`` of ``__consumer_offsets``: the producer's pending offsets of
        that partition's groups become committed (where no later commit of the partition is there
        already), or are dropped.

        A partition still loading replays the marker from the log itself; one not led here has nothing
        in memory. Sync; called on the Trio thread once the marker is appended (or replicated). Should
        the producer have opened its next transaction in the partition since the marker (a
        TxnOffsetCommit written meanwhile), the offsets of that one stay pending."""
        if not self.runtime.is_loaded(offsets_partition):
            return
        partition = self.runtime.partition(offsets_partition)
        entry = partition.log.producer_state.last_entry(producer_id) if partition and partition.log else None
        before = entry.current_txn_first_offset if entry is not None else None
        self._complete_transaction(offsets_partition, producer_id, committed, before=before)

    def _complete_transaction(
        self, index: int, producer_id: int, committed: bool, *, before: int | None = None
    ) -> None:
        groups = [g for g in self.offsets.pending_groups(producer_id) if self.partition_for(g) == index]
        if not groups:
            return
        materialized = self.offsets.complete(producer_id, groups, committed, before=before)
        log.debug(
            "producer %d %s its transactional offsets of groups %s (%d committed)",
            producer_id, "committed" if committed else "aborted", ", ".join(groups), len(materialized),
        )

    def fetch_offsets(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> list[FetchedOffset]:
        """Committed offsets of ``topics`` (every committed partition when None); -1 where none.

        ``member_id`` and ``member_epoch`` (OffsetFetch v9+) are checked by the group: a consumer group
        raises UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH or ILLEGAL_GENERATION for the whole request. An
        unknown or dead group has no offsets, whatever the member fields say.

        With ``require_stable`` (OffsetFetch v7+), a partition with offsets pending in an open
        transaction is answered UNSTABLE_OFFSET_COMMIT (offset -1), as Kafka does, partition by
        partition; asked for every partition, only committed partitions are listed.
        """
        self.check_group(group_id)
        group = self.groups.get(group_id)
        committed: dict[str, dict[int, OffsetAndMetadata]] = {}
        if group is not None:
            try:
                group.validate_offset_fetch(member_id, member_epoch)
            except KafkaError as exc:
                if exc.code != ErrorCode.GROUP_ID_NOT_FOUND:
                    raise
            else:
                committed = self.offsets.group_offsets(group_id)
        fetched = []
        unstable = require_stable and self.offsets.has_open_transactions(group_id)
        if topics is None:
            for topic, by_partition in committed.items():
                for partition, offset in by_partition.items():
                    if unstable and self.offsets.has_pending(group_id, topic, partition):
                        fetched.append(_unstable(topic, partition))
                        continue
                    fetched.append(
                        FetchedOffset(topic, partition, offset.committed_offset, offset.leader_epoch, offset.metadata)
                    )
            return fetched
        for topic, partitions in topics:
            by_partition = committed.get(topic, {})
            for partition in partitions:
                offset = by_partition.get(partition)
                if unstable and self.offsets.has_pending(group_id, topic, partition):
                    fetched.append(_unstable(topic, partition))
                elif offset is None:
                    fetched.append(FetchedOffset(topic, partition, NO_OFFSET, -1, ""))
                else:
                    fetched.append(
                        FetchedOffset(topic, partition, offset.committed_offset, offset.leader_epoch, offset.metadata)
                    )
        return fetched

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]) -> dict[tuple[str, int], ErrorCode]:
        """OffsetDelete: forget committed offsets of topics the group no longer consumes."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        group.validate_offset_delete()
        results: dict[tuple[str, int], ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        removed: list[tuple[str, int]] = []
        for topic, partitions in topics:
            subscribed = group.is_subscribed_to(topic)
            for partition in partitions:
                if subscribed:
                    results[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    continue
                results[(topic, partition)] = ErrorCode.NONE
                # A tombstone for a committed offset, or for a pending transactional one (as Kafka).
                if self.offsets.get(group_id, topic, partition) is not None or self.offsets.has_pending(
                    group_id, topic, partition
                ):
                    records.append((encode_key(OffsetCommitKey(group_id, topic, partition)), None))
                    removed.append((topic, partition))
        self.append(group_id, records)
        for topic, partition in removed:
            self.offsets.remove(group_id, topic, partition)
        return results

    def expire_offsets(self) -> None:
        """Drop offsets past ``offsets.retention.minutes`` and delete empty groups left without any."""
        if self.runtime.stopping:
            return
        self.runtime.forget_replicated()
        now = self.now_ms()
        retention_ms = self.config.offsets_retention_minutes * 60_000
        for group in list(self.groups.values()):
            group_id = group.group_id
            if not self._is_loaded(group_id):
                continue  # its partition is still loading
            may_expire, base = group.offset_expiry_base_ms()
            if may_expire:
                subscribed = group.subscribed_topics() or set()
                expired = self.offsets.expired(
                    group_id, now_ms=now, retention_ms=retention_ms, base_timestamp_ms=base, keep_topics=subscribed
                )
            else:
                expired = []
            records = [(encode_key(OffsetCommitKey(group_id, t, p)), None) for t, p in expired]
            # Not a group with an open transaction: its pending offsets would be left without a group.
            # (A share group is not: it holds the share state of its partitions; DeleteGroups deletes it.)
            delete_group = (
                not isinstance(group, ShareGroup)
                and group.is_empty
                and len(expired) == len(self.offsets.partitions(group_id))
                and not self.offsets.has_open_transactions(group_id)
            )
            if delete_group:
                records += self._group_tombstones(group)
            if not records:
                continue
            try:
                self.append(group_id, records)
            except KafkaError as exc:
                log.warning("group %s: could not expire offsets: %s", group_id, exc)
                continue
            for topic, partition in expired:
                self.offsets.remove(group_id, topic, partition)
            if expired:
                log.info("group %s: expired %d committed offsets", group_id, len(expired))
            if delete_group:
                self.remove_group(group)
                log.info("group %s: empty and without offsets; deleted", group_id)


def _unstable(topic: str, partition: int) -> FetchedOffset:
    """A partition with offsets pending in an open transaction, asked for with require_stable."""
    return FetchedOffset(topic, partition, NO_OFFSET, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)


def _group_from_metadata(group_id: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
    """A classic group as its last metadata record describes it: Stable with its members, or Empty."""
    timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    state = ClassicGroupState.STABLE if value.members else ClassicGroupState.EMPTY
    group = ClassicGroup(group_id, now_ms, state)
    group.state_timestamp_ms = timestamp
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    for m in value.members:
        member = ClassicGroupMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout, m.session_timeout,
            value.protocol_type, [(value.protocol or "", m.subscription)], m.assignment,
        )
        group.add(member)
    group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
    return group
