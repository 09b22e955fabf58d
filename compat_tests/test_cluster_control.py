"""A cluster on cue from its handle (``trafka.broker.testing.TrafkaCluster``, the ``trafka_cluster`` fixture's):
a partition's leadership moved to a chosen broker, a leader paused past its ZooKeeper session and resumed, and, on a
test network of its own, a leader cut off from everything and a follower from the other brokers, while an acks=all
producer (confluent-kafka) and a consumer (kafka-python) go on through all of it and lose nothing."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

from trafka.broker.testing import BrokerError, TrafkaCluster
from trafka.broker.testing.network import available

network_unavailable = available()

WAIT_S = 60


@pytest.fixture
def cluster(zookeeper, tmp_path) -> Iterator[TrafkaCluster]:
    with TrafkaCluster(3, zookeeper=zookeeper.connect_string, data_dir=tmp_path / "cluster",
                       properties={"offsets.topic.num.partitions": 1, "replica.lag.time.max.ms": 4000,
                                   "auto.leader.rebalance.enable": "false"}) as cluster:
        yield cluster


def _produce(cluster: TrafkaCluster, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": WAIT_S * 1000})
    for value in values:
        producer.produce(topic, value=b"%d" % value)
    assert producer.flush(WAIT_S) == 0


def _read_all(cluster: TrafkaCluster, topic: str, count: int) -> list[int]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, consumer_timeout_ms=20_000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = []
        for message in consumer:
            values.append(int(message.value))
            if len(values) == count:
                break
        return values
    finally:
        consumer.close()


def _until(condition, what: str):
    deadline = time.monotonic() + WAIT_S
    while not (result := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return result


def test_leadership_moved_and_a_leader_paused_past_its_session(cluster: TrafkaCluster):
    topic = cluster.create_topic("steered", partitions=1, replication_factor=3, configs={"min.insync.replicas": 2})
    _produce(cluster, topic, range(0, 50))
    leader = cluster.leader(topic)
    chosen = next(n for n in (1, 2, 3) if n != leader)
    cluster.move_leadership(topic, 0, chosen)
    assert cluster.leader(topic) == chosen
    _produce(cluster, topic, range(50, 100))

    paused = cluster.broker(chosen)
    paused.pause()
    try:
        # Its ZooKeeper session expires (6 s): another replica of the ISR leads, and writes go on there.
        _until(lambda: cluster.leader(topic) not in (chosen, -1), "a new leader while the old one is paused")
        _produce(cluster, topic, range(100, 150))
    finally:
        paused.resume()
    _produce(cluster, topic, range(150, 200))
    assert _read_all(cluster, topic, 200) == list(range(200))
    # Back in the ISR: it may lead again.
    _until(lambda: _try_move(cluster, topic, chosen), "the resumed broker leading again")
    assert _read_all(cluster, topic, 200) == list(range(200))


def _try_move(cluster: TrafkaCluster, topic: str, node_id: int) -> bool:
    try:
        cluster.move_leadership(topic, 0, node_id, timeout=5)
    except BrokerError:
        return False
    return True


def test_moving_leadership_to_a_broker_without_a_replica_is_refused(cluster: TrafkaCluster):
    topic = cluster.create_topic("pinned", partitions=1, replication_factor=1)
    leader = cluster.leader(topic)
    other = next(n for n in (1, 2, 3) if n != leader)
    with pytest.raises(BrokerError, match=f"broker {other} holds no replica"):
        cluster.move_leadership(topic, 0, other)


@pytest.mark.skipif(network_unavailable is not None, reason=f"no test network here: {network_unavailable}")
def test_a_leader_isolated_on_a_test_network_is_replaced_and_returns(tmp_path):
    """``TrafkaCluster(network=True)``: ZooKeeper and each broker on a host of their own; a leader cut off from
    everything loses its leadership when its ZooKeeper session expires, writes go on at the new leader, and, healed,
    it follows and rejoins the ISR; a follower cut off from the other brokers only leaves the ISR and comes back."""
    with TrafkaCluster(3, data_dir=tmp_path / "cluster", network=True,
                       properties={"offsets.topic.num.partitions": 1, "replica.lag.time.max.ms": 4000,
                                   "auto.leader.rebalance.enable": "false"}) as cluster:
        topic = cluster.create_topic("cut-off", partitions=1, replication_factor=3, configs={"min.insync.replicas": 2})
        _produce(cluster, topic, range(0, 50))
        leader = cluster.leader(topic)
        cluster.isolate(leader)
        _until(lambda: cluster.leader(topic) not in (leader, -1), "a new leader while the old one is cut off")
        _produce(cluster, topic, range(50, 100))
        cluster.heal()
        _until(lambda: _isr(cluster, topic) == [1, 2, 3], "the old leader back in the ISR")
        # Registered again after its session expired, it fetched over new connections, not over those that lived
        # through the cut (which TCP's retransmission back-off can keep silent for seconds after the heal).
        _until(lambda: "over a new connection: this broker registered again" in cluster.broker(leader).log_text(),
               "the old leader fetching over new connections")

        follower = next(n for n in (1, 2, 3) if n != cluster.leader(topic))
        cluster.isolate(follower, from_="brokers")
        _until(lambda: follower not in _isr(cluster, topic), "the cut-off follower out of the ISR")
        _produce(cluster, topic, range(100, 150))
        cluster.heal()
        _until(lambda: _isr(cluster, topic) == [1, 2, 3], "the follower back in the ISR")
        assert _read_all(cluster, topic, 150) == list(range(150))


def _isr(cluster: TrafkaCluster, topic: str) -> list[int]:
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    found = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(topic, timeout=10)
    return sorted(found.topics[topic].partitions[0].isrs)


@pytest.mark.skipif(network_unavailable is not None, reason=f"no test network here: {network_unavailable}")
def test_trafka_cluster_on_cue_from_its_control_endpoint(tmp_path):
    """``trafka cluster --network --control-port 0``, driven with ``trafka control --port P cluster ...``."""
    import re
    import subprocess
    import sys

    from trafka.broker.tools.control_client import ControlClient

    process = subprocess.Popen([sys.executable, "-m", "trafka", "cluster", "--brokers", "3", "--port", "0",
                                "--network", "--control-port", "0", "--data-dir", str(tmp_path / "cluster"),
                                "--override", "offsets.topic.num.partitions=1",
                                "--override", "replica.lag.time.max.ms=4000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        ready = re.search(r"bootstrap=(\S+) .* control=127\.0\.0\.1:(\d+)", line)
        assert ready, line + process.stderr.read()
        bootstrap, port = ready[1], int(ready[2])

        def control(*argv: str) -> dict:
            done = subprocess.run([sys.executable, "-m", "trafka", "control", "--port", str(port), "cluster", *argv],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        brokers = control("brokers")["brokers"]
        assert [(b["id"], b["running"]) for b in brokers] == [(1, True), (2, True), (3, True)]
        client = ControlClient(port)
        from confluent_kafka.admin import AdminClient as ConfluentAdmin, NewTopic

        admin = ConfluentAdmin({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("on-cue", 1, 3, config={"min.insync.replicas": "2"})])["on-cue"].result(30)
        leader = _until(lambda: next(iter(admin.list_topics("on-cue", timeout=10).topics["on-cue"].partitions
                                          .values())).leader, "a leader")
        chosen = next(n for n in (1, 2, 3) if n != leader)
        assert control("leader", "on-cue", "0", str(chosen))["leader"] == chosen
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})

        def produce(values: range) -> None:
            for value in values:
                producer.produce("on-cue", value=b"%d" % value)
            assert producer.flush(WAIT_S) == 0

        produce(range(0, 20))
        assert control("pause", str(chosen))["brokers"][chosen - 1]["paused"] is True
        control("resume", str(chosen))
        other = next(n for n in (1, 2, 3) if n != chosen)
        isolated = client.cluster("isolate", other, **{"from": "zookeeper"})
        assert isolated["isolated"], isolated
        produce(range(20, 40))
        assert control("heal")["isolated"] == []
        control("kill", str(other))
        # Started again at once: refused while its killed incarnation's ZooKeeper session lasts, so it waits.
        assert control("start", str(other))["brokers"][other - 1]["running"] is True
        produce(range(40, 80))
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=20_000)
        consumer.assign([TopicPartition("on-cue", 0)])
        consumer.seek_to_beginning()
        assert [int(m.value) for _, m in zip(range(80), consumer, strict=False)] == list(range(80))
        consumer.close()
    finally:
        process.terminate()
        process.wait(60)
