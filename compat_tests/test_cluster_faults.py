"""Faults in a replicated cluster: a real ZooKeeper and three trafka processes, unmodified clients.

The controller killed (SIGKILL) while it leads the partition an idempotent acks=all producer writes to,
and a follower killed while min.insync.replicas=2 lets production go on: no acknowledged record is lost
or duplicated, order is kept, the killed broker comes back, truncates what it must, rejoins the ISR and
its replicas end byte-identical. min.insync.replicas refuses acks=all writes (NOT_ENOUGH_REPLICAS, as
the client reports it) while acks=1 goes on. With every in-sync replica dead a partition stays offline
rather than be led by an out-of-sync replica, until unclean.leader.election.enable is set on the topic.
A broker whose ZooKeeper session expires (it is paused, SIGSTOP, for longer than the session timeout)
registers again and catches up. A consumer group survives the death of its coordinator. The Java client
and kafka-python produce and consume replicated topics. Bad input is refused with a clear message:
a replication factor above the live brokers, ZooKeeper out of reach, a broker.id already registered, a
data directory of another cluster.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.clients import ClientError, ConfluentClient, JavaClient, KafkaPythonClient, Message
from compat_tests.cluster import Cluster, Writer, check_sequence, replicas_identical, start_cluster, wait
from compat_tests.harness import BrokerProcess, BrokerStartError

SESSION_TIMEOUT_S = 6.0


@pytest.fixture
def make_cluster(zookeeper, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(overrides)``: three brokers (ids 1, 2, 3) on the module's ZooKeeper, in a chroot
    of their own, with the cluster tests' short timeouts and ``overrides`` (Kafka property names)."""
    clusters: list[Cluster] = []

    def make(overrides: dict[str, object] | None = None) -> Cluster:
        cluster = start_cluster(zookeeper, tmp_path / f"cluster{len(clusters)}", overrides)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        for broker in cluster.brokers:
            if broker.running:
                try:
                    os.kill(broker.pid, signal.SIGCONT)  # a paused broker cannot stop
                except ProcessLookupError:
                    pass
        cluster.close()


def _create(cluster: Cluster, topic: str, partitions: int = 1, **configs: str) -> dict:
    """Create an RF 3 topic and wait until every partition has a leader and all three replicas in its ISR."""
    ConfluentClient(cluster.bootstrap).create_topic(topic, partitions, replication_factor=3, configs=configs)
    return wait(lambda: (lambda m: m if len(m) == partitions and all(
        leader > 0 and isr == [1, 2, 3] for leader, _, isr in m.values()) else None)(cluster.metadata(topic)),
        f"{topic}'s partitions led, with full ISRs")


def _read_values(cluster: Cluster, topic: str, count: int, partition: int = 0) -> list[int]:
    records = ConfluentClient(cluster.bootstrap).consume(topic, count, partitions=[partition], timeout=30)
    return [int(r.value) for r in records]


def _new_leader(cluster: Cluster, topic: str, partition: int, old: int) -> int:
    return wait(lambda: (lambda leader: leader if leader not in (-1, old) else None)(
        cluster.metadata(topic)[partition][0]), f"a new leader of {topic}-{partition}")


def _full_isr(cluster: Cluster, topic: str, partitions: int = 1) -> None:
    wait(lambda: all(isr == [1, 2, 3] for _, _, isr in cluster.metadata(topic).values())
         and len(cluster.metadata(topic)) == partitions, f"every replica of {topic} back in the ISR")


# --------------------------------------------------------------------------------------- kill -9


def test_killing_the_controller_while_it_leads_loses_no_acknowledged_record(make_cluster):
    cluster = make_cluster()
    topic = "ledger"
    layout = _create(cluster, topic, 3, **{"min.insync.replicas": "2"})
    controller = cluster.controller_id()
    # Leaders are spread over the three brokers: the controller leads one of the partitions.
    [partition] = [p for p, (leader, _, _) in layout.items() if leader == controller]
    writer = Writer(cluster.bootstrap, topic, partition).start()
    victim = cluster.broker(controller)
    try:
        writer.wait_for(300)
        victim.kill()
        new_controller = wait(lambda: (lambda c: c if c not in (-1, controller) else None)(cluster.controller_id()),
                              "a new controller")
        new_leader = _new_leader(cluster, topic, partition, controller)
        writer.wait_for(300, "300 more acknowledged records, from the new leader")
    finally:
        writer.stop()
    assert not writer.failed
    assert new_controller != controller and new_leader != controller
    check_sequence(_read_values(cluster, topic, len(writer.acknowledged), partition), writer.acknowledged)

    victim.restart()
    wait(lambda: cluster.live_broker_ids() == {1, 2, 3}, "the restarted broker registered")
    _full_isr(cluster, topic, 3)
    wait(lambda: replicas_identical(cluster, topic, 3), "replicas byte-identical after the restart")


def test_killing_a_follower_lets_production_go_on_with_min_insync_replicas_2(make_cluster):
    cluster = make_cluster()
    topic = "journal"
    [(leader, replicas, _)] = _create(cluster, topic, **{"min.insync.replicas": "2"}).values()
    follower = next(r for r in replicas if r != leader)
    writer = Writer(cluster.bootstrap, topic).start()
    victim = cluster.broker(follower)
    try:
        writer.wait_for(300)
        victim.kill()
        wait(lambda: cluster.metadata(topic)[0][2] == sorted(set(replicas) - {follower}),
             "the ISR shrunk to the live replicas")
        writer.wait_for(300, "300 more acknowledged records with two replicas in sync")
        # As with Kafka, the broker.id is taken until the dead broker's session expires.
        wait(lambda: follower not in cluster.live_broker_ids(), "the dead broker's session expired")
        victim.restart()
        _full_isr(cluster, topic)
        writer.wait_for(300, "300 more acknowledged records with the follower back")
    finally:
        writer.stop()
    assert not writer.failed
    assert cluster.metadata(topic)[0][0] == leader  # the leader stayed
    check_sequence(_read_values(cluster, topic, len(writer.acknowledged)), writer.acknowledged)
    wait(lambda: replicas_identical(cluster, topic, 1), "replicas byte-identical after the restart")


# --------------------------------------------------------------------------------------- min.insync.replicas


def test_min_insync_replicas_refuses_acks_all_and_lets_acks_1_through(make_cluster):
    from confluent_kafka import KafkaError, Producer

    cluster = make_cluster()
    topic = "strict"
    [(leader, replicas, _)] = _create(cluster, topic, **{"min.insync.replicas": "3"}).values()
    confluent = ConfluentClient(cluster.bootstrap)
    confluent.produce(topic, [Message(b"0"), Message(b"1")], acks="all")  # three in sync: accepted

    follower = next(r for r in replicas if r != leader)
    cluster.broker(follower).kill()
    wait(lambda: len(cluster.metadata(topic)[0][2]) == 2, "the ISR shrunk to two")

    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 20_000})
    producer.produce(topic, value=b"refused", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() if e is not None else None for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS], errors

    confluent.produce(topic, [Message(b"2")], acks=1)  # acks=1 needs only the leader

    # Two live brokers cannot hold three replicas of a new topic (once the dead one's session expired).
    wait(lambda: cluster.live_broker_ids() == set(replicas) - {follower} and cluster.controller_id() != follower,
         "the dead broker gone from the cluster")
    with pytest.raises(ClientError) as refused:
        ConfluentClient(cluster.bootstrap).create_topic("three-copies", 1, replication_factor=3)
    assert refused.value.error == "INVALID_REPLICATION_FACTOR"
    assert "only 2 broker(s) are registered" in refused.value.detail
    assert [r.value for r in confluent.consume(topic, 3, partitions=[0])] == [b"0", b"1", b"2"]


# --------------------------------------------------------------------------------------- unclean leader election


def test_unclean_leader_election_is_off_by_default_and_on_when_the_topic_says(make_cluster):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    cluster = make_cluster()
    topic = "unclean"
    [(first, replicas, _)] = _create(cluster, topic).values()
    # The replicas die one after the other while records are written, the last in sync last: the first
    # to die (out_of_sync) misses what came after it.
    out_of_sync, second = [r for r in replicas if r != first][::-1]
    confluent = ConfluentClient(cluster.bootstrap)
    values = iter(range(1_000_000))

    def write(count: int) -> None:
        ConfluentClient(cluster.bootstrap).produce(topic, [Message(str(next(values)).encode()) for _ in range(count)],
                                                   acks="all")

    write(100)
    wait(lambda: replicas_identical(cluster, topic, 1), "three copies of the first 100")
    cluster.broker(out_of_sync).stop()
    wait(lambda: cluster.metadata(topic)[0][2] == sorted([first, second]), "the ISR without the first to go")
    write(100)
    cluster.broker(second).stop()
    wait(lambda: cluster.metadata(topic)[0][2] == [first], "the ISR down to the leader")
    write(100)
    cluster.broker(first).kill()

    # Only the out-of-sync replica comes back: it must not lead, the partition stays offline.
    cluster.broker(out_of_sync).restart()
    wait(lambda: cluster.live_broker_ids() == {out_of_sync} and cluster.controller_id() == out_of_sync,
         "the out-of-sync replica alone, and the controller")
    wait(lambda: cluster.metadata(topic)[0][0] == -1, "the partition offline")
    assert cluster.partition_errors(topic)[0] == "LEADER_NOT_AVAILABLE"
    time.sleep(1.0)  # the controller had its chance to elect it
    assert cluster.metadata(topic)[0][0] == -1
    assert cluster.metadata(topic)[0][2] == [first]  # the last leader remains the ISR

    # unclean.leader.election.enable on the topic: the out-of-sync replica leads, with what it has.
    admin = cluster.admin()
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(20)
    wait(lambda: cluster.metadata(topic)[0][0] == out_of_sync, "the out-of-sync replica elected")
    assert [int(r.value) for r in confluent.consume(topic, 100, partitions=[0])] == list(range(100))
    write(50)  # it takes writes: the records it lacked are lost, as Kafka documents

    # The others come back, truncate their logs to the new leader's and follow it.
    cluster.broker(first).restart()
    cluster.broker(second).restart()
    _full_isr(cluster, topic)
    values_read = [int(r.value) for r in ConfluentClient(cluster.bootstrap).consume(topic, 150, partitions=[0])]
    assert values_read == list(range(100)) + list(range(300, 350))
    wait(lambda: replicas_identical(cluster, topic, 1), "replicas byte-identical after the unclean election")


# --------------------------------------------------------------------------------------- ZooKeeper session expiry


def test_a_broker_whose_zookeeper_session_expired_registers_again_and_catches_up(make_cluster):
    cluster = make_cluster()
    topic = "sessions"
    [(leader, _, _)] = _create(cluster, topic, **{"min.insync.replicas": "2"}).values()
    victim = cluster.broker(leader)
    survivors = Cluster([b for b in cluster.brokers if b is not victim])
    # The paused broker keeps its connections open and answers nothing: the producer gives up on the
    # requests in flight to it after request.timeout.ms (30 s by default) and sends them on to the new leader.
    writer = Writer(cluster.bootstrap, topic, **{"request.timeout.ms": 5000}).start()
    fresh = [Message(f"fresh-{i}".encode(), partition=0) for i in range(50)]
    try:
        writer.wait_for(300)
        # A broker that stops answering (a long GC pause, a frozen VM) loses its session.
        os.kill(victim.pid, signal.SIGSTOP)
        try:
            wait(lambda: leader not in survivors.live_broker_ids(),
                 "the paused broker's registration gone with its session", timeout=SESSION_TIMEOUT_S * 3)
            _new_leader(survivors, topic, 0, leader)
            # The cluster goes on serving: a new producer writes to the partition's new leader.
            ConfluentClient(survivors.bootstrap).produce(topic, fresh, acks="all", **{"enable.idempotence": True})
        finally:
            os.kill(victim.pid, signal.SIGCONT)
        wait(lambda: "again after its ZooKeeper session expired" in victim.log_text(), "the broker registered again")
        wait(lambda: cluster.live_broker_ids() == {1, 2, 3}, "the broker back among the live ones")
        _full_isr(cluster, topic)
        writer.wait_for(300, "300 more acknowledged records with the broker back")
    finally:
        writer.stop()
    assert not writer.failed
    records = ConfluentClient(cluster.bootstrap).consume(topic, len(writer.acknowledged) + len(fresh), partitions=[0])
    assert [r.value for r in records if r.value.startswith(b"fresh-")] == [m.value for m in fresh]
    check_sequence([int(r.value) for r in records if not r.value.startswith(b"fresh-")], writer.acknowledged)
    wait(lambda: replicas_identical(cluster, topic, 1), "replicas byte-identical after the session expiry")


# --------------------------------------------------------------------------------------- consumer group


class _Member:
    """A confluent-kafka consumer in a group, reading a few records at a time (slowly, so that the group
    is still at work when its coordinator dies) and committing synchronously after each batch. Every
    record read is noted with the offset committed for its partition (by any member) when it was read."""

    def __init__(self, bootstrap: str, group: str, topic: str, seen: list, committed: dict,
                 lock: threading.Lock) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
                                  "heartbeat.interval.ms": 500})
        self.consumer.subscribe([topic])
        self.seen, self.committed, self.lock = seen, committed, lock
        self.commit_failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import KafkaException

        while not self._stop.is_set():
            messages = [m for m in self.consumer.consume(num_messages=5, timeout=0.2) if not m.error()]
            if not messages:
                continue
            with self.lock:
                for m in messages:
                    self.seen.append((m.partition(), m.offset(), self.committed.get(m.partition(), 0)))
            try:
                result = self.consumer.commit(asynchronous=False)
            except KafkaException:  # (while the coordinator is away) at the same pace: the group keeps work
                self.commit_failures += 1
                time.sleep(0.1)
                continue
            with self.lock:
                for tp in result or []:
                    if tp.error is None and tp.offset >= 0:
                        self.committed[tp.partition] = max(self.committed.get(tp.partition, 0), tp.offset)
            time.sleep(0.1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


def _coordinator(cluster: Cluster, group: str) -> int:
    admin = cluster.admin()  # (kept until its futures are done)
    [description] = [f.result(10) for f in admin.describe_consumer_groups([group]).values()]
    return description.coordinator.id


def test_a_consumer_group_goes_on_with_a_new_coordinator_from_its_committed_offsets(make_cluster):
    cluster = make_cluster({"offsets.topic.replication.factor": 3})
    topic, group = "events", f"group-{uuid.uuid4().hex[:8]}"
    _create(cluster, topic, 3)
    total = 3000  # (the group reads about 150 a second; its coordinator is away for some 7 s)
    ConfluentClient(cluster.bootstrap).produce(
        topic, [Message(str(i).encode(), key=str(i).encode(), partition=i % 3) for i in range(total)], acks="all")

    seen: list[tuple[int, int, int]] = []
    committed: dict[int, int] = {}
    lock = threading.Lock()
    members = [_Member(cluster.bootstrap, group, topic, seen, committed, lock) for _ in range(3)]

    def read() -> int:
        with lock:
            return len({(p, o) for p, o, _ in seen})

    try:
        wait(lambda: read() >= total // 5 and sum(committed.values()) > 0, "a fifth of the records read and committed")
        coordinator = _coordinator(cluster, group)
        _full_isr(cluster, "__consumer_offsets", 3)
        cluster.broker(coordinator).kill()
        new_coordinator = wait(lambda: (lambda c: c if c != coordinator else None)(_coordinator(cluster, group)),
                               "a new coordinator for the group")
        at_failover = read()
        wait(lambda: read() >= min(at_failover + 100, total), "100 more records read")
        # A member leaves: its partitions go to the others, who start where the group committed.
        members.pop().close()
        wait(lambda: read() == total, "every record read", timeout=90)
        wait(lambda: sum(committed.values()) == total, "every record committed")
    finally:
        for member in members:
            member.close()
    assert new_coordinator != coordinator
    assert at_failover < total, "the group had read everything before its coordinator changed"
    # No record skipped, and a record read twice only from where its partition's commits stood.
    assert {(p, o) for p, o, _ in seen} == {(p, o) for p in range(3) for o in range(total // 3)}
    first_reads: set[tuple[int, int]] = set()
    for partition, offset, committed_then in seen:
        if (partition, offset) in first_reads:
            assert offset >= committed_then, (partition, offset, committed_then)
        first_reads.add((partition, offset))


# --------------------------------------------------------------------------------------- other clients


def test_the_java_client_and_kafka_python_on_replicated_topics(make_cluster):
    cluster = make_cluster()
    java, kafka_python = JavaClient(cluster.bootstrap), KafkaPythonClient(cluster.bootstrap)
    java.create_topic("java-rf3", 3, replication_factor=3)
    kafka_python.create_topic("python-rf3", 3, replication_factor=3)
    for topic in ("java-rf3", "python-rf3"):
        wait(lambda: len(cluster.metadata(topic)) == 3 and all(
            isr == [1, 2, 3] for _, _, isr in cluster.metadata(topic).values()), f"{topic} with full ISRs")
    java_messages = [Message(f"java-{i}".encode(), key=f"k{i}".encode(), partition=i % 3) for i in range(300)]
    python_messages = [Message(f"python-{i}".encode(), key=f"k{i}".encode(), partition=i % 3) for i in range(300)]
    java.produce("python-rf3", java_messages, acks="all")
    kafka_python.produce("java-rf3", python_messages, acks="all")
    for topic, produced in (("python-rf3", java_messages), ("java-rf3", python_messages)):
        for client in (java, kafka_python):
            records = client.consume(topic, len(produced))
            for partition in range(3):
                assert [r.value for r in records if r.partition == partition] == \
                    [m.value for m in produced if m.partition == partition]
                assert [r.offset for r in records if r.partition == partition] == list(range(100))
        wait(lambda: replicas_identical(cluster, topic, 3), f"{topic}'s replicas byte-identical")


# --------------------------------------------------------------------------------------- bad input


def test_bad_input_is_refused_with_a_clear_message(make_cluster, zookeeper, tmp_path):
    cluster = make_cluster()
    confluent = ConfluentClient(cluster.bootstrap)
    _create(cluster, "kept")
    confluent.produce("kept", [Message(b"acknowledged")], acks="all")
    cluster_id = cluster.admin().list_topics(timeout=10).cluster_id

    # A replication factor above the live brokers.
    with pytest.raises(ClientError) as refused:
        confluent.create_topic("too-many", 1, replication_factor=4)
    assert refused.value.error == "INVALID_REPLICATION_FACTOR"
    assert "only 3 broker(s) are registered" in refused.value.detail

    # ZooKeeper out of reach at start: a non-zero exit naming the address.
    with _port_nobody_listens_on() as port:
        unreachable = BrokerProcess(tmp_path / "unreachable", name="unreachable", overrides={
            "broker.id": 9, "zookeeper.connect": f"127.0.0.1:{port}/kafka", "zookeeper.connection.timeout.ms": 1500})
        with pytest.raises(BrokerStartError):
            unreachable.start()
    assert unreachable.returncode not in (None, 0)
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port}/kafka" in unreachable.log_text()

    # A broker.id already registered: refused, and the broker holding it goes on serving.
    twin = BrokerProcess(tmp_path / "twin", name="twin", overrides={
        "broker.id": 2, "zookeeper.connect": cluster.connect, "zookeeper.session.timeout.ms": 6000})
    with pytest.raises(BrokerStartError):
        twin.start()
    assert twin.returncode not in (None, 0)
    holder = cluster.broker(2)
    assert (f"broker.id 2 is already registered in ZooKeeper at {cluster.connect}, by the broker at "
            f"{holder.host}:{holder.port}") in twin.log_text()
    assert cluster.live_broker_ids() == {1, 2, 3}

    # A data directory of another cluster: broker 3's, started against another chroot.
    other_cluster = f"{zookeeper.connect_string}/trafka-other-{uuid.uuid4().hex[:8]}"
    stray = cluster.broker(3)
    stray.stop()
    stray.overrides["zookeeper.connect"] = other_cluster
    with pytest.raises(BrokerStartError):
        stray.start()
    assert stray.returncode not in (None, 0)
    assert (f"{stray.data_dir / 'meta.properties'}: the data directory belongs to cluster {cluster_id}, not "
            in stray.log_tail(20))
    stray.overrides["zookeeper.connect"] = cluster.connect
    stray.restart()

    # Nothing acknowledged was lost on the way.
    _full_isr(cluster, "kept")
    assert [r.value for r in ConfluentClient(cluster.bootstrap).consume("kept", 1)] == [b"acknowledged"]
    wait(lambda: replicas_identical(cluster, "kept", 1), "kept's replicas byte-identical")


@contextlib.contextmanager
def _port_nobody_listens_on() -> Iterator[int]:
    """A loopback port bound but not listening while the block runs: connections to it are refused."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]
