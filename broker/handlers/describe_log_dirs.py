"""DescribeLogDirs (key 35), versions 1-5.

The broker's log directory and the partitions it holds there, as ``kafka-log-dirs.sh --describe`` and the
admin clients' ``describe_log_dirs()`` show them. A trafka broker has one log directory (``log.dirs``),
reported by its absolute path. For each partition with a replica on this broker (leader or follower; in a
cluster, a partition assigned elsewhere has no local log and is left out): its size in bytes (the sum of
its segments' sizes, as Kafka's ``UnifiedLog.size``), an offset lag of 0 (Kafka's lag of a future replica
behind the current one; for a current replica it is ``max(high watermark - log end offset, 0)``, always 0)
and ``is_future_key`` false (trafka does not move replicas between directories).

A null topic list means every partition held here; otherwise only the listed partitions, and topics or
partitions this broker does not hold are left out of the answer without an error, as Kafka leaves them
out. A topic none of whose listed partitions is held here is not listed. Without an authorizer every
client may describe the cluster, so the top-level error is always NONE.

Version notes: v2 is the first flexible version; v3 added the top-level error code; v4 added the
volume's total and usable bytes (from ``os.statvfs`` of the log directory; -1 if it cannot be read);
v5 added ``is_cordoned``, always false here.
With an authorizer, DESCRIBE on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED, with no directories).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.broker.partition import Partition
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from trafka.wire.protocol import ApiKey

log = logging.getLogger(__name__)

DirResult = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionResult = DescribeLogDirsResponse.DescribeLogDirsPartition

UNKNOWN_SPACE = -1


def volume_space(path: str) -> tuple[int, int]:
    """Total and usable bytes of the volume holding ``path`` (Java's ``FileStore.getTotalSpace`` and
    ``getUsableSpace``), or -1 each when they cannot be read."""
    try:
        stats = os.statvfs(path)
    except OSError as exc:
        log.warning("cannot read the free space of %s: %s", path, exc)
        return UNKNOWN_SPACE, UNKNOWN_SPACE
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


def _held(partitions: Iterable[Partition | None]) -> Iterator[Partition]:
    for partition in partitions:
        if partition is not None and partition.log is not None:
            yield partition


def _partitions(ctx: RequestContext, request: DescribeLogDirsRequest) -> dict[str, list[Partition]]:
    """The partitions to describe that this broker holds, by topic."""
    topics = ctx.broker.topics
    wanted: dict[str, list[Partition]] = {}
    if request.topics is None:
        for topic in topics:
            wanted[topic.name] = list(_held(topic.partitions))
    else:
        for requested in request.topics:
            found = wanted.setdefault(requested.topic, [])
            known = {partition.index for partition in found}
            for partition in _held(topics.partition(requested.topic, index) for index in requested.partitions):
                if partition.index not in known:
                    known.add(partition.index)
                    found.append(partition)
    return {name: partitions for name, partitions in wanted.items() if partitions}


@handles(ApiKey.DESCRIBE_LOG_DIRS, 1, 5)
async def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    log_dir = os.path.abspath(ctx.broker.config.data_dir)
    topics = [
        TopicResult(
            name=name,
            partitions=[
                PartitionResult(
                    partition_index=partition.index,
                    partition_size=partition.log.size_in_bytes,
                    offset_lag=0,
                    is_future_key=False,
                )
                for partition in sorted(partitions, key=lambda p: p.index)
            ],
        )
        for name, partitions in sorted(_partitions(ctx, request).items())
    ]
    total_bytes, usable_bytes = volume_space(log_dir)
    result = DirResult(
        error_code=ErrorCode.NONE,
        log_dir=log_dir,
        topics=topics,
        total_bytes=total_bytes,
        usable_bytes=usable_bytes,
        is_cordoned=False,
    )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result])
