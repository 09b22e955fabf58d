"""Partition reassignment in a replicated cluster (AlterPartitionReassignments and
ListPartitionReassignments, as kafka-reassign-partitions.sh uses them, through kafka-python's admin
client): replicas move to other brokers while an idempotent producer writes with acks=all; nothing
acknowledged is lost, the new replica ends byte-identical, the old one's log is deleted. A controller
that cannot reach ZooKeeper answers the request with an error at once and goes on serving the connection
(Kafka 3.9's holds the request until ZooKeeper is back: no answer within 60 s, measured)."""

from __future__ import annotations

import time
from pathlib import Path

from compat_tests.clients import ConfluentClient
from compat_tests.cluster import Writer, check_sequence, replicas_identical, segments, start_cluster, wait
from compat_tests.wire_client import WireClient
from compat_tests.zookeeper import ZooKeeperServer
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import AlterPartitionReassignmentsRequest as Reassign
from trafka.wire.messages import MetadataRequest

from kafka import TopicPartition


def _admin(cluster):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap)


def test_replicas_move_while_producing(zookeeper, tmp_path: Path):
    cluster = start_cluster(zookeeper, tmp_path)
    try:
        ConfluentClient(cluster.bootstrap).create_topic("moving", 1, replication_factor=2)
        leader, replicas, _ = wait(lambda: cluster.metadata("moving").get(0), "metadata")
        outsider = ({1, 2, 3} - set(replicas)).pop()
        target = [outsider, leader]  # the old leader stays; the other replica leaves; the outsider leads
        leaving = next(r for r in replicas if r != leader)
        writer = Writer(cluster.bootstrap, "moving").start()
        try:
            writer.wait_for(300)
            admin = _admin(cluster)
            try:
                assert admin.alter_partition_reassignments({TopicPartition("moving", 0): target}) == {
                    TopicPartition("moving", 0): None}
                wait(lambda: not admin.list_partition_reassignments(), "the reassignment to complete")
            finally:
                admin.close()
            writer.wait_for(300, "after the move")
        finally:
            writer.stop()
        assert not writer.failed
        _, now_replicas, _ = cluster.metadata("moving")[0]
        assert now_replicas == target
        values = [int(r.value) for r in ConfluentClient(cluster.bootstrap).consume("moving", len(writer.acknowledged),
                                                                                  partitions=[0])]
        check_sequence(values, writer.acknowledged)
        brokers = [cluster.broker(outsider), cluster.broker(leader)]
        wait(lambda: replicas_identical(cluster, "moving", [0], brokers=brokers), "the new replica identical")
        wait(lambda: not segments(cluster.broker(leaving), "moving", 0), "the old replica's log deleted")
    finally:
        cluster.close()


def test_reassignment_refusals_and_cancellation(zookeeper, tmp_path: Path):
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    cluster = start_cluster(zookeeper, tmp_path)
    try:
        ConfluentClient(cluster.bootstrap).create_topic("kept", 1, replication_factor=2)
        wait(lambda: cluster.metadata("kept").get(0), "metadata")
        admin = _admin(cluster)
        kept = TopicPartition("kept", 0)
        try:
            for target in ([1, 7], [1, 1]):  # (kafka-python refuses an empty list itself)
                assert admin.alter_partition_reassignments({kept: target}) == {kept: InvalidReplicationAssignmentError}
            assert admin.alter_partition_reassignments({kept: None}) == {kept: NoReassignmentInProgressError}
            assert admin.list_partition_reassignments() == {}
        finally:
            admin.close()
    finally:
        cluster.close()


def test_a_controller_out_of_zookeepers_reach_answers_an_error_and_serves_on(tmp_path: Path):
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper" / "data", name="private-zookeeper").start()
    cluster = start_cluster(zookeeper, tmp_path / "cluster", node_ids=(1,))
    try:
        ConfluentClient(cluster.bootstrap).create_topic("kept", 1, replication_factor=1)
        wait(lambda: cluster.metadata("kept").get(0), "metadata")
        move = Reassign(timeout_ms=5000, topics=[Reassign.ReassignableTopic(
            name="kept", partitions=[Reassign.ReassignablePartition(partition_index=0, replicas=[1])])])
        with WireClient(cluster.bootstrap) as connection:
            zookeeper.stop()
            # Once the broker has seen ZooKeeper go, its write cannot be made: the answer says so
            # (UNKNOWN_SERVER_ERROR with no message, as Kafka answers a failed request), and the same
            # connection is served on.
            deadline = time.monotonic() + 20
            while (answer := connection.request(move, 0)).error_code != ErrorCode.UNKNOWN_SERVER_ERROR:
                assert time.monotonic() < deadline, answer
                time.sleep(0.2)
            assert answer.error_message is None and answer.responses == []
            topics = connection.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="kept")]),
                                        4).topics
            assert [(t.name, t.error_code) for t in topics] == [("kept", 0)]
        zookeeper.start()
        admin = _admin(cluster)
        try:
            wait(lambda: admin.list_partition_reassignments() == {}, "the controller serving again")
        finally:
            admin.close()
    finally:
        cluster.close()
        zookeeper.stop()


def test_a_broker_stops_on_sigterm_with_its_zookeeper_gone(tmp_path: Path):
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper" / "data", name="private-zookeeper").start()
    cluster = start_cluster(zookeeper, tmp_path / "cluster", node_ids=(1,))
    try:
        zookeeper.kill()
        time.sleep(1)  # the broker sees its session's connection go, and reads wait for a reconnection
        # Its calls to ZooKeeper wait for a ZooKeeper that is not coming back: shutdown must not wait for them.
        assert cluster.brokers[0].stop() == 0
    finally:
        cluster.close()
        zookeeper.stop()
