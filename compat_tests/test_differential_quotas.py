"""Client quotas side by side: Apache Kafka 4.4 and trafka started with the same settings, sent the same
DescribeClientQuotas and AlterClientQuotas requests (valid, refused, every kind of filter) byte for byte and
through the Java admin client, and the same clients run against both at full speed under a quota.

The rate tests hold a producer (librdkafka and the Java client) to ``producer_byte_rate`` 1 MiB/s and a consumer
(the same two) to ``consumer_byte_rate`` 1 MiB/s on both brokers at once, and measure what each client got
through over 20 s, after 4 s in which it reaches its steady pace: a producer within 10 % of its quota, a
consumer under it (an answer that would take it over is sent empty, so it gets 50 to 90 % of its quota at full
speed, on Kafka as on trafka). Both brokers run with ``quota.window.num=2``:
with Kafka's default of 11 windows a client at full speed alternates bursts of 10 windows' worth with holds of
10 s (on Kafka as on trafka), so that no 20-s measurement is steady; with 2 the bursts are of one window.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.clients import ClientError, JavaDriver
from compat_tests.harness import BrokerProcess
from compat_tests.reference import KafkaBroker
from compat_tests.wire_client import WireClient
from trafka.wire.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest

QUOTA = 1024 * 1024
WARM_UP_S = 4
MEASURED_S = 20
SETTINGS = {"quota.window.num": 2, "num.partitions": 1}
D = DescribeClientQuotasRequest
A = AlterClientQuotasRequest


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = Path(tmp_path_factory.mktemp("differential-quotas"))
    kafka = KafkaBroker(root / "kafka", overrides=SETTINGS)
    trafka = BrokerProcess(root / "trafka", name="trafka", overrides=SETTINGS)
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": kafka, "trafka": trafka}
    finally:
        trafka.close()
        kafka.close()


def on_both(brokers, ask: Callable[[WireClient], object]) -> dict[str, object]:
    observed = {}
    for name, process in brokers.items():
        with WireClient(process.bootstrap) as client:
            observed[name] = ask(client)
    return observed


def _key(pairs) -> list:
    return sorted(((t, n is None, n or "") for t, n in pairs))


def describe(components, strict=False, version=1):
    def ask(client: WireClient):
        r = client.request(D(components=[D.ComponentData(entity_type=t, match_type=m, match=s)
                                         for t, m, s in components], strict=strict), version)
        entries = None if r.entries is None else sorted(
            (_key((e.entity_type, e.entity_name) for e in x.entity), sorted((v.key, v.value) for v in x.values))
             for x in r.entries)
        return r.error_code, r.error_message, entries
    return ask


def alter(entries, validate_only=False, version=1):
    def ask(client: WireClient):
        r = client.request(A(entries=[A.EntryData(entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in e],
                                                  ops=[A.OpData(key=k, value=v, remove=rm) for k, v, rm in ops])
                                      for e, ops in entries], validate_only=validate_only), version)
        return sorted((_key((x.entity_type, x.entity_name) for x in e.entity), e.error_code, e.error_message,
                       [(x.entity_type, x.entity_name) for x in e.entity]) for e in r.entries)
    return ask


def assert_same(observed):
    assert observed["trafka"] == observed["kafka"], observed


def settled(brokers, ask, expected_on_kafka: Callable[[object], bool]) -> dict[str, object]:
    """Kafka applies an alteration through its metadata log a moment after answering: ask until it shows."""
    deadline = time.monotonic() + 10
    while True:
        observed = on_both(brokers, ask)
        if expected_on_kafka(observed["kafka"]) or time.monotonic() > deadline:
            return observed
        time.sleep(0.1)


SETUP = [
    ([("user", "alice")], [("producer_byte_rate", 1024.0, False)]),
    ([("user", None), ("client-id", "c1")],
     [("consumer_byte_rate", 2048.0, False), ("request_percentage", 12.5, False)]),
    ([("client-id", None)], [("producer_byte_rate", 1e15, False)]),  # (no client here is held back by it)
    ([("ip", "10.1.2.3")], [("connection_creation_rate", 5.0, False)]),
    ([("ip", None)], [("connection_creation_rate", 100000.0, False)]),  # (every test connects from 127.0.0.1)
    ([("user", "bob"), ("client-id", None)], [("controller_mutation_rate", 0.5, False)]),
]
FILTERS = [
    ([], False), ([], True), ([("user", 0, "alice")], False), ([("user", 0, "nobody")], False),
    ([("user", 1, None)], False), ([("user", 2, None)], False), ([("user", 2, None)], True),
    ([("client-id", 1, None)], True), ([("client-id", 2, None)], False), ([("client-id", 0, "c1")], True),
    ([("user", 2, None), ("client-id", 2, None)], True), ([("ip", 2, None)], False), ([("ip", 1, None)], False),
    ([("ip", 0, "10.1.2.3")], False),
    # refused filters
    ([("client-id", 0, None)], False), ([("client-id", 1, "x")], False), ([("client-id", 2, "x")], False),
    ([("client-id", 3, None)], False), ([("foo", 0, "x")], False), ([("", 0, "x")], False),
    ([("user", 0, "x"), ("user", 2, None)], False), ([("ip", 2, None), ("user", 2, None)], False),
]


@pytest.fixture(scope="module")
def quotas_set(brokers):
    observed = on_both(brokers, alter(SETUP))
    assert_same(observed)
    assert all(code == 0 for _, code, _, _ in observed["kafka"])
    settled(brokers, describe([]), lambda seen: len(seen[2]) == len(SETUP))
    yield
    on_both(brokers, alter([(e, [(k, 0.0, True) for k, _, _ in ops]) for e, ops in SETUP]))


@pytest.mark.parametrize(("components", "strict"), FILTERS)
@pytest.mark.parametrize("version", [0, 1])
def test_describe_side_by_side(brokers, quotas_set, components, strict, version):
    assert_same(on_both(brokers, describe(components, strict, version)))


REFUSED = [
    ([("user", "x1")], [("producer_byte_rate", 1024.5, False)]),
    ([("user", "x1")], [("producer_byte_rate", 0.0, False)]),
    ([("user", "x1")], [("consumer_byte_rate", -5.0, False)]),
    ([("user", "x1")], [("bogus", 1.0, False)]),
    ([("user", "x1")], [("connection_creation_rate", 1.0, False)]),
    ([("ip", "10.9.9.9")], [("producer_byte_rate", 1.0, False)]),
    ([("ip", "not a host!")], [("connection_creation_rate", 1.0, False)]),
    ([("ip", "10.9.9.9"), ("user", "x1")], [("connection_creation_rate", 1.0, False)]),
    ([], [("producer_byte_rate", 1.0, False)]),
    ([("foo", "x")], [("producer_byte_rate", 1.0, False)]),
    ([("user", "")], [("producer_byte_rate", 1.0, False)]),
    ([("client-id", "")], [("producer_byte_rate", 1.0, False)]),
    ([("user", "x1")], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)]),
    ([("user", "x1")], [("producer_byte_rate", 1e30, False)]),
    ([("ip", "10.9.9.9")], [("connection_creation_rate", 5.5, False)]),
    ([("ip", "10.9.9.9")], [("connection_creation_rate", 3e9, False)]),
    ([("client-id", "x"), ("user", None)], [("bogus", 1.0, False)]),
]


@pytest.mark.parametrize("entry", REFUSED, ids=[str(i) for i in range(len(REFUSED))])
@pytest.mark.parametrize("version", [0, 1])
def test_refused_alterations_side_by_side(brokers, entry, version):
    observed = on_both(brokers, alter([entry], version=version))
    assert_same(observed)
    assert observed["kafka"][0][1] != 0


def test_validate_only_and_removal_side_by_side(brokers):
    entry = ([("user", "v1"), ("client-id", "app")], [("producer_byte_rate", 4096.0, False)])
    assert_same(on_both(brokers, alter([entry], validate_only=True)))
    time.sleep(0.5)
    assert_same(on_both(brokers, describe([("user", 0, "v1")])))
    assert_same(on_both(brokers, alter([entry, ([("user", "v2")], [("request_percentage", 0.5, False)])])))
    assert_same(settled(brokers, describe([("user", 2, None)], strict=False),
                        lambda seen: len(seen[2]) >= 2))
    removal = [(e, [(k, 0.0, True) for k, _, _ in ops]) for e, ops in
               [entry, ([("user", "v2")], [("request_percentage", 0.5, False)]),
                ([("user", "v3")], [("producer_byte_rate", 1.0, False)])]]
    assert_same(on_both(brokers, alter(removal)))
    assert_same(settled(brokers, describe([("user", 0, "v1")]), lambda seen: seen[2] == []))


def test_the_same_entity_twice_side_by_side(brokers):
    twice = [([("user", "d1")], [("producer_byte_rate", 1.0, False)]),
             ([("user", "d1")], [("producer_byte_rate", 2.0, False)]),
             ([("user", "d2"), ("user", "d3")], [("producer_byte_rate", 3.0, False)])]
    assert_same(on_both(brokers, alter(twice)))
    assert_same(settled(brokers, describe([("user", 2, None)], strict=True),
                        lambda seen: len([e for e in seen[2] if e[0][0][2] in ("d1", "d3")]) == 2))
    on_both(brokers, alter([([("user", n)], [("producer_byte_rate", 0.0, True)]) for n in ("d1", "d3")]))


def test_java_admin_side_by_side(brokers):
    entries = [{"entity": [["user", "java-user"], ["client-id", "java-app"]],
                "ops": [["producer_byte_rate", 65536], ["request_percentage", 25.0]]},
               {"entity": [["client-id", "java-app"]], "ops": [["consumer_byte_rate", 3.5]]},
               {"entity": [["ip", "10.7.7.7"]], "ops": [["connection_creation_rate", 3]]}]
    with JavaDriver() as java:
        observed = {}
        for name, process in brokers.items():
            altered = java.call("alter_client_quotas", bootstrap=process.bootstrap, entries=entries)
            deadline = time.monotonic() + 10
            while True:
                described = java.call("describe_client_quotas", bootstrap=process.bootstrap,
                                      components=[["user", "exact", "java-user"]])
                if described or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            strict = java.call("describe_client_quotas", bootstrap=process.bootstrap,
                               components=[["client-id", "specified"]], strict=True)
            java.call("alter_client_quotas", bootstrap=process.bootstrap, entries=[
                {"entity": entries[0]["entity"], "ops": [["producer_byte_rate", None], ["request_percentage", None]]},
                {"entity": entries[2]["entity"], "ops": [["connection_creation_rate", None]]}])
            observed[name] = (altered, described, strict)
    assert_same(observed)
    altered, described, _ = observed["kafka"]
    assert "consumer_byte_rate cannot be a fractional value." in altered["{client-id=java-app}"]
    assert described == [{"entity": {"client-id": "java-app", "user": "java-user"},
                          "values": {"producer_byte_rate": 65536.0, "request_percentage": 25.0}}]


# -- held to the quota -----------------------------------------------------------------------------------------

def _set_quota(brokers, client_id: str, key: str, value: float | None) -> None:
    op = (key, value or 0.0, value is None)
    observed = on_both(brokers, alter([([("client-id", client_id)], [op])]))
    assert all(r[1] == 0 for seen in observed.values() for r in seen), observed


def _rate(ticks: list[int]) -> float:
    return sum(ticks[WARM_UP_S:WARM_UP_S + MEASURED_S]) / MEASURED_S


def _confluent_produce_for(bootstrap: str, client_id: str, topic: str, seconds: int) -> list[int]:
    from confluent_kafka import Producer

    ticks = [0] * (seconds + 1)
    start = time.monotonic()

    def acknowledged(error, message):
        tick = int(time.monotonic() - start)
        if error is None and tick < len(ticks):
            ticks[tick] += len(message.value())

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "batch.size": 16384, "queue.buffering.max.kbytes": 4096})
    value = b"q" * 1000
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, value, on_delivery=acknowledged)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.purge()
    producer.flush(5)
    return ticks


def _confluent_consume_for(bootstrap: str, client_id: str, topic: str, seconds: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ticks = [0] * (seconds + 1)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            for message in consumer.consume(num_messages=1000, timeout=0.1):
                tick = int(time.monotonic() - start)
                if message.error() is None and tick < len(ticks):
                    ticks[tick] += len(message.value() or b"")
    finally:
        consumer.close()
    return ticks


def _run_all(jobs: dict[str, Callable[[], list[int]]]) -> dict[str, float]:
    results: dict[str, object] = {}

    def run(name, job):
        try:
            results[name] = _rate(job())
        except (ClientError, AssertionError, OSError, RuntimeError) as exc:  # reported below, beside the others
            results[name] = exc

    threads = [threading.Thread(target=run, args=item) for item in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failures = {name: r for name, r in results.items() if isinstance(r, Exception)}
    assert not failures, failures
    return results  # type: ignore[return-value]


def test_producers_held_to_producer_byte_rate(brokers):
    seconds = WARM_UP_S + MEASURED_S
    for client in ("rate-librdkafka", "rate-java"):
        _set_quota(brokers, client, "producer_byte_rate", QUOTA)
    time.sleep(1)
    javas = {name: JavaDriver() for name in brokers}
    try:
        jobs = {}
        for name, process in brokers.items():
            jobs[f"{name} librdkafka"] = (lambda b=process.bootstrap: _confluent_produce_for(
                b, "rate-librdkafka", "quota-produce-librdkafka", seconds))
            jobs[f"{name} java"] = (lambda b=process.bootstrap, j=javas[name]: j.call(
                "produce_for", bootstrap=b, topic="quota-produce-java", duration_ms=seconds * 1000,
                settings={"client.id": "rate-java", "linger.ms": 5, "buffer.memory": 4 * 1024 * 1024,
                          "max.block.ms": 60000}, timeout=seconds + 60))
        rates = _run_all(jobs)
    finally:
        for java in javas.values():
            java.close()
        for client in ("rate-librdkafka", "rate-java"):
            _set_quota(brokers, client, "producer_byte_rate", None)
    print({name: f"{rate / QUOTA:.3f} of the quota" for name, rate in rates.items()})
    for name, rate in rates.items():
        assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA, (name, rates)


def test_consumers_held_to_consumer_byte_rate(brokers):
    from confluent_kafka import Producer

    seconds = WARM_UP_S + MEASURED_S
    topic = "quota-consume"
    for process in brokers.values():
        producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
        for _ in range(40_000):  # 40 MB: more than either consumer can read under its quota
            while True:
                try:
                    producer.produce(topic, b"c" * 1000)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(120) == 0, f"{process!r}: the topic could not be filled"
    for client in ("rate-librdkafka-consumer", "rate-java-consumer"):
        _set_quota(brokers, client, "consumer_byte_rate", QUOTA)
    time.sleep(1)
    javas = {name: JavaDriver() for name in brokers}
    try:
        jobs = {}
        for name, process in brokers.items():
            jobs[f"{name} librdkafka"] = (lambda b=process.bootstrap: _confluent_consume_for(
                b, "rate-librdkafka-consumer", topic, seconds))
            jobs[f"{name} java"] = (lambda b=process.bootstrap, j=javas[name]: j.call(
                "consume_for", bootstrap=b, topic=topic, duration_ms=seconds * 1000,
                settings={"client.id": "rate-java-consumer"}, timeout=seconds + 60))
        rates = _run_all(jobs)
    finally:
        for java in javas.values():
            java.close()
        for client in ("rate-librdkafka-consumer", "rate-java-consumer"):
            _set_quota(brokers, client, "consumer_byte_rate", None)
    print({name: f"{rate / QUOTA:.3f} of the quota" for name, rate in rates.items()})
    # A consumer is held under its quota, never over it: an answer that would take it over is sent empty with
    # the throttle time, so a consumer at full speed gets somewhat less than its quota, on Kafka as on trafka.
    for name, rate in rates.items():
        assert 0.4 * QUOTA <= rate <= 1.1 * QUOTA, (name, rates)
    for client in ("librdkafka", "java"):
        assert abs(rates[f"trafka {client}"] - rates[f"kafka {client}"]) <= 0.35 * QUOTA, rates


# -- controller mutations (KIP-599) ----------------------------------------------------------------------------

def _create_topics(names_and_partitions, version):
    from trafka.wire.messages import CreateTopicsRequest as C

    def ask(client: WireClient):
        response = client.request(C(topics=[C.CreatableTopic(name=n, num_partitions=p, replication_factor=1)
                                            for n, p in names_and_partitions], timeout_ms=10_000), version)
        return ([(t.name, t.error_code, t.error_message) for t in response.topics],
                response.throttle_time_ms)
    return ask


def _delete_topics(names, version):
    from trafka.wire.messages import DeleteTopicsRequest as Del

    def ask(client: WireClient):
        if version >= 6:
            request = Del(topics=[Del.DeleteTopicState(name=n) for n in names], timeout_ms=10_000)
        else:
            request = Del(topic_names=list(names), timeout_ms=10_000)
        response = client.request(request, version)
        return [(t.name, t.error_code, t.error_message) for t in response.responses], response.throttle_time_ms
    return ask


def _as_mutator(brokers, ask):
    observed = {}
    for name, process in brokers.items():
        with WireClient(process.bootstrap, client_id="mutator") as client:
            observed[name] = ask(client)
    return observed


def test_controller_mutation_rate_side_by_side(brokers):
    # 1 partition a second; with controller.quota.window.num's 11 windows a client may go 11 partitions ahead.
    _set_quota(brokers, "mutator", "controller_mutation_rate", 1.0)
    time.sleep(1)
    observed = {}
    try:
        for name, process in brokers.items():
            with WireClient(process.bootstrap, client_id="mutator") as client:
                # Strict (CreateTopics v6+): 4 partitions a request until the client is over; then refused.
                strict = []
                for i in range(6):
                    results, throttle_ms = _create_topics([(f"kip599-{i}a", 3), (f"kip599-{i}b", 1)], 7)(client)
                    strict.append([code for _, code, _ in results])
                    if any(code for _, code, _ in results):
                        break
                refusal = (results, 0 < throttle_ms <= 1000)
                # Permissive (before v6): served, and the client throttled for going over.
                results, throttle_ms = _create_topics([("kip599-p", 3)], 5)(client)
                permissive = (results, 2000 < throttle_ms <= 4000)
                # The connection was muted for that throttle time: the next request is read once the client is
                # back under its quota, and served.
                deleted, _ = _delete_topics(["kip599-0a"], 6)(client)
            observed[name] = (strict, refusal, permissive, deleted)
    finally:
        _set_quota(brokers, "mutator", "controller_mutation_rate", None)
        time.sleep(0.5)
        for process in brokers.values():
            with WireClient(process.bootstrap) as client:
                _delete_topics([f"kip599-{i}{s}" for i in range(6) for s in "ab"] + ["kip599-p"], 6)(client)
    assert_same(observed)
    strict, refusal, permissive, deleted = observed["kafka"]
    assert strict == [[0, 0], [0, 0], [0, 0], [89, 89]]
    assert refusal[1] and permissive == ([("kip599-p", 0, None)], True)
    assert deleted == [("kip599-0a", 0, None)]


# -- authenticated users ---------------------------------------------------------------------------------------

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
              'password="alice-secret" user_alice="alice-secret" user_bob="bob-secret";')
SASL_SETTINGS = {"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}


@pytest.fixture(scope="module")
def sasl_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[object, str]]]:
    """Kafka and trafka with a SASL_PLAINTEXT listener (PLAIN users alice and bob): the process and that
    listener's address."""
    import socket

    root = Path(tmp_path_factory.mktemp("differential-user-quotas"))
    kafka = KafkaBroker(root / "kafka", overrides=SASL_SETTINGS, listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        sasl_port = probe.getsockname()[1]
    trafka = BrokerProcess(root / "trafka", name="trafka", overrides={
        **SASL_SETTINGS, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}"})
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": (kafka, f"127.0.0.1:{kafka.ports['SASL_PLAINTEXT']}"),
               "trafka": (trafka, f"127.0.0.1:{sasl_port}")}
    finally:
        trafka.close()
        kafka.close()


def _produce_as(address: str, user: str, client_id: str) -> int:
    """A Produce of one 1 KB record by ``user`` (PLAIN) with ``client_id``: the throttle time it is told."""
    from trafka.wire.messages import ProduceRequest, SaslAuthenticateRequest, SaslHandshakeRequest
    from trafka.wire.records import SimpleRecord, build_batch

    with WireClient(address, client_id=client_id) as client:
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        token = f"\0{user}\0{user}-secret".encode()
        assert client.request(SaslAuthenticateRequest(auth_bytes=token), 2).error_code == 0
        response = client.request(ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[
            ProduceRequest.TopicProduceData(name="user-quotas", partition_data=[ProduceRequest.PartitionProduceData(
                index=0, records=build_batch([SimpleRecord(None, b"u" * 1000)]))])]), 9)
        return response.throttle_time_ms


def test_user_quotas_and_their_precedence_side_by_side(sasl_brokers):
    """A principal's user name is the quota entity's (User:alice is user alice): the most specific entity that
    sets a quota holds the client, per user and client id."""
    entries = [
        ([("user", "alice")], [("producer_byte_rate", 10.0, False)]),
        ([("user", "alice"), ("client-id", "fast")], [("producer_byte_rate", 1e9, False)]),
        ([("user", None)], [("producer_byte_rate", 1e9, False)]),
        ([("client-id", "slow")], [("producer_byte_rate", 10.0, False)]),
    ]
    brokers = {name: process for name, (process, _) in sasl_brokers.items()}
    assert_same(on_both(brokers, alter(entries)))
    settled(brokers, describe([]), lambda seen: len(seen[2]) == len(entries))
    time.sleep(1)  # (Kafka's brokers apply a quota a moment after describing it)
    observed = {}
    for name, (_, address) in sasl_brokers.items():
        observed[name] = {
            # alice's own quota: throttled, whatever her client id, but for the one with a quota of its own
            "alice/app": _produce_as(address, "alice", "app") > 0,
            "alice/fast": _produce_as(address, "alice", "fast") > 0,
            # bob falls to the default user's quota, above the client id's: not throttled even as "slow"
            "bob/slow": _produce_as(address, "bob", "slow") > 0,
        }
    on_both(brokers, alter([(e, [(k, 0.0, True) for k, _, _ in ops]) for e, ops in entries]))
    assert_same(observed)
    assert observed["kafka"] == {"alice/app": True, "alice/fast": False, "bob/slow": False}


def test_create_partitions_under_the_controller_mutation_rate_side_by_side(brokers):
    from trafka.wire.messages import CreatePartitionsRequest as P

    def grow(topic: str, count: int):
        def ask(client: WireClient):
            response = client.request(P(topics=[P.CreatePartitionsTopic(name=topic, count=count, assignments=None)],
                                        timeout_ms=10_000, validate_only=False), 3)
            return [(r.name, r.error_code, r.error_message) for r in response.results], response.throttle_time_ms
        return ask

    for process in brokers.values():
        with WireClient(process.bootstrap) as client:
            _create_topics([("kip599-grow-a", 1), ("kip599-grow-b", 1)], 7)(client)
    _set_quota(brokers, "grower", "controller_mutation_rate", 1.0)
    time.sleep(1)
    observed = {}
    try:
        for name, process in brokers.items():
            with WireClient(process.bootstrap, client_id="grower") as client:
                first, _ = grow("kip599-grow-a", 13)(client)   # 12 partitions: allowed, 1 below zero
                second, throttle_ms = grow("kip599-grow-b", 2)(client)
            observed[name] = (first, second, 0 < throttle_ms <= 1000)
    finally:
        _set_quota(brokers, "grower", "controller_mutation_rate", None)
        for process in brokers.values():
            with WireClient(process.bootstrap) as client:
                _delete_topics(["kip599-grow-a", "kip599-grow-b"], 6)(client)
    assert_same(observed)
    assert observed["kafka"] == ([("kip599-grow-a", 0, None)], [("kip599-grow-b", 89, None)], True)
