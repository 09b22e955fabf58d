"""The share state APIs (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState, ReadShareGroupStateSummary) and FindCoordinator for share partitions, trafka beside Apache
Kafka 4.4 with the same settings: the same requests, the same answers (errors and messages included), the same
records in ``__share_group_state`` (timestamps aside), and the state read back after both brokers restart.

These APIs are sent by brokers to the share coordinator; a plain client sends them here, as a broker would
(neither broker has an authorizer).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.reference import KafkaBroker
from compat_tests.test_differential import create, side_by_side
from compat_tests.wire_client import WireClient
from trafka.wire.messages import (
    DeleteShareGroupStateRequest,
    FindCoordinatorRequest,
    InitializeShareGroupStateRequest,
    MetadataRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from trafka.wire.records import iter_batches

SETTINGS = {
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "share.coordinator.state.topic.num.partitions": 3,
    "share.coordinator.snapshot.update.records.per.snapshot": 2,
    # (Kafka also snapshots share partitions written since their last snapshot every 5 minutes by default)
    "share.coordinator.cold.partition.snapshot.interval.ms": 3_600_000,
}
TOPIC = "shared-state"
Init = InitializeShareGroupStateRequest
W = WriteShareGroupStateRequest
R = ReadShareGroupStateRequest
S = ReadShareGroupStateSummaryRequest
D = DeleteShareGroupStateRequest


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    with side_by_side(Path(tmp_path_factory.mktemp("share-state")), SETTINGS) as started:
        yield started


class StateClient:
    """The share state APIs of one broker, for one topic, each answer as plain values (the topic id left out)."""

    def __init__(self, bootstrap: str) -> None:
        self.client = WireClient(bootstrap)
        create(self.client, TOPIC, 2)
        metadata = self.client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                                       allow_auto_topic_creation=False), 12)
        self.topic_id = metadata.topics[0].topic_id

    def close(self) -> None:
        self.client.close()

    def key(self, group_id: str, partition: int) -> str:
        from trafka.broker.share.state import share_coordinator_key

        return share_coordinator_key(group_id, self.topic_id, partition)

    def find(self, keys: list[str], version: int = 6) -> list[tuple[str, int, str]]:
        response = self.client.request(FindCoordinatorRequest(key_type=2, coordinator_keys=keys), version)
        return [(c.key, c.error_code, c.error_message) for c in response.coordinators]

    def ready(self, group_id: str, partition: int) -> None:
        """Until the key's coordinator is found and loaded (the first lookup creates __share_group_state)."""
        deadline = time.monotonic() + 60
        while True:
            found = self.find([self.key(group_id, partition)])
            if found[0][1] == 0:
                code = self.summary(group_id, partition)[0][1]
                if code not in (14, 15, 16):
                    return
            assert time.monotonic() < deadline, found
            time.sleep(0.2)

    def _topic(self, topic_id: uuid.UUID | None) -> uuid.UUID:
        return self.topic_id if topic_id is None else topic_id

    def initialize(self, group_id: str, partition: int, state_epoch: int, start_offset: int, topic_id=None):
        response = self.client.request(Init(group_id=group_id, topics=[Init.InitializeStateData(
            topic_id=self._topic(topic_id), partitions=[Init.PartitionData(
                partition=partition, state_epoch=state_epoch, start_offset=start_offset)])]), 0)
        return [(p.partition, p.error_code, p.error_message) for r in response.results for p in r.partitions]

    def write(self, group_id: str, partition: int, state_epoch: int, leader_epoch: int, start_offset: int,
              batches=(), delivery_complete_count: int = -1, version: int = 1, topic_id=None):
        response = self.client.request(W(group_id=group_id, topics=[W.WriteStateData(
            topic_id=self._topic(topic_id), partitions=[W.PartitionData(
                partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                delivery_complete_count=delivery_complete_count,
                state_batches=[W.StateBatch(first_offset=a, last_offset=b, delivery_state=s, delivery_count=n)
                               for a, b, s, n in batches])])]), version)
        return [(p.partition, p.error_code, p.error_message) for r in response.results for p in r.partitions]

    def read(self, group_id: str, partition: int, leader_epoch: int, topic_id=None):
        response = self.client.request(R(group_id=group_id, topics=[R.ReadStateData(
            topic_id=self._topic(topic_id), partitions=[R.PartitionData(partition=partition,
                                                                         leader_epoch=leader_epoch)])]), 0)
        return [(p.partition, p.error_code, p.error_message, p.state_epoch, p.start_offset,
                 [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches])
                for r in response.results for p in r.partitions]

    def summary(self, group_id: str, partition: int, leader_epoch: int = 0, version: int = 1, topic_id=None):
        response = self.client.request(S(group_id=group_id, topics=[S.ReadStateSummaryData(
            topic_id=self._topic(topic_id), partitions=[S.PartitionData(partition=partition,
                                                                         leader_epoch=leader_epoch)])]), version)
        return [(p.partition, p.error_code, p.error_message, p.state_epoch, p.leader_epoch, p.start_offset,
                 p.delivery_complete_count) for r in response.results for p in r.partitions]

    def delete(self, group_id: str, partition: int, topic_id=None):
        response = self.client.request(D(group_id=group_id, topics=[D.DeleteStateData(
            topic_id=self._topic(topic_id), partitions=[D.PartitionData(partition=partition)])]), 0)
        return [(p.partition, p.error_code, p.error_message) for r in response.results for p in r.partitions]


def scenario(state: StateClient) -> list[tuple[str, object]]:
    """Every state API through its cases; what each answered, in order."""
    other_topic = uuid.UUID("00000000-0000-0000-0000-0000000000aa")
    seen: list[tuple[str, object]] = []

    def step(name: str, answer: object) -> None:
        seen.append((name, answer))

    state.ready("g1", 0)
    state.ready("g2", 1)
    step("read uninitialized", state.read("g1", 0, 0))
    step("summary uninitialized", state.summary("g1", 0))
    step("write uninitialized", state.write("g1", 0, 0, 0, 0))
    step("initialize", state.initialize("g1", 0, 0, 0))
    step("read initialized", state.read("g1", 0, 0))
    step("summary initialized", state.summary("g1", 0))
    step("write overlapping batches", state.write("g1", 0, 0, 0, 0, [(0, 9, 0, 1), (5, 7, 2, 1)], 3))
    step("read merged", state.read("g1", 0, 0))
    step("write a new start", state.write("g1", 0, 0, 0, 5, [(5, 12, 4, 2)], 8))
    step("read pruned", state.read("g1", 0, 0))
    step("write (a snapshot)", state.write("g1", 0, 0, 0, -1, [(20, 20, 2, 1)], 1))
    step("read after the snapshot", state.read("g1", 0, 0))
    step("summary v1", state.summary("g1", 0))
    step("summary v0", state.summary("g1", 0, version=0))
    step("write v0", state.write("g1", 0, 0, 0, -1, [(21, 21, 2, 1)], version=0))
    step("read a newer leader epoch", state.read("g1", 0, 3))
    step("read an older leader epoch", state.read("g1", 0, 2))
    step("read a negative leader epoch", state.read("g1", 0, -1))
    step("write an older leader epoch", state.write("g1", 0, 0, 2, 6))
    step("write a newer leader epoch", state.write("g1", 0, 0, 4, 6))
    step("read after it", state.read("g1", 0, 3))
    step("initialize a newer state epoch", state.initialize("g1", 0, 1, 7))
    step("read the new state", state.read("g1", 0, 3))
    step("write an older state epoch", state.write("g1", 0, 0, 3, 6))
    step("initialize an older state epoch", state.initialize("g1", 0, 0, 7))
    step("summary of the new state", state.summary("g1", 0))
    step("write a negative leader epoch", state.write("g1", 0, 1, -1, 6))
    step("write a negative state epoch", state.write("g1", 0, -1, 3, 6))
    step("write a negative partition", state.write("g1", -1, 1, 3, 6))
    step("initialize a negative state epoch", state.initialize("g1", 0, -1, 6))
    step("write an unknown topic", state.write("g1", 0, 1, 3, 6, topic_id=other_topic))
    step("read an unknown topic", state.read("g1", 0, 0, topic_id=other_topic))
    step("initialize an unknown topic", state.initialize("g1", 0, 0, 0, topic_id=other_topic))
    step("initialize an unknown partition", state.initialize("g1", 5, 0, 0))
    step("summary of an unknown topic", state.summary("g1", 0, topic_id=other_topic))
    step("delete an unknown topic", state.delete("g1", 0, topic_id=other_topic))
    step("delete", state.delete("g1", 0))
    step("read deleted", state.read("g1", 0, 0))
    step("delete again", state.delete("g1", 0))
    step("initialize with no start offset", state.initialize("g2", 1, 0, -1))
    step("read it", state.read("g2", 1, 0))
    step("summary of it", state.summary("g2", 1))
    step("write a start", state.write("g2", 1, 0, 0, 3, [(3, 4, 2, 1)]))
    step("write an older start", state.write("g2", 1, 0, 0, 1, [(1, 2, 2, 1)], 5))
    step("read g2", state.read("g2", 1, 0))
    step("summary g2", state.summary("g2", 1))
    step("an empty group id", state.client.request(R(group_id="", topics=[R.ReadStateData(
        topic_id=state.topic_id, partitions=[R.PartitionData(partition=0, leader_epoch=0)])]), 0).results)
    step("no topics", state.client.request(R(group_id="g1", topics=[]), 0).results)
    step("a topic without partitions", state.client.request(R(group_id="g1", topics=[R.ReadStateData(
        topic_id=state.topic_id, partitions=[])]), 0).results)
    return seen


def test_the_state_apis_answer_as_kafka_does(brokers):
    observed = {}
    for name, process in brokers.items():
        state = StateClient(process.bootstrap)
        try:
            observed[name] = scenario(state)
        finally:
            state.close()
    for (step, trafka), (_, kafka) in zip(observed["trafka"], observed["kafka"], strict=True):
        assert trafka == kafka, step


def test_find_coordinator_for_share_keys_as_kafka(brokers):
    observed = {}
    for name, process in brokers.items():
        state = StateClient(process.bootstrap)
        try:
            state.ready("g1", 0)
            t = state.key("g", 0).split(":")[1]
            keys = [state.key("g1", 0), "bad", "g:x:1", "", f":{t}:1", f"g:{t}:-1", f"g:{t}:abc", f"a:b:{t}:1",
                    f"g:{t}:1:", f"g:{t}", f"g:{t}x:0", f"g:{t}:01", f"g:{t}: 1", f"g:{t}:+1"]
            found = state.find(keys)
            older = state.find([state.key("g1", 0)], version=5)
            v3 = state.client.request(FindCoordinatorRequest(key_type=2, key=state.key("g1", 0)), 3)
            observed[name] = [repr(item).replace(t, "T") for item in (found, older, (v3.error_code, v3.error_message))]
        finally:
            state.close()
    assert observed["trafka"] == observed["kafka"]


def state_records(data_dir: Path) -> list[tuple[bytes, bytes | None]]:
    """The records of every partition of ``__share_group_state`` in a broker's data directory."""
    records = []
    for directory in sorted(data_dir.glob("__share_group_state-*")):
        for segment in sorted(directory.glob("*.log")):
            for batch in iter_batches(segment.read_bytes()):
                records += [(bytes(r.key), None if r.value is None else bytes(r.value)) for r in batch.records()]
    return records


def without_timestamps(records: list[tuple[bytes, bytes | None]], topic_id: uuid.UUID) -> list:
    """The records with the topic id and the snapshots' create and write timestamps blanked, in key order (the
    brokers' topic ids differ, so their keys land in different state partitions)."""
    from trafka.broker.share.records import decode_key, decode_snapshot_value, encode_snapshot_value

    blanked = []
    for key, value in records:
        decoded = decode_key(key)
        if decoded.snapshot and value is not None:
            snapshot = decode_snapshot_value(value)
            value = encode_snapshot_value(type(snapshot)(**{**snapshot.__dict__, "create_timestamp": 0,
                                                            "write_timestamp": 0}))
        blanked.append(((decoded.group_id, decoded.partition), key.replace(topic_id.bytes, bytes(16)), value))
    return [(key, value) for _, key, value in sorted(blanked, key=lambda item: item[0])]


def test_the_same_records_and_the_state_after_a_restart(brokers):
    ids, before = {}, {}
    for name, process in brokers.items():
        state = StateClient(process.bootstrap)
        try:
            state.ready("g3", 0)
            ids[name] = state.topic_id
            assert state.initialize("g3", 0, 2, 100) == [(0, 0, None)]
            for offset in range(100, 110):
                assert state.write("g3", 0, 2, 1, -1, [(offset, offset, 2, 1)], offset - 99) == [(0, 0, None)]
            before[name] = (state.read("g3", 0, 1), state.read("g1", 0, 0), state.read("g2", 1, 0))
        finally:
            state.close()
    assert before["trafka"] == before["kafka"]
    assert before["trafka"][0][0][5] == [(100, 109, 2, 1)]
    assert (without_timestamps(state_records(brokers["trafka"].data_dir), ids["trafka"])
            == without_timestamps(state_records(brokers["kafka"].data_dir), ids["kafka"]))

    brokers["trafka"].restart()
    brokers["kafka"].stop()
    brokers["kafka"].start()
    for name, process in brokers.items():
        state = StateClient(process.bootstrap)
        try:
            state.ready("g3", 0)
            assert (state.read("g3", 0, 1), state.read("g1", 0, 0), state.read("g2", 1, 0)) == before[name], name
        finally:
            state.close()


# ==================================================================================================== offsets APIs


def offsets_scenario(bootstrap: str) -> list[tuple[str, object]]:
    """DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets through their cases, around a
    share group that a member joins and leaves; what each answered (topic ids left out)."""
    from compat_tests.test_differential import group_request, produce
    from trafka.wire.messages import (
        AlterShareGroupOffsetsRequest,
        OffsetCommitRequest,
        DeleteShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequest,
        ShareGroupHeartbeatRequest,
    )
    from trafka.wire.records import SimpleRecord, build_batch

    Describe, Alter = DescribeShareGroupOffsetsRequest, AlterShareGroupOffsetsRequest
    Delete = DeleteShareGroupOffsetsRequest
    client = WireClient(bootstrap)
    topic, group = "share-offsets", "share-offsets-group"
    seen: list[tuple[str, object]] = []
    try:
        create(client, topic, 2)
        for partition in range(2):
            produce(client, topic, partition, build_batch([SimpleRecord(key=None, value=b"v%d" % i) for i in range(5)]))
        deadline = time.monotonic() + 60
        find = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
        while client.request(find, 6).coordinators[0].error_code:
            assert time.monotonic() < deadline
            time.sleep(0.2)

        def describe(group_id: str, topics=None, version: int = 1):
            response = client.request(Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(
                group_id=group_id, topics=topics)]), version)
            return [(g.group_id, g.error_code, g.error_message, [
                (t.topic_name, [(p.partition_index, p.start_offset, p.leader_epoch, p.lag, p.error_code)
                                for p in t.partitions]) for t in g.topics]) for g in response.groups]

        def alter(group_id: str, topics):
            response = client.request(Alter(group_id=group_id, topics=[Alter.AlterShareGroupOffsetsRequestTopic(
                topic_name=name, partitions=[Alter.AlterShareGroupOffsetsRequestPartition(
                    partition_index=p, start_offset=o) for p, o in partitions]) for name, partitions in topics]), 0)
            return (response.error_code, response.error_message, [
                (t.topic_name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
                for t in response.responses])

        def delete(group_id: str, names):
            response = client.request(Delete(group_id=group_id, topics=[
                Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=name) for name in names]), 0)
            return (response.error_code, response.error_message,
                    [(t.topic_name, t.error_code, t.error_message) for t in response.responses])

        def heartbeat(member_id: str, epoch: int, topics):
            return client.request(ShareGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch,
                                                             subscribed_topic_names=topics), 1)

        seen.append(("describe a missing group", describe("missing-" + group)))
        seen.append(("describe a missing group's topic", describe("missing-" + group, [
            Describe.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])))
        member = str(uuid.uuid4())
        joined = heartbeat(member, 0, [topic])
        assert joined.error_code == 0, joined
        seen.append(("alter a group with members", alter(group, [(topic, [(0, 2)])])))
        seen.append(("delete from a group with members", delete(group, [topic])))
        assert heartbeat(member, -1, None).error_code == 0
        seen.append(("alter", alter(group, [(topic, [(0, 2), (1, 9), (5, 0)]), ("no-such-topic", [(0, 0)])])))
        seen.append(("describe after alter", describe(group)))
        seen.append(("describe v0", describe(group, version=0)))
        seen.append(("describe some", describe(group, [Describe.DescribeShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=[1, 0])])))
        seen.append(("alter again", alter(group, [(topic, [(0, 1)])])))
        seen.append(("describe after it", describe(group)))
        seen.append(("alter a new group", alter("new-" + group, [(topic, [(0, 3)])])))
        seen.append(("describe the new group", describe("new-" + group)))
        seen.append(("delete", delete(group, [topic, "no-such-topic"])))
        seen.append(("describe after delete", describe(group)))
        seen.append(("delete from a missing group", delete("missing-" + group, [topic])))
        seen.append(("alter nothing", alter(group, [])))
        seen.append(("delete nothing", delete(group, [])))
        seen.append(("alter an empty group id", alter("", [(topic, [(0, 0)])])))
        seen.append(("delete an empty group id", delete("", [topic])))
        seen.append(("describe an empty group id", describe("")))
        seen.append(("alter a negative start offset", alter("negative-" + group, [(topic, [(0, -5)])])))
        consumer_group = "consumer-" + group
        commit = OffsetCommitRequest(group_id=consumer_group, generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])])
        group_request(client, commit, 8)
        seen.append(("describe a consumer group", describe(consumer_group)))
        seen.append(("alter a consumer group", alter(consumer_group, [(topic, [(0, 0)])])))
        seen.append(("delete from a consumer group", delete(consumer_group, [topic])))
    finally:
        client.close()
    return seen


def test_share_group_offsets_as_kafka(brokers):
    observed = {name: offsets_scenario(process.bootstrap) for name, process in brokers.items()}
    for (step, trafka), (_, kafka) in zip(observed["trafka"], observed["kafka"], strict=True):
        assert trafka == kafka, step


def test_the_state_topic_as_kafka_makes_it(brokers):
    from trafka.wire.messages import DescribeConfigsRequest

    observed = {}
    for name, process in brokers.items():
        state = StateClient(process.bootstrap)
        try:
            state.ready("g1", 0)
            metadata = state.client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
                name="__share_group_state")], allow_auto_topic_creation=False), 12)
            configs = state.client.request(DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="__share_group_state",
                                                               configuration_keys=[
                    "cleanup.policy", "retention.ms", "min.insync.replicas", "segment.bytes", "compression.type"])]), 4)
            observed[name] = ([(t.name, t.error_code, t.is_internal, len(t.partitions)) for t in metadata.topics],
                              sorted((c.name, c.value) for c in configs.results[0].configs))
        finally:
            state.close()
    assert observed["trafka"] == observed["kafka"]


JAVA_TOPIC, JAVA_GROUP = "java-share-offsets", "java-share-offsets-group"


def java_offsets_scenario(bootstrap: str) -> list[object]:
    """What Admin.listShareGroupOffsets, alterShareGroupOffsets and deleteShareGroupOffsets (kafka-clients) answer,
    each in turn (a Kafka error's name where one failed)."""
    from compat_tests.clients import ClientError, shared_java_driver
    from compat_tests.test_differential import produce
    from trafka.wire.records import SimpleRecord, build_batch

    with WireClient(bootstrap) as client:
        create(client, JAVA_TOPIC, 3)
        for partition in range(3):
            produce(client, JAVA_TOPIC, partition,
                    build_batch([SimpleRecord(key=None, value=b"%d" % i) for i in range(4 + partition)]))
    java = shared_java_driver()
    steps = [
        ("list_share_group_offsets", {}),
        ("alter_share_group_offsets", {"offsets": [[JAVA_TOPIC, 0, 1], [JAVA_TOPIC, 2, 3]]}),
        ("list_share_group_offsets", {}),
        ("alter_share_group_offsets", {"offsets": [[JAVA_TOPIC, 1, 9]]}),
        ("list_share_group_offsets", {}),
        ("alter_share_group_offsets", {"offsets": [["no-such-topic", 0, 0]]}),
        ("delete_share_group_offsets", {"topics": [JAVA_TOPIC]}),
        ("list_share_group_offsets", {}),
        ("delete_share_group_offsets", {"topics": ["no-such-topic"]}),
    ]
    answers: list[object] = []
    for op, arguments in steps:
        try:
            answers.append(java.call(op, bootstrap=bootstrap, group_id=JAVA_GROUP, **arguments))
        except ClientError as exc:
            answers.append(exc.error)
    return answers


def test_the_java_admin_client_alters_lists_and_deletes_share_group_offsets(brokers):
    """kafka-clients' share group offsets admin calls against both brokers: the same offsets, lags and errors."""
    observed = {name: java_offsets_scenario(process.bootstrap) for name, process in brokers.items()}
    assert observed["trafka"] == observed["kafka"]
    assert observed["trafka"][2] == [[JAVA_TOPIC, 0, 1, 0, 3], [JAVA_TOPIC, 2, 3, 0, 3]]


# ==================================================================================================== authorization


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    """Kafka and trafka with the StandardAuthorizer, the SASL users, topics, groups and ACLs of
    compat_tests/test_differential_authorization.py."""
    from compat_tests import test_differential_authorization as auth

    root = Path(tmp_path_factory.mktemp("share-state-authorization"))
    settings = {**auth.SETTINGS, **SETTINGS}
    kafka = KafkaBroker(root / "kafka", overrides=settings, listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    sasl_port = free_port()
    (root / "trafka").mkdir()
    trafka = BrokerProcess(root / "trafka", name="trafka", overrides={
        **settings, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}"})
    try:
        kafka.start()
        trafka.start()
        for process in (kafka, trafka):
            auth._prepare(process.bootstrap)
        yield {"kafka": (kafka, kafka.ports["SASL_PLAINTEXT"]), "trafka": (trafka, sasl_port)}
    finally:
        trafka.close()
        kafka.close()


def _refusable_requests() -> list[tuple[str, object, int]]:
    from trafka.wire.messages import (
        AlterShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsRequest,
        DeleteShareGroupStateRequest,
        DescribeShareGroupOffsetsRequest,
        ReadShareGroupStateSummaryRequest,
    )

    topic_id = uuid.UUID("00000000-0000-0000-0000-0000000000bb")
    key = share_key = f"g-alice:{share_coordinator_key_topic(topic_id)}:0"
    Describe, Alter = DescribeShareGroupOffsetsRequest, AlterShareGroupOffsetsRequest
    DeleteOffsets, DeleteState = DeleteShareGroupOffsetsRequest, DeleteShareGroupStateRequest
    Summary = ReadShareGroupStateSummaryRequest
    requests: list[tuple[str, object, int]] = [
        ("find a share coordinator", FindCoordinatorRequest(key_type=2, coordinator_keys=[key, share_key]), 6),
        ("initialize", Init(group_id="g-alice", topics=[Init.InitializeStateData(topic_id=topic_id, partitions=[
            Init.PartitionData(partition=0, state_epoch=0, start_offset=0)])]), 0),
        ("read", R(group_id="g-alice", topics=[R.ReadStateData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=0, leader_epoch=0)])]), 0),
        ("write", W(group_id="g-alice", topics=[W.WriteStateData(topic_id=topic_id, partitions=[
            W.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=0)])]), 1),
        ("delete", DeleteState(group_id="g-alice", topics=[DeleteState.DeleteStateData(topic_id=topic_id, partitions=[
            DeleteState.PartitionData(partition=0)])]), 0),
        ("summary", Summary(group_id="g-alice", topics=[Summary.ReadStateSummaryData(topic_id=topic_id, partitions=[
            Summary.PartitionData(partition=0, leader_epoch=0)])]), 1),
    ]
    for group in ("g-alice", "g-other"):
        requests += [
            (f"describe offsets of {group}", Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(
                group_id=group, topics=[Describe.DescribeShareGroupOffsetsRequestTopic(topic_name=name, partitions=[0])
                                        for name in ("orders", "secret")])]), 1),
            (f"alter offsets of {group}", Alter(group_id=group, topics=[Alter.AlterShareGroupOffsetsRequestTopic(
                topic_name=name, partitions=[Alter.AlterShareGroupOffsetsRequestPartition(
                    partition_index=0, start_offset=0)]) for name in ("orders", "secret")]), 0),
            (f"delete offsets of {group}", DeleteOffsets(group_id=group, topics=[
                DeleteOffsets.DeleteShareGroupOffsetsRequestTopic(topic_name="secret")]), 0),
        ]
    return requests


def share_coordinator_key_topic(topic_id: uuid.UUID) -> str:
    from trafka.broker.share.state import uuid_to_kafka_string

    return uuid_to_kafka_string(topic_id)


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_refusals_as_kafka_answers_them(secured, user):
    """The share state APIs need CLUSTER_ACTION, FindCoordinator for share keys too; the share group offsets
    APIs the group's and the topics' rights: alice (rights on g-alice and some topics, none on the cluster) and
    bob (none) see the same refusals from both brokers."""
    from compat_tests.test_differential_authorization import on_both, outcome

    for case, message, version in _refusable_requests():
        observed = on_both(secured, user, lambda client, m=message, v=version: outcome(client.request(m, v)))
        assert observed["trafka"] == observed["kafka"], case
