"""What the coordinators share about the internal topics they keep their state in (``__consumer_offsets``
for groups, ``__transaction_state`` for transactional ids): which partition a key belongs to, how a
partition is read back when its coordinator loads it, and what a client is told when a write to one fails."""
from __future__ import annotations

import functools
from collections.abc import Iterator

from trafka.storage.log import Log
from trafka.wire.errors import ErrorCode
from trafka.wire.records import RecordBatch, iter_batches


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, wrapped to a signed 32-bit int."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=8192)
def partition_for(key: str, partitions: int) -> int:
    """Kafka's key-to-partition mapping for a group id or a transactional id: ``Utils.abs(hashCode) %
    partitions`` (``Utils.abs`` maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(2**31) else abs(h)) % partitions


def read_for_load(storage_log: Log, buffer_bytes: int) -> Iterator[list[RecordBatch]]:
    """The batches of a partition from its log start offset to its log end (as it is when the reading
    gets there), ``buffer_bytes`` at a time (a larger batch comes whole), as Kafka's coordinators read
    with their load buffer (``offsets.load.buffer.size``, ``transaction.state.log.load.buffer.size``):
    a list per read, so that a loader may yield between them. The first batch may begin below the log
    start offset; its records there are not the partition's any more."""
    offset = storage_log.log_start_offset
    while offset < storage_log.log_end_offset:
        info = storage_log.read(offset, buffer_bytes, max_offset=storage_log.log_end_offset, min_one_batch=True)
        if info.records is None or info.records.size == 0:
            return
        batches = [batch for batch in iter_batches(info.records.read()) if batch.last_offset >= offset]
        if not batches:
            return
        yield batches
        offset = batches[-1].last_offset + 1


#: A failed append to an internal topic, as the coordinator answers it (Kafka's mapping).
WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}
