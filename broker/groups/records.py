"""Kafka's record schemas for ``__consumer_offsets``: the keys and values the group coordinator writes.

Every record's key and value start with an int16 schema version. Two kinds of record live in the topic:

- offset commits: key ``OffsetCommitKey`` (version 1: group, topic, partition), value
  ``OffsetCommitValue`` (version 3: offset, leader epoch, metadata, commit timestamp; version 1 adds an
  expire timestamp when the committer asked for a retention);
- group metadata: key ``GroupMetadataKey`` (version 2: group), value ``GroupMetadataValue`` (version 3:
  protocol type, generation, protocol, leader, state timestamp and the members with their subscription
  and assignment).

A null value is a tombstone: the offset (or group) was deleted, and compaction drops the key. The
encoding is Kafka's own, so the topic can be read by Kafka's tools, and this module reads every
version Kafka has written (values 0-4, where 4 is the flexible encoding).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from wire.primitives import (
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
    read_uvarint,
    skip_tagged_fields,
    write_bytes,
    write_nullable_string,
    write_string,
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


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    """The key of a ``__consumer_offsets`` record; raises DecodeError for a version Kafka never wrote
    for the group coordinator's classic records."""
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
    raise DecodeError(f"__consumer_offsets key version {version} is not a classic group record")


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
