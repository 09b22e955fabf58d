"""A three-broker cluster whose brokers talk to each other over a SASL_SSL inter-broker listener (TLS with the
cluster's CA, SASL PLAIN or SCRAM-SHA-512 as the broker user), while clients use a PLAINTEXT listener:
replication, a leader killed -9 and its partition failed over, and a transaction whose markers cross brokers."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic

from compat_tests.cluster import Cluster, start_cluster, wait
from compat_tests.ports import free_port
from trafka.broker.security.credentials import encode_zk_user_config, from_password, zk_user_path

BROKER_PASSWORD = "broker-secret"


def _secure_cluster(zookeeper, directory, mechanism: str) -> tuple[Cluster, object, dict[int, int]]:
    from trafka.broker.security.dev_certs import create_dev_certificates

    certs = create_dev_certificates(directory / "certs")
    tls = {f"listener.name.internal.{name}": value
           for name, value in certs.listener_settings(client_auth="required").items()}
    # The broker's certificate serves as its client certificate too (mutual TLS between brokers).
    tls.update({f"listener.name.internal.{name}": value for name, value in certs.client_settings("broker").items()})
    if mechanism == "PLAIN":
        jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
                f'password="{BROKER_PASSWORD}" user_broker="{BROKER_PASSWORD}";')
    else:
        jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                f'password="{BROKER_PASSWORD}";')
    chroot = f"/trafka-{uuid.uuid4().hex[:8]}"
    if mechanism != "PLAIN":
        # The brokers' own SCRAM user, created before any broker runs, where Kafka keeps it.
        from kazoo.client import KazooClient

        client = KazooClient(hosts=zookeeper.connect_string)
        client.start(timeout=10)
        try:
            client.create(chroot + zk_user_path("broker"), encode_zk_user_config(
                {mechanism: from_password(mechanism, BROKER_PASSWORD, 4096)}), makepath=True)
        finally:
            client.stop()
            client.close()
    internal_ports = {node_id: free_port() for node_id in (1, 2, 3)}
    cluster = start_cluster(zookeeper, directory, {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "listener.name.internal.sasl.enabled.mechanisms": mechanism,
        f"listener.name.internal.{mechanism.lower()}.sasl.jaas.config": jaas,
        **tls,
    }, broker_overrides=lambda node_id: {
        "listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{internal_ports[node_id]}"}, chroot=chroot)
    return cluster, certs, internal_ports


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_replication_failover_and_transactions_over_a_sasl_ssl_inter_broker_listener(zookeeper, tmp_path, mechanism):
    cluster, certs, internal_ports = _secure_cluster(zookeeper, tmp_path, mechanism)
    try:
        admin = cluster.admin()
        for future in admin.create_topics([NewTopic("replicated", 1, 3, config={"min.insync.replicas": "2"})]).values():
            future.result(30)
        wait(lambda: cluster.metadata("replicated")[0][2] == [1, 2, 3], "a full ISR (followers fetch over SASL_SSL)")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(50):
            producer.produce("replicated", value=b"%d" % i)
        assert producer.flush(30) == 0

        leader = cluster.metadata("replicated")[0][0]
        cluster.broker(leader).kill()
        wait(lambda: cluster.metadata("replicated")[0][0] not in (leader, -1), "a new leader")
        survivors = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(50, 60):
            survivors.produce("replicated", value=b"%d" % i)
        assert survivors.flush(30) == 0
        cluster.broker(leader).start(cluster.broker(leader).port)  # on its port: clients know it there
        wait(lambda: cluster.metadata("replicated")[0][2] == [1, 2, 3], "the old leader back in the ISR")

        # A transaction over partitions led by different brokers: its markers travel between brokers.
        for future in admin.create_topics([NewTopic("spread", 3, 2)]).values():
            future.result(30)
        transactional = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "secure-tx"})
        transactional.init_transactions(30)
        transactional.begin_transaction()
        for partition in range(3):
            transactional.produce("spread", value=b"tx-%d" % partition, partition=partition)
        transactional.commit_transaction(30)

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed"})
        consumer.subscribe(["replicated", "spread"])
        values = []
        try:
            wait(lambda: values.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
                 or len(values) >= 63, "every record read back")
        finally:
            consumer.close()
        assert sorted(v for v in values if not v.startswith(b"tx")) == sorted(b"%d" % i for i in range(60))
        assert sorted(v for v in values if v.startswith(b"tx")) == [b"tx-0", b"tx-1", b"tx-2"]
    finally:
        cluster.close()


def test_a_user_created_on_one_broker_logs_in_on_the_others(zookeeper, tmp_path):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    cluster, certs, internal_ports = _secure_cluster(zookeeper, tmp_path, "SCRAM-SHA-512")
    try:
        first = AdminClient({"bootstrap.servers": f"{cluster.broker(1).host}:{cluster.broker(1).port}"})
        upsert = UserScramCredentialUpsertion("dana", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              b"dana-secret")
        for future in first.alter_user_scram_credentials([upsert]).values():
            future.result(20)
        broker = certs.broker  # the listener requires a client certificate: dana presents the broker's
        for node_id in (2, 3):
            dana = AdminClient({
                "bootstrap.servers": f"localhost:{internal_ports[node_id]}", "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dana", "sasl.password": "dana-secret",
                "ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(broker.certificate),
                "ssl.key.location": str(broker.key)})
            wait(lambda: dana.list_topics(timeout=5).brokers, f"dana logging in on broker {node_id}")
    finally:
        cluster.close()
