"""Kafka's record schemas for ``__transaction_state``: one record per change of a transactional id.

Key ``TransactionLogKey`` (version 0): the transactional id. Value ``TransactionLogValue``: producer id
and epoch, transaction timeout, state id, the transaction's partitions by topic, last update and start
timestamps. Version 0 is written (what Kafka writes for clients of transaction version 1); version 1,
the flexible encoding with the previous and next producer ids and the client's transaction version as
tagged fields, is read too. A null value is a tombstone: the id expired, and compaction drops it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from trafka.broker.txn.state import NO_PRODUCER_ID, TransactionMetadata, TransactionState
from trafka.wire.primitives import (
    INT8,
    INT16,
    INT32,
    INT64,
    DecodeError,
    Writer,
    read_compact_string,
    read_string,
    read_uvarint,
    write_string,
)

KEY_VERSION = 0
VALUE_VERSION = 0


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w += INT16.pack(KEY_VERSION)
    write_string(w, transactional_id)
    return bytes(w)


def decode_key(data: bytes) -> str:
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if version != 0:
        raise DecodeError(f"TransactionLogKey version {version} is unknown")
    transactional_id, _ = read_string(buf, 2)
    return transactional_id


def encode_value(metadata: TransactionMetadata) -> bytes:
    """The metadata as Kafka writes it. Completed and empty transactions list no partitions."""
    w = Writer()
    w += INT16.pack(VALUE_VERSION)
    w += INT64.pack(metadata.producer_id)
    w += INT16.pack(metadata.producer_epoch)
    w += INT32.pack(metadata.timeout_ms)
    w += INT8.pack(metadata.state.id)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    w += INT32.pack(len(by_topic))
    for topic, partitions in by_topic.items():
        write_string(w, topic)
        w += INT32.pack(len(partitions))
        for partition in partitions:
            w += INT32.pack(partition)
    w += INT64.pack(metadata.last_update_ms)
    w += INT64.pack(metadata.start_ms)
    return bytes(w)


@dataclass
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: set[tuple[str, int]]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID

    def to_metadata(self, transactional_id: str) -> TransactionMetadata:
        return TransactionMetadata(
            transactional_id, self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
            set(self.partitions), self.start_ms, self.last_update_ms,
            last_producer_id=self.previous_producer_id,
        )


def decode_value(data: bytes) -> TransactionLogValue:
    buf = memoryview(data)
    (version,) = INT16.unpack_from(buf, 0)
    if version not in (0, 1):
        raise DecodeError(f"TransactionLogValue version {version} is unknown")
    flexible = version == 1
    producer_id, producer_epoch, timeout_ms, state_id = _HEAD.unpack_from(buf, 2)
    pos = 2 + _HEAD.size
    partitions: set[tuple[str, int]] = set()
    count, pos = _count(buf, pos, flexible)
    for _ in range(max(count, 0)):
        topic, pos = (read_compact_string if flexible else read_string)(buf, pos)
        ids, pos = _count(buf, pos, flexible)
        for _ in range(ids):
            partitions.add((topic, INT32.unpack_from(buf, pos)[0]))
            pos += 4
        if flexible:
            pos = _tagged(buf, pos, {})
    last_update_ms, start_ms = _TIMES.unpack_from(buf, pos)
    pos += _TIMES.size
    tags: dict[int, bytes] = {}
    if flexible:
        _tagged(buf, pos, tags)
    value = TransactionLogValue(producer_id, producer_epoch, timeout_ms, TransactionState.from_id(state_id),
                                partitions, last_update_ms, start_ms)
    if 0 in tags:
        (value.previous_producer_id,) = INT64.unpack(tags[0])
    if 1 in tags:
        (value.next_producer_id,) = INT64.unpack(tags[1])
    return value


_HEAD = struct.Struct(">qhib")
_TIMES = struct.Struct(">qq")


def _count(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        count, pos = read_uvarint(buf, pos)
        return count - 1, pos
    return INT32.unpack_from(buf, pos)[0], pos + 4


def _tagged(buf: memoryview, pos: int, into: dict[int, bytes]) -> int:
    """Read a tagged-field section, keeping each field's bytes by tag; returns the position after it."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        into[tag] = bytes(buf[pos:pos + size])
        pos += size
    return pos
