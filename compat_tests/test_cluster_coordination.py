"""Brokers coordinating through a real ZooKeeper, in Kafka's layout (broker.cluster.zookeeper): they
register, agree on one controller, see each other come and go, and elect a new controller, with a new
controller epoch, when the old one leaves. What they write is read back with a plain ZooKeeper client,
as a Kafka engineer would look at it."""

from __future__ import annotations

import json

import pytest
import trio
from kazoo.client import KazooClient

from broker.cluster import BrokerRegistration
from broker.cluster.zookeeper import CoordinationError, ZooKeeperCluster

TIMEOUT = 20


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
            assert clusters[1].brokers[3] == BrokerRegistration(3, "127.0.0.1", 9003)
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
    from wire.messages import MetadataRequest

    chroot = "/trafka/with-kafka"
    kafka = ZooKeeperModeKafka(tmp_path / "kafka", f"{zookeeper.connect_string}{chroot}", broker_id=1)
    await trio.to_thread.run_sync(kafka.start)
    try:
        cluster = _cluster(zookeeper, 2, chroot)
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                await nursery.start(cluster.run)
                await cluster.wait_for(lambda c: set(c.brokers) == {1, 2})

                assert cluster.brokers[1] == BrokerRegistration(1, "127.0.0.1", kafka.port)
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
                nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(kafka.stop)
