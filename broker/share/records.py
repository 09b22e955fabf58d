"""Kafka's record schemas for ``__share_group_state``: the share coordinator's log of share partition state.

Two kinds of record, both keyed by (group id, topic id, partition):

- ``ShareSnapshotKey`` (key version 0) / ``ShareSnapshotValue`` (value version 0): the whole state of a share
  partition: snapshot epoch, state epoch, leader epoch, start offset, create and write timestamps, state batches,
  and the delivery complete count as tagged field 0 (absent when -1). A null value (a tombstone) is the state
  deleted.
- ``ShareUpdateKey`` (key version 1) / ``ShareUpdateValue`` (value version 0): a change since the last snapshot,
  applied over it: snapshot epoch, leader epoch, start offset (-1: unchanged), state batches, and the delivery
  complete count as tagged field 0.

Keys are not flexible (a version, then a string, a uuid and an int32); values are flexible (compact arrays and
tagged fields), as Kafka's coordinator records are.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from trafka.broker.share.state import StateBatch
from trafka.wire.primitives import (
    INT8,
    INT16,
    INT32,
    INT64,
    DecodeError,
    Writer,
    read_string,
    read_tagged_field_header,
    read_uuid,
    read_uvarint,
    skip_tagged_fields,
    write_string,
    write_tagged_fields,
    write_uuid,
    write_uvarint,
)

SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1
VALUE_VERSION = 0
_DELIVERY_COMPLETE_COUNT_TAG = 0


@dataclass(frozen=True)
class ShareKey:
    """The key of a state record: whose state, and whether the value is a snapshot or an update."""

    group_id: str
    topic_id: uuid.UUID
    partition: int
    snapshot: bool


@dataclass(frozen=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


def encode_key(key: ShareKey) -> bytes:
    w = Writer()
    w += INT16.pack(SNAPSHOT_KEY_VERSION if key.snapshot else UPDATE_KEY_VERSION)
    write_string(w, key.group_id)
    write_uuid(w, key.topic_id)
    w += INT32.pack(key.partition)
    return bytes(w)


def decode_key(data: bytes | memoryview) -> ShareKey | None:
    """The key, or None for a record of a kind this coordinator does not know (skipped, as Kafka does)."""
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
        return None
    group_id, pos = read_string(buf, 2)
    topic_id, pos = read_uuid(buf, pos)
    (partition,) = INT32.unpack_from(buf, pos)
    return ShareKey(group_id, topic_id, partition, version == SNAPSHOT_KEY_VERSION)


def _write_batches(w: Writer, batches: tuple[StateBatch, ...]) -> None:
    write_uvarint(w, len(batches) + 1)
    for batch in batches:
        w += INT64.pack(batch.first_offset)
        w += INT64.pack(batch.last_offset)
        w += INT8.pack(batch.delivery_state)
        w += INT16.pack(batch.delivery_count)
        w.append(0)


def _read_batches(buf: memoryview, pos: int) -> tuple[tuple[StateBatch, ...], int]:
    count, pos = read_uvarint(buf, pos)
    if count == 0:
        raise DecodeError("StateBatches is null")
    batches = []
    for _ in range(count - 1):
        (first,) = INT64.unpack_from(buf, pos)
        (last,) = INT64.unpack_from(buf, pos + 8)
        (state,) = INT8.unpack_from(buf, pos + 16)
        (delivered,) = INT16.unpack_from(buf, pos + 17)
        pos = skip_tagged_fields(buf, pos + 19)
        batches.append(StateBatch(first, last, state, delivered))
    return tuple(batches), pos


def _write_delivery_complete_count(w: Writer, count: int) -> None:
    write_tagged_fields(w, [] if count == -1 else [(_DELIVERY_COMPLETE_COUNT_TAG, INT32.pack(count))])


def _read_delivery_complete_count(buf: memoryview, pos: int) -> int:
    count = -1
    fields, pos = read_uvarint(buf, pos)
    for _ in range(fields):
        tag, start, end = read_tagged_field_header(buf, pos)
        if tag == _DELIVERY_COMPLETE_COUNT_TAG:
            (count,) = INT32.unpack_from(buf, start)
        pos = end
    return count


def encode_snapshot_value(value: ShareSnapshotValue) -> bytes:
    w = Writer()
    w += INT16.pack(VALUE_VERSION)
    w += INT32.pack(value.snapshot_epoch)
    w += INT32.pack(value.state_epoch)
    w += INT32.pack(value.leader_epoch)
    w += INT64.pack(value.start_offset)
    w += INT64.pack(value.create_timestamp)
    w += INT64.pack(value.write_timestamp)
    _write_batches(w, value.state_batches)
    _write_delivery_complete_count(w, value.delivery_complete_count)
    return bytes(w)


def decode_snapshot_value(data: bytes | memoryview) -> ShareSnapshotValue:
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if version != VALUE_VERSION:
        raise DecodeError(f"ShareSnapshotValue version {version} is unknown")
    snapshot_epoch, state_epoch, leader_epoch = (INT32.unpack_from(buf, p)[0] for p in (2, 6, 10))
    start_offset, create_timestamp, write_timestamp = (INT64.unpack_from(buf, p)[0] for p in (14, 22, 30))
    batches, pos = _read_batches(buf, 38)
    count = _read_delivery_complete_count(buf, pos)
    return ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, create_timestamp,
                              write_timestamp, batches, count)


def encode_update_value(value: ShareUpdateValue) -> bytes:
    w = Writer()
    w += INT16.pack(VALUE_VERSION)
    w += INT32.pack(value.snapshot_epoch)
    w += INT32.pack(value.leader_epoch)
    w += INT64.pack(value.start_offset)
    _write_batches(w, value.state_batches)
    _write_delivery_complete_count(w, value.delivery_complete_count)
    return bytes(w)


def decode_update_value(data: bytes | memoryview) -> ShareUpdateValue:
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if version != VALUE_VERSION:
        raise DecodeError(f"ShareUpdateValue version {version} is unknown")
    (snapshot_epoch,) = INT32.unpack_from(buf, 2)
    (leader_epoch,) = INT32.unpack_from(buf, 6)
    (start_offset,) = INT64.unpack_from(buf, 10)
    batches, pos = _read_batches(buf, 18)
    count = _read_delivery_complete_count(buf, pos)
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, batches, count)
