"""Fault rules (broker.faults) on a real broker over TCP: errors per partition for Produce and Fetch, top-level
errors elsewhere, delays, dropped connections, counts, and what a rule may not be."""
from __future__ import annotations

import pytest
import trio

from trafka.broker.faults import RuleError
from trafka.broker.tests.conftest import KafkaClient, RunningBroker
from trafka.broker.tests.test_produce_fetch import create_topic, fetch_request, values
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import FindCoordinatorRequest, HeartbeatRequest, MetadataRequest, ProduceRequest
from trafka.wire.records import SimpleRecord, build_batch


def produce_both(topic: str) -> ProduceRequest:
    data = [ProduceRequest.PartitionProduceData(index=p, records=build_batch([SimpleRecord(None, b"v%d" % p)]))
            for p in (0, 1)]
    return ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=data)])


async def test_a_faulted_produce_partition_appends_nothing_and_the_others_go_on(broker: RunningBroker,
                                                                                client: KafkaClient):
    await create_topic(client, "faulted", 2)
    rule = broker.broker.faults.add({"action": "error", "api": "produce", "topic": "faulted", "partition": 0,
                                     "error": "NOT_LEADER_OR_FOLLOWER", "count": 2})

    codes = []
    for _ in range(3):
        response = await client.request(produce_both("faulted"), 9)
        codes.append([p.error_code for p in response.responses[0].partition_responses])

    assert codes == [[ErrorCode.NOT_LEADER_OR_FOLLOWER, 0], [ErrorCode.NOT_LEADER_OR_FOLLOWER, 0], [0, 0]]
    assert broker.broker.topics.partition("faulted", 0).log_end_offset == 1  # only the third one
    assert broker.broker.topics.partition("faulted", 1).log_end_offset == 3
    spent = broker.broker.faults.get(rule.id)  # acts no more, and can still be asked about
    assert (spent.hits, spent.remaining, bool(broker.broker.faults)) == (2, 0, False)


async def test_a_faulted_fetch_partition(broker: RunningBroker, client: KafkaClient):
    await create_topic(client, "fetched", 1)
    await client.request(produce_both("fetched").__class__(acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name="fetched", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=build_batch([SimpleRecord(None, b"x")]))])]), 9)
    broker.broker.faults.add({"action": "error", "api": "fetch", "topic": "fetched",
                              "error": "OFFSET_NOT_AVAILABLE", "count": 1})

    first = (await client.request(fetch_request("fetched", 0), 12)).responses[0].partitions[0]
    second = (await client.request(fetch_request("fetched", 0), 12)).responses[0].partitions[0]

    assert (first.error_code, bytes(first.records or b"")) == (ErrorCode.OFFSET_NOT_AVAILABLE, b"")
    assert (second.error_code, values(second.records)) == (0, [(0, b"x")])


async def test_top_level_errors_delays_drops_and_observations(broker: RunningBroker, client: KafkaClient):
    faults = broker.broker.faults
    faults.add({"action": "error", "api": "heartbeat", "group": "g", "error": "REBALANCE_IN_PROGRESS"})
    observed = faults.add({"action": "observe", "api": ["metadata", 10]})
    faults.add({"action": "delay", "api": "metadata", "delay_ms": 300, "count": 1})

    heartbeat = await client.request(HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), 4)
    started = trio.current_time()
    await client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    assert heartbeat.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert observed.hits == 1  # the observation comes first and the delay rule never sees it
    faults.remove(observed.id)
    await client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    assert trio.current_time() - started >= 0.3

    faults.add({"action": "drop", "api": "find_coordinator", "client_id": "trafka-tests"})
    with pytest.raises(EOFError):
        await client.request(FindCoordinatorRequest(key="g", key_type=0), 3)
    other = await broker.client()
    other.client_id = "someone-else"
    assert (await other.request(FindCoordinatorRequest(key="g", key_type=0), 3)).error_code in (0, 15)


async def test_waiting_for_hits(broker: RunningBroker, client: KafkaClient):
    rule = broker.broker.faults.add({"action": "observe", "api": "metadata"})

    async def ask() -> None:
        for _ in range(3):
            await client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        with trio.fail_after(10):
            assert (await broker.broker.faults.wait_for_hits(rule.id, 3)).hits == 3


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"action": "explode"}, "one of error, delay, drop, observe"),
        ({"action": "error", "api": "create_topics", "error": "NOT_CONTROLLER"},
         "CREATE_TOPICS has no error code of its own"),
        ({"action": "error", "api": "heartbeat", "topic": "t", "error": "REBALANCE_IN_PROGRESS"},
         "errors by topic or partition are answered for produce and fetch only"),
        ({"action": "error", "api": "produce", "error": "NO_SUCH_ERROR"}, "a Kafka error name"),
        ({"action": "delay", "api": "produce"}, "delay_ms"),
        ({"action": "drop", "api": "frobnicate"}, "an API name"),
        ({"action": "observe", "count": 0}, "count: at least 1"),
        ({"action": "observe", "colour": "red"}, "unknown rule fields: colour"),
    ],
)
async def test_rules_that_cannot_be_made(broker: RunningBroker, spec, message):
    with pytest.raises(RuleError, match=message):
        broker.broker.faults.add(spec)
