"""Named listeners: a broker serving several, each client told the addresses of the listener it came in on
(Metadata, FindCoordinator, DescribeCluster), with real clients against a real broker process."""
from __future__ import annotations

import socket

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.security import round_trip as _round_trip


def test_each_client_is_told_the_addresses_of_its_own_listener(tmp_path):
    clients_port, internal_port = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "broker", overrides={
        "listeners": f"CLIENTS://127.0.0.1:{clients_port},INTERNAL://127.0.0.1:{internal_port}",
        "advertised.listeners": f"CLIENTS://localhost:{clients_port},INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    })
    broker.start(clients_port)
    try:
        seen = {}
        for name, port in (("CLIENTS", clients_port), ("INTERNAL", internal_port)):
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
            metadata = admin.list_topics(timeout=10)
            seen[name] = sorted((b.id, b.host, b.port) for b in metadata.brokers.values())
        assert seen == {"CLIENTS": [(broker.node_id, "localhost", clients_port)],
                        "INTERNAL": [(broker.node_id, "127.0.0.1", internal_port)]}

        # A producer and a consumer group on the second listener: every address they are given is its.
        bootstrap = f"127.0.0.1:{internal_port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(10):
            producer.produce("through-internal", value=b"%d" % i)
        assert producer.flush(15) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["through-internal"])
        values = []
        try:
            for _ in range(100):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(message.value())
                if len(values) == 10:
                    break
        finally:
            consumer.close()
        assert values == [b"%d" % i for i in range(10)]
    finally:
        broker.stop()


# -- TLS -------------------------------------------------------------------------------------------


def _tls_broker(tmp_path, client_auth: str = "none", **more: str):
    from trafka.broker.security.dev_certs import create_dev_certificates

    certs = create_dev_certificates(tmp_path / "certs", clients={"alice": "CN=alice,OU=ServiceUsers,O=trafka"})
    plain_port, tls_port = free_port(), free_port()
    settings = {f"listener.name.ssl.{name}": value for name, value in certs.listener_settings(client_auth=client_auth).items()}
    broker = BrokerProcess(tmp_path / "broker", overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{tls_port}",
        **settings, **more,
    })
    broker.start(plain_port)
    return broker, certs, tls_port


def test_ssl_listener_serves_confluent_and_kafka_python_clients(tmp_path):
    broker, certs, tls_port = _tls_broker(tmp_path)
    try:
        config = {"bootstrap.servers": f"localhost:{tls_port}", "security.protocol": "SSL",
                  "ssl.ca.location": str(certs.ca)}
        assert _round_trip(config, "over-tls", 20) == [b"%d" % i for i in range(20)]

        from kafka import KafkaConsumer, KafkaProducer

        producer = KafkaProducer(bootstrap_servers=f"localhost:{tls_port}", security_protocol="SSL",
                                 ssl_cafile=str(certs.ca))
        for i in range(5):
            producer.send("over-tls-kafka-python", b"k%d" % i)
        producer.flush(20)
        producer.close()
        consumer = KafkaConsumer("over-tls-kafka-python", bootstrap_servers=f"localhost:{tls_port}",
                                 security_protocol="SSL", ssl_cafile=str(certs.ca), auto_offset_reset="earliest",
                                 consumer_timeout_ms=10_000)
        try:
            assert [record.value for record in consumer][:5] == [b"k%d" % i for i in range(5)]
        finally:
            consumer.close()
    finally:
        broker.stop()


def test_a_client_that_does_not_speak_tls_fails_alone(tmp_path):
    broker, certs, tls_port = _tls_broker(tmp_path)
    try:
        with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as plaintext:
            plaintext.sendall(b"\x00\x00\x00\x0a" + bytes(10))  # a Kafka frame where a TLS hello belongs
            plaintext.settimeout(10)
            while plaintext.recv(4096):  # the broker closes it
                pass
        config = {"bootstrap.servers": f"localhost:{tls_port}", "security.protocol": "SSL",
                  "ssl.ca.location": str(certs.ca)}
        assert _round_trip(config, "served-meanwhile", 3) == [b"0", b"1", b"2"]
    finally:
        broker.stop()


def test_mutual_tls_requires_a_client_certificate(tmp_path):
    broker, certs, tls_port = _tls_broker(tmp_path, client_auth="required")
    try:
        alice = certs.clients["alice"]
        config = {"bootstrap.servers": f"localhost:{tls_port}", "security.protocol": "SSL",
                  "ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(alice.certificate),
                  "ssl.key.location": str(alice.key)}
        assert _round_trip(config, "mutual", 3) == [b"0", b"1", b"2"]
        anonymous = AdminClient({"bootstrap.servers": f"localhost:{tls_port}", "security.protocol": "SSL",
                                 "ssl.ca.location": str(certs.ca)})
        with pytest.raises(KafkaException):
            anonymous.list_topics(timeout=5)
    finally:
        broker.stop()


def _client_hello() -> bytes:
    """The first flight of a real TLS client (OpenSSL, as librdkafka's): its ClientHello record."""
    import ssl

    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        client.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def test_mutated_tls_handshakes_fail_alone(tmp_path):
    """Mutants of a real ClientHello (bits flipped, cut short, lengths overwritten, garbage after it), each on
    its own connection to the SSL listener, while a TLS client produces and consumes: each fails alone, the
    broker logs no traceback and serves the client throughout."""
    import random
    import threading

    broker, certs, tls_port = _tls_broker(tmp_path)
    hello = _client_hello()
    rng = random.Random(20261127)

    def mutant() -> bytes:
        data = bytearray(hello)
        kind = rng.randrange(4)
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data = data[:rng.randrange(1, len(data))]
        elif kind == 2:
            at = rng.choice([3, 4, 6, 7, 8])  # record and handshake length fields
            data[at] = rng.randrange(256)
        else:
            data += rng.randbytes(rng.randint(1, 2000))
        return bytes(data)

    mutants = [mutant() for _ in range(300)]
    served: list[list[bytes]] = []
    config = {"bootstrap.servers": f"localhost:{tls_port}", "security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    client = threading.Thread(target=lambda: served.append(_round_trip(config, "through-the-noise", 50)))
    try:
        client.start()
        for data in mutants:
            with socket.create_connection(("127.0.0.1", tls_port), timeout=5) as connection:
                connection.sendall(data)
                connection.shutdown(socket.SHUT_WR)
                try:
                    while connection.recv(65536):
                        pass
                except OSError:
                    pass
        client.join(60)
        assert served == [[b"%d" % i for i in range(50)]]
        assert broker.running
        assert "Traceback" not in broker.log_text()
    finally:
        broker.stop()
