"""Record the request frames real clients send to trafka: the golden frames of the fuzz corpus.

``python -m compat_tests.fuzz.capture`` starts a broker process that advertises the address of a
recording proxy, so that clients reach the broker only through the proxy, even after they read
Metadata. The proxy passes bytes through in both directions and cuts the client-to-broker stream into
frames. Then each client runs a set of operations chosen to make it send every API it knows
(producing with each codec, consuming alone and in groups of both protocols, admin operations,
transactions), and the frames are written to ``corpus.json``: a few per (client, api key, version), the
first ones seen, small frames only. At the end the script names the served APIs no client sent; it
needs the clients that ``compat_tests/setup.sh`` installs.

Transactions: each client that has a transactional producer (all but kcat) runs init_transactions, a
transaction that produces, sends offsets for a consumer group and commits, and one that produces and
aborts. The admin side runs as ``kafka-transactions.sh`` does: kafka-python's admin client and the Java
``Admin`` (``TxnAdmin.java`` here) list and describe transactions, describe the producers of a partition
and abort the transaction a producer left open there. Aborting is how clients send WriteTxnMarkers,
otherwise a broker-to-broker request: ``Admin.abortTransaction`` (KIP-664) sends it to the partition's
leader, as a transaction coordinator would.

SASL: the broker also has a SASL_PLAINTEXT listener, advertised through a second recording proxy, with
the users of ``compat_tests/fuzz/sasl.py`` (PLAIN from JAAS, SCRAM-SHA-256/512 written into the data
directory before the start, OAUTHBEARER with unsecured tokens). Each client logs in with every mechanism
it has and makes a request or two: SaslHandshake v1 and SaslAuthenticate as each client sends them (v0
from kcat's older librdkafka and from kafka-python as it talks to a 1.0 broker, v1 from librdkafka,
aiokafka and kafkajs, v2 from the Java client and kafka-python), and SaslHandshake v0 from kafka-python
as it talks to a 0.10 broker (its tokens then travel as bare frames, which are not requests and are not
recorded). The admin clients that have them (confluent-kafka, kafka-python, the Java ``Admin`` in
``SaslClients.java``; kafkajs and aiokafka have none) create a SCRAM user with
AlterUserScramCredentials, describe users with DescribeUserScramCredentials, have refused alterations
answered, log in as the new user and delete it.

ACLs and client quotas: the admin clients that have the APIs create, describe and delete ACLs (confluent-kafka,
kafka-python) and alter and describe client quotas (the Java ``Admin``).

Share groups (KIP-932): confluent-kafka's ``ShareConsumer`` and the Java ``KafkaShareConsumer`` join a share
group, fetch, accept, release and reject records in explicit acknowledgement mode (acknowledgements committed
with ShareAcknowledge and piggy-backed on ShareFetch; confluent-kafka also in implicit mode) and leave; the Java
``Admin`` describes the group and lists, alters and deletes its offsets. The share state APIs
(InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
ReadShareGroupStateSummary) are sent by brokers only: they are recorded between two trafka brokers on a real
ZooKeeper (``share_state_between_brokers``), as client ``trafka-broker``. Which requests cross from one broker to
the other depends on where the partitions' leaders and the share coordinators of their keys land; the script
names those it missed, and another ``--only share --merge 83 84 85 86 87`` adds them.

``--merge`` keeps the committed corpus as it is and adds the new frames of the given api keys (by default
those of the families of steps run, FAMILIES): the capture is not deterministic (topic names, timestamps,
nonces, salts), so a full run rewrites every frame. ``--only FAMILY`` runs one family of steps only
(transactions, sasl, acls, quotas, share): ``python -m compat_tests.fuzz.capture --only sasl --merge`` adds frames of
SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials and AlterUserScramCredentials to the committed
corpus.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import queue
import shutil
import socket
import subprocess
import struct
import sys
import tempfile
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from compat_tests.clients import (
    CLIENTS,
    ClientError,
    JAVA_DIR,
    JS_DRIVER,
    JavaClient,
    KafkajsClient,
    Message,
    _b64,
    shared_java_driver,
)
from compat_tests.fuzz import sasl
from compat_tests.fuzz.corpus import BROKER_CLIENT, CORPUS_PATH, GoldenFrame, load_corpus, save_corpus
from compat_tests.harness import BIND_HOST, BrokerProcess

log = logging.getLogger("capture")

#: Frames larger than this stay out of the corpus (it is committed; mutations cover the large cases).
MAX_FRAME = 8192
#: How many frames to keep per (client, api key, version); data-plane APIs vary more, keep more of them.
KEEP = 3
KEEP_MORE = {0: 8, 1: 4}  # Produce (one per codec and producer kind), Fetch
#: What ``--merge`` adds by default: the requests of a transaction's life. FindCoordinator (for a
#: transactional id, and for the group whose offsets go into a transaction) and InitProducerId (with a
#: transactional id), then AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit,
#: DescribeProducers, DescribeTransactions and ListTransactions. Without a FindCoordinator for a
#: transactional id the broker under fuzzing loads no transaction coordinator, and the other frames would
#: only ever meet COORDINATOR_NOT_AVAILABLE.
TRANSACTION_APIS = (10, 22, 24, 25, 26, 27, 28, 61, 65, 66)
#: What ``--merge`` adds by default with ``--only-sasl``: SaslHandshake, SaslAuthenticate,
#: DescribeUserScramCredentials and AlterUserScramCredentials.
SASL_APIS = (17, 36, 50, 51)
#: DescribeAcls, CreateAcls, DeleteAcls (captured from a broker without an authorizer: the requests are what count).
ACL_APIS = (29, 30, 31)
#: DescribeClientQuotas, AlterClientQuotas.
QUOTA_APIS = (48, 49)
#: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge, DescribeShareGroupOffsets,
#: AlterShareGroupOffsets, DeleteShareGroupOffsets.
SHARE_APIS = (76, 77, 78, 79, 90, 91, 92)
#: InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
#: ReadShareGroupStateSummary: sent by brokers only, recorded between two trafka brokers
#: (`share_state_between_brokers`); ``--only share --merge`` adds them too.
SHARE_STATE_APIS = (83, 84, 85, 86, 87)
#: The Java admin client's transaction operations, run from source (java's single-file launcher).
TXN_ADMIN_JAVA = Path(__file__).with_name("TxnAdmin.java")
TXN_TIMEOUT_MS = 60_000
#: The Java client's SASL logins and SCRAM user administration, and kafkajs's SASL logins.
SASL_CLIENTS_JAVA = Path(__file__).with_name("SaslClients.java")
SASL_CLIENTS_JS = Path(__file__).with_name("sasl_clients.js")


class RecordingProxy:
    """A TCP proxy on 127.0.0.1 that records each client-to-broker frame under the current `label` (into
    `frames`, which several proxies may share).

    After a SaslHandshake v0 request the exchange's tokens travel as bare frames, without a request
    header: those are not requests, and are not recorded (the connection's frames are requests again
    once one decodes as a request)."""

    def __init__(self, frames: list[GoldenFrame] | None = None) -> None:
        self.listener = socket.create_server((BIND_HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.label = "unknown"
        self.frames: list[GoldenFrame] = frames if frames is not None else []
        self._lock = threading.Lock()
        self._closed = False

    def start(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.upstream is not None
            try:
                broker = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._pipe, args=(broker, client), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        pending = bytearray()
        label = self.label
        bare_tokens = False  # after SaslHandshake v0
        try:
            while data := source.recv(65536):
                sink.sendall(data)
                pending += data
                while len(pending) >= 4:
                    (size,) = struct.unpack_from(">i", pending)
                    if len(pending) < 4 + size:
                        break
                    frame = bytes(pending[4 : 4 + size])
                    del pending[: 4 + size]
                    if bare_tokens and not _is_request(frame):
                        continue
                    golden = GoldenFrame.from_frame(label, frame)
                    bare_tokens = (golden.api_key, golden.api_version) == (17, 0)
                    with self._lock:
                        self.frames.append(golden)
        except OSError:
            pass
        finally:
            _shutdown(sink)
            _shutdown(source)

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _shutdown(sink)
            _shutdown(source)


def _decode(frame: bytes) -> object | None:
    """The request a frame holds, or None when it holds none that trafka serves."""
    from trafka.wire.messages import REQUESTS
    from trafka.wire.protocol import decode_request_header

    from compat_tests.fuzz.mutate import served_versions

    try:
        header, body_start = decode_request_header(memoryview(frame))
        low, high = served_versions()[header.api_key]
        if not low <= header.api_version <= high:
            return None
        return REQUESTS[header.api_key].decode(memoryview(frame)[body_start:], header.api_version)
    except Exception:  # noqa: BLE001  (not a request: any decoding failure says so)
        return None


def _is_request(frame: bytes) -> bool:
    return _decode(frame) is not None


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


# --------------------------------------------------------------------------------------- client scenarios

def _messages(prefix: str, count: int = 6) -> list[Message]:
    return [Message(key=f"{prefix}-k{i}".encode(), value=f"{prefix}-value-{i}".encode() * 3,
                    headers=(("h", b"v"),)) for i in range(count)]


def confluent(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewPartitions, NewTopic, OffsetSpec, ResourceType)

    client = CLIENTS["confluent-kafka"](bootstrap)
    quiet = {"logger": logging.getLogger("librdkafka")}
    admin = AdminClient({"bootstrap.servers": bootstrap, **quiet})
    topic = f"golden-ck-{uuid.uuid4().hex[:8]}"

    def wait(futures):
        return [f.result(20) for f in futures.values()]

    with step("create topic"):
        wait(admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})], operation_timeout=10))
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        with step(f"produce {codec}"):
            client.produce(topic, _messages(codec), compression=codec)
    with step("produce acks=1, not idempotent"):
        client.produce(topic, _messages("acks1"), acks=1, **{"enable.idempotence": False})
    with step("produce idempotent"):
        client.produce(topic, _messages("idempotent"), **{"enable.idempotence": True})
    with step("produce acks=0"):
        client.produce(topic, _messages("acks0"), acks=0)
    with step("consume by assignment"):
        client.consume(topic, 12, partitions=[0, 1])
    with step("consume from a position with a leader epoch (OffsetForLeaderEpoch)"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"golden-ck-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False, **quiet})
        consumer.assign([TopicPartition(topic, 0, 2, leader_epoch=0), TopicPartition(topic, 1, 1, leader_epoch=0)])
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.close()
    group = f"golden-ck-group-{uuid.uuid4().hex[:6]}"
    for protocol in ("classic", "consumer"):
        for round_ in range(2):  # the second round resumes from committed offsets (OffsetForLeaderEpoch)
            with step(f"group consume {protocol} #{round_}"):
                settings = {"bootstrap.servers": bootstrap, "group.id": f"{group}-{protocol}",
                            "auto.offset.reset": "earliest", "group.protocol": protocol, **quiet}
                if protocol == "classic":
                    settings["session.timeout.ms"] = 6000
                    settings["heartbeat.interval.ms"] = 500
                consumer = Consumer(settings)
                consumer.subscribe([topic])
                deadline = time.monotonic() + 8
                seen = 0
                while time.monotonic() < deadline and seen < 5:
                    msg = consumer.poll(0.2)
                    if msg is not None and not msg.error():
                        seen += 1
                        consumer.commit(msg, asynchronous=False)
                time.sleep(1.2)  # a heartbeat or two
                consumer.close()
    with step("admin delete records"):
        wait(admin.delete_records([TopicPartition(topic, 0, 2)], request_timeout=20))
    with step("admin describe and alter"):
        wait(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))
        wait(admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]))
        wait(admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "7200000"})]))
        wait(admin.incremental_alter_configs([ConfigResource(
            ResourceType.TOPIC, topic, incremental_configs=[
                ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])]))
    with step("admin describe cluster"):
        admin.describe_cluster(request_timeout=20).result(20)
    with step("admin describe topics"):
        from confluent_kafka import TopicCollection

        wait(admin.describe_topics(TopicCollection([topic]), request_timeout=20))
    with step("admin groups"):
        admin.list_consumer_groups(request_timeout=20).result(20)
        wait(admin.describe_consumer_groups([f"{group}-classic", f"{group}-consumer"], request_timeout=20))
        from confluent_kafka import ConsumerGroupTopicPartitions

        wait(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(f"{group}-classic")]))
        wait(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            f"{group}-classic", [TopicPartition(topic, 0, 1)])]))
        wait(admin.delete_consumer_groups([f"{group}-classic"], request_timeout=20))
    with step("admin list offsets"):
        wait(admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest(),
                                 TopicPartition(topic, 1): OffsetSpec.earliest()}, request_timeout=20))
        wait(admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.for_timestamp(1_700_000_000_000)},
                                request_timeout=20))
    with step("admin elect leaders"):
        from confluent_kafka import ElectionType

        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)], request_timeout=20).result(20)
    with step("admin create partitions"):
        wait(admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=10))
    with step("watermarks"):
        client.watermarks(topic)
    with step("admin delete topic"):
        wait(admin.delete_topics([topic], operation_timeout=10))


def kafka_python(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    client = CLIENTS["kafka-python"](bootstrap)
    topic = f"golden-kp-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    with step("create topic"):
        admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "3600000"})])
    for codec in ("none", "gzip", "lz4", "zstd"):
        with step(f"produce {codec}"):
            client.produce(topic, _messages(codec), compression=codec)
    with step("produce acks=1"):
        client.produce(topic, _messages("acks1"), acks=1, enable_idempotence=False)
    with step("consume and offsets"):
        client.consume(topic, 10, partitions=[0, 1])
        client.watermarks(topic)
        client.offsets_for_time(topic, 1_700_000_000_000)
    group = f"golden-kp-group-{uuid.uuid4().hex[:6]}"
    for round_ in range(2):
        with step(f"group consume #{round_}"):
            consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     heartbeat_interval_ms=300, session_timeout_ms=6000)
            deadline = time.monotonic() + 8
            seen = 0
            while time.monotonic() < deadline and seen < 4:
                for batch in consumer.poll(timeout_ms=200).values():
                    seen += len(batch)
            consumer.commit()
            time.sleep(1)
            consumer.close()
    with step("admin"):
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})])
        admin.describe_cluster()
    with step("admin list config resources"):
        admin.list_config_resources()
    with step("admin describe topic partitions"):
        admin.describe_topic_partitions([topic])
    with step("admin groups"):
        admin.list_groups()
        admin.describe_groups([group])
        admin.list_group_offsets(group)
        admin.delete_group_offsets(group, [TopicPartition(topic, 1)])
        admin.delete_groups([group])
    with step("admin leadership and placement"):
        admin.elect_leaders(0, {topic: [0, 1]}, raise_errors=False)
        admin.alter_partition_reassignments({TopicPartition(topic, 0): [1]})
        admin.list_partition_reassignments()
    with step("admin log dirs"):
        admin.describe_log_dirs()
    with step("admin records and partitions"):
        admin.delete_records({TopicPartition(topic, 0): 1})
        admin.create_partitions({topic: NewPartitions(3)})
        admin.delete_topics([topic])
    admin.close()


def aiokafka(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    client = CLIENTS["aiokafka"](bootstrap)
    topic = f"golden-aio-{uuid.uuid4().hex[:8]}"
    for codec in ("none", "gzip", "lz4", "zstd"):
        with step(f"produce {codec}"):
            client.produce(topic, _messages(codec), compression=codec)
    with step("produce idempotent"):
        client.produce(topic, _messages("idem"), enable_idempotence=True)
    with step("consume and offsets"):
        client.consume(topic, 10)
        client.watermarks(topic)
        client.offsets_for_time(topic, 1_700_000_000_000)

    async def group_consume() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"golden-aio-{uuid.uuid4().hex[:6]}",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    heartbeat_interval_ms=300)
        await consumer.start()
        try:
            await asyncio.wait_for(consumer.getone(), 15)
            await consumer.commit()
            await asyncio.sleep(1)
        finally:
            await consumer.stop()

    with step("group consume"):
        asyncio.run(group_consume())


def kafkajs(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    client = KafkajsClient(bootstrap)
    topic = f"golden-js-{uuid.uuid4().hex[:8]}"
    with step("admin"):
        client.create_topic(topic, 2, configs={"retention.ms": "3600000"})
        client.describe_configs(topic)
        client.partitions(topic)
    for codec in ("none", "gzip"):
        with step(f"produce {codec}"):
            client.produce(topic, _messages(codec), compression=codec)
    with step("produce idempotent"):
        client.produce(topic, _messages("idem"), idempotent=True)
    with step("group consume"):
        client.consume(topic, 18, timeout=20)
    with step("offsets"):
        client.watermarks(topic)
        client.offsets_for_time(topic, 1_700_000_000_000)
    with step("partitions and delete"):
        client.create_partitions(topic, 3)
        client.delete_topic(topic)


def kcat(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    client = CLIENTS["kcat"](bootstrap)
    topic = f"golden-kcat-{uuid.uuid4().hex[:8]}"
    with step("produce"):
        client.produce(topic, [Message(key=b"k", value=b"v" * 20, partition=0) for _ in range(5)])
    with step("consume"):
        client.consume(topic, 5)
    with step("metadata"):
        client.list_topics()


def java(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    client = JavaClient(bootstrap)
    driver = shared_java_driver()
    topic = f"golden-java-{uuid.uuid4().hex[:8]}"
    with step("create topic"):
        client.create_topic(topic, 2, configs={"retention.ms": "3600000"})
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        with step(f"produce {codec}"):
            client.produce(topic, _messages(codec), compression=codec)
    with step("consume and offsets"):
        client.consume(topic, 10, partitions=[0, 1])
        client.watermarks(topic)
        client.offsets_for_time(topic, 1_700_000_000_000)
    group = f"golden-java-group-{uuid.uuid4().hex[:6]}"
    for protocol in ("classic", "consumer"):
        with step(f"group consume {protocol}"):
            driver.call("group_consume", bootstrap=bootstrap, group_id=f"{group}-{protocol}", protocol=protocol,
                        topics=[topic], count=6)
    with step("admin"):
        client.partitions(topic)
        client.describe_configs(topic)
        driver.call("describe_cluster", bootstrap=bootstrap)
        driver.call("list_groups", bootstrap=bootstrap)
        driver.call("describe_groups", bootstrap=bootstrap, groups=[f"{group}-classic", f"{group}-consumer"])
        driver.call("list_group_offsets", bootstrap=bootstrap, group_id=f"{group}-classic")
        driver.call("alter_group_offsets", bootstrap=bootstrap, group_id=f"{group}-classic",
                    offsets=[[topic, 0, 1]])
        driver.call("delete_group_offsets", bootstrap=bootstrap, group_id=f"{group}-classic", topic=topic,
                    partitions=[0])
        driver.call("delete_groups", bootstrap=bootstrap, groups=[f"{group}-classic"])
    with step("partitions and delete"):
        client.create_partitions(topic, 3)
        client.delete_topic(topic)


# --------------------------------------------------------------------------------------- transactions
# For each client: init_transactions; begin, produce to both partitions, send offsets for a consumer
# group, commit; begin, produce, abort. kafka-python and Java then leave a transaction open on partition 0
# and run the admin side on it (list, describe, describe producers, abort: WriteTxnMarkers).

def _txn_names(prefix: str) -> tuple[str, str, str]:
    """(topic, transactional id, group) of one client's transaction steps."""
    tag = uuid.uuid4().hex[:8]
    return f"golden-{prefix}-txn-{tag}", f"golden-{prefix}-txn-id-{tag}", f"golden-{prefix}-txn-group-{tag}"


def _txn_messages(prefix: str, count: int = 4) -> list[Message]:
    return [Message(key=m.key, value=m.value, partition=i % 2) for i, m in enumerate(_messages(prefix, count))]


def confluent_transactions(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    quiet = {"logger": logging.getLogger("librdkafka")}
    topic, transactional_id, group = _txn_names("ck")
    timeout = 20

    def produce(prefix: str) -> None:
        for m in _txn_messages(prefix):
            producer.produce(topic, key=m.key, value=m.value, partition=m.partition)
        if producer.flush(timeout):
            raise RuntimeError("records left unsent")

    with step("transactions: create topic, init"):
        CLIENTS["confluent-kafka"](bootstrap).create_topic(topic, 2)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                             "transaction.timeout.ms": TXN_TIMEOUT_MS, **quiet})
        producer.init_transactions(timeout)
    with step("transactions: produce, send offsets, commit"):
        producer.begin_transaction()
        produce("txn-commit")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                             **quiet})
        try:
            producer.send_offsets_to_transaction([TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 1)],
                                                 consumer.consumer_group_metadata(), timeout)
        finally:
            consumer.close()
        producer.commit_transaction(timeout)
    with step("transactions: produce, abort"):
        producer.begin_transaction()
        produce("txn-abort")
        producer.abort_transaction(timeout)


def kafka_python_transactions(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    import kafka.errors
    from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
    from kafka.admin import AbortTransactionSpec
    from kafka.structs import OffsetAndMetadata

    topic, transactional_id, group = _txn_names("kp")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)

    def produce(prefix: str, partition: int | None = None) -> None:
        futures = [producer.send(topic, key=m.key, value=m.value,
                                 partition=m.partition if partition is None else partition)
                   for m in _txn_messages(prefix)]
        producer.flush(20)
        for future in futures:
            future.get(20)

    with step("transactions: create topic, init"):
        CLIENTS["kafka-python"](bootstrap).create_topic(topic, 2)
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                 transaction_timeout_ms=TXN_TIMEOUT_MS, request_timeout_ms=15000, max_block_ms=15000)
        producer.init_transactions()
    with step("transactions: produce, send offsets, commit"):
        producer.begin_transaction()
        produce("txn-commit")
        producer.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1),
                                              TopicPartition(topic, 1): OffsetAndMetadata(1, "", -1)}, group)
        producer.commit_transaction()
    with step("transactions: produce, abort"):
        producer.begin_transaction()
        produce("txn-abort")
        producer.abort_transaction()
    with step("transactions: leave one open on partition 0"):
        producer.begin_transaction()
        produce("txn-open", partition=0)
    with step("admin transactions: list, describe, describe producers"):
        admin.list_transactions()
        admin.list_transactions(state_filters=["Ongoing"], producer_id_filters=[1, 2])
        admin.list_transactions(duration_filter_ms=1, transactional_id_pattern="golden-.*")
        admin.describe_transactions([transactional_id])
        producers = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        # An id the coordinator never saw: answered TRANSACTIONAL_ID_NOT_FOUND, which kafka-python raises.
        with contextlib.suppress(kafka.errors.TransactionalIdNotFoundError):
            admin.describe_transactions(["golden-no-such-txn"])
    with step("admin abort transaction (WriteTxnMarkers)"):
        partition = TopicPartition(topic, 0)
        open_ = [p for p in producers[partition].active_producers if p.current_transaction_start_offset >= 0]
        if not open_:
            raise RuntimeError(f"no open transaction on {partition}: {producers}")
        for p in open_:
            admin.abort_transaction(AbortTransactionSpec(partition, p.producer_id, p.producer_epoch,
                                                         p.coordinator_epoch))
    with contextlib.suppress(Exception):
        producer.close(timeout=2)
    admin.close()


def aiokafka_transactions(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer, TopicPartition

    topic, transactional_id, group = _txn_names("aio")

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                    transaction_timeout_ms=TXN_TIMEOUT_MS, enable_idempotence=True)

        async def produce(prefix: str) -> None:
            for m in _txn_messages(prefix):
                await producer.send_and_wait(topic, key=m.key, value=m.value, partition=m.partition)

        with step("transactions: create topic, init"):
            CLIENTS["confluent-kafka"](bootstrap).create_topic(topic, 2)  # aiokafka's wrapper has no admin
            await asyncio.wait_for(producer.start(), 20)
        try:
            with step("transactions: produce, send offsets, commit"):
                await producer.begin_transaction()
                await produce("txn-commit")
                await producer.send_offsets_to_transaction({TopicPartition(topic, 0): 2, TopicPartition(topic, 1): 1},
                                                           group)
                await asyncio.wait_for(producer.commit_transaction(), 20)
            with step("transactions: produce, abort"):
                await producer.begin_transaction()
                await produce("txn-abort")
                await asyncio.wait_for(producer.abort_transaction(), 20)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), 5)

    asyncio.run(scenario())


class _KafkajsSession:
    """``node driver.js --session``: one kafkajs transactional producer kept between commands."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(["node", str(JS_DRIVER), "--session"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        cwd=JS_DRIVER.parent)
        self.answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.ids = itertools.count(1)
        if not self._answer().get("ready"):
            raise RuntimeError("the kafkajs session did not start")

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.put(line)
        self.answers.put(None)

    def _answer(self, timeout: float = 40.0) -> dict:
        line = self.answers.get(timeout=timeout)
        if line is None:
            raise RuntimeError("the kafkajs session exited")
        return json.loads(line)

    def call(self, op: str, **arguments: object) -> object:
        command_id = next(self.ids)
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"id": command_id, "op": op, **arguments}) + "\n")
        self.process.stdin.flush()
        output = self._answer()
        if not output["ok"]:
            raise RuntimeError(f"{op}: {output['error']}")
        return output["result"]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("txn_close", name="p")
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _driver_messages(prefix: str) -> list[dict[str, object]]:
    return [{"key": _b64(m.key), "value": _b64(m.value), "partition": m.partition} for m in _txn_messages(prefix)]


def kafkajs_transactions(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    topic, transactional_id, group = _txn_names("js")
    session = None
    try:
        with step("transactions: create topic, connect"):
            KafkajsClient(bootstrap).create_topic(topic, 2)
            session = _KafkajsSession()
            session.call("txn_open", name="p", bootstrap=bootstrap, transactional_id=transactional_id,
                         transaction_timeout_ms=TXN_TIMEOUT_MS)
        with step("transactions: init, produce, send offsets, commit"):  # kafkajs inits on its first begin
            session.call("txn_begin", name="p")
            session.call("txn_send", name="p", topic=topic, messages=_driver_messages("txn-commit"))
            session.call("txn_send_offsets", name="p", group_id=group, offsets=[[topic, 0, 2], [topic, 1, 1]])
            session.call("txn_commit", name="p")
        with step("transactions: produce, abort"):
            session.call("txn_begin", name="p")
            session.call("txn_send", name="p", topic=topic, messages=_driver_messages("txn-abort"))
            session.call("txn_abort", name="p")
    finally:
        if session is not None:
            session.close()


def java_transactions(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    driver = shared_java_driver()
    topic, transactional_id, group = _txn_names("java")
    name = f"golden-{uuid.uuid4().hex[:6]}"
    try:
        with step("transactions: create topic, init"):
            JavaClient(bootstrap).create_topic(topic, 2)
            driver.call("txn_open", name=name, bootstrap=bootstrap, transactional_id=transactional_id,
                        settings={"transaction.timeout.ms": str(TXN_TIMEOUT_MS)})
        with step("transactions: produce, send offsets, commit"):
            driver.call("txn_begin", name=name)
            driver.call("txn_send", name=name, topic=topic, messages=_driver_messages("txn-commit"))
            driver.call("txn_send_offsets", name=name, group_id=group, offsets=[[topic, 0, 2], [topic, 1, 1]])
            driver.call("txn_commit", name=name)
        with step("transactions: produce, abort"):
            driver.call("txn_begin", name=name)
            driver.call("txn_send", name=name, topic=topic, messages=_driver_messages("txn-abort"))
            driver.call("txn_abort", name=name)
        with step("transactions: leave one open on partition 0"):
            driver.call("txn_begin", name=name)
            driver.call("txn_send", name=name, topic=topic,
                        messages=[{**m, "partition": 0} for m in _driver_messages("txn-open")])
        with step("admin transactions: list, describe, describe producers, abort (TxnAdmin.java)"):
            _java_txn_admin(bootstrap, topic, transactional_id)
    finally:
        with contextlib.suppress(Exception):
            driver.call("txn_close", name=name, timeout_ms=2000)


def _java_txn_admin(bootstrap: str, topic: str, transactional_id: str) -> None:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not installed: run compat_tests/setup.sh")
    completed = subprocess.run(
        [java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m",
         f"-Dlog4j2.configurationFile={JAVA_DIR / 'log4j2.properties'}", "-Dcompat.java.log.level=warn",
         "-cp", str(JAVA_DIR / "lib" / "*"), str(TXN_ADMIN_JAVA), bootstrap, topic, transactional_id],
        capture_output=True, text=True, timeout=120)
    log.debug("TxnAdmin.java:\n%s%s", completed.stdout, completed.stderr)
    if completed.returncode != 0 or "aborted: " not in completed.stdout:
        raise RuntimeError(f"TxnAdmin.java exited with {completed.returncode}:\n{completed.stdout}"
                           f"{completed.stderr[-3000:]}")


TRANSACTION_SCENARIOS: dict[str, Callable[[str, Callable[[str], contextlib.AbstractContextManager]], None]] = {
    "confluent-kafka": confluent_transactions,
    "kafka-python": kafka_python_transactions,
    "aiokafka": aiokafka_transactions,
    "kafkajs": kafkajs_transactions,
    "java": java_transactions,
}


# --------------------------------------------------------------------------------------- SASL
# Each client logs in over the SASL_PLAINTEXT listener with each mechanism it has (compat_tests/fuzz/sasl.py
# names the users) and makes a request or two; kafka-python also logs in as it would to the older brokers it
# knows (SaslHandshake v0 and bare tokens; SaslHandshake v1 and SaslAuthenticate v0). The admin clients that
# can (confluent-kafka, kafka-python, Java) then create a SCRAM user, describe users, have refused alterations
# answered, log in as the new user and delete it.

def _sasl_user(prefix: str) -> str:
    return f"golden-{prefix}-{uuid.uuid4().hex[:6]}"


def confluent_sasl(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)

    quiet = {"logger": logging.getLogger("librdkafka")}
    topic = f"golden-ck-sasl-{uuid.uuid4().hex[:8]}"
    for mechanism, user, password in sasl.LOGINS:
        with step(f"SASL {mechanism}: metadata, produce"):
            settings = {**sasl.confluent_settings(bootstrap, mechanism, user, password), **quiet}
            AdminClient(settings).list_topics(timeout=20)
            producer = Producer(settings)
            producer.produce(topic, b"golden")
            if producer.flush(20):
                raise RuntimeError("the record was not delivered")
    admin = AdminClient({**sasl.confluent_settings(bootstrap, *sasl.ADMIN_LOGIN), **quiet})
    user = _sasl_user("ck")
    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    with step("SCRAM users: create"):
        for future in admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(user, ScramCredentialInfo(sha256, 8192), b"golden-secret")]).values():
            future.result(20)
        for future in admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(user, ScramCredentialInfo(sha512, 4096), b"golden-secret",
                                             b"golden-salt-0123")]).values():
            future.result(20)
    with step("SCRAM users: describe"):
        admin.describe_user_scram_credentials().result(20)
        for future in admin.describe_user_scram_credentials([user]).values():
            future.result(20)
        for future in admin.describe_user_scram_credentials([user, "golden-nobody"]).values():
            with contextlib.suppress(KafkaException):
                future.result(20)
    with step("SCRAM users: refused alterations"):
        futures = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("golden-weak", ScramCredentialInfo(sha256, 1000), b"weak"),
            UserScramCredentialDeletion("golden-nobody", sha512)])
        for future in futures.values():
            with contextlib.suppress(KafkaException):
                future.result(20)
    with step("SCRAM users: the new user logs in"):
        AdminClient({**sasl.confluent_settings(bootstrap, "SCRAM-SHA-256", user, "golden-secret"),
                     **quiet}).list_topics(timeout=20)
    with step("SCRAM users: delete"):  # one alteration per user and request, as Kafka requires
        for mechanism in (sha256, sha512):
            for future in admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, mechanism)]).values():
                future.result(20)


class _UnsecuredTokens:
    """A token provider of kafka-python's: unsecured tokens for one principal."""

    def __init__(self, principal: str) -> None:
        self.principal = principal

    def token(self) -> str:
        return sasl.unsecured_token(self.principal)

    def extensions(self) -> dict[str, str]:
        return {}


def _kafka_python_settings(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, object]:
    settings: dict[str, object] = {"bootstrap_servers": bootstrap, "security_protocol": sasl.LISTENER,
                                   "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        settings["sasl_oauth_token_provider"] = type("Tokens", (_UnsecuredTokens, AbstractTokenProvider), {})(user)
    else:
        settings.update(sasl_plain_username=user, sasl_plain_password=password)
    return settings


def kafka_python_sasl(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

    topic = f"golden-kp-sasl-{uuid.uuid4().hex[:8]}"
    for mechanism, user, password in sasl.LOGINS:
        with step(f"SASL {mechanism}: metadata, produce"):
            settings = _kafka_python_settings(bootstrap, mechanism, user, password)
            admin = KafkaAdminClient(request_timeout_ms=15000, **settings)
            try:
                admin.list_topics()
            finally:
                admin.close()
            producer = KafkaProducer(**settings)
            try:
                producer.send(topic, b"golden").get(20)
            finally:
                producer.close(5)
    for api_version in ((0, 10, 1), (1, 0, 0)):
        for mechanism, user, password in sasl.LOGINS[:3]:
            with step(f"SASL {mechanism} as to a broker {'.'.join(map(str, api_version))}: metadata"):
                consumer = KafkaConsumer(api_version=api_version,
                                         **_kafka_python_settings(bootstrap, mechanism, user, password))
                try:
                    consumer.topics()
                finally:
                    consumer.close()
    admin = KafkaAdminClient(request_timeout_ms=15000, **_kafka_python_settings(bootstrap, *sasl.ADMIN_LOGIN))
    user = _sasl_user("kp")
    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    # One alteration per user and request: Kafka refuses a user altered twice in one request.
    alter = admin.alter_user_scram_credentials
    with step("SCRAM users: create"):
        errors = {**alter([UserScramCredentialUpsertion(user, sha256, "golden-secret", iterations=8192)]),
                  **alter([UserScramCredentialUpsertion(user, sha512, "golden-secret")])}
        if any(errors.values()):
            raise RuntimeError(f"not created: {errors}")
    with step("SCRAM users: describe"):
        admin.describe_user_scram_credentials()
        admin.describe_user_scram_credentials([user, "golden-nobody"])
    with step("SCRAM users: refused alterations"):
        alter([UserScramCredentialUpsertion("golden-weak", sha256, "weak", iterations=1000),
               UserScramCredentialDeletion("golden-nobody", sha512)])
        alter([UserScramCredentialDeletion(user, sha256), UserScramCredentialDeletion(user, sha512)])
    with step("SCRAM users: the new user logs in"):
        newcomer = KafkaAdminClient(request_timeout_ms=15000,
                                    **_kafka_python_settings(bootstrap, "SCRAM-SHA-512", user, "golden-secret"))
        newcomer.list_topics()
        newcomer.close()
    with step("SCRAM users: delete"):
        errors = {**alter([UserScramCredentialDeletion(user, sha256)]),
                  **alter([UserScramCredentialDeletion(user, sha512)])}
        if any(errors.values()):
            raise RuntimeError(f"not deleted: {errors}")
    admin.close()


def aiokafka_sasl(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def __init__(self, principal: str) -> None:
            self.principal = principal

        async def token(self) -> str:
            return sasl.unsecured_token(self.principal)

    topic = f"golden-aio-sasl-{uuid.uuid4().hex[:8]}"

    async def login(mechanism: str, user: str, password: str) -> None:
        settings: dict[str, object] = {"bootstrap_servers": bootstrap, "security_protocol": sasl.LISTENER,
                                       "sasl_mechanism": mechanism}
        if mechanism == "OAUTHBEARER":
            settings["sasl_oauth_token_provider"] = Tokens(user)
        else:
            settings.update(sasl_plain_username=user, sasl_plain_password=password)
        producer = AIOKafkaProducer(**settings)
        await asyncio.wait_for(producer.start(), 20)
        try:
            await asyncio.wait_for(producer.send_and_wait(topic, b"golden"), 20)
        finally:
            await producer.stop()

    for mechanism, user, password in sasl.LOGINS:
        with step(f"SASL {mechanism}: produce"):
            asyncio.run(login(mechanism, user, password))


def kafkajs_sasl(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    logins = [{"mechanism": mechanism.lower(), "token": sasl.unsecured_token(user)} if mechanism == "OAUTHBEARER"
              else {"mechanism": mechanism.lower(), "username": user, "password": password}
              for mechanism, user, password in sasl.LOGINS]
    with step("SASL logins: metadata, produce (sasl_clients.js)"):
        completed = subprocess.run(["node", str(SASL_CLIENTS_JS), bootstrap, f"golden-js-sasl-{uuid.uuid4().hex[:8]}",
                                    json.dumps(logins)], capture_output=True, text=True, timeout=120)
        log.debug("sasl_clients.js:\n%s%s", completed.stdout, completed.stderr)
        if completed.returncode != 0:
            raise RuntimeError(f"sasl_clients.js exited with {completed.returncode}:\n{completed.stdout}"
                               f"{completed.stderr[-3000:]}")


def kcat_sasl(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    executable = shutil.which("kcat")
    if executable is None:
        raise RuntimeError("kcat is not installed: run compat_tests/setup.sh")
    for mechanism, user, password in sasl.LOGINS:
        with step(f"SASL {mechanism}: metadata"):
            settings = sasl.confluent_settings(bootstrap, mechanism, user, password)
            arguments = [part for name, value in settings.items() if name != "bootstrap.servers"
                         for part in ("-X", f"{name}={value}")]
            completed = subprocess.run([executable, "-b", bootstrap, "-m", "5", "-L", *arguments],
                                       capture_output=True, text=True, timeout=30)
            # librdkafka before 2.6.1 (kcat 1.7.1 has 2.0.2) puts its own nonce twice into SCRAM's final
            # message; Kafka 4 refuses that (its nonce check is exact since CVE-2024-56128), and so does
            # trafka. The frames are what the client sends all the same.
            refused = mechanism.startswith("SCRAM") and "invalid credentials" in completed.stderr
            if completed.returncode != 0 and not refused:
                raise RuntimeError(f"kcat exited with {completed.returncode}: {completed.stderr[-2000:]}")


def java_sasl(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    java_ = shutil.which("java")
    if java_ is None:
        raise RuntimeError("java is not installed: run compat_tests/setup.sh")
    with step("SASL logins, SCRAM users (SaslClients.java)"):
        completed = subprocess.run(
            [java_, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m",
             f"-Dlog4j2.configurationFile={JAVA_DIR / 'log4j2.properties'}", "-Dcompat.java.log.level=warn",
             "-cp", str(JAVA_DIR / "lib" / "*"), str(SASL_CLIENTS_JAVA), bootstrap],
            capture_output=True, text=True, timeout=180)
        log.debug("SaslClients.java:\n%s%s", completed.stdout, completed.stderr)
        if completed.returncode != 0 or "deleted: " not in completed.stdout:
            raise RuntimeError(f"SaslClients.java exited with {completed.returncode}:\n{completed.stdout}"
                               f"{completed.stderr[-3000:]}")


SASL_SCENARIOS: dict[str, Callable[[str, Callable[[str], contextlib.AbstractContextManager]], None]] = {
    "confluent-kafka": confluent_sasl,
    "kafka-python": kafka_python_sasl,
    "aiokafka": aiokafka_sasl,
    "kafkajs": kafkajs_sasl,
    "kcat": kcat_sasl,
    "java": java_sasl,
}


# --------------------------------------------------------------------------------------- ACLs
# The admin clients that have them create ACLs (literal and prefixed, allowed and denied), describe them
# with filters of every kind and delete them.

def confluent_acls(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": logging.getLogger("librdkafka")})
    bindings = [AclBinding(ResourceType.TOPIC, "golden-acl", ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.GROUP, "golden-", ResourcePatternType.PREFIXED, "User:*", "10.0.0.1",
                           AclOperation.ALL, AclPermissionType.DENY)]
    filters = [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                AclPermissionType.ANY),
               AclBindingFilter(ResourceType.TOPIC, "golden-acl-1", ResourcePatternType.MATCH, "User:alice", None,
                                AclOperation.READ, AclPermissionType.ALLOW)]
    with step("ACLs: create, describe, delete"):
        for future in admin.create_acls(bindings, request_timeout=20).values():
            with contextlib.suppress(KafkaException):
                future.result(20)
        for acl_filter in filters:
            with contextlib.suppress(KafkaException):
                admin.describe_acls(acl_filter, request_timeout=20).result(20)
        for future in admin.delete_acls(filters, request_timeout=20).values():
            with contextlib.suppress(KafkaException):
                future.result(20)


def kafka_python_acls(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    acl = ACL(principal="User:bob", host="*", operation=ACLOperation.WRITE, permission_type=ACLPermissionType.ALLOW,
              resource_pattern=ResourcePattern(ResourceType.TRANSACTIONAL_ID, "golden-tx",
                                               ACLResourcePatternType.LITERAL))
    acl_filter = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    try:
        with step("ACLs: create, describe, delete"):
            with contextlib.suppress(Exception):
                admin.create_acls([acl])
            with contextlib.suppress(Exception):
                admin.describe_acls(acl_filter)
            with contextlib.suppress(Exception):
                admin.delete_acls([acl_filter])
    finally:
        admin.close()


ACL_SCENARIOS: dict[str, Callable[[str, Callable[[str], contextlib.AbstractContextManager]], None]] = {
    "confluent-kafka": confluent_acls,
    "kafka-python": kafka_python_acls,
}


# --------------------------------------------------------------------------------------- client quotas
# The Java admin client (the only client here that has the quota APIs) sets quotas on users, client ids,
# their defaults and an address, describes them with strict and loose filters and removes them.

def java_quotas(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    java = JavaClient(bootstrap)
    entries = [{"entity": [["user", "golden-user"], ["client-id", "golden-app"]],
                "ops": [["producer_byte_rate", 65536], ["request_percentage", 25.0]]},
               {"entity": [["client-id", None]], "ops": [["consumer_byte_rate", 1048576]]},
               {"entity": [["ip", "10.0.0.7"]], "ops": [["connection_creation_rate", 3]]}]
    with step("client quotas: alter, describe, remove"):
        java.call("alter_client_quotas", entries=entries)
        java.call("alter_client_quotas", entries=entries[:1], validate_only=True)
        java.call("describe_client_quotas", components=[["user", "exact", "golden-user"]])
        java.call("describe_client_quotas", components=[["client-id", "specified"]], strict=True)
        java.call("describe_client_quotas", components=[["client-id", "default"]])
        java.call("alter_client_quotas", entries=[
            {"entity": entry["entity"], "ops": [[key, None] for key, _ in entry["ops"]]} for entry in entries])


QUOTA_SCENARIOS: dict[str, Callable[[str, Callable[[str], contextlib.AbstractContextManager]], None]] = {
    "java": java_quotas,
}


# --------------------------------------------------------------------------------------- share groups
# Share consumers (KIP-932) join a share group (ShareGroupHeartbeat), fetch (ShareFetch), acknowledge records
# one by one in explicit mode, accepting, releasing and rejecting them, on a commit (ShareAcknowledge) and
# piggy-backed on the next ShareFetch, and leave. The Java Admin then describes the group (ShareGroupDescribe)
# and lists, alters and deletes its offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets,
# DeleteShareGroupOffsets).

def _share_topic(bootstrap: str, prefix: str) -> tuple[str, str]:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"golden-share-{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": logging.getLogger("librdkafka")})
    for future in admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10).values():
        future.result(20)
    return topic, f"{topic}-group"


def _share_produce(bootstrap: str, topic: str, prefix: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "logger": logging.getLogger("librdkafka")})
    for message in _messages(prefix):
        producer.produce(topic, key=message.key, value=message.value, partition=0)
    producer.flush(10)


def confluent_share(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    topic, group = _share_topic(bootstrap, "ck")
    quiet = {"logger": logging.getLogger("librdkafka")}
    for mode in ("explicit", "implicit"):
        with step(f"share consumer, {mode} acknowledgement: join, fetch, acknowledge, leave"):
            consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                      "share.acknowledgement.mode": mode, **quiet})
            try:
                consumer.subscribe([topic])
                for _ in range(10):  # joined and assigned: no records yet
                    consumer.poll(0.5)
                _share_produce(bootstrap, topic, f"share-{mode}")
                kinds = itertools.cycle([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT])
                deadline = time.monotonic() + 20
                got = 0
                while got < 6 and time.monotonic() < deadline:
                    messages = consumer.poll(0.5)
                    got += sum(m.error() is None for m in messages)
                    if mode == "explicit" and messages:
                        for message in messages:
                            consumer.acknowledge(message, next(kinds))
                        consumer.commit_sync()
                for _ in range(4):  # released records again, accepted: piggy-backed on the next ShareFetch
                    for message in consumer.poll(0.5):
                        if mode == "explicit":
                            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            finally:
                consumer.close()


def java_share(bootstrap: str, step: Callable[[str], contextlib.AbstractContextManager]) -> None:
    driver = shared_java_driver()
    topic, group = _share_topic(bootstrap, "java")
    name = f"{group}-consumer"
    with step("share consumer, explicit acknowledgement: join, fetch, release, reject, accept, leave"):
        driver.call("share_open", bootstrap=bootstrap, name=name, group_id=group, topics=[topic],
                    settings={"share.acknowledgement.mode": "explicit"})
        try:
            for _ in range(4):  # joined and assigned
                driver.call("share_poll", bootstrap=bootstrap, name=name, timeout_ms=1000)
            _share_produce(bootstrap, topic, "share-java")
            # released (acknowledged with commitSync: ShareAcknowledge), delivered again and rejected, then
            # accepted without a commit: piggy-backed on the next ShareFetch
            driver.call("share_poll", bootstrap=bootstrap, name=name, timeout_ms=10000, ack="release", commit=True)
            driver.call("share_poll", bootstrap=bootstrap, name=name, timeout_ms=10000, ack="reject", commit=True)
            _share_produce(bootstrap, topic, "share-java-more")
            driver.call("share_poll", bootstrap=bootstrap, name=name, timeout_ms=10000, ack="accept")
            driver.call("share_poll", bootstrap=bootstrap, name=name, timeout_ms=1000)
            with step("describe the share group"):
                driver.call("describe_share_groups", bootstrap=bootstrap, group_ids=[group])
        finally:
            driver.call("share_close", bootstrap=bootstrap, name=name)
    with step("share group offsets: list, alter, delete"):
        driver.call("describe_share_groups", bootstrap=bootstrap, group_ids=[group])
        driver.call("list_share_group_offsets", bootstrap=bootstrap, group_id=group)
        driver.call("alter_share_group_offsets", bootstrap=bootstrap, group_id=group,
                    offsets=[[topic, 0, 1], [topic, 1, 0]])
        driver.call("list_share_group_offsets", bootstrap=bootstrap, group_id=group)
        driver.call("delete_share_group_offsets", bootstrap=bootstrap, group_id=group, topics=[topic])


SHARE_SCENARIOS: dict[str, Callable[[str, Callable[[str], contextlib.AbstractContextManager]], None]] = {
    "confluent-kafka": confluent_share,
    "java": java_share,
}


# The share state APIs (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
# DeleteShareGroupState, ReadShareGroupStateSummary) are sent by brokers only: a share partition's leader and a
# share group's coordinator send them to the share coordinator of the key (broker/share/persister.py). Two trafka
# brokers on a real ZooKeeper, each advertising the address of a recording proxy, so that they reach each other
# through the proxies; frames recorded there are labelled BROKER_CLIENT. Share consumers read a topic whose
# partitions and share state keys are spread over both brokers, and the Java Admin lists, alters and deletes the
# group's offsets, so that each of these requests crosses from one broker to the other.

SHARE_STATE_PARTITIONS = 8


def share_state_between_brokers(work_dir: Path) -> list[GoldenFrame]:
    """The share state requests two trafka brokers sent each other while share consumers and the Java Admin used
    a share group (see above)."""
    from compat_tests.cluster import CLUSTER_SETTINGS, wait_until_registered
    from compat_tests.cluster import Cluster
    from compat_tests.zookeeper import ZooKeeperServer

    frames: list[GoldenFrame] = []
    zookeeper = ZooKeeperServer(work_dir / "zookeeper", name="capture-zookeeper")
    zookeeper.start()
    proxies = [RecordingProxy(frames), RecordingProxy(frames)]
    brokers: list[BrokerProcess] = []
    connect = f"{zookeeper.connect_string}/trafka-capture"
    try:
        ports = []
        for _ in proxies:
            with socket.create_server((BIND_HOST, 0)) as probe:
                ports.append(probe.getsockname()[1])
        for node_id, (proxy, port) in enumerate(zip(proxies, ports, strict=True), start=1):
            proxy.label = BROKER_CLIENT
            brokers.append(BrokerProcess(work_dir / f"broker{node_id}", name=f"capture-broker{node_id}", overrides={
                **CLUSTER_SETTINGS, "broker.id": node_id, "zookeeper.connect": connect,
                "listeners": f"PLAINTEXT://{BIND_HOST}:{port}",
                "advertised.listeners": f"PLAINTEXT://{BIND_HOST}:{proxy.port}",
                "offsets.topic.replication.factor": 1, "group.initial.rebalance.delay.ms": 0,
                "share.coordinator.state.topic.num.partitions": SHARE_STATE_PARTITIONS,
                "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1,
                "group.share.heartbeat.interval.ms": 1000, "group.share.min.heartbeat.interval.ms": 1000}))
            proxy.start((BIND_HOST, port))
        for broker, port in zip(brokers, ports, strict=True):
            broker.start(port)
        wait_until_registered(Cluster(brokers))
        bootstrap = ",".join(f"{BIND_HOST}:{proxy.port}" for proxy in proxies)
        _share_state_scenario(bootstrap)
        time.sleep(1)
    finally:
        for proxy in proxies:
            proxy.close()
        for broker in brokers:
            broker.stop()
        zookeeper.close()
    for broker in brokers:
        if "Traceback" in broker.log_text():
            print(f"{broker.name} logged a traceback:\n{broker.log_tail(80)}", file=sys.stderr)
    state = [frame for frame in frames if frame.api_key in SHARE_STATE_APIS]
    print(f"  {BROKER_CLIENT}: {len(frames)} frames between the brokers, of the share state APIs: "
          + ", ".join(f"{GoldenFrame.from_frame(BROKER_CLIENT, f.frame).name.split(' from ')[0]}"
                      for f in {f.api_key: f for f in state}.values()), file=sys.stderr)
    return state


def _share_state_scenario(bootstrap: str) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    quiet = {"logger": logging.getLogger("librdkafka")}
    topic = f"golden-share-state-{uuid.uuid4().hex[:8]}"
    group = f"{topic}-group"
    admin = AdminClient({"bootstrap.servers": bootstrap, **quiet})
    for future in admin.create_topics([NewTopic(topic, SHARE_STATE_PARTITIONS, 1)], operation_timeout=10).values():
        future.result(20)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit", **quiet})
    try:
        consumer.subscribe([topic])
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **quiet})
        kinds = itertools.cycle([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT])
        deadline = time.monotonic() + 40
        got = 0
        # Records go to every partition until the consumer, once assigned, has some of each (those produced
        # before its share partitions start are not delivered); their state is written with each acknowledgement.
        while got < 3 * SHARE_STATE_PARTITIONS and time.monotonic() < deadline:
            for partition in range(SHARE_STATE_PARTITIONS):
                producer.produce(topic, value=b"state-%d-%d" % (partition, got), partition=partition)
            producer.flush(10)
            messages = consumer.poll(1.0)
            got += sum(m.error() is None for m in messages)
            for message in messages:
                consumer.acknowledge(message, next(kinds))
            if messages:
                consumer.commit_sync()
        for _ in range(4):
            for message in consumer.poll(0.5):
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        print(f"  {BROKER_CLIENT}: a share consumer between two brokers: {got} records", file=sys.stderr)
    finally:
        consumer.close()
    driver = shared_java_driver()
    # DescribeShareGroupOffsets: ReadShareGroupStateSummary; AlterShareGroupOffsets: InitializeShareGroupState;
    # DeleteShareGroupOffsets: DeleteShareGroupState, each from the group's coordinator.
    steps = [("list_share_group_offsets", {}),
             ("alter_share_group_offsets", {"offsets": [[topic, p, 1] for p in range(SHARE_STATE_PARTITIONS)]}),
             ("list_share_group_offsets", {}),
             ("delete_share_group_offsets", {"topics": [topic]})]
    for op, arguments in steps:
        try:
            driver.call(op, bootstrap=bootstrap, group_id=group, **arguments)
        except ClientError as exc:
            print(f"  {BROKER_CLIENT}: {op}: failed: {exc!r:.300}", file=sys.stderr)


SCENARIOS: dict[str, Callable[[str, Callable[[str], contextlib.AbstractContextManager]], None]] = {
    "confluent-kafka": confluent,
    "kafka-python": kafka_python,
    "aiokafka": aiokafka,
    "kafkajs": kafkajs,
    "kcat": kcat,
    "java": java,
}

#: The families of steps each client runs after its main scenario (``--only`` runs one of them alone): their
#: scenarios by client, whether they speak to the SASL listener, and the APIs ``--merge`` adds for them.
FAMILIES: dict[str, tuple[dict, bool, tuple[int, ...]]] = {
    "transactions": (TRANSACTION_SCENARIOS, False, TRANSACTION_APIS),
    "sasl": (SASL_SCENARIOS, True, SASL_APIS),
    "acls": (ACL_SCENARIOS, False, ACL_APIS),
    "quotas": (QUOTA_SCENARIOS, False, QUOTA_APIS),
    "share": (SHARE_SCENARIOS, False, SHARE_APIS + SHARE_STATE_APIS),
}


# --------------------------------------------------------------------------------------- selection

def _body(frame: GoldenFrame) -> bytes:
    """The frame without its correlation id."""
    return frame.frame[:4] + frame.frame[8:]


def select(frames: list[GoldenFrame]) -> list[GoldenFrame]:
    """The first few distinct small frames of each (client, api key, version), and for SaslHandshake and
    SaslAuthenticate of each mechanism and step (`sasl.sasl_kind`).

    A frame whose body does not decode exactly, to its last byte, stays out (and is named on stderr): the
    corpus's frames decode and encode back to the same bytes (wire/tests/test_golden_frames.py), and trailing
    bytes, which Kafka and trafka ignore, would not come back. librdkafka sends one after its
    AlterUserScramCredentials requests."""
    kept: dict[tuple[str, int, int, str], list[GoldenFrame]] = {}
    seen_bodies: set[tuple[str, bytes]] = set()
    left_out: set[str] = set()
    for frame in frames:
        if len(frame.frame) > MAX_FRAME:
            continue
        if _decode(frame.frame) is None:
            if frame.name not in left_out:
                left_out.add(frame.name)
                print(f"left out: {frame.name}, whose body does not decode to its last byte: {frame.frame.hex()}",
                      file=sys.stderr)
            continue
        # The same request again with another correlation id adds nothing.
        body = _body(frame)
        if (frame.client, body) in seen_bodies:
            continue
        group = kept.setdefault((frame.client, frame.api_key, frame.api_version, sasl.sasl_kind(frame)), [])
        if len(group) < KEEP_MORE.get(frame.api_key, KEEP):
            group.append(frame)
            seen_bodies.add((frame.client, body))
    chosen = {id(f) for group in kept.values() for f in group}
    return [f for f in frames if id(f) in chosen]


def missing_apis(frames: list[GoldenFrame]) -> list[str]:
    """Served APIs (at any version) that no frame of the corpus exercises."""
    from trafka.broker.handlers import REGISTRY

    sent = {f.api_key for f in frames}
    return [h.api_key.name for h in REGISTRY if h.api_key not in sent]


def merge(committed: list[GoldenFrame], frames: list[GoldenFrame], api_keys: set[int]) -> list[GoldenFrame]:
    """The committed frames as they are, then the new frames of ``api_keys`` not already among them
    (chosen as `select` chooses)."""
    known = {(f.client, _body(f)) for f in committed}
    fresh = [f for f in frames if f.api_key in api_keys and (f.client, _body(f)) not in known]
    return committed + select(fresh)


def capture(clients: list[str], *, work_dir: Path, only: str | None = None) -> list[GoldenFrame]:
    """Run the clients' scenarios (``only``: the steps of that family of FAMILIES alone) against a broker with
    a PLAINTEXT and a SASL_PLAINTEXT listener, each behind a recording proxy; returns the frames recorded, in
    order."""
    frames: list[GoldenFrame] = []
    proxy, sasl_proxy = RecordingProxy(frames), RecordingProxy(frames)
    data_dir = work_dir / "data"
    sasl.write_scram_users(data_dir)
    # The broker's ready line shows the advertised (proxy's) address: choose its listening ports here.
    with socket.create_server((BIND_HOST, 0)) as probe, socket.create_server((BIND_HOST, 0)) as sasl_probe:
        port, sasl_port = probe.getsockname()[1], sasl_probe.getsockname()[1]
    broker = BrokerProcess(data_dir, name="capture",
                           overrides={**sasl.sasl_overrides(port, sasl_port, advertised=(proxy.port, sasl_proxy.port)),
                                      "group.initial.rebalance.delay.ms": 0,
                                      "group.share.heartbeat.interval.ms": 1000,
                                      "group.share.min.heartbeat.interval.ms": 1000})
    broker.start(port)
    proxy.start((BIND_HOST, port))
    sasl_proxy.start((BIND_HOST, sasl_port))
    bootstrap = f"{BIND_HOST}:{proxy.port}"
    sasl_bootstrap = f"{BIND_HOST}:{sasl_proxy.port}"
    try:
        for name in clients:
            proxy.label = sasl_proxy.label = name

            @contextlib.contextmanager
            def step(what: str, name: str = name) -> Iterator[None]:
                started = time.monotonic()
                try:
                    yield
                except Exception as exc:  # a step that fails still leaves its frames behind
                    print(f"  {name}: {what}: failed: {exc!r:.300}", file=sys.stderr)
                    log.debug("%s", traceback.format_exc())
                else:
                    print(f"  {name}: {what}: {time.monotonic() - started:.1f} s", file=sys.stderr)

            print(f"{name}:", file=sys.stderr)
            if only is None:
                SCENARIOS[name](bootstrap, step)
            for family, (scenarios, over_sasl, _apis) in FAMILIES.items():
                if name in scenarios and only in (None, family):
                    scenarios[name](sasl_bootstrap if over_sasl else bootstrap, step)
            time.sleep(0.5)
    finally:
        proxy.close()
        sasl_proxy.close()
        broker.stop()
    if "Traceback" in broker.log_text():
        print(f"the broker logged a traceback during the capture:\n{broker.log_tail(80)}", file=sys.stderr)
    if only in (None, "share"):
        print(f"{BROKER_CLIENT}:", file=sys.stderr)
        started = time.monotonic()
        try:
            frames += share_state_between_brokers(work_dir / "share-state")
        except Exception as exc:  # the frames of the clients stay
            print(f"  {BROKER_CLIENT}: share state between two brokers: failed: {exc!r:.300}", file=sys.stderr)
            log.debug("%s", traceback.format_exc())
        else:
            print(f"  {BROKER_CLIENT}: share state between two brokers: {time.monotonic() - started:.1f} s",
                  file=sys.stderr)
    return list(frames)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CORPUS_PATH)
    parser.add_argument("--clients", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--only", choices=list(FAMILIES),
                        help="run one family of steps of each client only: transactions, sasl (logins, SCRAM user "
                             "administration), acls (CreateAcls, DescribeAcls, DeleteAcls) or quotas "
                             "(DescribeClientQuotas, AlterClientQuotas) or share (share consumers and share group "
                             "administration)")
    parser.add_argument("--merge", nargs="*", type=int, metavar="API_KEY",
                        help="keep the frames of --out as they are and add the new frames of these api keys "
                             "(none given: the APIs of the families of steps run, "
                             + "; ".join(f"{family} {' '.join(map(str, apis))}"
                                         for family, (_, _, apis) in FAMILIES.items()) + ")")
    args = parser.parse_args(argv)
    committed = load_corpus(args.out) if args.merge is not None else []
    logging.basicConfig(level=logging.WARNING)
    warnings.simplefilter("ignore", DeprecationWarning)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    logging.getLogger("librdkafka").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="trafka-capture-") as work_dir:
        frames = capture(args.clients, work_dir=Path(work_dir), only=args.only)
    if args.merge is not None:
        default = {api for family, (_, _, apis) in FAMILIES.items() if args.only in (None, family) for api in apis}
        corpus = merge(committed, frames, set(args.merge or default))
    else:
        corpus = select(frames)
    save_corpus(corpus, args.out)
    size = args.out.stat().st_size
    print(f"{len(frames)} frames recorded, {len(corpus)} kept in {args.out} ({size} bytes"
          + (f", {len(corpus) - len(committed)} added to the {len(committed)} committed)" if args.merge is not None
             else ")"))
    by_api: dict[str, set[str]] = {}
    for frame in corpus:
        api, version, _, client = frame.name.split(" ", 3)
        by_api.setdefault(api, set()).add(f"{version} ({client})")
    for api in sorted(by_api):
        print(f"  {api}: {', '.join(sorted(by_api[api]))}")
    missing = missing_apis(corpus)
    if missing:
        print(f"served APIs no client sent: {', '.join(missing)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
