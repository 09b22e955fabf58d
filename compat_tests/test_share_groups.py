"""Share groups (KIP-932) with unmodified clients: confluent-kafka's ShareConsumer (librdkafka) and Apache
Kafka's KafkaShareConsumer (the Java driver) join share groups on a real trafka process, and ShareGroupDescribe
and ListGroups show their members and assignments; members come and go (a second consumer takes its share of
the partitions, a closed one leaves and the others take its partitions back)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.test_differential import create
from compat_tests.wire_client import WireClient
from trafka.wire.messages import ListGroupsRequest, ShareGroupDescribeRequest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no ShareConsumer", allow_module_level=True)

SETTINGS = {"offsets.topic.num.partitions": 1, "group.share.heartbeat.interval.ms": 1000,
            "group.share.min.heartbeat.interval.ms": 1000}
WAIT_S = 30


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("share") / "data", overrides=SETTINGS, name="share-broker")
    process.start()
    yield process
    process.close()


def share_consumer(broker: BrokerProcess, group_id: str, client_id: str):
    return confluent_kafka.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id,
                                          "client.id": client_id})


def describe(broker: BrokerProcess, group_id: str):
    with WireClient(broker.bootstrap) as client:
        return client.request(ShareGroupDescribeRequest(group_ids=[group_id]), 1).groups[0]


def wait_until(broker: BrokerProcess, consumers, check, what: str):
    """Poll the consumers (their heartbeats run meanwhile) until ``check(described group)`` holds."""
    deadline = time.monotonic() + WAIT_S
    while True:
        for consumer in consumers:
            consumer.poll(0.2)
        described = describe(broker, check.group_id)
        if described.error_code == 0 and check(described):
            return described
        assert time.monotonic() < deadline, f"{what}: {described}"


class Check:
    def __init__(self, group_id: str, fn):
        self.group_id, self.fn = group_id, fn

    def __call__(self, described) -> bool:
        return self.fn(described)


def assignments(described) -> dict[str, list[int]]:
    return {m.client_id: sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
            for m in described.members}


def test_share_consumers_join_share_the_partitions_and_leave(share_broker):
    with WireClient(share_broker.bootstrap) as client:
        create(client, "share-compat", 4)
    first = share_consumer(share_broker, "share-compat-group", "first")
    first.subscribe(["share-compat"])
    described = wait_until(share_broker, [first], Check("share-compat-group",
                           lambda d: assignments(d).get("first") == [0, 1, 2, 3]), "the first consumer's partitions")
    assert (described.group_state, described.assignor_name) == ("Stable", "simple")
    (member,) = described.members
    assert member.subscribed_topic_names == ["share-compat"] and member.member_epoch == described.assignment_epoch

    with WireClient(share_broker.bootstrap) as client:
        listed = client.request(ListGroupsRequest(types_filter=["share"]), 5).groups
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] == [
        ("share-compat-group", "share", "share", "Stable")]

    second = share_consumer(share_broker, "share-compat-group", "second")
    second.subscribe(["share-compat"])
    described = wait_until(share_broker, [first, second], Check("share-compat-group", lambda d: sorted(
        len(ps) for ps in assignments(d).values()) == [2, 2]), "the partitions split between two consumers")
    assert sorted(p for ps in assignments(described).values() for p in ps) == [0, 1, 2, 3]

    second.close()
    wait_until(share_broker, [first], Check("share-compat-group",
               lambda d: assignments(d) == {"first": [0, 1, 2, 3]}), "the second consumer's leave")
    first.close()
    with WireClient(share_broker.bootstrap) as client:
        listed = client.request(ListGroupsRequest(types_filter=["share"]), 5).groups
    assert [(g.group_id, g.group_state) for g in listed] == [("share-compat-group", "Empty")]


# ------------------------------------------------------------------------------------------ the Java client

class JavaShareMember:
    """Apache Kafka's KafkaShareConsumer in the Java driver; it heartbeats while it polls."""

    def __init__(self, driver, broker: BrokerProcess, group: str, name: str, topic: str):
        self.driver, self.broker, self.name = driver, broker, name
        driver.call("share_open", bootstrap=broker.bootstrap, name=name, group_id=group, topics=[topic], settings={})

    def poll(self, timeout_s: float) -> None:
        self.driver.call("share_poll", bootstrap=self.broker.bootstrap, name=self.name,
                         timeout_ms=int(timeout_s * 1000), ack=None, commit=False)

    def close(self) -> None:
        self.driver.call("share_close", bootstrap=self.broker.bootstrap, name=self.name)


def test_java_share_consumers_and_librdkafka_join_one_group_and_leave(share_broker):
    from compat_tests.clients import shared_java_driver

    try:
        driver = shared_java_driver()
    except Exception as exc:  # no java, no driver jars
        pytest.skip(f"the Java driver cannot run here: {exc}")
    with WireClient(share_broker.bootstrap) as client:
        create(client, "share-java", 2)
    group = "share-java-group"
    java = JavaShareMember(driver, share_broker, group, "java-member", "share-java")
    described = wait_until(share_broker, [java], Check(group, lambda d: assignments(d).get("java-member") == [0, 1]),
                           "the Java consumer's partitions")
    (member,) = described.members
    assert member.subscribed_topic_names == ["share-java"] and member.client_host.startswith("/")

    librdkafka = share_consumer(share_broker, group, "librdkafka-member")
    librdkafka.subscribe(["share-java"])
    described = wait_until(share_broker, [java, librdkafka], Check(group, lambda d: sorted(
        (client_id, len(ps)) for client_id, ps in assignments(d).items()) == [
            ("java-member", 1), ("librdkafka-member", 1)]), "one partition each")
    assert len({m.member_epoch for m in described.members}) == 1

    java.close()
    wait_until(share_broker, [librdkafka], Check(group, lambda d: assignments(d) == {"librdkafka-member": [0, 1]}),
               "the Java consumer's leave")
    librdkafka.close()


def test_the_groups_command_shows_share_groups(share_broker):
    import subprocess
    import sys

    from trafka.wire.messages import ShareGroupHeartbeatRequest

    with WireClient(share_broker.bootstrap) as client:
        create(client, "share-cli", 2)
        request = ShareGroupHeartbeatRequest(group_id="share-cli-group", member_id="cli-member", member_epoch=0,
                                             subscribed_topic_names=["share-cli"])
        epoch = client.request(request, 1).member_epoch
        deadline = time.monotonic() + WAIT_S
        while not any(assignments(describe(share_broker, "share-cli-group")).values()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
            epoch = client.request(ShareGroupHeartbeatRequest(group_id="share-cli-group", member_id="cli-member",
                                                              member_epoch=epoch), 1).member_epoch

    def trafka(*arguments: str) -> str:
        completed = subprocess.run([sys.executable, "-m", "trafka", *arguments, "--bootstrap-server",
                                    share_broker.bootstrap], capture_output=True, text=True, timeout=60)
        assert completed.returncode == 0, completed.stderr
        return completed.stdout

    assert "share-cli-group\tshare\tStable" in trafka("groups", "list").splitlines()
    described = trafka("groups", "describe", "share-cli-group").splitlines()
    assert described[0].startswith("share-cli-group\tshare\tStable\tgroup epoch ")
    assert described[1].startswith("share-cli-group\tcli-member\t/127.0.0.1\t") and described[1].endswith(
        "\tshare-cli:0,1")
    # No share consumer fetched yet: no start offset (share.auto.offset.reset decides at the first fetch).
    assert described[2:] == ["GROUP\tTOPIC\tPARTITION\tSTART-OFFSET\tLAG", "share-cli-group\tshare-cli\t0\t-\t-",
                             "share-cli-group\tshare-cli\t1\t-\t-"]


# ------------------------------------------------------------------------------------------ in a cluster

def test_a_share_group_moves_to_the_next_coordinator_when_its_coordinator_dies(zookeeper, tmp_path):
    """Three brokers on ZooKeeper, __consumer_offsets replicated three times: a group config altered through one
    broker is seen by all; the group's coordinator is killed -9, the next leader of its partition loads the group
    from the replicated records, and the member carries on at its epoch with its partitions, their share state
    initialized through the share coordinators."""
    from compat_tests.cluster import start_cluster, wait
    from trafka.wire.messages import (
        CreateTopicsRequest,
        DescribeConfigsRequest,
        FindCoordinatorRequest,
        IncrementalAlterConfigsRequest,
        ShareGroupHeartbeatRequest,
    )

    cluster = start_cluster(zookeeper, tmp_path, {"offsets.topic.num.partitions": 1,
                                                  "share.coordinator.state.topic.num.partitions": 3,
                                                  "auto.leader.rebalance.enable": "false"})
    group = "cluster-share-group"

    def coordinator() -> int | None:
        running = next(b for b in cluster.brokers if b.running)
        with WireClient(f"{running.host}:{running.port}") as client:
            [found] = client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4).coordinators
        return found.node_id if found.error_code == 0 else None

    def heartbeat(epoch: int, topics=None):
        broker = cluster.broker(coordinator())
        with WireClient(f"{broker.host}:{broker.port}") as client:
            return client.request(ShareGroupHeartbeatRequest(group_id=group, member_id="survivor",
                                                             member_epoch=epoch, subscribed_topic_names=topics), 1)

    try:
        with WireClient(cluster.bootstrap.split(",")[0]) as client:
            created = client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name="cluster-share", num_partitions=2, replication_factor=3, assignments=[], configs=[])],
                timeout_ms=30_000), 7)
            assert created.topics[0].error_code == 0, created
        wait(coordinator, "a coordinator for the group")
        joined = wait(lambda: (lambda r: r if r.error_code == 0 else None)(heartbeat(0, ["cluster-share"])),
                      "the member to join")
        state = {"epoch": joined.member_epoch}

        def assigned():
            response = heartbeat(state["epoch"])
            assert response.error_code == 0, response
            state["epoch"] = response.member_epoch
            return response if response.assignment is not None and response.assignment.topic_partitions else None

        before = wait(assigned, "the partitions to be assigned")
        assert sorted(p for tp in before.assignment.topic_partitions for p in tp.partitions) == [0, 1]

        # A group config altered through another broker is described by every broker and used by the coordinator.
        other = next(b for b in cluster.brokers if b.node_id != coordinator())
        with WireClient(f"{other.host}:{other.port}") as client:
            response = client.request(IncrementalAlterConfigsRequest(resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(name="share.heartbeat.interval.ms",
                                                                   config_operation=0, value="7000")])]), 1)
            assert response.responses[0].error_code == 0, response

        def described_everywhere() -> bool:
            for broker in cluster.brokers:
                with WireClient(f"{broker.host}:{broker.port}") as client:
                    result = client.request(DescribeConfigsRequest(resources=[
                        DescribeConfigsRequest.DescribeConfigsResource(resource_type=32, resource_name=group,
                                                                       configuration_keys=[
                                                                           "share.heartbeat.interval.ms"])]), 4)
                    if [(c.value, c.config_source) for c in result.results[0].configs] != [("7000", 8)]:
                        return False
            return True

        wait(described_everywhere, "every broker to describe the group's config")
        assert heartbeat(before.member_epoch).heartbeat_interval_ms == 7000

        victim = coordinator()
        cluster.broker(victim).kill()
        wait(lambda: coordinator() not in (None, victim), "a new coordinator")
        after = wait(lambda: (lambda r: r if r.error_code == 0 else None)(heartbeat(before.member_epoch)),
                     "the new coordinator to answer the member")
        assert (after.member_epoch, after.assignment, after.heartbeat_interval_ms) == (before.member_epoch, None, 7000)
        broker = cluster.broker(coordinator())
        with WireClient(f"{broker.host}:{broker.port}") as client:
            (described,) = client.request(ShareGroupDescribeRequest(group_ids=[group]), 1).groups
        assert (described.error_code, described.group_state, described.group_epoch) == (0, "Stable",
                                                                                       before.member_epoch)
        assert [(m.member_id, sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
                for m in described.members] == [("survivor", [0, 1])]
    finally:
        cluster.close()
