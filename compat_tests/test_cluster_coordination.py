"""Brokers coordinating through a real ZooKeeper, in Kafka's layout (broker.cluster.zookeeper): they
register, agree on one controller, see each other come and go, and elect a new controller, with a new
controller epoch, when the old one leaves. Topics created, grown and deleted through one broker are seen
by all; the controller fails partitions over when brokers leave and come back, and a stale controller
cannot write. What they write is read back with a plain ZooKeeper client, as a Kafka engineer would look
at it."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Callable

import pytest
import trio
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from trafka.broker.cluster import (
    RECOVERING,
    BrokerRegistration,
    ClusterChange,
    Endpoint,
    PartitionState,
    TopicAssignment,
)
from trafka.broker.cluster.zookeeper import (
    ConcurrentChangeError,
    CoordinationError,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperCluster,
)

TIMEOUT = 20


def _plaintext(port: int) -> Endpoint:
    """A PLAINTEXT listener on 127.0.0.1:``port``, as a registration lists it."""
    return Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port)


def _cluster(zookeeper, node_id: int, chroot: str) -> ZooKeeperCluster:
    return ZooKeeperCluster(f"{zookeeper.connect_string}{chroot}", BrokerRegistration(node_id, "127.0.0.1", 9000 + node_id),
                            session_timeout_ms=4000)


def _read(zookeeper, chroot: str, path: str) -> bytes:
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=10)
    try:
        return client.get(f"{chroot}{path}")[0]
    finally:
        client.stop()
        client.close()


async def test_brokers_register_and_elect_one_controller(zookeeper):
    chroot = "/trafka/elect"
    clusters = [_cluster(zookeeper, node_id, chroot) for node_id in (1, 2, 3)]
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            scopes = []
            for cluster in clusters:
                scope = trio.CancelScope()
                scopes.append(scope)

                async def run(cluster=cluster, scope=scope, task_status=trio.TASK_STATUS_IGNORED):
                    with scope:
                        await cluster.run(task_status=task_status)

                await nursery.start(run)
            for cluster in clusters:
                await cluster.wait_for(lambda c: set(c.brokers) == {1, 2, 3} and c.controller_id == 1
                                       and c.controller_epoch == 1)

            assert len({c.cluster_id for c in clusters}) == 1 and len(clusters[0].cluster_id) == 22
            seen = clusters[1].brokers[3]
            assert seen.epoch > 0  # the registration's czxid: Kafka's broker epoch
            assert dataclasses.replace(seen, epoch=-1) == BrokerRegistration(3, "127.0.0.1", 9003, None,
                                                                             (_plaintext(9003),))
            registered = json.loads(await trio.to_thread.run_sync(_read, zookeeper, chroot, "/brokers/ids/2"))
            assert (registered["endpoints"], registered["version"]) == (["PLAINTEXT://127.0.0.1:9002"], 5)
            controller = json.loads(await trio.to_thread.run_sync(_read, zookeeper, chroot, "/controller"))
            assert controller["brokerid"] == 1
            cluster_id = json.loads(await trio.to_thread.run_sync(_read, zookeeper, chroot, "/cluster/id"))
            assert cluster_id == {"version": "1", "id": clusters[0].cluster_id}

            # The controller leaves: one of the others takes over, under a new controller epoch.
            scopes[0].cancel()
            for cluster in clusters[1:]:
                await cluster.wait_for(lambda c: set(c.brokers) == {2, 3} and c.controller_id in (2, 3)
                                       and c.controller_epoch == 2)
            assert clusters[1].controller_id == clusters[2].controller_id
            assert await trio.to_thread.run_sync(_read, zookeeper, chroot, "/controller_epoch") == b"2"
            nursery.cancel_scope.cancel()


async def test_a_broker_id_already_registered_is_refused(zookeeper):
    chroot = "/trafka/taken"
    first, second = _cluster(zookeeper, 7, chroot), _cluster(zookeeper, 7, chroot)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            with pytest.raises(CoordinationError, match="broker.id 7 is already registered .* by the broker at "
                                                        "127.0.0.1:9007"):
                await second.run()
            nursery.cancel_scope.cancel()


async def test_zookeeper_out_of_reach_is_a_clear_error():
    cluster = ZooKeeperCluster("127.0.0.1:1/kafka", BrokerRegistration(1, "127.0.0.1", 9092),
                               session_timeout_ms=2000, connection_timeout_ms=1000)
    with trio.fail_after(TIMEOUT), pytest.raises(CoordinationError, match="cannot reach ZooKeeper at 127.0.0.1:1/kafka"):
        await cluster.run()


async def test_a_broker_whose_session_expired_registers_again_and_rejoins(zookeeper):
    chroot = "/trafka/expiry"
    first, second = _cluster(zookeeper, 1, chroot), _cluster(zookeeper, 2, chroot)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            await nursery.start(second.run)
            await second.wait_for(lambda c: set(c.brokers) == {1, 2} and c.controller_id == 1)

            # Closing the first broker's session from another connection expires it, as ZooKeeper does
            # with a broker that stopped answering: its registration and /controller go.
            session_id, password = first._client.client_id
            await trio.to_thread.run_sync(_expire, zookeeper.connect_string, session_id, password)

            await second.wait_for(lambda c: c.controller_id == 2 and c.controller_epoch == 2)
            await first.wait_for(lambda c: set(c.brokers) == {1, 2} and c.controller_id == 2)
            await second.wait_for(lambda c: set(c.brokers) == {1, 2})

            # Its watches were set again with the new session: it follows the topics as before.
            await second.create_topic(TopicAssignment("after", uuid.uuid4(), ((2, 1),)), {})
            await first.wait_for(lambda c: _state(c, "after") == PartitionState(2, 0, (2, 1), 2, 0))
            await second.update_partition_state("after", 0, PartitionState(2, 0, (2,), 2, 0))
            await first.wait_for(lambda c: _state(c, "after") == PartitionState(2, 0, (2,), 2, 1))
            nursery.cancel_scope.cancel()


def _expire(hosts: str, session_id: int, password: bytes) -> None:
    intruder = KazooClient(hosts=hosts, client_id=(session_id, password))
    intruder.start(timeout=10)
    intruder.stop()
    intruder.close()


async def test_the_layout_is_kafkas_own(zookeeper, tmp_path):
    """A real Apache Kafka 3.9 broker in ZooKeeper mode and a trafka broker in the same chroot: trafka reads
    Kafka's cluster id, registration and controller as its own, and Kafka's broker sees trafka's."""
    from compat_tests.reference import ZooKeeperModeKafka
    from trafka.wire.messages import CreateTopicsRequest, MetadataRequest

    chroot = "/trafka/with-kafka"
    kafka = ZooKeeperModeKafka(tmp_path / "kafka", f"{zookeeper.connect_string}{chroot}", broker_id=1)
    await trio.to_thread.run_sync(kafka.start)
    try:
        cluster = _cluster(zookeeper, 2, chroot)
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                await nursery.start(cluster.run)
                await cluster.wait_for(lambda c: set(c.brokers) == {1, 2})

                assert cluster.brokers[1].epoch > 0
                assert dataclasses.replace(cluster.brokers[1], epoch=-1) == BrokerRegistration(
                    1, "127.0.0.1", kafka.port, None, (_plaintext(kafka.port),))
                assert cluster.controller_id == 1 and cluster.controller_epoch >= 1
                cluster_id = json.loads(await trio.to_thread.run_sync(_read, zookeeper, chroot, "/cluster/id"))["id"]
                assert cluster.cluster_id == cluster_id

                def brokers_kafka_lists() -> set[int]:
                    from compat_tests.wire_client import WireClient

                    with WireClient(kafka.bootstrap) as client:
                        response = client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9)
                    assert response.cluster_id == cluster_id
                    return {broker.node_id for broker in response.brokers}

                deadline = trio.current_time() + 15
                while await trio.to_thread.run_sync(brokers_kafka_lists) != {1, 2}:
                    assert trio.current_time() < deadline, "Kafka never listed trafka's broker"
                    await trio.sleep(0.2)

                # A topic Kafka creates (its controller writes the partitions' states) reads as trafka's own.
                def create_in_kafka():
                    from compat_tests.wire_client import WireClient

                    topic = CreateTopicsRequest.CreatableTopic(
                        name="from-kafka", num_partitions=-1, replication_factor=-1,
                        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2]),
                                     CreateTopicsRequest.CreatableReplicaAssignment(partition_index=1, broker_ids=[2, 1])],
                        configs=[CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="60000")])
                    with WireClient(kafka.bootstrap) as client:
                        response = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7)
                    assert response.topics[0].error_code == 0, response
                    return response.topics[0].topic_id

                topic_id = await trio.to_thread.run_sync(create_in_kafka)
                await cluster.wait_for(lambda c: ("from-kafka", 1) in c.partition_states)
                assert cluster.topics["from-kafka"] == TopicAssignment("from-kafka", topic_id, ((1, 2), (2, 1)), 0)
                assert cluster.topic_configs["from-kafka"] == {"retention.ms": "60000"}
                assert cluster.partition_states[("from-kafka", 0)] == PartitionState(1, 0, (1, 2), cluster.controller_epoch, 0)
                assert cluster.partition_states[("from-kafka", 1)].isr == (2, 1)
                nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(kafka.stop)


# -- topics, partitions and the controller's duty ---------------------------------------------------

class Brokers:
    """ZooKeeperCluster instances in one Trio run, each in its own cancel scope, so that a test can stop
    one (its session closes: its registration goes at once) and start it again."""

    def __init__(self, nursery: trio.Nursery, zookeeper, chroot: str, **options) -> None:
        self.nursery, self.zookeeper, self.chroot, self.options = nursery, zookeeper, chroot, options
        self.running: dict[int, ZooKeeperCluster] = {}
        self._scopes: dict[int, trio.CancelScope] = {}

    async def start(self, node_id: int, **options) -> ZooKeeperCluster:
        cluster = ZooKeeperCluster(f"{self.zookeeper.connect_string}{self.chroot}",
                                   BrokerRegistration(node_id, "127.0.0.1", 9000 + node_id), session_timeout_ms=4000,
                                   **{**self.options, **options})
        scope = trio.CancelScope()

        async def run(task_status=trio.TASK_STATUS_IGNORED):
            with scope:
                await cluster.run(task_status=task_status)

        await self.nursery.start(run)
        self.running[node_id], self._scopes[node_id] = cluster, scope
        return cluster

    async def stop(self, node_id: int) -> None:
        """Stop a broker and wait until the others see it gone."""
        self._scopes.pop(node_id).cancel()
        del self.running[node_id]
        for cluster in self.running.values():
            await cluster.wait_for(lambda c: node_id not in c.brokers)

    async def all_see(self, condition) -> None:
        for cluster in self.running.values():
            await cluster.wait_for(condition)

    def controller(self) -> ZooKeeperCluster:
        (controller,) = [c for c in self.running.values() if c.is_controller]
        return controller


async def _three(nursery, zookeeper, chroot: str, **options) -> Brokers:
    brokers = Brokers(nursery, zookeeper, chroot, **options)
    for node_id in (1, 2, 3):
        await brokers.start(node_id)
    await brokers.all_see(lambda c: set(c.brokers) == {1, 2, 3} and c.controller_id == 1)
    return brokers


def _raw(zookeeper, chroot: str, *paths: str) -> dict[str, bytes | None]:
    """The data of znodes as a plain ZooKeeper client reads them (None: no such znode)."""
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=10)
    try:
        found = {}
        for path in paths:
            try:
                found[path] = client.get(f"{chroot}{path}")[0]
            except NoNodeError:
                found[path] = None
        return found
    finally:
        client.stop()
        client.close()


async def _znode(zookeeper, chroot: str, path: str) -> bytes | None:
    return (await trio.to_thread.run_sync(_raw, zookeeper, chroot, path))[path]


def _write_raw(zookeeper, chroot: str, action: Callable[[KazooClient], object]) -> object:
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=10)
    client.chroot = chroot
    try:
        return action(client)
    finally:
        client.stop()
        client.close()


def _topic(name: str, *replicas: tuple[int, ...]) -> TopicAssignment:
    return TopicAssignment(name, uuid.uuid4(), tuple(replicas))


def _state(cluster: ZooKeeperCluster, topic: str, partition: int = 0) -> PartitionState | None:
    return cluster.partition_states.get((topic, partition))


async def test_a_topic_created_through_one_broker_is_seen_by_all_in_kafkas_layout(zookeeper):
    chroot = "/trafka/create"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            creator = brokers.running[2]
            changes: list[ClusterChange] = []
            brokers.running[3].add_listener(changes.append)
            assignment = _topic("orders", (1, 2, 3), (2, 3, 1))

            await creator.create_topic(assignment, {"retention.ms": "1000"})

            # The creator's view has the topic as soon as the creation returns; the others follow.
            assert creator.topics["orders"] == dataclasses.replace(assignment, version=0)
            assert creator.partition_states[("orders", 1)] == PartitionState(2, 0, (2, 3, 1), 1, 0)
            await brokers.all_see(lambda c: len([k for k in c.partition_states if k[0] == "orders"]) == 2)
            for cluster in brokers.running.values():
                assert cluster.topics["orders"].replicas == ((1, 2, 3), (2, 3, 1))
                assert cluster.topics["orders"].topic_id == assignment.topic_id
                assert cluster.topic_configs["orders"] == {"retention.ms": "1000"}
                assert _state(cluster, "orders") == PartitionState(1, 0, (1, 2, 3), 1, 0)
            assert ClusterChange(topics_created=frozenset({"orders"}),
                                 partitions_changed=frozenset({("orders", 0), ("orders", 1)})) in changes

            # Byte for byte what Kafka 3.9 writes.
            topic_id = base64.urlsafe_b64encode(assignment.topic_id.bytes).decode().rstrip("=")
            raw = await trio.to_thread.run_sync(
                _raw, zookeeper, chroot, "/brokers/topics/orders", "/brokers/topics/orders/partitions/0/state",
                "/brokers/topics/orders/partitions/1/state", "/config/topics/orders",
                "/brokers/topics/orders/partitions", "/brokers/topics/orders/partitions/1")
            assert raw["/brokers/topics/orders"] == (
                b'{"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"' + topic_id.encode()
                + b'","adding_replicas":{},"removing_replicas":{},"version":3}')
            assert raw["/brokers/topics/orders/partitions/0/state"] == \
                b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
            assert json.loads(raw["/brokers/topics/orders/partitions/1/state"]) == {
                "controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 0, "isr": [2, 3, 1]}
            assert raw["/config/topics/orders"] == b'{"version":1,"config":{"retention.ms":"1000"}}'
            assert raw["/brokers/topics/orders/partitions"] == b"" and raw["/brokers/topics/orders/partitions/1"] == b""

            with pytest.raises(TopicExistsError):
                await brokers.running[1].create_topic(_topic("orders", (1,)), {})

            # A broker joining later reports what it finds as created in its first change.
            late: list[ClusterChange] = []
            await brokers.stop(3)
            cluster = ZooKeeperCluster(f"{zookeeper.connect_string}{chroot}", BrokerRegistration(3, "127.0.0.1", 9003),
                                       session_timeout_ms=4000)
            cluster.add_listener(late.append)
            await nursery.start(cluster.run)
            assert late[0] == ClusterChange(True, frozenset({"orders"}), frozenset(), frozenset(),
                                            frozenset({("orders", 0), ("orders", 1)}))
            nursery.cancel_scope.cancel()


async def test_partitions_are_added_under_a_version_check(zookeeper):
    chroot = "/trafka/add-partitions"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            await brokers.running[1].create_topic(_topic("grow", (1, 2)), {})
            await brokers.all_see(lambda c: "grow" in c.topics)
            changes: list[ClusterChange] = []
            brokers.running[2].add_listener(changes.append)

            await brokers.running[3].add_partitions("grow", [(2, 3), (3, 1)])

            assert brokers.running[3].topics["grow"].replicas == ((1, 2), (2, 3), (3, 1))
            await brokers.all_see(lambda c: len(c.topics["grow"].replicas) == 3 and ("grow", 2) in c.partition_states)
            for cluster in brokers.running.values():
                assert cluster.topics["grow"].version == 1
                assert _state(cluster, "grow", 1) == PartitionState(2, 0, (2, 3), 1, 0)
                assert _state(cluster, "grow", 2) == PartitionState(3, 0, (3, 1), 1, 0)
            assert ClusterChange(topics_changed=frozenset({"grow"}),
                                 partitions_changed=frozenset({("grow", 1), ("grow", 2)})) in changes
            raw = json.loads(await _znode(zookeeper, chroot, "/brokers/topics/grow"))
            assert raw["partitions"] == {"0": [1, 2], "1": [2, 3], "2": [3, 1]}

            # A broker whose view is older than the topic's znode is refused (simulated: its view is set
            # back to version 0), and writes nothing.
            stale = brokers.running[1]
            stale.topics["grow"] = dataclasses.replace(stale.topics["grow"], version=0)
            with pytest.raises(ConcurrentChangeError):
                await stale.add_partitions("grow", [(1, 2)])
            assert await _znode(zookeeper, chroot, "/brokers/topics/grow/partitions/3") is None
            with pytest.raises(UnknownTopicError):
                await stale.add_partitions("nothing", [(1,)])
            nursery.cancel_scope.cancel()


async def test_a_deleted_topic_is_removed_by_the_controller_and_leaves_every_view(zookeeper):
    chroot = "/trafka/delete"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            await brokers.running[2].create_topic(_topic("doomed", (1, 2), (2, 3), (3, 1)), {"retention.ms": "5"})
            await brokers.running[2].create_topic(_topic("kept", (1, 2)), {})
            await brokers.all_see(lambda c: {"doomed", "kept"} <= c.topics.keys())
            changes: list[ClusterChange] = []
            brokers.running[3].add_listener(changes.append)

            await brokers.running[2].delete_topic("doomed")
            try:
                await brokers.running[2].delete_topic("doomed")  # marked already: nothing more
            except UnknownTopicError:  # unless the controller has deleted it in between
                assert await _znode(zookeeper, chroot, "/brokers/topics/doomed") is None

            await brokers.all_see(lambda c: "doomed" not in c.topics and "doomed" not in c.topic_configs
                                  and not [k for k in c.partition_states if k[0] == "doomed"])
            assert ClusterChange(topics_deleted=frozenset({"doomed"})) in changes
            paths = ("/brokers/topics/doomed", "/config/topics/doomed", "/admin/delete_topics/doomed")
            assert set((await trio.to_thread.run_sync(_raw, zookeeper, chroot, *paths)).values()) == {None}
            assert "kept" in brokers.running[3].topics
            with pytest.raises(UnknownTopicError):
                await brokers.running[1].delete_topic("doomed")

            # Kafka's own tools delete a topic by writing the mark: the controller carries it out too.
            await trio.to_thread.run_sync(_write_raw, zookeeper, chroot,
                                          lambda client: client.create("/admin/delete_topics/kept"))
            await brokers.all_see(lambda c: "kept" not in c.topics)
            assert await _znode(zookeeper, chroot, "/admin/delete_topics/kept") is None
            nursery.cancel_scope.cancel()


async def test_with_topic_deletion_disabled_the_controller_only_removes_the_mark(zookeeper):
    chroot = "/trafka/delete-disabled"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = Brokers(nursery, zookeeper, chroot, delete_topic_enable=False)
            controller = await brokers.start(1)
            await controller.create_topic(_topic("kept", (1,)), {})

            await controller.delete_topic("kept")

            deadline = trio.current_time() + 10
            while await _znode(zookeeper, chroot, "/admin/delete_topics/kept") is not None:
                assert trio.current_time() < deadline, "the mark stayed"
                await trio.sleep(0.05)
            assert "kept" in controller.topics
            assert await _znode(zookeeper, chroot, "/brokers/topics/kept") is not None
            nursery.cancel_scope.cancel()


async def test_a_conditional_state_update_loses_to_a_newer_state(zookeeper):
    chroot = "/trafka/isr-update"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            leader = brokers.running[2]
            await leader.create_topic(_topic("isr", (2, 3, 1)), {})
            read = _state(leader, "isr")
            assert read == PartitionState(2, 0, (2, 3, 1), 1, 0)

            # The leader shrinks its ISR: same leader epoch, the controller epoch as read, a new version.
            shrunk = await leader.update_partition_state("isr", 0, dataclasses.replace(read, isr=(2, 1)))
            assert shrunk == PartitionState(2, 0, (2, 1), 1, 1)
            assert _state(leader, "isr") == shrunk
            await brokers.all_see(lambda c: _state(c, "isr") == shrunk)
            assert json.loads(await _znode(zookeeper, chroot, "/brokers/topics/isr/partitions/0/state")) == {
                "controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 0, "isr": [2, 1]}

            # A write conditional on the version read before is refused, and changes nothing.
            assert await leader.update_partition_state("isr", 0, dataclasses.replace(read, isr=(2,))) is None
            assert await brokers.running[3].update_partition_state("isr", 0, read) is None
            assert _state(leader, "isr") == shrunk
            assert json.loads(await _znode(zookeeper, chroot, "/brokers/topics/isr/partitions/0/state"))["isr"] == [2, 1]
            nursery.cancel_scope.cancel()


async def test_the_controller_fails_over_the_partitions_of_a_broker_that_leaves(zookeeper):
    chroot = "/trafka/failover"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            await brokers.running[1].create_topic(_topic("led", (3, 1, 2), (1, 3, 2), (1, 2)), {})
            await brokers.all_see(lambda c: len([k for k in c.partition_states if k[0] == "led"]) == 3)

            await brokers.stop(3)

            # Led by 3: the first live ISR member in assignment order leads, epoch + 1, 3 out of the ISR.
            await brokers.all_see(lambda c: _state(c, "led", 0) == PartitionState(1, 1, (1, 2), 1, 1))
            # Followed by 3: it leaves the ISR, and the leader epoch moves as Kafka's controller moves it.
            await brokers.all_see(lambda c: _state(c, "led", 1) == PartitionState(1, 1, (1, 2), 1, 1))
            # Without 3: untouched.
            assert _state(brokers.running[2], "led", 2) == PartitionState(1, 0, (1, 2), 1, 0)
            assert await _znode(zookeeper, chroot, "/brokers/topics/led/partitions/0/state") == \
                b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":1,"isr":[1,2]}'
            nursery.cancel_scope.cancel()


async def test_a_new_controller_fails_over_the_partitions_the_old_one_led(zookeeper):
    chroot = "/trafka/controller-failover"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            await brokers.running[2].create_topic(_topic("led", (1, 2, 3), (1, 3), (2, 3)), {})
            await brokers.all_see(lambda c: len([k for k in c.partition_states if k[0] == "led"]) == 3)

            await brokers.stop(1)

            await brokers.all_see(lambda c: c.controller_id in (2, 3) and c.controller_epoch == 2)
            await brokers.all_see(lambda c: _state(c, "led", 0) == PartitionState(2, 1, (2, 3), 2, 1)
                                  and _state(c, "led", 1) == PartitionState(3, 1, (3,), 2, 1))
            assert _state(brokers.running[2], "led", 2) == PartitionState(2, 0, (2, 3), 1, 0)
            nursery.cancel_scope.cancel()


async def test_an_offline_partition_waits_for_its_last_isr_member_unless_unclean_election_is_allowed(zookeeper):
    chroot = "/trafka/offline"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            controller = brokers.running[1]
            await controller.create_topic(_topic("clean", (2, 3)), {})
            await controller.create_topic(_topic("unclean", (2, 3)), {"unclean.leader.election.enable": "true"})

            await brokers.stop(3)
            await brokers.all_see(lambda c: _state(c, "clean") == PartitionState(2, 1, (2,), 1, 1))
            await brokers.stop(2)
            # No live ISR member: offline, the last leader kept as the ISR's only member.
            offline = PartitionState(-1, 2, (2,), 1, 2)
            await brokers.all_see(lambda c: _state(c, "clean") == offline and _state(c, "unclean") == offline)
            assert json.loads(await _znode(zookeeper, chroot, "/brokers/topics/clean/partitions/0/state")) == {
                "controller_epoch": 1, "leader": -1, "version": 1, "leader_epoch": 2, "isr": [2]}

            # 3 comes back: out of the ISR, it may lead only where unclean election is allowed, alone in
            # the ISR and marked as recovering.
            await brokers.start(3)
            await brokers.all_see(lambda c: 3 in c.brokers and _state(c, "unclean") == PartitionState(
                3, 3, (3,), 1, 3, leader_recovery_state=RECOVERING))
            assert json.loads(await _znode(zookeeper, chroot, "/brokers/topics/unclean/partitions/0/state")) == {
                "controller_epoch": 1, "leader": 3, "version": 1, "leader_epoch": 3, "isr": [3],
                "leader_recovery_state": 1}
            assert _state(controller, "clean") == offline

            # 2 comes back: it leads again.
            await brokers.start(2)
            await brokers.all_see(lambda c: _state(c, "clean") == PartitionState(2, 3, (2,), 1, 3))
            assert _state(controller, "unclean").leader == 3
            nursery.cancel_scope.cancel()


async def test_a_stale_controllers_writes_are_refused(zookeeper, caplog):
    chroot = "/trafka/fenced"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            await brokers.running[1].create_topic(_topic("fenced", (3, 2)), {})
            await brokers.all_see(lambda c: _state(c, "fenced") is not None)

            # Another controller epoch is written from outside, as a newer controller would: broker 1 still
            # holds /controller but its epoch is stale.
            def bump(client: KazooClient) -> None:
                data, stat = client.get("/controller_epoch")
                client.set("/controller_epoch", str(int(data) + 1).encode(), version=stat.version)

            await trio.to_thread.run_sync(_write_raw, zookeeper, chroot, bump)
            await brokers.all_see(lambda c: c.controller_epoch == 2)

            await brokers.stop(3)

            # The stale controller's write of the failover is refused; it resigns, a controller is elected
            # under epoch 3 and makes the failover: the only write since creation (version 1).
            await brokers.all_see(lambda c: c.controller_epoch == 3 and c.controller_id in (1, 2))
            await brokers.all_see(lambda c: _state(c, "fenced") == PartitionState(2, 1, (2,), 3, 1))
            assert "its controller epoch 1 is stale" in caplog.text
            assert await _znode(zookeeper, chroot, "/controller_epoch") == b"3"
            nursery.cancel_scope.cancel()


async def test_the_controller_writes_the_states_of_a_topic_kafkas_admin_created(zookeeper):
    """Kafka's admin writes only the assignment (and configs); the controller writes the partitions'
    states."""
    chroot = "/trafka/admin-created"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            brokers = await _three(nursery, zookeeper, chroot)
            assignment = _topic("admin", (2, 3), (3, 1))

            def create(client: KazooClient) -> None:
                client.create("/config/topics/admin", b'{"version":1,"config":{"cleanup.policy":"compact"}}')
                client.create("/brokers/topics/admin", assignment.to_json())

            await trio.to_thread.run_sync(_write_raw, zookeeper, chroot, create)

            await brokers.all_see(lambda c: _state(c, "admin", 0) == PartitionState(2, 0, (2, 3), 1, 0)
                                  and _state(c, "admin", 1) == PartitionState(3, 0, (3, 1), 1, 0))
            assert brokers.running[2].topic_configs["admin"] == {"cleanup.policy": "compact"}
            nursery.cancel_scope.cancel()
