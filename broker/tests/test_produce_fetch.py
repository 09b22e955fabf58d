"""Produce, Fetch, ListOffsets, InitProducerId and the connection's rules, against an in-process broker
over a real TCP socket."""
from __future__ import annotations

import trio

from trafka.broker.connection import SENDFILE_MIN
from trafka.broker.tests.conftest import KafkaClient, RunningBroker
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from trafka.wire.protocol import ApiKey
from trafka.wire.records import Compression, RecordBatch, SimpleRecord, build_batch, iter_batches

FETCH_VERSION = 12
PRODUCE_VERSION = 9


async def create_topic(client: KafkaClient, name: str, partitions: int = 1, **configs: str) -> None:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
    )
    response = await client.request(CreateTopicsRequest(topics=[topic], timeout_ms=5000), 5)
    assert response.topics[0].error_code == ErrorCode.NONE


def produce_request(topic: str, batch: bytes, *, partition: int = 0, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)]
            )
        ],
    )


def fetch_request(topic: str, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)],
            )
        ],
    )


async def produce(client: KafkaClient, topic: str, batch: bytes, **kwargs):
    response = await client.request(produce_request(topic, batch, **kwargs), PRODUCE_VERSION)
    return response.responses[0].partition_responses[0]


async def fetch(client: KafkaClient, topic: str, offset: int, **kwargs):
    response = await client.request(fetch_request(topic, offset, **kwargs), FETCH_VERSION)
    assert response.error_code == ErrorCode.NONE
    return response.responses[0].partitions[0]


def values(records: memoryview | bytes | None) -> list[tuple[int, bytes | None]]:
    out = []
    for batch in iter_batches(bytes(records or b"")):
        out += [(r.offset, r.value) for r in batch.records()]
    return out


async def test_produce_then_fetch_returns_the_batches_with_offsets_assigned(client: KafkaClient):
    await create_topic(client, "orders")
    first = await produce(client, "orders", build_batch([SimpleRecord(b"k", b"a"), SimpleRecord(b"k", b"b")]))
    second = await produce(client, "orders", build_batch([SimpleRecord(None, b"c")], compression=Compression.ZSTD))
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 2)
    partition = await fetch(client, "orders", 0)
    assert partition.high_watermark == 3
    assert values(partition.records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    # Reading from inside a batch returns the whole batch, as Kafka does; the client skips ahead.
    assert values((await fetch(client, "orders", 1)).records)[0] == (0, b"a")


async def test_long_poll_fetch_is_woken_by_an_append(client: KafkaClient, broker: RunningBroker):
    await create_topic(client, "events")
    producer = await broker.client()
    result = {}

    async def waiting_fetch():
        result["partition"] = await fetch(client, "events", 0, max_wait_ms=60_000)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting_fetch)
        await trio.testing.wait_all_tasks_blocked()
        await produce(producer, "events", build_batch([SimpleRecord(None, b"wake up")]))
    # Answered with the data long before max_wait_ms: the append woke the fetch.
    assert values(result["partition"].records) == [(0, b"wake up")]


async def test_fetch_at_the_end_waits_out_max_wait_and_returns_nothing(client: KafkaClient):
    await create_topic(client, "quiet")
    partition = await fetch(client, "quiet", 0, max_wait_ms=50)
    assert partition.error_code == ErrorCode.NONE
    assert not partition.records


async def test_fetch_naming_no_partitions_is_answered_without_waiting(client: KafkaClient):
    # The Java consumer sends one as it closes, to end its fetch session.
    with trio.fail_after(30):
        response = await client.request(FetchRequest(max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, topics=[]),
                                        FETCH_VERSION)
    assert response.error_code == ErrorCode.NONE and response.responses == []


async def test_fetch_out_of_range(client: KafkaClient):
    await create_topic(client, "short")
    await produce(client, "short", build_batch([SimpleRecord(None, b"x")]))
    partition = await fetch(client, "short", 5)
    assert partition.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert partition.high_watermark == 1


async def test_produce_to_unknown_topic_does_not_create_it(client: KafkaClient, broker: RunningBroker):
    response = await produce(client, "nowhere", build_batch([SimpleRecord(None, b"x")]))
    assert response.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.broker.topics.get("nowhere") is None


async def test_metadata_auto_creates_topics(client: KafkaClient, broker: RunningBroker):
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="fresh")], allow_auto_topic_creation=True)
    response = await client.request(request, 12)
    assert response.topics[0].error_code == ErrorCode.NONE
    assert [p.partition_index for p in response.topics[0].partitions] == [0]
    assert response.topics[0].topic_id == broker.broker.topics.get("fresh").topic_id


async def test_metadata_auto_creates_internal_topics_as_their_coordinators_do(broker_factory):
    """With the partitions and configs of their own settings, not num.partitions and the topic defaults."""
    running = await broker_factory({"offsets.topic.num.partitions": "4", "transaction.state.log.num.partitions": "3",
                                    "share.coordinator.state.topic.num.partitions": "2", "num.partitions": "7"})
    client = await running.client()
    names = ("__consumer_offsets", "__transaction_state", "__share_group_state")
    response = await client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n)
                                                            for n in names], allow_auto_topic_creation=True), 12)
    assert [(t.name, t.error_code, len(t.partitions), t.is_internal) for t in response.topics] == [
        ("__consumer_offsets", 0, 4, True), ("__transaction_state", 0, 3, True), ("__share_group_state", 0, 2, True)]
    configs = {name: running.broker.topics.get(name).log_config for name in names}
    assert configs["__consumer_offsets"].cleanup_policy == configs["__transaction_state"].cleanup_policy == "compact"
    assert configs["__share_group_state"].cleanup_policy == "delete"


async def test_metadata_auto_creates_no_more_partitions_than_one_request_may(broker_factory):
    running = await broker_factory({"controller.max.records.per.batch": "6", "num.partitions": "2"})
    client = await running.client()

    def request(*names: str) -> MetadataRequest:
        return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                               allow_auto_topic_creation=True)

    # Three unknown topics of two partitions are nine records: none is created.
    response = await client.request(request("a", "b", "c", "a"), 12)
    assert [(t.name, t.error_code) for t in response.topics] == [
        (name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for name in ("a", "b", "c", "a")]
    assert len(running.broker.topics) == 0
    # Two of them fit, next to a topic that exists.
    response = await client.request(request("a", "b"), 12)
    assert [(t.name, t.error_code) for t in response.topics] == [("a", ErrorCode.NONE), ("b", ErrorCode.NONE)]
    response = await client.request(request("a", "b", "c", "d"), 12)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("a", ErrorCode.NONE), ("b", ErrorCode.NONE), ("c", ErrorCode.NONE), ("d", ErrorCode.NONE)]


async def test_fetch_responses_keep_to_the_brokers_fetch_max_bytes(broker_factory):
    running = await broker_factory({"fetch.max.bytes": "3000"})
    client = await running.client()
    await create_topic(client, "capped", 2)
    for partition in (0, 1):
        for n in range(4):
            await produce(client, "capped", build_batch([SimpleRecord(None, bytes(900))]), partition=partition)
    request = FetchRequest(
        max_wait_ms=0, min_bytes=1, max_bytes=2**31 - 1,
        topics=[FetchRequest.FetchTopic(topic="capped", partitions=[
            FetchRequest.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=2**31 - 1) for p in (0, 1)])],
    )

    response = await client.request(request, FETCH_VERSION)

    read = [values(p.records) for p in response.responses[0].partitions]
    # Whole batches (about 970 bytes each) up to 3000 bytes: three of the first partition, none of the second.
    assert [len(r) for r in read] == [3, 0]


async def test_corrupt_batch_is_rejected_and_nothing_is_stored(client: KafkaClient, broker: RunningBroker):
    await create_topic(client, "safe")
    await produce(client, "safe", build_batch([SimpleRecord(None, b"kept")]))
    corrupt = bytearray(build_batch([SimpleRecord(None, b"lost")]))
    corrupt[-1] ^= 0xFF
    response = await produce(client, "safe", bytes(corrupt))
    assert response.error_code == ErrorCode.CORRUPT_MESSAGE
    assert broker.broker.topics.partition("safe", 0).log_end_offset == 1
    assert values((await fetch(client, "safe", 0)).records) == [(0, b"kept")]


async def test_idempotent_retry_gets_the_original_offsets_and_gaps_are_refused(client: KafkaClient):
    await create_topic(client, "idem")
    init = await client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch

    def batch(sequence: int, value: bytes) -> bytes:
        return build_batch(
            [SimpleRecord(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=sequence
        )

    assert (await produce(client, "idem", batch(0, b"a"))).base_offset == 0
    assert (await produce(client, "idem", batch(1, b"b"))).base_offset == 1
    retry = await produce(client, "idem", batch(0, b"a"))
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 0)
    gap = await produce(client, "idem", batch(5, b"z"))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert values((await fetch(client, "idem", 0)).records) == [(0, b"a"), (1, b"b")]


async def test_list_offsets_earliest_latest_and_by_timestamp(client: KafkaClient):
    await create_topic(client, "timed")
    for i, ts in enumerate((1000, 2000, 3000)):
        await produce(client, "timed", build_batch([SimpleRecord(None, b"%d" % i, timestamp=ts)]))

    async def offset_for(timestamp: int):
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name="timed",
                    partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)],
                )
            ],
        )
        partition = (await client.request(request, 7)).topics[0].partitions[0]
        assert partition.error_code == ErrorCode.NONE
        return partition.offset, partition.timestamp

    assert await offset_for(-2) == (0, -1)
    assert await offset_for(-1) == (3, -1)
    assert await offset_for(1500) == (1, 2000)
    assert await offset_for(9999) == (-1, -1)
    assert await offset_for(-3) == (2, 3000)


async def test_acks_zero_gets_no_response_and_later_responses_stay_in_order(client: KafkaClient, broker: RunningBroker):
    await create_topic(client, "fire")
    await client.send(produce_request("fire", build_batch([SimpleRecord(None, b"x")]), acks=0), PRODUCE_VERSION)
    assert client.protocol.awaiting == 0
    # The next request's response is the next thing on the wire (the client checks the correlation
    # id: a response to the acks=0 request would not match), so that request was answered with nothing.
    response = await client.request(ApiVersionsRequest(), 3)
    assert response.error_code == ErrorCode.NONE
    assert broker.broker.topics.partition("fire", 0).log_end_offset == 1


async def test_api_versions_lists_the_registry_and_answers_unknown_versions_with_v0(client: KafkaClient):
    response = await client.request(ApiVersionsRequest(), 3)
    produce_range = next(k for k in response.api_keys if k.api_key == ApiKey.PRODUCE)
    assert (produce_range.min_version, produce_range.max_version) == (0, 13)
    correlation_id = client.protocol.next_correlation_id
    await client.stream.send_all(client.protocol.send_raw(ApiKey.API_VERSIONS, 99))
    answer = await client.receive()
    # The response header is v0 and so is the body (the client decodes an UNSUPPORTED_VERSION answer in v0).
    assert (answer.correlation_id, answer.api_version) == (correlation_id, 0)
    v0 = answer.body
    assert isinstance(v0, ApiVersionsResponse)
    assert v0.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {k.api_key for k in v0.api_keys} == {k.api_key for k in response.api_keys}


async def test_produce_v2_closes_the_connection_and_others_are_served(client: KafkaClient, broker: RunningBroker):
    await client.stream.send_all(client.protocol.send_raw(ApiKey.PRODUCE, 2, b"\x00" * 16, expect_response=False))
    assert await client.stream.receive_some(100) == b""
    other = await broker.client()
    assert (await other.request(ApiVersionsRequest(), 3)).error_code == ErrorCode.NONE


async def test_records_on_disk_are_the_produced_bytes(client: KafkaClient, broker: RunningBroker):
    await create_topic(client, "exact")
    batch = build_batch([SimpleRecord(b"k", b"v", headers=[("h", b"1")])], compression=Compression.LZ4)
    await produce(client, "exact", batch)
    fetched = bytes((await fetch(client, "exact", 0)).records)
    # Only the base offset (bytes 0-8) and partition leader epoch (12-16) may differ: both lie
    # outside the CRC, which the broker leaves as the producer computed it.
    assert fetched[8:12] == batch[8:12]
    assert fetched[16:] == batch[16:]
    assert RecordBatch(fetched).is_valid()


async def test_small_and_large_record_slices_reach_the_client_whole(client: KafkaClient):
    # Slices under SENDFILE_MIN are read and sent with the response; larger ones go by sendfile.
    await create_topic(client, "sizes")
    small = build_batch([SimpleRecord(None, b"s" * 100)])
    large = build_batch([SimpleRecord(None, bytes([i % 251]) * 1000) for i in range(64)])
    assert len(small) < SENDFILE_MIN <= len(large)
    await produce(client, "sizes", small)
    assert values((await fetch(client, "sizes", 0)).records) == [(0, b"s" * 100)]
    await produce(client, "sizes", large)
    assert values((await fetch(client, "sizes", 1)).records) == [(1 + i, bytes([i % 251]) * 1000) for i in range(64)]
    assert len(values((await fetch(client, "sizes", 0)).records)) == 65


async def test_acks_zero_failure_closes_the_connection_and_others_are_served(client: KafkaClient, broker: RunningBroker):
    await client.send(produce_request("no-such-topic", build_batch([SimpleRecord(None, b"x")]), acks=0),
                      PRODUCE_VERSION)
    assert await client.stream.receive_some(100) == b""
    other = await broker.client()
    assert (await other.request(ApiVersionsRequest(), 3)).error_code == ErrorCode.NONE


async def test_rolled_segments_are_flushed_after_the_append_that_rolled_them(client: KafkaClient, broker: RunningBroker):
    await create_topic(client, "rolling", **{"segment.bytes": "200"})
    for value in (b"a" * 120, b"b" * 120, b"c" * 120):
        assert (await produce(client, "rolling", build_batch([SimpleRecord(None, value)]))).error_code == ErrorCode.NONE
    log = broker.broker.topics.get("rolling").partitions[0].log
    assert [segment.base_offset for segment in log.segments] == [0, 1, 2]
    # The appends did not wait for the disk: the broker's housekeeping flushes what rolled, in a
    # worker thread, and the recovery point follows.
    with trio.fail_after(10):
        while log.recovery_point < 2:
            await trio.sleep(0.05)
    assert log.recovery_point == 2


async def test_requests_over_a_mebibyte_are_answered_from_worker_threads(broker: RunningBroker):
    clients = [await broker.client() for _ in range(4)]
    await create_topic(clients[0], "large", 2)
    names = [MetadataRequest.MetadataRequestTopic(name=f"absent-{i:07d}") for i in range(60_000)]
    metadata = MetadataRequest(topics=[*names, MetadataRequest.MetadataRequestTopic(name="large")],
                               allow_auto_topic_creation=False)
    records = build_batch([SimpleRecord(None, bytes(1000)) for _ in range(600)])
    Data = ProduceRequest.PartitionProduceData
    produce_request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name="large", partition_data=[Data(index=0, records=records), Data(index=1, records=records)])])
    results = {}

    async def ask(index: int) -> None:
        results[index] = await clients[index].request(metadata, 12)

    async def write() -> None:
        results[3] = await clients[3].request(produce_request, PRODUCE_VERSION)

    async with trio.open_nursery() as nursery:
        for index in range(3):
            nursery.start_soon(ask, index)
        nursery.start_soon(write)

    for index in range(3):
        topics = results[index].topics
        assert len(topics) == 60_001
        assert {t.error_code for t in topics[:-1]} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert (topics[-1].name, topics[-1].error_code) == ("large", ErrorCode.NONE)
    assert [p.error_code for p in results[3].responses[0].partition_responses] == [ErrorCode.NONE] * 2
    assert len(values((await fetch(clients[3], "large", 0)).records)) == 600


async def test_a_nameless_metadata_topic_before_v12_makes_the_request_invalid(client: KafkaClient):
    import uuid

    topic_id = uuid.uuid4()
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id)],
                              allow_auto_topic_creation=True)

    response = await client.request(request, 11)

    assert [(t.error_code, t.name, t.topic_id) for t in response.topics] == [(ErrorCode.INVALID_REQUEST, "", topic_id)]
    assert (await client.request(request, 12)).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
