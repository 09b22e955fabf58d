"""Kafka's records of share groups (KIP-932) in ``__consumer_offsets``.

A share group is stored as several records, as a consumer group of the KIP-848 protocol is, so that a
heartbeat writes only what changed. Keys are non-flexible (an int16 record type, then int16-length
strings); values are version 0 of flexible schemas (compact strings and arrays, tagged fields after
every struct):

- ``ShareGroupMemberMetadata`` (type 10): a member's rack, client id, client host and subscribed topic names;
- ``ShareGroupMetadata`` (11): the group epoch and the hash of the subscribed topics' metadata;
- ``ShareGroupTargetAssignmentMetadata`` (12): the assignment epoch;
- ``ShareGroupTargetAssignmentMember`` (13): a member's target partitions;
- ``ShareGroupCurrentMemberAssignment`` (14): a member's epochs, state and partitions;
- ``ShareGroupStatePartitionMetadata`` (15): the partitions whose share state is being initialized, those
  initialized, and the topics whose state is being deleted.

A null value is a tombstone.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from trafka.wire.primitives import (
    INT8,
    INT16,
    INT32,
    INT64,
    DecodeError,
    Writer,
    read_compact_nullable_string,
    read_compact_string,
    read_string,
    read_uuid,
    read_uvarint,
    skip_tagged_fields,
    write_compact_nullable_string,
    write_compact_string,
    write_string,
    write_uuid,
    write_uvarint,
)

TopicPartitionsMap = Mapping[uuid.UUID, Collection[int]]

SHARE_GROUP_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    group: str


ShareGroupKey = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | ShareGroupStatePartitionMetadataKey
)

SHARE_GROUP_KEY_TYPES: dict[int, type] = {
    10: ShareGroupMemberMetadataKey,
    11: ShareGroupMetadataKey,
    12: ShareGroupTargetAssignmentMetadataKey,
    13: ShareGroupTargetAssignmentMemberKey,
    14: ShareGroupCurrentMemberAssignmentKey,
    15: ShareGroupStatePartitionMetadataKey,
}
_KEY_VERSIONS = {key_type: version for version, key_type in SHARE_GROUP_KEY_TYPES.items()}
_MEMBER_KEYS = (ShareGroupMemberMetadataKey, ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey)


@dataclass(slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]


@dataclass(slots=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(slots=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitionsMap


@dataclass(slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitionsMap


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: frozenset[int]
    create_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    topic_name: str


@dataclass(slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: list[TopicPartitionsInfo] = field(default_factory=list)
    initialized_topics: list[TopicPartitionsInfo] = field(default_factory=list)
    deleting_topics: list[TopicInfo] = field(default_factory=list)


ShareGroupValue = (
    ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)


def is_share_group_key_version(version: int) -> bool:
    return version in SHARE_GROUP_KEY_TYPES


# -- encoding -----------------------------------------------------------------------------------------


def encode_share_group_key(key: ShareGroupKey) -> bytes:
    w = Writer()
    w += INT16.pack(_KEY_VERSIONS[type(key)])
    write_string(w, key.group)
    if isinstance(key, _MEMBER_KEYS):
        write_string(w, key.member_id)
    return bytes(w)


def decode_share_group_key(buf: memoryview, version: int) -> ShareGroupKey:
    key_type = SHARE_GROUP_KEY_TYPES[version]
    group, pos = read_string(buf, 2)
    if key_type in _MEMBER_KEYS:
        member_id, _ = read_string(buf, pos)
        return key_type(group, member_id)
    return key_type(group)


def _count(w: Writer, n: int) -> None:
    write_uvarint(w, n + 1)


def _write_partitions(w: Writer, partitions: Collection[int]) -> None:
    ordered = sorted(partitions)
    _count(w, len(ordered))
    for partition in ordered:
        w += INT32.pack(partition)


def _write_topic_partitions(w: Writer, topic_partitions: TopicPartitionsMap) -> None:
    _count(w, len(topic_partitions))
    for topic_id in sorted(topic_partitions, key=str):
        write_uuid(w, topic_id)
        _write_partitions(w, topic_partitions[topic_id])
        w.append(0)


def encode_share_group_value(value: ShareGroupValue) -> bytes:
    w = Writer()
    w += INT16.pack(SHARE_GROUP_VALUE_VERSION)
    if isinstance(value, ShareGroupMemberMetadataValue):
        write_compact_nullable_string(w, value.rack_id)
        write_compact_string(w, value.client_id)
        write_compact_string(w, value.client_host)
        _count(w, len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            write_compact_string(w, name)
    elif isinstance(value, ShareGroupMetadataValue):
        w += INT32.pack(value.epoch)
        w += INT64.pack(value.metadata_hash)
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        w += INT32.pack(value.assignment_epoch)
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        _write_topic_partitions(w, value.topic_partitions)
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        w += INT32.pack(value.member_epoch)
        w += INT32.pack(value.previous_member_epoch)
        w += INT8.pack(value.state)
        _write_topic_partitions(w, value.assigned_partitions)
    elif isinstance(value, ShareGroupStatePartitionMetadataValue):
        for topics in (value.initializing_topics, value.initialized_topics):
            _count(w, len(topics))
            for topic in topics:
                write_uuid(w, topic.topic_id)
                write_compact_string(w, topic.topic_name)
                _write_partitions(w, topic.partitions)
                w += INT64.pack(topic.create_timestamp)
                w.append(0)
        _count(w, len(value.deleting_topics))
        for info in value.deleting_topics:
            write_uuid(w, info.topic_id)
            write_compact_string(w, info.topic_name)
            w.append(0)
    else:
        raise TypeError(f"not a share group record value: {value!r}")
    w.append(0)  # tagged fields
    return bytes(w)


# -- decoding -----------------------------------------------------------------------------------------


def _read_count(buf: memoryview, pos: int) -> tuple[int, int]:
    count, pos = read_uvarint(buf, pos)
    if count == 0:
        raise DecodeError(f"null array at offset {pos - 1} where the schema allows none")
    return count - 1, pos


def _read_partitions(buf: memoryview, pos: int) -> tuple[frozenset[int], int]:
    n, pos = _read_count(buf, pos)
    if pos + 4 * n > len(buf):
        raise DecodeError(f"{n} partitions at offset {pos} run past the end of the record")
    partitions = struct.unpack_from(f">{n}i", buf, pos)
    return frozenset(partitions), pos + 4 * n


def _read_topic_partitions(buf: memoryview, pos: int) -> tuple[dict[uuid.UUID, frozenset[int]], int]:
    count, pos = _read_count(buf, pos)
    result = {}
    for _ in range(count):
        topic_id, pos = read_uuid(buf, pos)
        partitions, pos = _read_partitions(buf, pos)
        pos = skip_tagged_fields(buf, pos)
        if partitions:
            result[topic_id] = partitions
    return result, pos


def _read_topics_info(buf: memoryview, pos: int) -> tuple[list[TopicPartitionsInfo], int]:
    count, pos = _read_count(buf, pos)
    topics = []
    for _ in range(count):
        topic_id, pos = read_uuid(buf, pos)
        name, pos = read_compact_string(buf, pos)
        partitions, pos = _read_partitions(buf, pos)
        (created,) = INT64.unpack_from(buf, pos)
        pos = skip_tagged_fields(buf, pos + 8)
        topics.append(TopicPartitionsInfo(topic_id, name, partitions, created))
    return topics, pos


def decode_share_group_value(key: ShareGroupKey, data: bytes) -> ShareGroupValue:
    """The value of a share group record whose key is ``key`` (version 0; later versions only add tagged
    fields, which are skipped)."""
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if version < 0:
        raise DecodeError(f"{type(key).__name__} value version {version} is unknown")
    pos = 2
    if isinstance(key, ShareGroupMemberMetadataKey):
        rack_id, pos = read_compact_nullable_string(buf, pos)
        client_id, pos = read_compact_string(buf, pos)
        client_host, pos = read_compact_string(buf, pos)
        count, pos = _read_count(buf, pos)
        names = []
        for _ in range(count):
            name, pos = read_compact_string(buf, pos)
            names.append(name)
        return ShareGroupMemberMetadataValue(rack_id, client_id, client_host, names)
    if isinstance(key, ShareGroupMetadataKey):
        (epoch,) = INT32.unpack_from(buf, pos)
        metadata_hash = INT64.unpack_from(buf, pos + 4)[0] if len(buf) >= pos + 12 else 0
        return ShareGroupMetadataValue(epoch, metadata_hash)
    if isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        (assignment_epoch,) = INT32.unpack_from(buf, pos)
        return ShareGroupTargetAssignmentMetadataValue(assignment_epoch)
    if isinstance(key, ShareGroupTargetAssignmentMemberKey):
        topic_partitions, _ = _read_topic_partitions(buf, pos)
        return ShareGroupTargetAssignmentMemberValue(topic_partitions)
    if isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        member_epoch, previous, state = struct.unpack_from(">iib", buf, pos)
        assigned, _ = _read_topic_partitions(buf, pos + 9)
        return ShareGroupCurrentMemberAssignmentValue(member_epoch, previous, state, assigned)
    initializing, pos = _read_topics_info(buf, pos)
    initialized, pos = _read_topics_info(buf, pos)
    count, pos = _read_count(buf, pos)
    deleting = []
    for _ in range(count):
        topic_id, pos = read_uuid(buf, pos)
        name, pos = read_compact_string(buf, pos)
        pos = skip_tagged_fields(buf, pos)
        deleting.append(TopicInfo(topic_id, name))
    return ShareGroupStatePartitionMetadataValue(initializing, initialized, deleting)
