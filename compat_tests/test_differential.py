"""The same requests against Apache Kafka and trafka, and what a client observes compared: error codes,
error messages, counts of records returned; and the APIs Kafka serves that trafka does not, each
explained in the README.

Both brokers get the same settings where a scenario depends on one (``fetch.max.bytes``, topics' partition
counts). Requests are sent by the wire client built from Kafka's own message specs, so that each one
carries exactly what the scenario needs, counts no admin client would send included.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference import LIB, KafkaBroker
from compat_tests.wire_client import WireClient
from trafka.wire.messages import (
    ApiVersionsRequest,
    ConsumerGroupHeartbeatRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    JoinGroupRequest,
    ListConfigResourcesRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from trafka.wire.records import SimpleRecord, build_batch

ROOT = Path(__file__).resolve().parent.parent
#: Settings both brokers run with.
SHARED_SETTINGS = {"fetch.max.bytes": 3000, "num.partitions": 1}

#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: ask again.
COORDINATOR_NOT_READY = {14, 15, 16}

CreatableTopic = CreateTopicsRequest.CreatableTopic
CreatableTopicConfig = CreateTopicsRequest.CreatableTopicConfig


@contextlib.contextmanager
def side_by_side(root: Path, settings: dict[str, object]) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    """Apache Kafka and trafka, started with the same ``settings``, by name."""
    kafka = KafkaBroker(root / "kafka", overrides=settings)
    trafka = BrokerProcess(root / "trafka", overrides=settings, name="trafka")
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": kafka, "trafka": trafka}
    finally:
        trafka.close()
        kafka.close()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    """Apache Kafka and trafka side by side, with the same settings."""
    with side_by_side(Path(tmp_path_factory.mktemp("differential")), SHARED_SETTINGS) as started:
        yield started


def on_both(brokers, ask: Callable[[WireClient], object]) -> dict[str, object]:
    """What ``ask`` observes on each broker, by broker name."""
    observed = {}
    for name, process in brokers.items():
        with WireClient(process.bootstrap) as client:
            observed[name] = ask(client)
    return observed


def assert_same(observed: dict[str, object]) -> None:
    assert observed["trafka"] == observed["kafka"], observed


# -------------------------------------------------------------------------- partitions per request


def topic(name: str, partitions: int, configs: int = 0) -> CreatableTopic:
    values = [("retention.ms", "3600000"), ("segment.bytes", "1048576"), ("cleanup.policy", "delete")]
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                          configs=[CreatableTopicConfig(name=k, value=v) for k, v in values[:configs]])


@pytest.mark.parametrize(
    "topics",
    [
        pytest.param([topic("huge", 268_435_456), topic("small", 1)], id="268435456 partitions"),
        pytest.param([topic("a", 5_000), topic("b", 5_001)], id="10001 partitions over two topics"),
        pytest.param([topic("a", 4_999), topic("b", 4_999)], id="9998 partitions and 2 topics"),
        pytest.param([topic("a", 4_999), topic("b", 5_000)], id="9999 partitions and 2 topics"),
        pytest.param([topic("a", 10_000)], id="10000 partitions in one topic"),
        pytest.param([topic("a", 9_998, configs=1)], id="9998 partitions and a config"),
        pytest.param([topic("a", 9_998, configs=2)], id="9998 partitions and two configs"),
        pytest.param([topic("a", 9_999), topic("bad?", 1), topic("zero", 0)], id="invalid topics count nothing"),
        pytest.param([topic("a", 6_000), topic("a", 6_000), topic("b", 1)], id="duplicates count nothing"),
    ],
)
def test_create_topics_within_one_requests_budget(brokers, topics):
    request = CreateTopicsRequest(topics=topics, timeout_ms=10_000, validate_only=True)

    observed = on_both(brokers, lambda client: sorted(
        (t.name, t.error_code, t.error_message) for t in client.request(request, 7).topics))

    assert_same(observed)


@pytest.mark.parametrize("count", [268_435_456, 10_003, 10_002], ids=str)
def test_create_partitions_within_one_requests_budget(brokers, count):
    Topic = CreatePartitionsRequest.CreatePartitionsTopic

    def ask(client: WireClient):
        created = client.request(CreateTopicsRequest(topics=[topic(f"grow-{count}", 2)], timeout_ms=10_000), 7)
        assert created.topics[0].error_code == 0, created
        response = client.request(CreatePartitionsRequest(
            topics=[Topic(name=f"grow-{count}", count=count, assignments=None)], timeout_ms=10_000,
            validate_only=True), 3)
        return [(r.name, r.error_code, r.error_message) for r in response.results]

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------- fetch.max.bytes


def whole_batches(records: bytes | memoryview | None) -> list[bytes]:
    """The complete record batches in a Fetch response's records, as a client reads them."""
    data, batches, position = bytes(records or b""), [], 0
    while position + 12 <= len(data):
        end = position + 12 + int.from_bytes(data[position + 8:position + 12], "big")
        if end > len(data):
            break
        batches.append(data[position:end])
        position = end
    return batches


def test_fetch_keeps_to_fetch_max_bytes(brokers):
    """Four batches of about 970 bytes in each of two partitions, fetched with max_bytes of 2 GiB from a
    broker whose fetch.max.bytes is 3000."""
    name = "capped"
    fetch = FetchRequest(
        max_wait_ms=0, min_bytes=1, max_bytes=2**31 - 1, isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic=name, partitions=[
            FetchRequest.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=2**31 - 1) for p in (0, 1)])],
    )

    def ask(client: WireClient):
        create(client, name, 2, existing_ok=False)
        for partition in (0, 1):
            for _ in range(4):
                batch = build_batch([SimpleRecord(None, bytes(900))])
                produced = client.request(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
                    ProduceRequest.TopicProduceData(name=name, partition_data=[
                        ProduceRequest.PartitionProduceData(index=partition, records=batch)])]), 9)
                assert produced.responses[0].partition_responses[0].error_code == 0, produced
        response = client.request(fetch, 12)
        # Kafka cuts the response at fetch.max.bytes, inside a batch; trafka sends whole batches only.
        # Clients drop a partial batch at the end, so what they read is the whole batches.
        return [(p.partition_index, p.error_code, len(whole_batches(p.records))) for p in response.responses[0].partitions]

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------- subscription regexes


@pytest.mark.parametrize("regex", ["(unbalanced", "(?=lookahead)x", r"(a)\1", "a*+"])
def test_a_subscription_regex_kafka_cannot_compile_is_refused_alike(brokers, regex):
    request = ConsumerGroupHeartbeatRequest(
        group_id=f"regex-{abs(hash(regex))}", member_id="m-" + "0" * 20, member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout_ms=30_000, subscribed_topic_names=None, subscribed_topic_regex=regex,
        server_assignor=None, topic_partitions=[],
    )

    assert_same(on_both(brokers, lambda client: group_request(client, request, 1).error_code))


# -------------------------------------------------------------------------- API coverage


def kafka_api_names() -> dict[int, str]:
    """API key -> name, from the message specs inside the reference's own kafka-clients jar."""
    (jar,) = LIB.glob("kafka-clients-*.jar")
    names = {}
    with zipfile.ZipFile(jar) as archive:
        for entry in archive.namelist():
            if entry.startswith("common/message/") and entry.endswith("Request.json"):
                spec = json.loads(re.sub(r"^\s*//.*$", "", archive.read(entry).decode(), flags=re.M))
                names[spec["apiKey"]] = spec["name"].removesuffix("Request")
    return names


def advertised(process) -> dict[int, tuple[int, int]]:
    with WireClient(process.bootstrap) as client:
        response = client.request(ApiVersionsRequest(client_software_name="compat", client_software_version="1"), 3)
    return {api.api_key: (api.min_version, api.max_version) for api in response.api_keys}


def test_every_api_kafka_serves_is_served_or_explained_in_the_readme(brokers):
    names = kafka_api_names()
    served = advertised(brokers["trafka"])
    readme = (ROOT / "README.md").read_text()
    explained = set(re.findall(r"\b[A-Z][A-Za-z]+\b", readme.split("### What it does not serve yet", 1)[1]))

    missing = [names.get(key, str(key)) for key in advertised(brokers["kafka"]) if key not in served]

    unexplained = [name for name in missing if name not in explained]
    assert not unexplained, f"APIs Apache Kafka serves that trafka neither serves nor explains: {unexplained}"


def test_trafka_advertises_no_version_kafka_does_not_serve(brokers):
    kafka, trafka = advertised(brokers["kafka"]), advertised(brokers["trafka"])

    beyond = {key: (trafka[key], kafka.get(key)) for key in trafka
              if key not in kafka or trafka[key][0] < kafka[key][0] or trafka[key][1] > kafka[key][1]}

    assert not beyond, f"api key: (trafka's range, Kafka's range) {beyond}"


# -------------------------------------------------------------------------- produce and fetch errors


def group_request(client: WireClient, request, version: int):
    """A request to a group's coordinator, asked again while the coordinator loads (the first request for
    a group creates the offsets topic on Kafka)."""
    group_id = getattr(request, "group_id", None) or request.groups[0]
    found = client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]), 4)
    deadline = time.monotonic() + 30
    while True:
        response = client.request(request, version)
        if not _error_codes(response) & COORDINATOR_NOT_READY:
            return response
        assert time.monotonic() < deadline, f"the coordinator of {group_id} is still not ready: {found}"
        time.sleep(0.2)


def _error_codes(response) -> set[int]:
    if hasattr(response, "error_code"):
        return {response.error_code}
    if hasattr(response, "groups"):
        return {group.error_code for group in response.groups}
    return {partition.error_code for topic in response.topics for partition in topic.partitions}


def create(client: WireClient, name: str, partitions: int = 1, *, existing_ok: bool = True, **configs: str) -> None:
    """Create topic ``name`` and wait until each of its partitions has a leader (``existing_ok``: or
    find it there from an earlier case)."""
    topic_ = CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                            configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    response = client.request(CreateTopicsRequest(topics=[topic_], timeout_ms=10_000), 7)
    assert response.topics[0].error_code in ((0, 36) if existing_ok else (0,)), response
    # Kafka elects the new partitions' leader a moment after it answers.
    deadline = time.monotonic() + 30
    while True:
        metadata = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                                  allow_auto_topic_creation=False), 12)
        partitions_ = metadata.topics[0].partitions
        if len(partitions_) == partitions and all(p.error_code == 0 and p.leader_id >= 0 for p in partitions_):
            return
        assert time.monotonic() < deadline, f"{name} has no leader for every partition: {metadata.topics[0]}"
        time.sleep(0.05)


#: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER: a partition just created whose leader is not ready yet.
_NOT_READY = (3, 6)


def produce(client: WireClient, name: str, partition: int, records: bytes, *, acks: int = -1,
            version: int = 9, retry: bool = True) -> tuple[int, int]:
    """Produce ``records``; with ``retry``, again for a moment while the partition, just created, is not
    ready to take them (Kafka 4.4 answers so for a moment after its Metadata names the leader, on a busy
    machine)."""
    deadline = time.monotonic() + (10 if retry else 0)
    while True:
        response = client.request(ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[
            ProduceRequest.TopicProduceData(name=name, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=records)])]), version)
        result = response.responses[0].partition_responses[0]
        if result.error_code not in _NOT_READY or time.monotonic() > deadline:
            return result.error_code, result.base_offset, result.error_message
        time.sleep(0.05)


def corrupted(batch: bytes, position: int) -> bytes:
    data = bytearray(batch)
    data[position] ^= 0xFF
    return bytes(data)


ONE_RECORD = build_batch([SimpleRecord(b"k", b"v")])
PRODUCE_CASES = {
    "unknown topic": ("nowhere", 0, ONE_RECORD, {}),
    "unknown partition": ("errors", 7, ONE_RECORD, {}),
    "record over max.message.bytes": ("small-messages", 0, build_batch([SimpleRecord(None, bytes(2000))]), {}),
    "bad CRC": ("errors", 0, corrupted(ONE_RECORD, len(ONE_RECORD) - 1), {}),
    "magic 3": ("errors", 0, ONE_RECORD[:16] + b"\x03" + ONE_RECORD[17:], {}),
    "acks=2": ("errors", 0, ONE_RECORD, {"acks": 2}),
    "a batch cut short": ("errors", 0, ONE_RECORD[:-5], {}),
    "under a batch header": ("errors", 0, ONE_RECORD[:11], {}),
    "no records": ("errors", 0, b"", {}),
    "two batches": ("errors", 0, ONE_RECORD + ONE_RECORD, {}),
    "a batch and a half": ("errors", 0, ONE_RECORD + ONE_RECORD[:20], {}),
}


@pytest.mark.parametrize("case", PRODUCE_CASES)
def test_produce_errors(brokers, case):
    name, partition, records, options = PRODUCE_CASES[case]

    def ask(client: WireClient):
        create(client, "errors", 2)
        create(client, "small-messages", 1, **{"max.message.bytes": "1000"})
        try:
            # Kafka leaves most of these without a message; trafka says what was wrong. Codes are compared.
            return produce(client, name, partition, records, retry=False, **options)[0]
        except ConnectionError:
            return "connection closed"

    assert_same(on_both(brokers, ask))


def test_keyless_records_in_a_compacted_topic_are_named_in_the_record_errors(brokers):
    # Every tenth record of the batch has no key: the batch is refused, and the response names those records.
    batch = build_batch([SimpleRecord(None if i % 10 == 0 else b"k%d" % i, b"v") for i in range(100)])

    def ask(client: WireClient):
        create(client, "compacted", 1, **{"cleanup.policy": "compact"})
        response = client.request(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
            ProduceRequest.TopicProduceData(name="compacted", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9)
        result = response.responses[0].partition_responses[0]
        return (result.error_code, result.error_message,
                [(e.batch_index, e.batch_index_error_message) for e in result.record_errors])

    observed = on_both(brokers, ask)
    assert_same(observed)
    code, message, record_errors = observed["trafka"]
    assert code == 87 and [index for index, _ in record_errors] == list(range(0, 100, 10))
    assert message.startswith("One or more records have been rejected due to 10 record errors in total")


def test_records_out_of_the_timestamp_range_are_named_in_the_record_errors(brokers):
    # A compacted topic that takes timestamps within a minute of now: keyless records, too old and too new
    # ones, and one both keyless and too old, in one batch.
    now = int(time.time() * 1000)
    hours = 3_600_000
    records = [(b"a", now), (None, now), (b"c", now - 10 * hours), (None, now - 10 * hours), (b"e", now + 10 * hours)]
    batch = build_batch([SimpleRecord(key, b"v", timestamp=timestamp) for key, timestamp in records])

    def ask(client: WireClient):
        create(client, "recent-compacted", 1, **{"cleanup.policy": "compact", "message.timestamp.before.max.ms": "60000",
                                                 "message.timestamp.after.max.ms": "60000"})
        response = client.request(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
            ProduceRequest.TopicProduceData(name="recent-compacted", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9)
        result = response.responses[0].partition_responses[0]
        # The range is counted from each broker's own clock.
        within = re.compile(r"within \[-?\d+, -?\d+\]")
        return (result.error_code, result.error_message,
                [(e.batch_index, within.sub("within [now - 60000, now + 60000]", e.batch_index_error_message or ""))
                 for e in result.record_errors])

    observed = on_both(brokers, ask)
    assert_same(observed)
    code, _, record_errors = observed["trafka"]
    assert code == 32 and [index for index, _ in record_errors] == [1, 2, 3, 4]


FETCH_CASES = {
    "unknown topic": ("nowhere", 0, 0),
    "unknown partition": ("fetched", 9, 0),
    "offset past the end": ("fetched", 0, 100),
    "negative offset": ("fetched", 0, -5),
    "the end": ("fetched", 0, 2),
}


@pytest.mark.parametrize("case", FETCH_CASES)
def test_fetch_errors(brokers, case):
    name, partition, offset = FETCH_CASES[case]
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic=name, partitions=[
            FetchRequest.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])

    def ask(client: WireClient):
        create(client, "fetched", 1)
        assert produce(client, "fetched", 0, build_batch([SimpleRecord(None, b"a"), SimpleRecord(None, b"b")]))[0] == 0
        partition_ = client.request(request, 12).responses[0].partitions[0]
        return partition_.error_code, partition_.high_watermark, partition_.log_start_offset

    observed = on_both(brokers, ask)
    # The high watermark depends on how many cases ran before; compare codes, and the rest where known.
    assert observed["trafka"][0] == observed["kafka"][0], observed
    if observed["kafka"][0] == 0:
        assert observed["trafka"] == observed["kafka"], observed


# -------------------------------------------------------------------------- ListOffsets


LIST_OFFSETS_CASES = {"earliest": -2, "latest": -1, "max timestamp": -3, "earliest local": -4,
                      "by timestamp, before all": 0, "by timestamp, after all": 2**62}


@pytest.mark.parametrize("case", LIST_OFFSETS_CASES)
def test_list_offsets(brokers, case):
    L = ListOffsetsRequest
    timestamp = LIST_OFFSETS_CASES[case]

    def ask(client: WireClient):
        name = f"listed-{abs(timestamp) % 97}"
        create(client, name, 1)
        batches = [build_batch([SimpleRecord(None, b"x", timestamp=1_000 + i)]) for i in range(3)]
        for batch in batches:
            assert produce(client, name, 0, batch)[0] == 0
        response = client.request(L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=name, partitions=[
            L.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
            for p in (0, 3)])]), 9)
        return sorted((p.partition_index, p.error_code, p.timestamp, p.offset) for p in response.topics[0].partitions)

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------- offsets of a group


def test_offset_commit_to_unknown_topics_and_partitions(brokers):
    C = OffsetCommitRequest

    def ask(client: WireClient):
        create(client, "committed", 2)
        response = group_request(client, C(group_id="committer", generation_id_or_member_epoch=-1, member_id="",
                                           group_instance_id=None, topics=[
            C.OffsetCommitRequestTopic(name=name, partitions=[
                C.OffsetCommitRequestPartition(partition_index=p, committed_offset=0, committed_leader_epoch=-1,
                                               committed_metadata="") for p in (0, 5)])
            for name in ("committed", "never-created")]), 8)
        return sorted((t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions)

    assert_same(on_both(brokers, ask))


def test_delete_records_errors(brokers):
    D = DeleteRecordsRequest

    def ask(client: WireClient):
        for name in ("trimmed", "trimmed-too"):
            create(client, name, 1)
            assert produce(client, name, 0, build_batch([SimpleRecord(None, b"x")] * 3))[0] == 0
        response = client.request(D(timeout_ms=10_000, topics=[D.DeleteRecordsTopic(name=name, partitions=[
            D.DeleteRecordsPartition(partition_index=p, offset=offset) for p, offset in ((0, offset), (4, 0))])
            for name, offset in (("trimmed", 99), ("trimmed-too", 1), ("never-created", 0))]), 2)
        return sorted((t.name, p.partition_index, p.error_code, p.low_watermark) for t in response.topics
                      for p in t.partitions)

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------- topic administration


def creatable(name: str, partitions: int = 1, replication_factor: int = 1, configs: dict | None = None,
              assignments: list[list[int]] | None = None) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=i, broker_ids=ids)
                     for i, ids in enumerate(assignments or [])],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


CREATE_TOPICS_CASES = {
    "replication factor 3": creatable("rf3", 1, 3),
    "replication factor 0": creatable("rf0", 1, 0),
    "partitions -2": creatable("p-2", -2),
    "unknown config": creatable("unknown-config", configs={"no.such.config": "1"}),
    "bad config value": creatable("bad-value", configs={"retention.ms": "soon"}),
    "null config value": creatable("null-config", configs={"retention.ms": None}),
    "assignment with counts": creatable("assigned", 1, 1, assignments=[[1]]),
    "assignment to an unknown broker": creatable("assigned", -1, -1, assignments=[[7]]),
    "assignment naming a broker twice": creatable("assigned", -1, -1, assignments=[[1, 1]]),
    "__cluster_metadata": creatable("__cluster_metadata"),
    "cleanup.policy empty": creatable("no-cleanup", configs={"cleanup.policy": ""}),
    "min.insync.replicas over replicas": creatable("min-isr", configs={"min.insync.replicas": "2"}),
}


@pytest.mark.parametrize("case", CREATE_TOPICS_CASES)
def test_create_topics_validation(brokers, case):
    request = CreateTopicsRequest(topics=[CREATE_TOPICS_CASES[case]], timeout_ms=10_000, validate_only=True)

    observed = on_both(brokers, lambda client: [(t.error_code, t.error_message) for t in client.request(request, 7).topics])

    assert_same(observed)


def test_delete_topics_errors(brokers):
    D = DeleteTopicsRequest

    def ask(client: WireClient):
        response = client.request(D(topics=[D.DeleteTopicState(name=n) for n in ("never-created", "__consumer_offsets")],
                                    timeout_ms=10_000), 6)
        return sorted((r.name, r.error_code, r.error_message) for r in response.responses)

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------- configs

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INCREMENTAL_CASES = {
    "append to cleanup.policy": [("cleanup.policy", APPEND, "compact")],
    "subtract cleanup.policy to nothing": [("cleanup.policy", SUBTRACT, "delete")],
    "append to a non-list config": [("retention.ms", APPEND, "5")],
    "delete a config never set": [("retention.ms", DELETE, None)],
    "set an unknown config": [("no.such.config", SET, "1")],
    "set a bad value": [("retention.ms", SET, "soon")],
    "set and delete one config": [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)],
}


@pytest.mark.parametrize("case", INCREMENTAL_CASES)
def test_incremental_alter_configs_of_a_topic(brokers, case):
    I = IncrementalAlterConfigsRequest
    name = "configured-" + re.sub(r"\W+", "-", case)

    def ask(client: WireClient):
        create(client, name)
        response = client.request(I(validate_only=False, resources=[I.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=name, configs=[
                I.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in INCREMENTAL_CASES[case]])]), 1)
        (result,) = response.responses

        def describe():
            described = client.request(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=["cleanup.policy",
                                                                                      "retention.ms"])],
                include_synonyms=False, include_documentation=False), 4)
            return sorted((c.name, c.value, c.config_source) for c in described.results[0].configs)

        values = describe()
        if result.error_code == 0:
            # Kafka applies an accepted change through its metadata log, a little after answering:
            # read until three looks 50 ms apart agree (trafka's first look is already the last).
            seen = [values]
            deadline = time.monotonic() + 10
            while (len(seen) < 3 or seen[-1] != seen[-2] or seen[-2] != seen[-3]) and time.monotonic() < deadline:
                time.sleep(0.05)
                seen.append(describe())
            values = seen[-1]
        return result.error_code, result.error_message, values

    assert_same(on_both(brokers, ask))


#: Broker defaults of topic configs that trafka keeps as Kafka has them.
TOPIC_DEFAULTS = ("log.segment.bytes", "message.max.bytes", "log.message.timestamp.after.max.ms",
                  "log.message.timestamp.before.max.ms", "log.message.timestamp.type", "log.cleanup.policy",
                  "min.insync.replicas", "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
                  "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio", "log.retention.bytes",
                  "log.segment.delete.delay.ms", "log.roll.jitter.ms")


def test_the_topic_defaults_are_kafkas(brokers):
    R = DescribeConfigsRequest.DescribeConfigsResource

    def ask(client: WireClient):
        response = client.request(DescribeConfigsRequest(resources=[
            R(resource_type=4, resource_name="1", configuration_keys=list(TOPIC_DEFAULTS))],
            include_synonyms=False, include_documentation=False), 4)
        return {config.name: config.value for config in response.results[0].configs}

    assert_same(on_both(brokers, ask))


def test_describe_configs_of_unknown_resources(brokers):
    R = DescribeConfigsRequest.DescribeConfigsResource

    def ask(client: WireClient):
        response = client.request(DescribeConfigsRequest(resources=[
            R(resource_type=TOPIC_RESOURCE, resource_name="never-created", configuration_keys=None),
            R(resource_type=BROKER_RESOURCE, resource_name="99", configuration_keys=None),
            R(resource_type=BROKER_RESOURCE, resource_name="not-a-number", configuration_keys=None),
        ], include_synonyms=False, include_documentation=False), 4)
        return [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in response.results]

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------- authorized operations


def test_authorized_operations_when_asked(brokers):
    def ask(client: WireClient):
        create(client, "authorized")
        metadata = client.request(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="authorized")], allow_auto_topic_creation=False,
            include_topic_authorized_operations=True), 12)
        cluster = client.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
        not_asked = client.request(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="authorized")], allow_auto_topic_creation=False,
            include_topic_authorized_operations=False), 12)
        return (metadata.topics[0].topic_authorized_operations, cluster.cluster_authorized_operations,
                not_asked.topics[0].topic_authorized_operations)

    assert_same(on_both(brokers, ask))


def test_group_authorized_operations_when_asked(brokers):
    C = OffsetCommitRequest

    def ask(client: WireClient):
        create(client, "group-ops", 1)
        commit = C(group_id="described", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                   topics=[C.OffsetCommitRequestTopic(name="group-ops", partitions=[C.OffsetCommitRequestPartition(
                       partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])])
        committed = group_request(client, commit, 8)
        assert committed.topics[0].partitions[0].error_code == 0, committed
        described = group_request(client, DescribeGroupsRequest(groups=["described"],
                                                                include_authorized_operations=True), 5)
        return [(g.error_code, g.group_state, g.authorized_operations) for g in described.groups]

    assert_same(on_both(brokers, ask))


def test_offset_fetch_and_delete_of_unknown_topics(brokers):
    F, D = OffsetFetchRequest, OffsetDeleteRequest

    def ask(client: WireClient):
        create(client, "fetched-offsets", 1)
        fetched = group_request(client, F(group_id="reader", topics=[F.OffsetFetchRequestTopic(
            name=n, partition_indexes=[0, 3]) for n in ("fetched-offsets", "never-created")], require_stable=False), 7)
        deleted = group_request(client, D(group_id="reader", topics=[D.OffsetDeleteRequestTopic(
            name=n, partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])
            for n in ("fetched-offsets", "never-created")]), 0)
        return (fetched.error_code,
                sorted((t.name, p.partition_index, p.committed_offset, p.error_code)
                       for t in fetched.topics for p in t.partitions),
                deleted.error_code, sorted((t.name, p.error_code) for t in deleted.topics for p in t.partitions))

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------- ListConfigResources


@pytest.mark.parametrize(("version", "types"), [(1, [2]), (1, [4]), (1, [16]), (1, [32]), (1, [2, 99]), (1, [99]),
                                                (0, [])], ids=str)
def test_list_config_resources(brokers, version, types):
    def ask(client: WireClient):
        create(client, "listed-config-resource")
        response = client.request(ListConfigResourcesRequest(resource_types=types), version)
        return response.error_code, sorted((r.resource_type, r.resource_name) for r in response.config_resources)

    observed = on_both(brokers, ask)

    assert_same(observed)
    if types == [2]:
        assert (2, "listed-config-resource") in observed["trafka"][1]


# -------------------------------------------------------------------------- group member metadata


@pytest.mark.parametrize("size", [100_000, 2_000_000], ids=lambda size: f"{size} bytes")
def test_group_protocol_metadata_bounded_by_the_offsets_topic(brokers, size):
    """A member's protocol metadata is kept as sent; the group's record must fit __consumer_offsets'
    max.message.bytes (1 MB) when SyncGroup writes it, or the sync fails."""
    group_id = f"metadata-{size}"

    def ask(client: WireClient):
        join = JoinGroupRequest(group_id=group_id, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                member_id="", group_instance_id=None, protocol_type="consumer",
                                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=bytes(size))])
        joined = group_request(client, join, 9)
        if joined.error_code == 79:  # MEMBER_ID_REQUIRED
            join.member_id = joined.member_id
            joined = client.request(join, 9)
        synced = client.request(SyncGroupRequest(
            group_id=group_id, generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=None,
            protocol_type="consumer", protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"")]), 5)
        return joined.error_code, joined.generation_id, synced.error_code

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------- dynamic broker configs


@pytest.fixture
def fresh_brokers(tmp_path: Path) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    """Apache Kafka and trafka of this test's own: the test changes broker-wide settings."""
    settings = {"log.retention.hours": 24, "num.partitions": 1}
    kafka = KafkaBroker(tmp_path / "kafka", overrides=settings)
    trafka = BrokerProcess(tmp_path / "trafka", overrides=settings, name="trafka")
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": kafka, "trafka": trafka}
    finally:
        trafka.close()
        kafka.close()


def test_dynamic_broker_configs(fresh_brokers):
    I = IncrementalAlterConfigsRequest
    R = DescribeConfigsRequest.DescribeConfigsResource
    changes = [
        ("", [("log.retention.ms", 0, "5000"), ("message.max.bytes", 0, "500000")]),
        ("1", [("log.retention.ms", 0, "7000")]),
        ("1", [("num.partitions", 0, "3")]),
        ("1", [("log.roll.hours", 0, "3")]),
        ("1", [("log.retention.ms", 0, "soon")]),
        # (On purpose, trafka takes segments from 14 bytes, where Kafka 4 wants 1 MiB: small ones suit tests.)
        ("2", [("log.retention.ms", 0, "5")]),
    ]

    def ask(client: WireClient):
        create(client, "inherits")
        results = []
        for name, operations in changes:
            response = client.request(I(validate_only=False, resources=[I.AlterConfigsResource(
                resource_type=BROKER_RESOURCE, resource_name=name,
                configs=[I.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in operations])]), 1)
            results.append([(r.error_code, r.error_message) for r in response.responses])
        # (log.retention.hours is left out: Kafka reports its built-in value where a dynamic
        # log.retention.ms is set, whatever server.properties says.)
        keys = ["log.retention.ms", "message.max.bytes", "num.partitions", "log.roll.hours"]

        def describe():
            return client.request(DescribeConfigsRequest(resources=[
                R(resource_type=BROKER_RESOURCE, resource_name="1", configuration_keys=keys),
                R(resource_type=BROKER_RESOURCE, resource_name="", configuration_keys=keys),
                R(resource_type=TOPIC_RESOURCE, resource_name="inherits", configuration_keys=["retention.ms",
                                                                                              "max.message.bytes"]),
            ], include_synonyms=True, include_documentation=False), 4)

        def applied(response) -> bool:  # Kafka applies the changes through its metadata log, a little later
            values = {(r.resource_name, c.name): c.value for r in response.results for c in r.configs}
            # (log.roll.hours is not dynamic per broker on either side: its change is refused and it stays.)
            return values.get(("1", "log.retention.ms")) == "7000" and values.get(("inherits", "retention.ms")) == "7000"

        deadline = time.monotonic() + 15
        while not applied(described := describe()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for result in described.results:
            results.append(sorted((c.name, c.value, c.config_source, c.read_only,
                                   [(s.name, s.value, s.source) for s in c.synonyms]) for c in result.configs))
        return results

    assert_same(on_both(fresh_brokers, ask))


# -------------------------------------------------------------------------- retention and cleaner configs

#: Broker settings of the retention and cleaner case, in server.properties on both brokers.
RETENTION_SETTINGS = {
    "num.partitions": 1, "log.retention.minutes": 90, "log.retention.bytes": 1_000_000_000,
    "log.segment.bytes": 50_000_000, "log.roll.hours": 12, "log.cleanup.policy": "delete",
    "log.cleaner.threads": 2, "log.cleaner.backoff.ms": 5000, "log.cleaner.delete.retention.ms": 3_600_000,
    "log.cleaner.min.cleanable.ratio": 0.25, "log.segment.delete.delay.ms": 1000,
}
RETENTION_BROKER_KEYS = [
    "log.retention.ms", "log.retention.minutes", "log.retention.hours", "log.retention.bytes",
    "log.retention.check.interval.ms", "log.segment.bytes", "log.segment.delete.delay.ms", "log.roll.ms",
    "log.roll.hours", "log.roll.jitter.ms", "log.roll.jitter.hours", "log.cleanup.policy", "log.cleaner.enable",
    "log.cleaner.threads", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
]
RETENTION_TOPIC_KEYS = [
    "cleanup.policy", "retention.ms", "retention.bytes", "segment.ms", "segment.bytes", "segment.jitter.ms",
    "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio",
    "file.delete.delay.ms",
]
#: Settings Kafka changes at run time and trafka's cleaner reads at start-up only: read-only here.
CLEANER_STARTUP_SETTINGS = {
    "log.cleaner.threads", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
}


@pytest.fixture
def retention_brokers(tmp_path: Path) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    with side_by_side(tmp_path, RETENTION_SETTINGS) as started:
        yield started


def test_describe_configs_of_retention_and_the_cleaner(retention_brokers):
    R = DescribeConfigsRequest.DescribeConfigsResource
    I = IncrementalAlterConfigsRequest

    def ask(client: WireClient):
        create(client, "compacted", **{"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1",
                                       "segment.ms": "60000", "max.compaction.lag.ms": "3600000"})
        create(client, "inherits")
        response = client.request(I(validate_only=False, resources=[I.AlterConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name="1", configs=[
                I.AlterableConfig(name="log.cleaner.min.compaction.lag.ms", config_operation=0, value="1000")])]), 1)
        results = [[(r.error_code, r.error_message) for r in response.responses]]

        def describe():
            return client.request(DescribeConfigsRequest(resources=[
                R(resource_type=BROKER_RESOURCE, resource_name="1", configuration_keys=RETENTION_BROKER_KEYS),
                R(resource_type=TOPIC_RESOURCE, resource_name="compacted", configuration_keys=RETENTION_TOPIC_KEYS),
                R(resource_type=TOPIC_RESOURCE, resource_name="inherits", configuration_keys=RETENTION_TOPIC_KEYS),
            ], include_synonyms=True, include_documentation=False), 4)

        def applied(response) -> bool:  # Kafka applies the dynamic config through its metadata log
            values = {(r.resource_name, c.name): c.value for r in response.results for c in r.configs}
            return (values.get(("inherits", "min.compaction.lag.ms")) == "1000"
                    and values.get(("1", "log.cleaner.min.compaction.lag.ms")) == "1000")

        deadline = time.monotonic() + 15
        while not applied(described := describe()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for result in described.results:
            results.append(sorted(
                (c.name, c.value, c.config_source, c.read_only if c.name not in CLEANER_STARTUP_SETTINGS else None,
                 c.config_type, [(s.name, s.value, s.source) for s in c.synonyms]) for c in result.configs))
        return results

    assert_same(on_both(retention_brokers, ask))
