"""Produce (key 0), versions 3-13 served; 0-13 advertised.

Kafka 4 still advertises v0-2 so that old librdkafka builds negotiate a version at all, and rejects
them when used: this broker does the same (the connection is closed with a log line saying why).

Each partition's records are one record batch (v3+ requires exactly one; as in Kafka, bytes after the
last whole batch are not a batch and are left out). The batch stays bytes: the
log validates its header and CRC-32C, checks the idempotent producer's sequence, patches the base
offset and leader epoch in place and appends it; records are not decoded. Only the partition's
leader appends; another broker answers NOT_LEADER_OR_FOLLOWER with the leader it knows (v10+).
acks=1 is answered once the leader has the batch. acks=all with fewer in-sync replicas than
min.insync.replicas fails with NOT_ENOUGH_REPLICAS before the append; otherwise it is answered once
every in-sync replica has the batch (the high watermark passed it), waiting on the partition within
the request's timeout (REQUEST_TIMED_OUT after it; NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR
shrank below the minimum meanwhile). With a single replica the high watermark moves on every append,
so both are answered at once.
A batch refused for some of its records (a record without a key in a compacted topic, a timestamp out
of ``message.timestamp.before/after.max.ms``) names them in the response's record errors (v8+,
KIP-467), each with its index in the batch and why, under Kafka's summary as the error message:
clients fail those records and may send the others again.
acks=0 gets no response at all; if any partition failed, the connection is closed instead, as Kafka
does, so the producer refreshes its metadata. Produce never creates topics: that is Metadata's job.

Transaction verification (KIP-890, broker.txn.verification; ``transaction.partition.verification.enable``,
on by default): in a request with a transactional id, a transactional batch whose producer has no
transaction open in the partition at its epoch is first verified with the id's coordinator (one
question per request); a partition not in the producer's ongoing transaction is refused, nothing
appended (INVALID_TXN_STATE up to v10, TRANSACTION_ABORTABLE from v11; INVALID_PRODUCER_EPOCH for a
fenced producer; NOT_ENOUGH_REPLICAS while the coordinator cannot answer), and the other partitions are
served as usual. Transactional batches of more than one producer in one request are
INVALID_PRODUCER_ID_MAPPING everywhere. Requests without a transactional id pay nothing for it.

Authorization (with an authorizer): a request carrying a transactional batch needs WRITE on its
transactional id, or every partition is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs
WRITE, or its partitions are TOPIC_AUTHORIZATION_FAILED, before anything else is said of them (an unknown
topic the producer may not write to is not disclosed). An idempotent producer needs nothing more: its
InitProducerId was authorized.
"""
from __future__ import annotations

import logging
import struct
from collections.abc import Sequence

import trio

from trafka.broker.handlers.registry import CloseConnection, RequestContext, handles
from trafka.broker.partition import Partition
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.txn import verification
from trafka.storage.producer_state import VerificationGuard
from trafka.wire.errors import ErrorCode, KafkaError, RecordError
from trafka.wire.messages import ProduceRequest, ProduceResponse
from trafka.wire.protocol import ApiKey
from trafka.wire.records import LOG_OVERHEAD, RecordBatch

log = logging.getLogger(__name__)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse

VALID_ACKS = (-1, 0, 1)
#: The smallest record Kafka has ever had (magic 0): a batch length below it is corrupt.
MIN_RECORD_SIZE = 14
_BATCH_LENGTH = struct.Struct(">i")
#: Transaction verification's outcome per partition data, by its (topic, partition) place in the request:
#: the batch with its guard, or the response refusing it.
Verified = dict[tuple[int, int], tuple[bytearray | memoryview, VerificationGuard | None] | PartitionResponse]


@handles(ApiKey.PRODUCE, 3, 13, advertised_min_version=0)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    topics = ctx.broker.topics
    acks = request.acks
    responses: list[TopicResponse] = []
    # acks=all partitions whose batch is not below the high watermark yet.
    replicating: list[tuple[Partition, int, PartitionResponse, int]] = []
    # Transaction verification: per partition data (by its place in the request), its batch and guard,
    # or its refusal.
    verified: Verified | None = None
    authorizing = ctx.broker.authorizer is not None
    if authorizing and _has_transactional_batch(request) and (
            request.transactional_id is None
            or not ctx.authorize(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, request.transactional_id)):
        return _refuse_all(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if request.transactional_id is not None and ctx.broker.config.transaction_partition_verification_enable:
        verified = await _verify_transaction(ctx, request)
    for place, topic_data in enumerate(request.topic_data):
        topic, unknown = topics.lookup(topic_data.name, topic_data.topic_id, by_id=ctx.api_version >= 13)
        denied = authorizing and (topic is not None or topic_data.name) and not ctx.authorize(
            AclOperation.WRITE, AclResourceType.TOPIC, topic.name if topic is not None else topic_data.name)
        partition_responses = []
        for data_place, data in enumerate(topic_data.partition_data):
            if denied:
                partition_responses.append(_error(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if acks not in VALID_ACKS:
                partition_responses.append(_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if topic is None or not 0 <= data.index < len(topic.partitions):
                partition_responses.append(_error(data.index, unknown))
                continue
            partition = topic.partitions[data.index]
            if not partition.is_leader:
                partition_responses.append(_not_leader(data.index, partition, ctx.api_version))
                continue
            if acks == -1 and len(partition.isr) < topic.log_config.min_insync_replicas:
                partition_responses.append(
                    _error(
                        data.index,
                        ErrorCode.NOT_ENOUGH_REPLICAS,
                        f"The size of the current ISR {len(partition.isr)} is insufficient to satisfy "
                        f"the min.isr requirement of {topic.log_config.min_insync_replicas}",
                    )
                )
                continue
            if ctx.broker.faults:
                code = ctx.broker.faults.partition_error(ApiKey.PRODUCE, ctx.header.client_id, partition.topic,
                                                         data.index, listener=ctx.listener,
                                                         client_host=ctx.client_host)
                if code is not None:  # a fault rule's answer: nothing is appended here
                    partition_responses.append(_error(data.index, ErrorCode(code)))
                    continue
            try:
                if verified is not None and (place, data_place) in verified:
                    outcome = verified[(place, data_place)]
                    if isinstance(outcome, PartitionResponse):
                        partition_responses.append(outcome)
                        continue
                    records, guard = outcome
                    _check_guard(partition, RecordBatch(records), guard)
                else:
                    records = _single_batch(data.records, ctx.api_version)
                info = partition.append(records)
                if ctx.broker.metrics is not None:
                    ctx.broker.metrics.bytes_in(partition.topic, len(records))
            except KafkaError as exc:
                log.debug("produce to %s-%d rejected: %s", partition.topic, data.index, exc)
                partition_responses.append(_error(data.index, exc.code, exc.message or None, exc.record_errors))
                continue
            response = PartitionResponse(
                index=data.index,
                error_code=ErrorCode.NONE,
                base_offset=info.first_offset,
                log_append_time_ms=info.log_append_time,
                log_start_offset=info.log_start_offset,
            )
            partition_responses.append(response)
            if acks == -1 and partition.high_watermark <= info.last_offset:
                replicating.append((partition, info.last_offset + 1, response, topic.log_config.min_insync_replicas))
        responses.append(
            TopicResponse(name=topic_data.name, topic_id=topic_data.topic_id, partition_responses=partition_responses)
        )
    if replicating:
        await _await_replication(replicating, request.timeout_ms)
    if acks == 0:
        failed = [
            f"{t.name or t.topic_id}-{p.index}: {ErrorCode(p.error_code).name}"
            for t in responses
            for p in t.partition_responses
            if p.error_code != ErrorCode.NONE
        ]
        if failed:
            # No response is expected, so closing is the only way to tell the producer to refresh
            # its metadata and look again.
            raise CloseConnection(f"acks=0 produce failed for {', '.join(failed)}")
        return None
    return ProduceResponse(responses=responses)


def _has_transactional_batch(request: ProduceRequest) -> bool:
    """Whether a batch of the request is transactional (its header says so; records are not read)."""
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            try:
                if data.records is not None and RecordBatch(data.records).is_transactional:
                    return True
            except KafkaError:
                continue  # refused by the append loop
    return False


def _refuse_all(request: ProduceRequest, code: ErrorCode) -> ProduceResponse:
    """Every partition of the request refused with ``code``; acks=0 closes the connection instead."""
    if request.acks == 0:
        raise CloseConnection(f"acks=0 produce refused: {code.name}")
    return ProduceResponse(responses=[
        TopicResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                      partition_responses=[_error(data.index, code) for data in topic_data.partition_data])
        for topic_data in request.topic_data])


async def _verify_transaction(
    ctx: RequestContext, request: ProduceRequest,
) -> Verified:
    """Verify with the transactional id's coordinator the partitions whose transactional batch would
    start a transaction, by the place of their partition data in the request: the batch and its guard
    when the coordinator confirmed it, the response refusing it otherwise. Partitions that need no
    verification, or fail the usual checks (left to the append loop), are not in it."""
    topics = ctx.broker.topics
    by_data: Verified = {}
    wanted: dict[tuple[str, int], tuple[tuple[int, int], bytearray | memoryview, Partition, VerificationGuard]] = {}
    producers: set[tuple[int, int]] = set()
    pending: list[tuple[tuple[int, int], int, bytearray | memoryview, Partition]] = []
    for place, topic_data in enumerate(request.topic_data):
        topic, _unknown = topics.lookup(topic_data.name, topic_data.topic_id, by_id=ctx.api_version >= 13)
        if topic is None:
            continue
        for data_place, data in enumerate(topic_data.partition_data):
            if not 0 <= data.index < len(topic.partitions) or not topic.partitions[data.index].is_leader:
                continue
            try:
                records = _single_batch(data.records, ctx.api_version)
                batch = RecordBatch(records)
                if batch.magic != 2 or not batch.is_transactional or batch.producer_id < 0:
                    continue
            except KafkaError:
                continue  # refused by the append loop
            producers.add((batch.producer_id, batch.producer_epoch))
            pending.append(((place, data_place), data.index, records, topic.partitions[data.index]))
    if not pending:
        return by_data
    if len(producers) > 1:
        refusal = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        message = "Transactional records contained more than one producer ID"
        return {key: _error(index, refusal, message) for key, index, _, _ in pending}
    ((producer_id, producer_epoch),) = producers
    for key, index, records, partition in pending:
        state = partition.log.producer_state
        if state.has_ongoing_transaction(producer_id, producer_epoch):
            by_data[key] = (records, None)  # the transaction is open here: nothing to verify
            continue
        wanted[(partition.topic, index)] = (key, records, partition, state.start_verification(producer_id))
    if not wanted:
        return by_data
    broker = ctx.broker
    answers = await verification.verify(broker.transaction_coordinator(), broker.peers, broker.node_id,
                                        request.transactional_id, producer_id, producer_epoch,
                                        list(wanted))
    for topic_partition, (key, records, partition, guard) in wanted.items():
        code = answers.get(topic_partition, ErrorCode.NONE)
        if code == ErrorCode.NONE:
            by_data[key] = (records, guard)
            continue
        refusal, message = verification.produce_error(code, ctx.api_version)
        log.debug("produce to %s-%d by producer %d epoch %d not verified: %s", *topic_partition, producer_id,
                  producer_epoch, code.name)
        by_data[key] = _error(topic_partition[1], refusal, message)
    return by_data


def _check_guard(partition: Partition, batch: RecordBatch, guard: VerificationGuard | None) -> None:
    """Refuse a verified batch if its producer's guard fell meanwhile (a marker ended the transaction
    the coordinator confirmed) and no transaction of the producer is open in the partition now. Runs
    right before the append, with no await between them."""
    state = partition.log.producer_state
    producer_id = batch.producer_id
    if state.has_ongoing_transaction(producer_id, batch.producer_epoch):
        return
    if guard is None or not state.verified(producer_id, guard):
        raise KafkaError(ErrorCode.INVALID_TXN_STATE, verification.APPEND_NOT_VERIFIED_MESSAGE)


async def _await_replication(replicating: list[tuple[Partition, int, PartitionResponse, int]],
                             timeout_ms: int) -> None:
    """acks=all: wait, within the request's timeout, until every ISR member has each partition's
    batch, and answer each partition as :meth:`Partition.await_replicated` says it went."""
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000
    for partition, required, response, min_insync_replicas in replicating:
        code = await partition.await_replicated(required, deadline, min_insync_replicas)
        if code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            _fail(response, code, f"The size of the current ISR {len(partition.isr)} is insufficient to satisfy "
                                  f"the min.isr requirement of {min_insync_replicas}")
        elif code != ErrorCode.NONE:
            _fail(response, code)


def _fail(response: PartitionResponse, code: ErrorCode, message: str | None = None) -> None:
    response.error_code = code
    response.base_offset = -1
    response.log_append_time_ms = -1
    response.error_message = message


def _not_leader(index: int, partition: Partition, version: int) -> PartitionResponse:
    response = _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if version < 10:
        return response
    # The leader as this broker knows it (given from v10), so the producer need not ask Metadata first.
    response.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=partition.leader_id,
                                                               leader_epoch=partition.leader_epoch)
    return response


def _single_batch(records: bytes | bytearray | memoryview | None, version: int) -> bytearray | memoryview:
    """The partition's records as a writable buffer holding exactly one v2 record batch.

    Read as Kafka reads them: whole batches, one after the other, and whatever follows the last whole
    batch (a batch cut short) is not a batch at all; there must then be exactly one (INVALID_RECORD).
    A batch length below the smallest record is CORRUPT_MESSAGE.
    """
    if records is None:
        records = b""
    end = count = 0
    while len(records) - end >= LOG_OVERHEAD:
        (length,) = _BATCH_LENGTH.unpack_from(records, end + 8)
        if length < MIN_RECORD_SIZE:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"Record size {length} is less than the minimum record overhead ({MIN_RECORD_SIZE})",
            )
        if end + LOG_OVERHEAD + length > len(records):
            break
        end += LOG_OVERHEAD + length
        count += 1
    if count != 1:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {version} must have {'at least' if count == 0 else 'exactly'} "
            "one record batch per partition",
        )
    if isinstance(records, bytes) or isinstance(records, memoryview) and records.readonly:
        records = bytearray(records[:end])
    return records if end == len(records) else memoryview(records)[:end]


def _error(index: int, code: ErrorCode, message: str | None = None,
           record_errors: Sequence[RecordError] = ()) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, error_message=message, record_errors=[
        ProduceResponse.BatchIndexAndErrorMessage(batch_index=e.batch_index, batch_index_error_message=e.message)
        for e in record_errors])
