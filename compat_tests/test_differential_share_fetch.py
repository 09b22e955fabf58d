"""ShareFetch and ShareAcknowledge side by side with Apache Kafka 4.4: the same scripted conversation of two
members of a share group (joined with ShareGroupHeartbeat) gets the same acquired ranges, delivery counts, error
codes and acknowledgement codes from both, session epochs and their errors included.

The answers are reduced to what a client acts on: the top-level code, then per partition its code, its
acknowledgement code and the acquired ranges (first offset, last offset, delivery count), and the offsets of the
records sent."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.ports import free_port
from compat_tests.test_differential import side_by_side
from compat_tests.test_differential_share_groups import SETTINGS as GROUP_SETTINGS
from compat_tests.test_differential_share_groups import Conversation, conversation
from compat_tests.wire_client import WireClient
from trafka.wire.messages import (
    MetadataRequest,
    ProduceRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from trafka.wire.records import SimpleRecord, build_batch, iter_batches

SETTINGS = {**GROUP_SETTINGS, "group.share.record.lock.duration.ms": 15_000, "group.share.delivery.count.limit": 6,
            "group.share.min.record.lock.duration.ms": 1000}
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
#: What a ShareFetch that only renews locks must say.
RENEWING = dict(is_renew_ack=True, max_wait_ms=0, min_bytes=0, max_bytes=0, max_records=0)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    with side_by_side(Path(tmp_path_factory.mktemp("share-fetch-differential")), SETTINGS) as started:
        yield started


class Script:
    """ShareFetch and ShareAcknowledge requests of one group to one broker, answers reduced."""

    def __init__(self, talk: Conversation, group: str, topic: str):
        self.talk, self.client, self.group = talk, talk.client, group
        metadata = self.client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]),
                                       12)
        self.topic, self.topic_id = topic, metadata.topics[0].topic_id

    def produce(self, *counts: int) -> None:
        for count in counts:
            batch = build_batch([SimpleRecord(key=None, value=b"v%d" % i) for i in range(count)])
            response = self.client.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name=self.topic, partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9)
            assert response.responses[0].partition_responses[0].error_code == 0, response

    def fetch(self, member: str, epoch: int, *, acks=(), max_records: int = 500, batch_size: int = 500,
              topic_id: uuid.UUID | None = None, fetch: bool = True, version: int = 1, **v2_fields):
        topics = []
        if fetch or acks:
            topics = [ShareFetchRequest.FetchTopic(topic_id=topic_id or self.topic_id, partitions=[
                ShareFetchRequest.FetchPartition(partition_index=0, acknowledgement_batches=[
                    ShareFetchRequest.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=list(t))
                    for f, last, t in acks])])]
        fields = dict(max_wait_ms=300, min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=batch_size)
        response = self.client.request(ShareFetchRequest(
            group_id=self.group, member_id=member, share_session_epoch=epoch, topics=topics, forgotten_topics_data=[],
            **{**fields, **v2_fields}), version)
        return (response.error_code, response.acquisition_lock_timeout_ms if response.error_code == 0 else None,
                [(p.partition_index, p.error_code, p.acknowledge_error_code,
                  [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records],
                  _offsets(p.records)) for t in response.responses for p in t.partitions])

    def acknowledge(self, member: str, epoch: int, acks, *, topic_id: uuid.UUID | None = None, version: int = 1,
                    **v2_fields):
        response = self.client.request(ShareAcknowledgeRequest(
            group_id=self.group, member_id=member, share_session_epoch=epoch, **v2_fields, topics=[
                ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id or self.topic_id, partitions=[
                    ShareAcknowledgeRequest.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                        ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                                     acknowledge_types=list(t))
                        for f, last, t in acks])])]), version)
        return (response.error_code, [(p.partition_index, p.error_code) for t in response.responses
                                      for p in t.partitions]) + ((response.acquisition_lock_timeout_ms,)
                                                                  if version >= 2 else ())


def _offsets(records) -> list[int]:
    return [r.offset for batch in iter_batches(bytes(records or b"")) for r in batch.records()]


def on_both(brokers, topic: str, scenario) -> dict[str, object]:
    observed = {}
    for name, process in brokers.items():
        talk, client = conversation(process, (topic, 1))
        try:
            observed[name] = scenario(talk)
        finally:
            client.close()
    return observed


def join(talk: Conversation, group: str, topic: str, *members: str) -> None:
    """The first member joins until its partition is assigned (its share state initialized), the others join."""
    first, *others = members
    answer = talk.heartbeat(group, first, 0, [topic])
    assert answer[0] == 0, answer
    talk.until_assigned(group, first, answer[3])
    for member in others:
        talk.heartbeat(group, member, 0, [topic])


def assert_same(observed) -> None:
    for step, (trafka_step, kafka_step) in enumerate(zip(observed["trafka"], observed["kafka"], strict=False)):
        assert trafka_step == kafka_step, f"step {step}: trafka {trafka_step}, kafka {kafka_step}"
    assert len(observed["trafka"]) == len(observed["kafka"])


def test_acquire_acknowledge_and_redeliver(brokers):
    def scenario(talk: Conversation):
        join(talk, "sf-group", "sf-topic", "member-a", "member-b")
        script = Script(talk, "sf-group", "sf-topic")
        # the share partition starts at the end of the log (share.auto.offset.reset latest) when first fetched
        seen = [script.fetch("member-a", 0), script.fetch("member-b", 0)]
        script.produce(3, 2, 5)  # batches 0-2, 3-4, 5-9
        return seen + [
            script.fetch("member-a", 1, max_records=1, batch_size=1),  # a whole batch, though one was asked for
            script.fetch("member-b", 1),
            script.acknowledge("member-a", 2, [(0, 2, [ACCEPT, RELEASE, REJECT])]),
            script.fetch("member-a", 3),  # the released record, delivered again
            script.acknowledge("member-b", 2, [(3, 4, [RELEASE]), (5, 9, [ACCEPT])]),
            script.acknowledge("member-b", 3, [(5, 5, [ACCEPT])]),  # already acknowledged
            script.acknowledge("member-a", 4, [(3, 3, [ACCEPT])]),  # not acquired by it
            script.acknowledge("member-a", 5, [(12, 14, [ACCEPT])]),  # past the end
            script.fetch("member-b", 4, acks=[]),
            script.fetch("member-a", 6, acks=[(1, 1, [RELEASE])]),  # released again (its own fetch comes first)
            script.fetch("member-b", 5, acks=[(3, 4, [ACCEPT])]),
            script.acknowledge("member-b", 6, [(0, 1, [ACCEPT])]),  # below the start offset
            script.fetch("member-a", 7),
            script.fetch("member-a", -1, fetch=False),
            script.fetch("member-b", -1, fetch=False),
        ]

    assert_same(on_both(brokers, "sf-topic", scenario))


def test_share_session_errors(brokers):
    def scenario(talk: Conversation):
        join(talk, "sf-sessions", "sf-sessions-topic", "member-s")
        script = Script(talk, "sf-sessions", "sf-sessions-topic")
        seen = [
            script.fetch("member-s", 1),  # no session yet
            script.acknowledge("member-s", 0, [(0, 0, [ACCEPT])]),  # acknowledgements cannot open one
            script.fetch("member-s", 0, acks=[(0, 0, [ACCEPT])]),  # nor can a fetch with acknowledgements
            script.fetch("member-s", 0),
        ]
        script.produce(4)
        return seen + [
            script.fetch("member-s", 0),  # a new session
            script.fetch("member-s", 3),  # not the next epoch
            script.fetch("member-s", 1, acks=[(0, 3, [ACCEPT, ACCEPT])]),  # types neither one nor one each
            script.fetch("member-s", 2, acks=[(2, 1, [ACCEPT])]),
            script.fetch("member-s", 3, acks=[(0, 1, [ACCEPT]), (1, 2, [ACCEPT])]),  # overlapping
            script.fetch("member-s", 4, acks=[(0, 3, [9])]),
            script.acknowledge("member-s", 5, [(0, 3, [ACCEPT])]),
            script.fetch("member-s", 6, topic_id=uuid.uuid4()),
            script.acknowledge("member-s", -1, [(0, 0, [ACCEPT])]),
            script.acknowledge("member-s", -1, [(0, 0, [ACCEPT])]),  # closed already
        ]

    assert_same(on_both(brokers, "sf-sessions-topic", scenario))


def test_a_closed_connection_ends_the_share_session(brokers):
    observed = {}
    for name, process in brokers.items():
        talk, client = conversation(process, ("sf-closed", 1))
        join(talk, "sf-closed-group", "sf-closed", "member-c", "member-d")
        script = Script(talk, "sf-closed-group", "sf-closed")
        seen = [script.fetch("member-c", 0)]
        script.produce(3)
        seen.append(script.fetch("member-c", 1))
        other = WireClient(process.bootstrap)
        try:
            second = Script(Conversation(other, talk.topics), "sf-closed-group", "sf-closed")
            seen.append(second.fetch("member-d", 0, fetch=False))
            client.close()  # member-c's records are released, its session ends
            seen.append(second.fetch("member-d", 1))
            seen.append(second.fetch("member-c", 2))
        finally:
            other.close()
        observed[name] = seen
    assert_same(observed)


def test_version_2_record_limit_and_renew(brokers):
    def scenario(talk: Conversation):
        join(talk, "sf-v2", "sf-v2-topic", "member-r")
        script = Script(talk, "sf-v2", "sf-v2-topic")
        seen = [script.fetch("member-r", 0, version=2)]
        script.produce(5, 5)
        return seen + [
            # record-limit mode: exactly max_records, though the batch holds more
            script.fetch("member-r", 1, version=2, max_records=3, share_acquire_mode=1),
            script.fetch("member-r", 2, version=2, max_records=3, share_acquire_mode=0),
            script.acknowledge("member-r", 3, [(0, 2, [RENEW])], version=2),  # RENEW without is_renew_ack
            script.acknowledge("member-r", 4, [(0, 2, [RENEW])], version=2, is_renew_ack=True),
            script.fetch("member-r", 5, version=2, acks=[(3, 4, [RENEW])], is_renew_ack=True),  # must fetch nothing
            script.fetch("member-r", 5, version=2, acks=[(3, 4, [RENEW])], **RENEWING),
            script.fetch("member-r", 6, version=2, acks=[(3, 4, [ACCEPT])], **RENEWING),  # not only renewals
            script.fetch("member-r", 7, version=2, acks=[(0, 4, [ACCEPT])]),
            script.acknowledge("member-r", 8, [(5, 9, [ACCEPT])], version=2),
            script.fetch("member-r", 9, version=2),
        ]

    assert_same(on_both(brokers, "sf-v2-topic", scenario))


def test_records_near_the_delivery_limit_come_fewer_at_a_time(brokers):
    """With a delivery limit of 6, a released batch comes back whole up to its third delivery, then half of it,
    then a quarter, and a record on its last delivery alone; a fetch acquires before its own acknowledgements
    free records (they are still being written)."""
    def scenario(talk: Conversation):
        join(talk, "sf-limit", "sf-limit-topic", "member-l")
        script = Script(talk, "sf-limit", "sf-limit-topic")
        seen = [script.fetch("member-l", 0)]
        script.produce(6, 4)
        seen.append(script.fetch("member-l", 1))
        for epoch in range(2, 10):
            ranges = seen[-1][2][0][3] if seen[-1][2] else []
            seen.append(script.fetch("member-l", epoch, acks=[(first, last, [RELEASE]) for first, last, _ in ranges]))
        return seen

    assert_same(on_both(brokers, "sf-limit-topic", scenario))


def set_group_configs(client, group: str, **configs: str) -> None:
    from trafka.wire.messages import IncrementalAlterConfigsRequest as Inc

    response = client.request(Inc(resources=[Inc.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        Inc.AlterableConfig(name=name.replace("_", "."), config_operation=0, value=value)
        for name, value in configs.items()])]), 1)
    assert [r.error_code for r in response.responses] == [0], response


def test_group_configs_earliest_read_committed_and_the_delivery_limit(brokers):
    """A group's own share.auto.offset.reset (earliest), share.isolation.level (read_committed, with the Java
    client's transactions, one aborted, one left open) and share.delivery.count.limit."""
    from compat_tests.clients import shared_java_driver

    try:
        java = shared_java_driver()
    except Exception as exc:
        pytest.skip(f"the Java driver cannot run here: {exc}")

    def scenario(talk: Conversation, process):
        set_group_configs(talk.client, "sf-configured", share_auto_offset_reset="earliest",
                          share_isolation_level="read_committed", share_delivery_count_limit="3")
        script = Script(talk, "sf-configured", "sf-txn")
        script.produce(2)  # 0-1, before the group's first fetch: earliest delivers them

        def send(name: str, values: list[bytes], end: str | None):
            java.call("txn_open", bootstrap=process.bootstrap, name=name, transactional_id=f"{name}-{id(process)}")
            java.call("txn_begin", bootstrap=process.bootstrap, name=name)
            java.call("txn_send", bootstrap=process.bootstrap, name=name, topic="sf-txn",
                      messages=[{"key": None, "value": base64.b64encode(v).decode(), "partition": 0} for v in values])
            if end is not None:
                java.call(f"txn_{end}", bootstrap=process.bootstrap, name=name)
                java.call("txn_close", bootstrap=process.bootstrap, name=name)

        send("aborting", [b"a1", b"a2", b"a3"], "abort")
        send("committing", [b"c1", b"c2"], "commit")
        script.produce(1)
        send("open", [b"o1"], None)
        join(talk, "sf-configured", "sf-txn", "member-t")
        seen = [script.fetch("member-t", 0)]
        seen.append(script.acknowledge("member-t", 1, [(r[0], r[1], [RELEASE]) for r in seen[-1][2][0][3]]))
        seen.append(script.fetch("member-t", 2))
        seen.append(script.acknowledge("member-t", 3, [(r[0], r[1], [RELEASE]) for r in seen[-1][2][0][3]]))
        seen.append(script.fetch("member-t", 4))
        java.call("txn_commit", bootstrap=process.bootstrap, name="open")
        java.call("txn_close", bootstrap=process.bootstrap, name="open")
        seen.append(script.fetch("member-t", 5))
        return seen

    observed = {}
    for name, process in brokers.items():
        talk, client = conversation(process, ("sf-txn", 1))
        try:
            observed[name] = scenario(talk, process)
        finally:
            client.close()
    assert_same(observed)


@pytest.fixture(scope="module")
def authorized_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Kafka and trafka with an authorizer, SASL users and ACLs (compat_tests/test_differential_authorization.py):
    alice may READ the share group sf-alice and the topics beginning with ord but ordinal; bob nothing."""
    from compat_tests import test_differential_authorization as authorization
    from compat_tests.harness import BrokerProcess
    from compat_tests.reference import KafkaBroker
    from trafka.broker.security.authorizer import AclOperation
    from trafka.wire import messages as m

    root = Path(tmp_path_factory.mktemp("share-fetch-authorization"))
    settings = {**authorization.SETTINGS, **SETTINGS}
    kafka = KafkaBroker(root / "kafka", overrides=settings, listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    sasl_port = free_port()
    (root / "trafka").mkdir()
    trafka = BrokerProcess(root / "trafka", name="trafka", overrides={
        **settings, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}"})
    try:
        kafka.start()
        trafka.start()
        for process in (kafka, trafka):
            authorization._prepare(process.bootstrap)
            with WireClient(process.bootstrap) as admin:  # and alice may READ the share group sf-alice
                acl = m.CreateAclsRequest.AclCreation(
                    resource_type=authorization.G, resource_name="sf-alice", principal="User:alice", host="*",
                    resource_pattern_type=authorization.LITERAL, operation=AclOperation.READ,
                    permission_type=authorization.ALLOW)
                response = admin.request(m.CreateAclsRequest(creations=[acl]), 3)
                assert [r.error_code for r in response.results] == [0], response
        yield {"kafka": (kafka, kafka.ports["SASL_PLAINTEXT"]), "trafka": (trafka, sasl_port)}
    finally:
        trafka.close()
        kafka.close()


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_authorization(authorized_brokers, user):
    """READ on the group (GROUP_AUTHORIZATION_FAILED for the whole request) and on each topic
    (TOPIC_AUTHORIZATION_FAILED for its partitions), as Kafka 4.4 checks them."""
    from compat_tests import test_differential_authorization as authorization

    observed = {}
    for name, (process, sasl_port) in authorized_brokers.items():
        with WireClient(process.bootstrap) as admin:  # a super user: the topic ids, the group joined
            metadata = admin.request(MetadataRequest(topics=None), 12)
            ids = {t.name: t.topic_id for t in metadata.topics}
            talk = Conversation(admin, {str(t.topic_id): t.name for t in metadata.topics})
            if user == "alice":
                join(talk, "sf-alice", "orders", "member-alice")
        with WireClient(f"127.0.0.1:{sasl_port}") as client:
            authorization._login(client, user)

            def share_fetch(group: str, epoch: int, acks=(), ids=ids):
                response = client.request(ShareFetchRequest(
                    group_id=group, member_id=f"member-{user}", share_session_epoch=epoch, max_wait_ms=300,
                    min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
                    topics=[ShareFetchRequest.FetchTopic(topic_id=ids[topic], partitions=[
                        ShareFetchRequest.FetchPartition(partition_index=0, acknowledgement_batches=[
                            ShareFetchRequest.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                                   acknowledge_types=[ACCEPT])
                            for f, last in acks])])
                            for topic in ("orders", "ordinal", "secret")]), 1)
                return (response.error_code, response.error_message,
                        sorted((p.partition_index, p.error_code, p.acknowledge_error_code,
                                [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records])
                               for t in response.responses for p in t.partitions))

            def share_acknowledge(group: str, epoch: int, ids=ids):
                response = client.request(ShareAcknowledgeRequest(
                    group_id=group, member_id=f"member-{user}", share_session_epoch=epoch, topics=[
                        ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=ids[topic], partitions=[
                            ShareAcknowledgeRequest.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                                ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=0, last_offset=0,
                                                                             acknowledge_types=[ACCEPT])])])
                        for topic in ("orders", "ordinal", "secret")]), 1)
                return (response.error_code, response.error_message,
                        sorted((p.partition_index, p.error_code) for t in response.responses for p in t.partitions))

            observed[name] = [share_fetch("g-other", 0), share_fetch("sf-alice", 0), share_fetch("sf-alice", 1),
                              share_acknowledge("sf-alice", 2), share_acknowledge("g-other", 1)]
    assert_same(observed)


def test_the_in_flight_limit(brokers):
    """share.partition.max.record.locks bounds the records in flight (acquired or awaiting redelivery) of a share
    partition; what is done with makes room."""
    def scenario(talk: Conversation):
        set_group_configs(talk.client, "sf-locks", share_partition_max_record_locks="100",
                          share_auto_offset_reset="earliest")
        script = Script(talk, "sf-locks", "sf-locks-topic")
        script.produce(30, 30, 30, 30, 30)  # 0-29, 30-59, ... 120-149
        join(talk, "sf-locks", "sf-locks-topic", "member-x", "member-y")
        seen = [script.fetch("member-x", 0), script.fetch("member-y", 0)]
        seen.append(script.acknowledge("member-x", 1, [(0, 29, [ACCEPT]), (30, 59, [RELEASE])]))
        seen.append(script.fetch("member-y", 1))
        seen.append(script.acknowledge("member-x", 2, [(60, 89, [ACCEPT])]))
        seen.append(script.fetch("member-y", 2))
        seen.append(script.fetch("member-x", 3))
        return seen

    assert_same(on_both(brokers, "sf-locks-topic", scenario))


def test_records_deleted_from_the_log(brokers):
    """DeleteRecords moves the log start offset past records in flight: those waiting for delivery are done with."""
    from trafka.wire.messages import DeleteRecordsRequest as D

    def scenario(talk: Conversation):
        join(talk, "sf-deleted", "sf-deleted-topic", "member-d")
        script = Script(talk, "sf-deleted", "sf-deleted-topic")
        seen = [script.fetch("member-d", 0)]
        script.produce(2, 2, 2, 2)
        seen.append(script.fetch("member-d", 1, max_records=1))
        seen.append(script.fetch("member-d", 2, max_records=1))
        seen.append(script.acknowledge("member-d", 3, [(0, 1, [RELEASE])]))
        deleted = talk.client.request(D(timeout_ms=10_000, topics=[D.DeleteRecordsTopic(
            name="sf-deleted-topic", partitions=[D.DeleteRecordsPartition(partition_index=0, offset=5)])]), 2)
        seen.append([(p.partition_index, p.low_watermark, p.error_code) for t in deleted.topics for p in t.partitions])
        seen.append(script.fetch("member-d", 4))
        seen.append(script.acknowledge("member-d", 5, [(2, 3, [ACCEPT])]))  # acquired before, below the log start now
        seen.append(script.fetch("member-d", 6, acks=[(5, 7, [ACCEPT])]))
        return seen

    assert_same(on_both(brokers, "sf-deleted-topic", scenario))


def test_a_member_leaving_releases_its_records(brokers):
    def scenario(talk: Conversation):
        join(talk, "sf-leaving", "sf-leaving-topic", "member-l1", "member-l2")
        script = Script(talk, "sf-leaving", "sf-leaving-topic")
        seen = [script.fetch("member-l1", 0), script.fetch("member-l2", 0)]
        script.produce(3)
        seen.append(script.fetch("member-l1", 1))
        seen.append(talk.heartbeat("sf-leaving", "member-l1", -1)[:4])  # leaves, its share session still open
        seen.append(script.fetch("member-l2", 1))
        seen.append(script.acknowledge("member-l1", 2, [(0, 2, [ACCEPT])]))  # no longer its records
        seen.append(script.fetch("member-l1", -1, fetch=False))
        return seen

    assert_same(on_both(brokers, "sf-leaving-topic", scenario))


def test_a_session_opened_again(brokers):
    def scenario(talk: Conversation):
        join(talk, "sf-reopen", "sf-reopen-topic", "member-o")
        script = Script(talk, "sf-reopen", "sf-reopen-topic")
        seen = [script.fetch("member-o", 0)]
        script.produce(3)
        seen.append(script.fetch("member-o", 1))
        seen.append(script.fetch("member-o", 0))  # a new session of the same member
        seen.append(script.acknowledge("member-o", 1, [(0, 2, [ACCEPT])]))
        seen.append(script.fetch("member-o", 2))
        return seen

    assert_same(on_both(brokers, "sf-reopen-topic", scenario))


def test_closing_requests_and_forgotten_partitions(brokers):
    def scenario(talk: Conversation):
        join(talk, "sf-closing", "sf-closing-topic", "member-k")
        script = Script(talk, "sf-closing", "sf-closing-topic")
        seen = [script.fetch("member-k", 0)]
        script.produce(4)
        seen.append(script.fetch("member-k", 1, max_records=1))
        seen.append(script.fetch("member-k", -1))  # a closing request naming a partition to fetch
        seen.append(script.fetch("member-k", 0, fetch=False))  # a session without partitions
        seen.append(script.acknowledge("member-k", 1, [(0, 1, [RELEASE])]))  # a partition not in the session
        forgotten = talk.client.request(ShareFetchRequest(
            group_id="sf-closing", member_id="member-k", share_session_epoch=2, max_wait_ms=300, min_bytes=1,
            max_bytes=1 << 20, max_records=500, batch_size=500, topics=[],
            forgotten_topics_data=[ShareFetchRequest.ForgottenTopic(topic_id=script.topic_id, partitions=[0])]), 1)
        seen.append((forgotten.error_code, [(p.partition_index, p.error_code) for t in forgotten.responses
                                            for p in t.partitions]))
        seen.append(script.fetch("member-k", 3, fetch=False))
        seen.append(script.fetch("member-k", -1, acks=[(2, 3, [ACCEPT])]))  # closing with acknowledgements
        seen.append(script.fetch("member-k", 0))
        return seen

    assert_same(on_both(brokers, "sf-closing-topic", scenario))


def test_groups_and_members_that_are_not_there(brokers):
    def scenario(talk: Conversation):
        join(talk, "sf-ids", "sf-ids-topic", "member-i")
        script = Script(talk, "sf-ids", "sf-ids-topic")
        script.produce(1)
        seen = []
        for group, member in (("sf-ids", ""), ("", "member-i"), ("sf-no-such-group", "member-i"),
                              ("sf-ids", "member-stranger")):
            other = Script(talk, group, "sf-ids-topic")
            seen.append(other.fetch(member, 0))
            seen.append(other.acknowledge(member, 1, [(0, 0, [ACCEPT])]))
        return seen

    assert_same(on_both(brokers, "sf-ids-topic", scenario))


def test_renewals_refused_by_the_group(brokers):
    def scenario(talk: Conversation):
        set_group_configs(talk.client, "sf-no-renew", share_renew_acknowledge_enable="false")
        join(talk, "sf-no-renew", "sf-no-renew-topic", "member-n")
        script = Script(talk, "sf-no-renew", "sf-no-renew-topic")
        seen = [script.fetch("member-n", 0, version=2)]
        script.produce(3)
        seen.append(script.fetch("member-n", 1, version=2))
        seen.append(script.acknowledge("member-n", 2, [(0, 2, [RENEW])], version=2, is_renew_ack=True))
        seen.append(script.fetch("member-n", 3, version=2, acks=[(0, 2, [RENEW])], **RENEWING))
        seen.append(script.acknowledge("member-n", 4, [(0, 2, [ACCEPT])], version=2))
        return seen

    assert_same(on_both(brokers, "sf-no-renew-topic", scenario))


def test_an_expired_lock(brokers):
    """A group's share.record.lock.duration.ms (2 s, group.share.min.record.lock.duration.ms allowing it): past it,
    the records go to another member with their delivery count, and their first member's acknowledgement is
    refused."""
    import time

    def scenario(talk: Conversation):
        set_group_configs(talk.client, "sf-expiry", share_record_lock_duration_ms="2000")
        join(talk, "sf-expiry", "sf-expiry-topic", "member-e1", "member-e2")
        script = Script(talk, "sf-expiry", "sf-expiry-topic")
        seen = [script.fetch("member-e1", 0), script.fetch("member-e2", 0)]
        script.produce(3)
        seen.append(script.fetch("member-e1", 1))
        seen.append(script.fetch("member-e2", 1))
        time.sleep(3)
        seen.append(script.fetch("member-e2", 2))
        seen.append(script.acknowledge("member-e1", 2, [(0, 2, [ACCEPT])]))
        seen.append(script.acknowledge("member-e2", 3, [(0, 2, [ACCEPT])]))
        return seen

    assert_same(on_both(brokers, "sf-expiry-topic", scenario))


def test_a_restart_keeps_the_state(brokers):
    """Both brokers stopped and started again: what was acknowledged stays done with, a released record's
    delivery count goes on (its last delivery, whose session ended with the broker, counts)."""
    def before(talk: Conversation):
        join(talk, "sf-restart", "sf-restart-topic", "member-r")
        script = Script(talk, "sf-restart", "sf-restart-topic")
        seen = [script.fetch("member-r", 0)]
        script.produce(3, 3)
        seen.append(script.fetch("member-r", 1, max_records=1))
        seen.append(script.acknowledge("member-r", 2, [(0, 2, [ACCEPT, RELEASE, ACCEPT])]))
        seen.append(script.fetch("member-r", 3, max_records=1))
        return seen

    def after(talk: Conversation):
        script = Script(talk, "sf-restart", "sf-restart-topic")
        return [script.fetch("member-r", 0), script.fetch("member-r", 1)]

    observed = on_both(brokers, "sf-restart-topic", before)
    for process in brokers.values():
        if hasattr(process, "restart"):
            process.restart()
        else:
            process.stop()
            process.start()
    later = on_both(brokers, "sf-restart-topic", after)
    assert_same({name: observed[name] + later[name] for name in observed})
