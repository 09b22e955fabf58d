"""Kafka's record schemas for ``__consumer_offsets``: the keys and values the group coordinator writes.

Every record's key and value start with an int16 schema version. Two kinds of record live in the topic:

- offset commits: key ``OffsetCommitKey`` (version 1: group, topic, partition), value
  ``OffsetCommitValue`` (version 3: offset, leader epoch, metadata, commit timestamp; version 1 adds an
  expire timestamp when the committer asked for a retention);
- group metadata: key ``GroupMetadataKey`` (version 2: group), value ``GroupMetadataValue`` (version 3:
  protocol type, generation, protocol, leader, state timestamp and the members with their subscription
  and assignment).

Consumer groups of the KIP-848 protocol are stored as several records per group, so that a
heartbeat only writes what changed (keys 3-8, flexible version-0 values): ``ConsumerGroupMetadata``
(group epoch), ``ConsumerGroupPartitionMetadata`` (the subscribed topics' ids and partition counts),
``ConsumerGroupMemberMetadata`` (a member's subscription; for a member that uses the classic
protocol inside a consumer group, also its session timeout and JoinGroup protocols, in the tagged
field ``ClassicMemberMetadata``), ``ConsumerGroupTargetAssignmentMetadata``
(assignment epoch), ``ConsumerGroupTargetAssignmentMember`` (a member's target assignment) and
``ConsumerGroupCurrentMemberAssignment`` (a member's epochs, reconciliation state and partitions).

A null value is a tombstone: the offset (or group) was deleted, and compaction drops the key. The
encoding is Kafka's own, so the topic can be read by Kafka's tools, and this module reads every
version Kafka has written (values 0-4, where 4 is the flexible encoding).
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from trafka.broker.groups.share_records import ShareGroupKey, decode_share_group_key, is_share_group_key_version
from trafka.wire.primitives import (
    INT8,
    INT16,
    INT32,
    INT64,
    DecodeError,
    Writer,
    read_bytes,
    read_compact_bytes,
    read_compact_nullable_string,
    read_compact_string,
    read_nullable_string,
    read_string,
    read_uuid,
    read_uvarint,
    skip_tagged_fields,
    write_bytes,
    write_compact_bytes,
    write_compact_nullable_string,
    write_compact_string,
    write_nullable_string,
    write_string,
    write_uuid,
    write_uvarint,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

#: The longest string the non-flexible encodings of these records can carry.
MAX_STRING_BYTES = 32767


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


# -- encoding -----------------------------------------------------------------------------------


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    w = Writer()
    if isinstance(key, OffsetCommitKey):
        w += INT16.pack(OFFSET_COMMIT_KEY_VERSION)
        write_string(w, key.group)
        write_string(w, key.topic)
        w += INT32.pack(key.partition)
    else:
        w += INT16.pack(GROUP_METADATA_KEY_VERSION)
        write_string(w, key.group)
    return bytes(w)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    w = Writer()
    if value.expire_timestamp >= 0:
        w += INT16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        w += INT64.pack(value.offset)
        write_string(w, value.metadata)
        w += INT64.pack(value.commit_timestamp)
        w += INT64.pack(value.expire_timestamp)
    else:
        w += INT16.pack(OFFSET_COMMIT_VALUE_VERSION)
        w += INT64.pack(value.offset)
        w += INT32.pack(value.leader_epoch)
        write_string(w, value.metadata)
        w += INT64.pack(value.commit_timestamp)
    return bytes(w)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = Writer()
    w += INT16.pack(GROUP_METADATA_VALUE_VERSION)
    write_string(w, value.protocol_type)
    w += INT32.pack(value.generation)
    write_nullable_string(w, value.protocol)
    write_nullable_string(w, value.leader)
    w += INT64.pack(value.current_state_timestamp)
    w += INT32.pack(len(value.members))
    for member in value.members:
        write_string(w, member.member_id)
        write_nullable_string(w, member.group_instance_id)
        write_string(w, member.client_id)
        write_string(w, member.client_host)
        w += INT32.pack(member.rebalance_timeout)
        w += INT32.pack(member.session_timeout)
        write_bytes(w, member.subscription)
        write_bytes(w, member.assignment)
    return bytes(w)


# -- decoding -----------------------------------------------------------------------------------


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | ShareGroupKey:
    """The key of a ``__consumer_offsets`` record; raises DecodeError for a version this coordinator
    does not know (share groups and other record types of newer Kafkas)."""
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if version in (0, 1):
        group, pos = read_string(buf, 2)
        topic, pos = read_string(buf, pos)
        (partition,) = INT32.unpack_from(buf, pos)
        return OffsetCommitKey(group, topic, partition)
    if version == 2:
        group, _ = read_string(buf, 2)
        return GroupMetadataKey(group)
    if version in _CONSUMER_GROUP_KEY_TYPES:
        return _decode_consumer_group_key(buf, version)
    if is_share_group_key_version(version):
        return decode_share_group_key(buf, version)
    raise DecodeError(f"__consumer_offsets key version {version} is not a record this coordinator knows")


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if not 0 <= version <= 4:
        raise DecodeError(f"OffsetCommitValue version {version} is unknown")
    flexible = version >= 4
    read_str = read_compact_string if flexible else read_string
    (offset,) = INT64.unpack_from(buf, 2)
    pos = 10
    leader_epoch = -1
    if version >= 3:
        (leader_epoch,) = INT32.unpack_from(buf, pos)
        pos += 4
    metadata, pos = read_str(buf, pos)
    (commit_timestamp,) = INT64.unpack_from(buf, pos)
    pos += 8
    expire_timestamp = -1
    if version == 1:
        (expire_timestamp,) = INT64.unpack_from(buf, pos)
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if not 0 <= version <= 4:
        raise DecodeError(f"GroupMetadataValue version {version} is unknown")
    flexible = version >= 4
    read_str = read_compact_string if flexible else read_string
    read_nullable_str = read_compact_nullable_string if flexible else read_nullable_string
    read_blob = read_compact_bytes if flexible else read_bytes
    protocol_type, pos = read_str(buf, 2)
    (generation,) = INT32.unpack_from(buf, pos)
    protocol, pos = read_nullable_str(buf, pos + 4)
    leader, pos = read_nullable_str(buf, pos)
    state_timestamp = -1
    if version >= 2:
        (state_timestamp,) = INT64.unpack_from(buf, pos)
        pos += 8
    if flexible:
        count, pos = read_uvarint(buf, pos)
        count -= 1
    else:
        (count,) = INT32.unpack_from(buf, pos)
        pos += 4
    members = []
    for _ in range(max(count, 0)):
        member_id, pos = read_str(buf, pos)
        instance_id = None
        if version >= 3:
            instance_id, pos = read_nullable_str(buf, pos)
        client_id, pos = read_str(buf, pos)
        client_host, pos = read_str(buf, pos)
        rebalance_timeout = -1
        if version >= 1:
            (rebalance_timeout,) = INT32.unpack_from(buf, pos)
            pos += 4
        (session_timeout,) = INT32.unpack_from(buf, pos)
        subscription, pos = read_blob(buf, pos + 4)
        assignment, pos = read_blob(buf, pos)
        if flexible:
            pos = skip_tagged_fields(buf, pos)
        members.append(
            MemberMetadata(
                member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                bytes(subscription), bytes(assignment),
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp, members)


# == consumer groups (KIP-848) ==================================================================
# Keys are non-flexible (int16 version, then int16-length strings); values are version 0 of flexible
# schemas (compact strings and arrays, a tagged-field section after every struct).

#: A member's partitions: topic id -> partition indexes.
TopicPartitionsMap = Mapping[uuid.UUID, Collection[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


ConsumerGroupKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)

_CONSUMER_GROUP_KEY_TYPES: dict[int, type] = {
    3: ConsumerGroupMetadataKey,
    4: ConsumerGroupPartitionMetadataKey,
    5: ConsumerGroupMemberMetadataKey,
    6: ConsumerGroupTargetAssignmentMetadataKey,
    7: ConsumerGroupTargetAssignmentMemberKey,
    8: ConsumerGroupCurrentMemberAssignmentKey,
}
_CONSUMER_GROUP_KEY_VERSIONS = {key_type: version for version, key_type in _CONSUMER_GROUP_KEY_TYPES.items()}
_MEMBER_KEYS = (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
)


@dataclass(slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class SubscribedTopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: list[SubscribedTopicMetadata]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member of a consumer group that uses the classic protocol joined with: its session
    timeout and its protocols (assignor name and ConsumerProtocolSubscription bytes), in order."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


#: The tag of ClassicMemberMetadata in ConsumerGroupMemberMetadataValue.
CLASSIC_MEMBER_METADATA_TAG = 0


@dataclass(slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    #: Set for a member that uses the classic protocol; None for a consumer-protocol member.
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitionsMap


@dataclass(slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitionsMap
    partitions_pending_revocation: TopicPartitionsMap


ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)

CONSUMER_GROUP_VALUE_VERSION = 0
_EPOCHS_AND_STATE = struct.Struct(">iib")


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    w = Writer()
    w += INT16.pack(_CONSUMER_GROUP_KEY_VERSIONS[type(key)])
    write_string(w, key.group)
    if isinstance(key, _MEMBER_KEYS):
        write_string(w, key.member_id)
    return bytes(w)


def _decode_consumer_group_key(buf: memoryview, version: int) -> ConsumerGroupKey:
    key_type = _CONSUMER_GROUP_KEY_TYPES[version]
    group, pos = read_string(buf, 2)
    if key_type in _MEMBER_KEYS:
        member_id, _ = read_string(buf, pos)
        return key_type(group, member_id)
    return key_type(group)


def _write_compact_array_header(w: Writer, count: int) -> None:
    write_uvarint(w, count + 1)


def _write_topic_partitions(w: Writer, topic_partitions: TopicPartitionsMap) -> None:
    _write_compact_array_header(w, len(topic_partitions))
    for topic_id in sorted(topic_partitions, key=str):
        write_uuid(w, topic_id)
        partitions = sorted(topic_partitions[topic_id])
        _write_compact_array_header(w, len(partitions))
        for partition in partitions:
            w += INT32.pack(partition)
        w.append(0)  # tagged fields


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    w = Writer()
    w += INT16.pack(CONSUMER_GROUP_VALUE_VERSION)
    if isinstance(value, ConsumerGroupMetadataValue):
        w += INT32.pack(value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        _write_compact_array_header(w, len(value.topics))
        for topic in value.topics:
            write_uuid(w, topic.topic_id)
            write_compact_string(w, topic.topic_name)
            w += INT32.pack(topic.num_partitions)
            _write_compact_array_header(w, 0)  # partition racks: not tracked
            w.append(0)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        write_compact_nullable_string(w, value.instance_id)
        write_compact_nullable_string(w, value.rack_id)
        write_compact_string(w, value.client_id)
        write_compact_string(w, value.client_host)
        _write_compact_array_header(w, len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            write_compact_string(w, name)
        write_compact_nullable_string(w, value.subscribed_topic_regex)
        w += INT32.pack(value.rebalance_timeout_ms)
        write_compact_nullable_string(w, value.server_assignor)
        if value.classic_member_metadata is not None:
            field = _encode_classic_member_metadata(value.classic_member_metadata)
            w.append(1)  # one tagged field
            write_uvarint(w, CLASSIC_MEMBER_METADATA_TAG)
            write_uvarint(w, len(field) + 1)
            w.append(1)  # a nullable struct: present
            w += field
            return bytes(w)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w += INT32.pack(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _write_topic_partitions(w, value.topic_partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        w += INT32.pack(value.member_epoch)
        w += INT32.pack(value.previous_member_epoch)
        w += INT8.pack(value.state)
        _write_topic_partitions(w, value.assigned_partitions)
        _write_topic_partitions(w, value.partitions_pending_revocation)
    else:
        raise TypeError(f"not a consumer group record value: {value!r}")
    w.append(0)  # tagged fields
    return bytes(w)


def _encode_classic_member_metadata(metadata: ClassicMemberMetadata) -> bytes:
    w = Writer()
    w += INT32.pack(metadata.session_timeout_ms)
    _write_compact_array_header(w, len(metadata.supported_protocols))
    for name, protocol_metadata in metadata.supported_protocols:
        write_compact_string(w, name)
        write_compact_bytes(w, protocol_metadata)
        w.append(0)  # tagged fields
    w.append(0)  # tagged fields
    return bytes(w)


def _decode_classic_member_metadata(buf: memoryview, pos: int) -> ClassicMemberMetadata:
    (session_timeout_ms,) = INT32.unpack_from(buf, pos)
    count, pos = _read_compact_count(buf, pos + 4)
    protocols = []
    for _ in range(count):
        name, pos = read_compact_string(buf, pos)
        protocol_metadata, pos = read_compact_bytes(buf, pos)
        pos = skip_tagged_fields(buf, pos)
        protocols.append((name, bytes(protocol_metadata)))
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def _read_member_tagged_fields(buf: memoryview, pos: int) -> ClassicMemberMetadata | None:
    """The ClassicMemberMetadata in the tagged fields at ``pos`` (None when absent or null)."""
    if pos >= len(buf):
        return None
    count, pos = read_uvarint(buf, pos)
    classic = None
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise DecodeError(f"tagged field {tag} of {size} bytes at offset {pos} runs past the end of the record")
        if tag == CLASSIC_MEMBER_METADATA_TAG:
            present, start = read_uvarint(buf, pos)  # a nullable struct: 0 for null
            classic = _decode_classic_member_metadata(buf[: pos + size], start) if present > 0 else None
        pos += size
    return classic


def _read_compact_count(buf: memoryview, pos: int) -> tuple[int, int]:
    count, pos = read_uvarint(buf, pos)
    if count == 0:
        raise DecodeError(f"null array at offset {pos - 1} where the schema allows none")
    return count - 1, pos


def _read_topic_partitions(buf: memoryview, pos: int) -> tuple[dict[uuid.UUID, frozenset[int]], int]:
    count, pos = _read_compact_count(buf, pos)
    topic_partitions = {}
    for _ in range(count):
        topic_id, pos = read_uuid(buf, pos)
        n, pos = _read_compact_count(buf, pos)
        if pos + 4 * n > len(buf):
            raise DecodeError(f"{n} partitions at offset {pos} run past the end of the record")
        partitions = struct.unpack_from(f">{n}i", buf, pos)
        pos += 4 * n
        pos = skip_tagged_fields(buf, pos)
        if partitions:
            topic_partitions[topic_id] = frozenset(partitions)
    return topic_partitions, pos


def decode_consumer_group_value(key: ConsumerGroupKey, data: bytes) -> ConsumerGroupValue:
    """The value of a consumer group record whose key is ``key`` (version 0; later versions only add
    tagged fields, which are skipped)."""
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if version < 0:
        raise DecodeError(f"{type(key).__name__} value version {version} is unknown")
    pos = 2
    if isinstance(key, ConsumerGroupMetadataKey):
        (epoch,) = INT32.unpack_from(buf, pos)
        return ConsumerGroupMetadataValue(epoch)
    if isinstance(key, ConsumerGroupPartitionMetadataKey):
        count, pos = _read_compact_count(buf, pos)
        topics = []
        for _ in range(count):
            topic_id, pos = read_uuid(buf, pos)
            name, pos = read_compact_string(buf, pos)
            (num_partitions,) = INT32.unpack_from(buf, pos)
            pos += 4
            racks, pos = _read_compact_count(buf, pos)
            for _ in range(racks):
                pos += 4
                rack_count, pos = _read_compact_count(buf, pos)
                for _ in range(rack_count):
                    _, pos = read_compact_string(buf, pos)
                pos = skip_tagged_fields(buf, pos)
            pos = skip_tagged_fields(buf, pos)
            topics.append(SubscribedTopicMetadata(topic_id, name, num_partitions))
        return ConsumerGroupPartitionMetadataValue(topics)
    if isinstance(key, ConsumerGroupMemberMetadataKey):
        instance_id, pos = read_compact_nullable_string(buf, pos)
        rack_id, pos = read_compact_nullable_string(buf, pos)
        client_id, pos = read_compact_string(buf, pos)
        client_host, pos = read_compact_string(buf, pos)
        count, pos = _read_compact_count(buf, pos)
        names = []
        for _ in range(count):
            name, pos = read_compact_string(buf, pos)
            names.append(name)
        regex, pos = read_compact_nullable_string(buf, pos)
        (rebalance_timeout_ms,) = INT32.unpack_from(buf, pos)
        assignor, pos = read_compact_nullable_string(buf, pos + 4)
        classic = _read_member_tagged_fields(buf, pos)
        return ConsumerGroupMemberMetadataValue(
            instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout_ms, assignor, classic
        )
    if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        (assignment_epoch,) = INT32.unpack_from(buf, pos)
        return ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch)
    if isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        topic_partitions, _ = _read_topic_partitions(buf, pos)
        return ConsumerGroupTargetAssignmentMemberValue(topic_partitions)
    member_epoch, previous_member_epoch, state = _EPOCHS_AND_STATE.unpack_from(buf, pos)
    assigned, pos = _read_topic_partitions(buf, pos + 9)
    pending, _ = _read_topic_partitions(buf, pos)
    return ConsumerGroupCurrentMemberAssignmentValue(member_epoch, previous_member_epoch, state, assigned, pending)
