"""Share groups (KIP-932) side by side with Apache Kafka 4.4: the same ShareGroupHeartbeat and
ShareGroupDescribe conversations get the same errors and messages, epochs and assignments from both, and
ListGroups, DescribeGroups, DeleteGroups, OffsetFetch and OffsetCommit treat share groups alike.

Kafka computes a share group's target assignment on a background thread at most once a second by default;
the settings here make it compute the assignment at the heartbeat that needs it, as trafka does."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.reference import KafkaBroker
from compat_tests.test_differential import create, side_by_side
from compat_tests.wire_client import WireClient
from trafka.wire.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)

SETTINGS = {
    "offsets.topic.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.assignor.offload.enable": "false",
    "group.share.assignment.interval.ms": 0,
}
COORDINATOR_NOT_READY = {14, 15, 16}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    with side_by_side(Path(tmp_path_factory.mktemp("share-differential")), SETTINGS) as started:
        yield started


class Conversation:
    """ShareGroupHeartbeats to one broker, answers reduced to what a client sees (topic ids as names)."""

    def __init__(self, client: WireClient, topics: dict[str, str]):
        self.client, self.topics = client, topics

    def heartbeat(self, group_id: str, member_id: str, epoch: int, topics: list[str] | None = None, **fields):
        request = ShareGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=epoch,
                                             subscribed_topic_names=topics, **fields)
        deadline = time.monotonic() + 30
        while True:
            response = self.client.request(request, 1)
            if response.error_code not in COORDINATOR_NOT_READY:
                break
            assert time.monotonic() < deadline, response
            time.sleep(0.2)
        assignment = None
        if response.assignment is not None:
            assignment = {self.topics[str(tp.topic_id)]: sorted(tp.partitions)
                          for tp in response.assignment.topic_partitions}
        return (response.error_code, response.error_message, response.member_id, response.member_epoch,
                response.heartbeat_interval_ms, assignment)

    def until_assigned(self, group_id: str, member_id: str, epoch: int):
        """Heartbeats until the member's partitions come (their share state initialized)."""
        deadline = time.monotonic() + 30
        while True:
            answer = self.heartbeat(group_id, member_id, epoch)
            if answer[5]:
                return answer
            epoch = answer[3]
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)

    def describe(self, *group_ids: str):
        response = self.client.request(ShareGroupDescribeRequest(group_ids=list(group_ids),
                                                                 include_authorized_operations=True), 1)
        return [(g.group_id, g.error_code, g.error_message, g.group_state, g.group_epoch, g.assignment_epoch,
                 g.assignor_name, g.authorized_operations,
                 sorted((m.member_id, m.member_epoch, m.rack_id, m.client_id, m.client_host,
                         m.subscribed_topic_names,
                         sorted((tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions))
                        for m in g.members))
                for g in response.groups]


def conversation(process, *topics: tuple[str, int]) -> tuple[Conversation, WireClient]:
    client = WireClient(process.bootstrap)
    for name, partitions in topics:
        create(client, name, partitions)
    from trafka.wire.messages import MetadataRequest

    metadata = client.request(MetadataRequest(topics=None), 12)
    names = {str(t.topic_id): t.name for t in metadata.topics}
    client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["warm-up"]), 4)
    return Conversation(client, names), client


def on_both(brokers, scenario) -> dict[str, object]:
    observed = {}
    for name, process in brokers.items():
        talk, client = conversation(process, ("sd-four", 4), ("sd-one", 1), ("sd-two", 2))
        try:
            observed[name] = scenario(talk)
        finally:
            client.close()
    return observed


def assert_same(observed) -> None:
    assert observed["trafka"] == observed["kafka"], observed


def test_bad_heartbeats_get_the_same_errors(brokers):
    def scenario(talk: Conversation):
        talk.heartbeat("sd-errors", "joined", 0, ["sd-one"])
        return [
            talk.heartbeat("sd-errors", "", 0, ["sd-one"]),
            talk.heartbeat("sd-errors", "y" * 36, 0, ["sd-one"])[0],
            talk.heartbeat("sd-errors", "y" * 37, 0, ["sd-one"]),
            talk.heartbeat("", "m", 0, ["sd-one"]),
            talk.heartbeat("sd-errors", "m", 0, ["sd-one"], rack_id=""),
            talk.heartbeat("sd-errors", "m", 0, None),
            talk.heartbeat("sd-errors", "m", 0, []),
            talk.heartbeat("sd-errors", "m", -2),
            talk.heartbeat("sd-errors", "m", -3),
            talk.heartbeat("sd-errors", "stranger", 2),
            talk.heartbeat("sd-errors", "stranger", -1),
            talk.heartbeat("sd-errors", "joined", 9),
            talk.heartbeat("sd-errors", "joined", 1),
            talk.heartbeat("sd-missing", "m", 3),
            talk.heartbeat("sd-missing", "m", -1),
        ]

    assert_same(on_both(brokers, scenario))


def test_members_join_share_the_partitions_and_leave_with_the_same_epochs(brokers):
    def scenario(talk: Conversation):
        seen = [talk.heartbeat("sd-group", "member-a", 0, ["sd-four"])]
        seen.append(talk.until_assigned("sd-group", "member-a", seen[-1][3]))
        b = talk.heartbeat("sd-group", "member-b", 0, ["sd-four"])
        seen.append(b[:5] + (len(b[5]["sd-four"]),))
        a = talk.heartbeat("sd-group", "member-a", seen[1][3])
        seen.append(a[:5] + (sorted(a[5]["sd-four"] + b[5]["sd-four"]),))
        described = talk.describe("sd-group", "sd-nope", "")
        seen.append([d[:8] + (len(d[8]),) for d in described])
        seen.append(talk.heartbeat("sd-group", "member-b", -1))
        seen.append(talk.heartbeat("sd-group", "member-a", a[3]))
        seen.append(talk.describe("sd-group"))
        return seen

    assert_same(on_both(brokers, scenario))


def test_more_members_than_partitions(brokers):
    def scenario(talk: Conversation):
        first = talk.heartbeat("sd-crowd", "c0", 0, ["sd-one"])
        seen = [first, talk.until_assigned("sd-crowd", "c0", first[3])]
        seen += [talk.heartbeat("sd-crowd", f"c{i}", 0, ["sd-one"]) for i in (1, 2)]
        seen.append(talk.describe("sd-crowd"))
        return seen

    assert_same(on_both(brokers, scenario))


def test_group_apis_treat_share_groups_alike(brokers):
    def scenario(talk: Conversation):
        client = talk.client
        talk.heartbeat("sd-admin", "m", 0, ["sd-one"])
        seen = [
            [(g.group_id, g.protocol_type, g.group_state, g.group_type)
             for g in client.request(ListGroupsRequest(types_filter=["share"]), 5).groups if g.group_id == "sd-admin"],
            client.request(DescribeGroupsRequest(groups=["sd-admin"]), 5).groups,
            client.request(DeleteGroupsRequest(groups_names=["sd-admin"]), 2).results,
            client.request(OffsetFetchRequest(group_id="sd-admin", topics=None), 7),
            client.request(OffsetCommitRequest(
                group_id="sd-admin", generation_id_or_member_epoch=-1, member_id="", topics=[
                    OffsetCommitRequest.OffsetCommitRequestTopic(name="sd-one", partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]),
                8).topics[0].partitions[0].error_code,
            client.request(OffsetDeleteRequest(group_id="sd-admin", topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(name="sd-one", partitions=[
                    OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0).error_code,
            _classic_requests(client),
            talk.heartbeat("sd-admin", "m", -1),
            _classic_requests(client),
            [(g.group_id, g.group_state)
             for g in client.request(ListGroupsRequest(types_filter=["share"]), 5).groups if g.group_id == "sd-admin"],
            client.request(DeleteGroupsRequest(groups_names=["sd-admin"]), 2).results,
            [g.group_id for g in client.request(ListGroupsRequest(types_filter=["share"]), 5).groups
             if g.group_id == "sd-admin"],
        ]
        return seen

    assert_same(on_both(brokers, scenario))


def test_group_configs_are_described_checked_and_altered_alike(brokers):
    from trafka.wire.messages import (
        AlterConfigsRequest,
        DescribeConfigsRequest,
        IncrementalAlterConfigsRequest,
        ListConfigResourcesRequest,
    )

    D, Inc, A = DescribeConfigsRequest, IncrementalAlterConfigsRequest, AlterConfigsRequest

    def scenario(talk: Conversation):
        client = talk.client

        def describe(name: str, keys=None):
            result = client.request(D(resources=[D.DescribeConfigsResource(
                resource_type=32, resource_name=name, configuration_keys=keys)], include_synonyms=True), 4).results[0]
            return (result.error_code, result.error_message,
                    [(c.name, c.value, c.read_only, c.config_source, c.is_sensitive, c.config_type,
                      [(s.name, s.value, s.source) for s in c.synonyms]) for c in result.configs])

        def describe_when(name: str, ready, keys=None):
            """What describe shows once ``ready(values by name)`` holds (or after 15 s): Kafka applies an altered
            group config through its metadata log, so a describe right after an alteration may show the one
            before it."""
            deadline = time.monotonic() + 15
            while True:
                shown = describe(name, keys)
                if ready({c[0]: c[1] for c in shown[2]}) or time.monotonic() > deadline:
                    return shown
                time.sleep(0.1)

        def alter(name: str, *ops, validate_only=False):
            response = client.request(Inc(resources=[Inc.AlterConfigsResource(
                resource_type=32, resource_name=name, configs=[
                    Inc.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
                validate_only=validate_only), 1)
            return [(r.error_code, r.error_message) for r in response.responses]

        seen = [describe("sd-configs"), describe("")]
        for name, value in [("share.session.timeout.ms", "1000"), ("share.heartbeat.interval.ms", "99999"),
                            ("share.auto.offset.reset", "middle"), ("share.nope", "1"),
                            ("share.record.lock.duration.ms", "abc"), ("share.record.lock.duration.ms", "1"),
                            ("share.record.lock.duration.ms", "14000"), ("share.delivery.count.limit", "11"),
                            ("share.partition.max.record.locks", "50"), ("share.isolation.level", "x"),
                            ("share.renew.acknowledge.enable", "x"), ("consumer.session.timeout.ms", "1"),
                            ("streams.num.standby.replicas", "9"), ("streams.assignor.name", "x")]:
            seen.append(alter("sd-configs", (name, 0, value), validate_only=True))
        seen.append(alter("sd-configs", ("share.record.lock.duration.ms", 2, "20000")))
        seen.append(alter("", ("share.record.lock.duration.ms", 0, "20000")))
        seen.append(alter("sd-configs", ("share.session.timeout.ms", 0, "50000"),
                          ("share.auto.offset.reset", 0, "by_duration:PT1H"),
                          ("share.isolation.level", 0, "read_committed"),
                          ("share.record.lock.duration.ms", 0, "20000"), ("share.delivery.count.limit", 0, "3")))
        seen.append(describe_when("sd-configs", lambda values: values.get("share.delivery.count.limit") == "3"))
        seen.append(alter("sd-configs", ("share.session.timeout.ms", 1, None)))
        seen.append(describe_when("sd-configs", lambda values: values.get("share.session.timeout.ms") != "50000",
                                  ["share.session.timeout.ms", "share.auto.offset.reset"]))
        response = client.request(A(resources=[A.AlterConfigsResource(resource_type=32, resource_name="sd-configs",
                                  configs=[A.AlterableConfig(name="share.delivery.count.limit", value="4")])]), 2)
        seen.append([(r.error_code, r.error_message) for r in response.responses])
        seen.append(describe_when("sd-configs", lambda values: values.get("share.delivery.count.limit") == "4"))
        listed = client.request(ListConfigResourcesRequest(resource_types=[32]), 1)
        seen.append((listed.error_code, [(r.resource_name, r.resource_type) for r in listed.config_resources]))
        return seen

    assert_same(on_both(brokers, scenario))


# ------------------------------------------------------------------------------------------ authorization

@pytest.fixture(scope="module")
def authorizing_brokers(tmp_path_factory: pytest.TempPathFactory):
    """Kafka and trafka with the StandardAuthorizer and the users, topics and ACLs of
    test_differential_authorization, and alice allowed to READ share group ``s-alice``."""
    from compat_tests import test_differential_authorization as authorization
    from trafka.broker.security.authorizer import AclOperation, AclPermissionType, AclResourceType, PatternType
    from trafka.wire import messages as m

    root = Path(tmp_path_factory.mktemp("share-authorization"))
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
            with WireClient(process.bootstrap) as client:
                response = client.request(m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
                    resource_type=AclResourceType.GROUP, resource_name="s-alice",
                    resource_pattern_type=PatternType.LITERAL, principal="User:alice", host="*",
                    operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)]), 3)
                assert {r.error_code for r in response.results} == {0}, response
        yield {"kafka": (kafka, kafka.ports["SASL_PLAINTEXT"]), "trafka": (trafka, sasl_port)}
    finally:
        trafka.close()
        kafka.close()


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_share_group_apis_check_what_kafka_checks(authorizing_brokers, user):
    from compat_tests import test_differential_authorization as authorization

    def heartbeat(client: WireClient, group_id: str, member_id: str, topics: list[str]):
        request = ShareGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=0,
                                             subscribed_topic_names=topics)
        deadline = time.monotonic() + 30
        while True:
            response = client.request(request, 1)
            if response.error_code not in COORDINATOR_NOT_READY:
                return (response.error_code, response.error_message, response.member_id, response.member_epoch)
            assert time.monotonic() < deadline, response
            time.sleep(0.2)

    def ask(client: WireClient):
        seen = [
            heartbeat(client, "s-alice", f"{user}-1", ["orders"]),
            heartbeat(client, "s-alice", f"{user}-2", ["orders", "secret"]),
            heartbeat(client, "s-alice", f"{user}-3", ["missing-topic"]),
            heartbeat(client, "g-other", f"{user}-4", ["orders"]),
            heartbeat(client, "g-alice", f"{user}-5", ["orders"]),
        ]
        described = client.request(ShareGroupDescribeRequest(group_ids=["s-alice", "g-other", "g-alice"],
                                                             include_authorized_operations=True), 1)
        seen.append(sorted((g.group_id, g.error_code, g.error_message, g.group_state, g.authorized_operations,
                            sorted(mb.member_id for mb in g.members)) for g in described.groups))
        return seen

    observed = {}
    for name, (_process, sasl_port) in authorizing_brokers.items():
        with WireClient(f"127.0.0.1:{sasl_port}") as client:
            authorization._login(client, user)
            observed[name] = ask(client)
    assert_same(observed)


def test_subscription_changes_and_topics_created_later(brokers):
    """When a partition's share state is initialized depends on the share coordinator's pace: the epochs are
    compared where they do not depend on it, and seen to move forward elsewhere."""

    def scenario(talk: Conversation):
        first = talk.heartbeat("sd-subs", "s", 0, ["sd-later"])
        seen = [first, talk.heartbeat("sd-subs", "s", first[3])]
        changed = talk.heartbeat("sd-subs", "s", first[3], ["sd-one"])
        seen.append(changed)
        assigned = talk.until_assigned("sd-subs", "s", changed[3])
        seen.append(assigned[:3] + assigned[4:])
        epochs = [assigned[3]]
        same = talk.heartbeat("sd-subs", "s", assigned[3], ["sd-one"])
        seen.append(same)
        create(talk.client, "sd-later", 2)
        talk.topics.update(_topic_names(talk.client))
        answer = talk.heartbeat("sd-subs", "s", assigned[3], ["sd-one", "sd-later"])
        seen.append(answer[:3] + answer[4:])
        epochs.append(answer[3])
        deadline = time.monotonic() + 30
        while answer[5] is None or "sd-later" not in answer[5]:
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
            answer = talk.heartbeat("sd-subs", "s", answer[3])
            epochs.append(answer[3])
        seen.append(answer[:3] + answer[4:])
        rack = talk.heartbeat("sd-subs", "s", answer[3], rack_id="rack-1")
        seen.append(rack[:3] + rack[4:])
        epochs.append(rack[3])
        assert epochs == sorted(epochs) and epochs[0] < epochs[-1], epochs
        seen.append([d[:4] + d[6:8] + ([m[:1] + m[2:] for m in d[8]],) for d in talk.describe("sd-subs")])
        return seen

    assert_same(on_both(brokers, scenario))


def _topic_names(client: WireClient) -> dict[str, str]:
    from trafka.wire.messages import MetadataRequest

    return {str(t.topic_id): t.name for t in client.request(MetadataRequest(topics=None), 12).topics}


def test_five_members_on_two_partitions(brokers):
    """Each partition is shared by three members: one member holds both (the members' partition counts and
    each partition's sharing are compared; which member holds what follows Kafka's hash orders)."""

    def scenario(talk: Conversation):
        first = talk.heartbeat("sd-five", "f0", 0, ["sd-two"])
        talk.until_assigned("sd-five", "f0", first[3])
        for i in range(1, 5):
            talk.heartbeat("sd-five", f"f{i}", 0, ["sd-two"])
        (described,) = talk.describe("sd-five")
        members = described[8]
        sizes = sorted(sum(len(ps) for _, ps in m[6]) for m in members)
        sharing = sorted(sum(1 for m in members for name, ps in m[6] if p in ps) for p in (0, 1))
        return described[:8], sizes, sharing

    assert_same(on_both(brokers, scenario))


def test_share_state_is_initialized_without_a_start_offset(brokers):
    """The group initializes a partition's share state with start offset -1: records written before the first
    ShareFetch are left to share.auto.offset.reset, which the share partition applies then."""
    from compat_tests.test_differential import produce
    from trafka.wire.messages import DescribeShareGroupOffsetsRequest as D
    from trafka.wire.records import build_batch

    def scenario(talk: Conversation):
        create(talk.client, "sd-start", 1)
        talk.topics.update(_topic_names(talk.client))
        produce(talk.client, "sd-start", 0, bytes(build_batch([(b"k", b"v1"), (b"k", b"v2")])))
        joined = talk.heartbeat("sd-start-group", "m", 0, ["sd-start"])
        assigned = talk.until_assigned("sd-start-group", "m", joined[3])
        (group,) = talk.client.request(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(
            group_id="sd-start-group", topics=None)]), 1).groups
        return assigned, group.error_code, [(t.topic_name, [(p.partition_index, p.start_offset, p.lag, p.error_code)
                                                            for p in t.partitions]) for t in group.topics]

    assert_same(on_both(brokers, scenario))


def _classic_requests(client: WireClient) -> list:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup and ConsumerGroupDescribe for share group
    ``sd-admin``: the error codes (and messages) each answers."""
    from trafka.wire import messages as m

    joined = client.request(m.JoinGroupRequest(
        group_id="sd-admin", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        protocol_type="consumer", protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                         metadata=b"")]), 9)
    synced = client.request(m.SyncGroupRequest(group_id="sd-admin", generation_id=1, member_id="x",
                                               protocol_type="consumer", protocol_name="range", assignments=[]), 5)
    beat = client.request(m.HeartbeatRequest(group_id="sd-admin", generation_id=1, member_id="x"), 4)
    left = client.request(m.LeaveGroupRequest(group_id="sd-admin", members=[
        m.LeaveGroupRequest.MemberIdentity(member_id="x")]), 5)
    described = client.request(m.ConsumerGroupDescribeRequest(group_ids=["sd-admin"]), 0).groups[0]
    return [(joined.error_code, joined.member_id != ""), synced.error_code, beat.error_code,
            (left.error_code, [(r.member_id, r.error_code) for r in left.members]),
            (described.error_code, described.error_message)]


# ------------------------------------------------------------------------------------------ sessions and size

@pytest.fixture(scope="module")
def small_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    """Kafka and trafka with 2-second share sessions and at most two members per share group."""
    settings = {**SETTINGS, "group.share.min.session.timeout.ms": 1000, "group.share.session.timeout.ms": 2000,
                "group.share.min.heartbeat.interval.ms": 500, "group.share.heartbeat.interval.ms": 500,
                "group.share.max.size": 2}
    with side_by_side(Path(tmp_path_factory.mktemp("share-sessions")), settings) as started:
        yield started


def test_silent_members_are_removed_and_the_group_size_is_limited(small_brokers):
    def scenario(talk: Conversation):
        a = talk.heartbeat("sd-small", "a", 0, ["sd-one"])
        b = talk.heartbeat("sd-small", "b", 0, ["sd-one"])
        seen = [a, b, talk.heartbeat("sd-small", "c", 0, ["sd-one"])]
        # b keeps heartbeating, a says nothing: its session ends after 2 s.
        deadline = time.monotonic() + 30
        while True:
            b = talk.heartbeat("sd-small", "b", b[3])
            members = [m[0] for m in talk.describe("sd-small")[0][8]]
            if members == ["b"]:
                break
            assert time.monotonic() < deadline, members
            time.sleep(0.3)
        seen.append(talk.heartbeat("sd-small", "a", a[3]))
        # (The epochs depend on whether the share state was initialized before a's session ended.)
        c = talk.heartbeat("sd-small", "c", 0, ["sd-one"])
        (described,) = talk.describe("sd-small")
        seen.append((c[:3], c[3] == described[4] == described[5], sorted(m[0] for m in described[8])))
        return seen

    assert_same(on_both(small_brokers, scenario))


def test_describing_a_share_group_whose_members_use_topics_the_user_may_not_describe(authorizing_brokers):
    from compat_tests import test_differential_authorization as authorization

    observed = {}
    for name, (process, sasl_port) in authorizing_brokers.items():
        with WireClient(process.bootstrap) as admin:  # a super user: a member reading "secret" joins
            talk = Conversation(admin, _topic_names(admin))
            joined = talk.heartbeat("s-secret", "admin-member", 0, ["secret"])
            talk.until_assigned("s-secret", "admin-member", joined[3])
            response = admin.request(m_acl_request("s-secret"), 3)
            assert {r.error_code for r in response.results} == {0}, response
        with WireClient(f"127.0.0.1:{sasl_port}") as client:
            authorization._login(client, "alice")
            described = client.request(ShareGroupDescribeRequest(group_ids=["s-secret"],
                                                                 include_authorized_operations=True), 1)
            observed[name] = [(g.group_id, g.error_code, g.error_message, g.group_state, len(g.members))
                              for g in described.groups]
    assert_same(observed)


def m_acl_request(group_id: str):
    """alice may DESCRIBE group ``group_id``."""
    from trafka.broker.security.authorizer import AclOperation, AclPermissionType, AclResourceType, PatternType
    from trafka.wire import messages as m

    return m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
        resource_type=AclResourceType.GROUP, resource_name=group_id, resource_pattern_type=PatternType.LITERAL,
        principal="User:alice", host="*", operation=AclOperation.DESCRIBE, permission_type=AclPermissionType.ALLOW)])


@pytest.mark.parametrize("topic, partitions, members", [("sd-six", 6, 4), ("sd-pair", 2, 5)])
def test_the_simple_assignor_makes_kafkas_choices(brokers, topic, partitions, members):
    """Which member gets which partitions depends on the topic id (Kafka's choices follow Java's hash orders),
    which differs between the brokers: on each, the assignments members get are the ones trafka's assignor
    computes for that topic id, step by step as members join and one leaves."""
    import uuid as uuid_module

    from trafka.broker.groups.share import simple_assign

    group = f"{topic}-choices"

    def scenario(talk: Conversation):
        create(talk.client, topic, partitions)
        talk.topics.update(_topic_names(talk.client))
        tid = uuid_module.UUID(next(i for i, name in talk.topics.items() if name == topic))
        everything = frozenset(range(partitions))
        epochs: dict[str, int] = {}
        current: dict[str, list[int]] = {}
        predicted: dict[str, frozenset[int]] = {}
        checks = []

        def heartbeat_all() -> None:
            for member_id in sorted(epochs):
                answer = talk.heartbeat(group, member_id, epochs[member_id])
                epochs[member_id] = answer[3]
                if answer[5] is not None:
                    current[member_id] = answer[5].get(topic, [])

        def predict() -> None:
            target = simple_assign({m: frozenset({tid}) for m in epochs}, {tid: everything},
                                   {m: {tid: ps} for m, ps in predicted.items() if m in epochs and ps})
            predicted.clear()
            predicted.update({m: a.get(tid, frozenset()) for m, a in target.items()})
            checks.append(current == {m: sorted(ps) for m, ps in predicted.items()})

        first = talk.heartbeat(group, "m-0", 0, [topic])
        answer = talk.until_assigned(group, "m-0", first[3])
        epochs["m-0"], current["m-0"] = answer[3], answer[5][topic]
        predict()
        for i in range(1, members):
            joined = talk.heartbeat(group, f"m-{i}", 0, [topic])
            epochs[f"m-{i}"], current[f"m-{i}"] = joined[3], joined[5].get(topic, [])
            heartbeat_all()
            predict()
        talk.heartbeat(group, "m-1", -1)
        del epochs["m-1"], current["m-1"]
        heartbeat_all()
        predict()
        return checks, sorted(len(ps) for ps in current.values())

    observed = on_both(brokers, scenario)
    assert all(observed["kafka"][0]) and all(observed["trafka"][0]), observed
    assert_same(observed)


def test_the_simple_assignor_makes_kafkas_choices_for_different_subscriptions(brokers):
    """Members subscribing to different topics: each topic is shared among its subscribers, as on Kafka 4.4
    (checked on each broker against the assignor's prediction for its topic ids)."""
    import uuid as uuid_module

    from trafka.broker.groups.share import simple_assign

    group, plan = "sd-mixed-choices", [("x-0", ["sd-mix-a"]), ("x-1", ["sd-mix-a", "sd-mix-b"]),
                                       ("x-2", ["sd-mix-b"]), ("x-3", ["sd-mix-a", "sd-mix-b"])]

    def scenario(talk: Conversation):
        create(talk.client, "sd-mix-a", 5)
        create(talk.client, "sd-mix-b", 3)
        talk.topics.update(_topic_names(talk.client))
        ids = {name: uuid_module.UUID(i) for i, name in talk.topics.items() if name in ("sd-mix-a", "sd-mix-b")}
        everything = {ids["sd-mix-a"]: frozenset(range(5)), ids["sd-mix-b"]: frozenset(range(3))}
        subscriptions: dict[str, list[str]] = {}
        epochs: dict[str, int] = {}
        current: dict[str, dict[str, list[int]]] = {}
        predicted: dict[str, dict] = {}
        checks = []

        def heartbeat_all() -> None:
            for member_id in sorted(epochs):
                answer = talk.heartbeat(group, member_id, epochs[member_id])
                epochs[member_id] = answer[3]
                if answer[5] is not None:
                    current[member_id] = answer[5]

        def predict() -> None:
            target = simple_assign({m: frozenset(ids[t] for t in topics) for m, topics in subscriptions.items()},
                                   everything, {m: a for m, a in predicted.items() if m in subscriptions})
            predicted.clear()
            predicted.update(target)
            names = {v: k for k, v in ids.items()}
            expected = {m: {names[t]: sorted(ps) for t, ps in a.items()} for m, a in target.items()}
            checks.append(current == expected)

        for member_id, topics in plan:
            subscriptions[member_id] = topics
            joined = talk.heartbeat(group, member_id, 0, topics)
            epochs[member_id], current[member_id] = joined[3], joined[5]
            if len(epochs) == 1:
                answer = talk.until_assigned(group, member_id, joined[3])
                epochs[member_id], current[member_id] = answer[3], answer[5]
                # (until the other topic is initialized too, for later members)
            heartbeat_all()
            deadline = time.monotonic() + 30
            while len({ids[t] for topics in subscriptions.values() for t in topics}) > len(
                    {tid for a in current.values() for tid in (a or {})}) and time.monotonic() < deadline:
                time.sleep(0.2)
                heartbeat_all()
            predict()
        return checks

    observed = on_both(brokers, scenario)
    assert all(observed["kafka"]) and all(observed["trafka"]), observed


@pytest.fixture(scope="module")
def interval_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    """Kafka and trafka computing a share group's target at most once a second (Kafka's default interval)."""
    settings = {**SETTINGS, "group.share.assignment.interval.ms": 1000}
    with side_by_side(Path(tmp_path_factory.mktemp("share-interval")), settings) as started:
        yield started


def test_members_joining_within_the_assignment_interval_wait_for_the_next_target(interval_brokers):
    def scenario(talk: Conversation):
        first = talk.heartbeat("sd-interval", "a", 0, ["sd-two"])
        a = talk.until_assigned("sd-interval", "a", first[3])
        b = talk.heartbeat("sd-interval", "b", 0, ["sd-two"])
        (described,) = talk.describe("sd-interval")
        seen = [a, b, described[4:6]]
        time.sleep(1.2)
        b = talk.heartbeat("sd-interval", "b", b[3])
        seen.append(b[:5] + (len(b[5]["sd-two"]),))
        return seen

    assert_same(on_both(interval_brokers, scenario))
