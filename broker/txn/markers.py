"""Transaction markers: the COMMIT or ABORT control batch that ends a producer's transaction in each
partition it wrote to (Kafka's ``KafkaApis.handleWriteTxnMarkersRequest`` and the appends it makes).

:func:`write_markers` is the one way markers are written: the transaction coordinator calls it for the
partitions led here, and the WriteTxnMarkers handler for the markers other brokers' coordinators send.
Each marker is appended by the partition's leader as a coordinator write, then waited on as Kafka's
acks=all append is: until the high watermark passes it, within the request timeout. Per partition the
outcome is an error code:

- UNKNOWN_TOPIC_OR_PARTITION where this broker holds no replica of the partition (or it does not exist),
  NOT_LEADER_OR_FOLLOWER where it holds a follower, or stops leading before the marker is replicated;
- NOT_ENOUGH_REPLICAS where the ISR is smaller than the topic's min.insync.replicas (nothing is
  written), NOT_ENOUGH_REPLICAS_AFTER_APPEND where it shrank below while the marker replicated,
  REQUEST_TIMED_OUT where the high watermark did not pass the marker in time;
- from the log: TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the producer's last
  marker's, INVALID_PRODUCER_EPOCH for an older producer epoch, KAFKA_STORAGE_ERROR;
- NONE: the marker is in the log and replicated.

Once a marker is replicated, the caller's ``on_replicated`` hears of it: the broker has the group
coordinator complete the producer's transactional offset commits of a ``__consumer_offsets`` partition
(commit or drop them), as Kafka's group coordinator does when the marker's append completes.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple

import trio

from trafka.broker.partition import Partition
from trafka.broker.topics import TopicLookup
from trafka.wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

#: How long a marker may wait for its replicas (Kafka's request.timeout.ms default).
MARKER_TIMEOUT_S = 30.0


class TxnMarker(NamedTuple):
    """The end of one producer's transaction, to be written to ``partitions`` ((topic, index) pairs)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool  # COMMIT, else ABORT
    partitions: Sequence[tuple[str, int]]
    transaction_version: int = 0  # the coordinator's (WriteTxnMarkers v2); 2 validates the epoch strictly


async def write_markers(topics: TopicLookup, markers: Sequence[TxnMarker], *,
                        on_replicated: Callable[[tuple[str, int], TxnMarker], None] | None = None,
                        timeout_s: float = MARKER_TIMEOUT_S) -> dict[tuple[str, int], ErrorCode]:
    """Write ``markers`` to their partitions of ``topics`` (all appended, in order, then waited on
    together) and return each (topic, partition)'s error code; ``on_replicated(partition, marker)`` is
    called for each marker once replicated. Where markers of one call name the same partition,
    its code is the first error among them; callers that need one code per marker (WriteTxnMarkers)
    keep the partitions of one call distinct."""
    results: dict[tuple[str, int], ErrorCode] = {}
    waiting: list[tuple[TxnMarker, tuple[str, int], Partition, int, int]] = []
    for marker in markers:
        for key in dict.fromkeys(marker.partitions):  # a partition named twice gets one marker
            code, partition, min_insync_replicas = _leader(topics, *key)
            if partition is not None:
                try:
                    info = partition.append_marker(marker.producer_id, marker.producer_epoch,
                                                   marker.coordinator_epoch, marker.committed,
                                                   transaction_version=marker.transaction_version)
                except KafkaError as exc:
                    log.info("%s marker of producer %d (epoch %d, coordinator epoch %d) refused by %s-%d: %s",
                             _kind(marker), marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                             *key, exc)
                    code = ErrorCode(exc.code)
                else:
                    waiting.append((marker, key, partition, info.last_offset + 1, min_insync_replicas))
            _note(results, key, code)
    if not waiting:
        return results
    deadline = trio.current_time() + timeout_s
    for marker, key, partition, required, min_insync_replicas in waiting:
        code = await partition.await_replicated(required, deadline, min_insync_replicas)
        if code == ErrorCode.NONE and on_replicated is not None:
            on_replicated(key, marker)
        _note(results, key, code)
    return results


def _leader(topics: TopicLookup, topic: str, index: int) -> tuple[ErrorCode, Partition | None, int]:
    """The partition to append to, with the topic's min.insync.replicas; or the error that says why not."""
    found = topics.get(topic)
    if found is None or not 0 <= index < len(found.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, 0
    partition = found.partitions[index]
    if partition.log is None:  # no replica here
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, 0
    if not partition.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None, 0
    min_insync_replicas = found.log_config.min_insync_replicas
    if len(partition.isr) < min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS, None, 0
    return ErrorCode.NONE, partition, min_insync_replicas


def _note(results: dict[tuple[str, int], ErrorCode], key: tuple[str, int], code: ErrorCode) -> None:
    if results.get(key, ErrorCode.NONE) == ErrorCode.NONE:
        results[key] = code


def _kind(marker: TxnMarker) -> str:
    return "COMMIT" if marker.committed else "ABORT"
