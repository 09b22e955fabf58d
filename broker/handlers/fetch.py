"""Fetch (key 1), versions 4-18.

Reads whole record batches from each partition's log as file slices; the response sends them with
``os.sendfile``, so record data never enters Python. Partitions are named (v4-12) or identified by
topic id (v13+). The response holds at most ``max_bytes`` of records across partitions (and never
more than the broker's ``fetch.max.bytes``, 55 MiB by default) and ``partition_max_bytes`` per
partition, except that the first partition with data returns at least one whole batch, as Kafka
does, so a consumer can always make progress.

Long polling: if fewer than ``min_bytes`` are available the request waits, up to ``max_wait_ms``, on
waiters registered with the partitions it reads; an append wakes it, and the read is done again. No
polling loop. A Fetch naming no partitions (the Java consumer sends one as it closes) is answered at
once, as Kafka does.

Consumers only see data below the high watermark. read_committed consumers (isolation_level 1) only
see data below the last stable offset (the first offset of a transaction still open; with none open,
the high watermark), and get the aborted transactions (producer id, first offset) that overlap the
batches returned, from which they skip the aborted records; for read_uncommitted consumers and
followers aborted_transactions is null. Every partition answered is given the log's last stable
offset, at both isolation levels, as Kafka does. A read_committed fetch waits only for bytes below the
last stable offset: data held back by an open transaction does not end its wait, and the marker that
closes the transaction does. Incremental fetch sessions (KIP-227)
are not kept: session creation is answered with session id 0, which tells the client to keep sending
full fetch requests, and an unknown session id gets FETCH_SESSION_ID_NOT_FOUND.

A consumer with a ``consumer_byte_rate`` quota gets at most its quota over the quota windows but one in a
response, and when a response would put it over its quota, it gets an empty one with the throttle time
instead, its bytes not counted, as Kafka answers.

Authorization (with an authorizer): a consumer needs READ on each topic (TOPIC_AUTHORIZATION_FAILED for the
topic's partitions otherwise, said before whether the topic exists); a follower needs CLUSTER_ACTION on the
cluster, or every partition is TOPIC_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import trio

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.partition import DataWaiter, Partition
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import FetchRequest, FetchResponse
from trafka.wire.protocol import ApiKey

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction

READ_COMMITTED = 1
NO_SESSION = 0


@handles(ApiKey.FETCH, 4, 18)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    if request.session_id != NO_SESSION:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=NO_SESSION, responses=[])
    replica_id = replica_id_of(request, ctx.api_version)
    targets = _resolve(ctx, request, replica_id)
    max_bytes = min(request.max_bytes, ctx.broker.config.fetch_max_bytes)
    quotas = ctx.broker.client_quotas
    if quotas.fetch.enabled and replica_id < 0:  # no more than the consumer's quota allows (broker.security.quotas)
        max_bytes = quotas.fetch_max_bytes(ctx.principal, ctx.header.client_id, max_bytes)
    faulted = _faulted(ctx, targets) if ctx.broker.faults else {}
    responses, available = _read(targets, request, ctx.api_version, max_bytes, faulted, replica_id)
    if available < request.min_bytes and request.max_wait_ms > 0 and responses and _all_readable(responses):
        partitions = [p for _, _, p in _flatten(targets) if p is not None]
        waiter = DataWaiter(request.min_bytes, available)
        read_committed = request.isolation_level == READ_COMMITTED
        for partition in partitions:
            partition.add_waiter(waiter, replica=replica_id >= 0, read_committed=read_committed)
        try:
            with trio.move_on_after(request.max_wait_ms / 1000):
                await waiter.event.wait()
        finally:
            for partition in partitions:
                partition.remove_waiter(waiter)
        responses, _ = _read(targets, request, ctx.api_version, max_bytes, faulted, replica_id)
    if quotas.fetch.enabled and replica_id < 0:  # consumer_byte_rate: over it, an empty response
        size = sum(p.records.size for t in responses for p in t.partitions if p.records)
        throttle_ms = quotas.fetch_throttle(ctx.principal, ctx.header.client_id, size)
        if throttle_ms:  # over its quota: the bytes are not sent, and the consumer is told to wait
            return FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE, session_id=NO_SESSION,
                                 responses=[])
    if ctx.broker.metrics is not None:
        _count_bytes_out(ctx.broker.metrics, targets, responses)
    return FetchResponse(error_code=ErrorCode.NONE, session_id=NO_SESSION, responses=responses)


def _count_bytes_out(metrics, targets: list[Target], responses: list[TopicResponse]) -> None:
    """Record bytes of the response, by topic (responses follow the request's topics in order)."""
    for (_, partitions, _), response in zip(targets, responses):
        sent = sum(p.records.size for p in response.partitions if p.records)
        found = next((partition for _, partition in partitions if partition is not None), None)
        if sent and found is not None:
            metrics.bytes_out(found.topic, sent)


Target = tuple[FetchRequest.FetchTopic, list[tuple[FetchRequest.FetchPartition, Partition | None]], ErrorCode]


def _resolve(ctx: RequestContext, request: FetchRequest, replica_id: int) -> list[Target]:
    topics = ctx.broker.topics
    targets: list[Target] = []
    authorizing = ctx.broker.authorizer is not None
    follower_allowed = replica_id < 0 or not authorizing or ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    for wanted in request.topics:
        topic, missing = topics.lookup(wanted.topic, wanted.topic_id, by_id=ctx.api_version >= 13)
        if authorizing and (topic is not None or missing != ErrorCode.UNKNOWN_TOPIC_ID):
            name = topic.name if topic is not None else wanted.topic
            allowed = follower_allowed if replica_id >= 0 else ctx.authorize(AclOperation.READ,
                                                                               AclResourceType.TOPIC, name)
            if not allowed:
                topic, missing = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        partitions = []
        for wanted_partition in wanted.partitions:
            index = wanted_partition.partition
            found = topic.partitions[index] if topic is not None and 0 <= index < len(topic.partitions) else None
            partitions.append((wanted_partition, found))
        targets.append((wanted, partitions, missing))
    return targets


def _flatten(targets: list[Target]):
    for wanted, partitions, _ in targets:
        for wanted_partition, partition in partitions:
            yield wanted, wanted_partition, partition


def _faulted(ctx: RequestContext, targets: list[Target]) -> dict[tuple[str, int], int]:
    """The partitions fault rules answer with an error, and the codes (asked once per request)."""
    faulted = {}
    for _, wanted_partition, partition in _flatten(targets):
        if partition is not None:
            code = ctx.broker.faults.partition_error(ApiKey.FETCH, ctx.header.client_id, partition.topic,
                                                     partition.index, listener=ctx.listener,
                                                     client_host=ctx.client_host)
            if code is not None:
                faulted[(partition.topic, partition.index)] = code
    return faulted


def replica_id_of(request: FetchRequest, version: int) -> int:
    """The fetching broker's id (a follower), or -1 for a consumer: in the request up to v14, in
    its replica state from v15."""
    if version >= 15:
        return request.replica_state.replica_id if request.replica_state is not None else -1
    return request.replica_id


def _read(targets: list[Target], request: FetchRequest, version: int, max_bytes: int,
          faulted: dict[tuple[str, int], int], replica_id: int = -1) -> tuple[list[TopicResponse], int]:
    """One pass over the requested partitions; returns the responses and the record bytes found.
    Partitions in ``faulted`` get their fault rule's error code and no records. A follower
    (``replica_id`` >= 0) reads up to the log end offset and, from v12 (where the response can say
    so), is told where its log diverges."""
    remaining = max_bytes
    read_committed = request.isolation_level == READ_COMMITTED and replica_id < 0
    total = 0
    responses = []
    for wanted, partitions, missing in targets:
        partition_responses = []
        for wanted_partition, partition in partitions:
            index = wanted_partition.partition
            if partition is None:
                partition_responses.append(_error(index, missing))
                continue
            if faulted and (partition.topic, index) in faulted:
                partition_responses.append(_error(index, ErrorCode(faulted[(partition.topic, index)])))
                continue
            try:
                partition.check_leader_epoch(wanted_partition.current_leader_epoch)
                limit = min(wanted_partition.partition_max_bytes, max(remaining, 0))
                diverging = None
                if replica_id < 0:
                    info = partition.read(wanted_partition.fetch_offset, limit, min_one_batch=total == 0,
                                          read_committed=read_committed)
                else:
                    if version >= 12:
                        diverging = partition.diverging_epoch(wanted_partition.last_fetched_epoch,
                                                              wanted_partition.fetch_offset)
                    info = None if diverging is not None else partition.read_for_follower(
                        replica_id, wanted_partition.fetch_offset, limit, min_one_batch=total == 0)
            except KafkaError as exc:
                response = _error(index, exc.code, partition if version >= 12 else None)
                if partition.is_leader:  # e.g. OFFSET_OUT_OF_RANGE: the offsets tell the client where to go
                    response.high_watermark = partition.high_watermark
                    response.last_stable_offset = partition.last_stable_offset
                    response.log_start_offset = partition.log_start_offset
                partition_responses.append(response)
                continue
            response = PartitionData(
                partition_index=index,
                error_code=ErrorCode.NONE,
                high_watermark=partition.high_watermark,
                last_stable_offset=partition.last_stable_offset,
                log_start_offset=partition.log_start_offset,
                aborted_transactions=[] if read_committed else None,
                records=b"",
            )
            if diverging is not None:
                response.diverging_epoch = FetchResponse.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
            elif info.records is not None:
                response.records = info.records
                total += info.records.size
                remaining -= info.records.size
                if info.aborted_transactions:
                    response.aborted_transactions = [
                        AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
                        for txn in info.aborted_transactions
                    ]
            partition_responses.append(response)
        responses.append(TopicResponse(topic=wanted.topic, topic_id=wanted.topic_id, partitions=partition_responses))
    return responses, total


def _all_readable(responses: list[TopicResponse]) -> bool:
    return all(p.error_code == ErrorCode.NONE for t in responses for p in t.partitions)


def _error(index: int, code: ErrorCode, partition: Partition | None = None) -> PartitionData:
    data = PartitionData(
        partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1, records=b""
    )
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) and partition is not None:
        # The leader as this broker knows it (given from v12), so the client need not ask Metadata first.
        data.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=partition.leader_id,
                                                             leader_epoch=partition.leader_epoch)
    return data
