"""Transactions and exactly-once, end to end, with unmodified clients.

Each of confluent-kafka, kafka-python, aiokafka, kafkajs and the Java client is the transactional producer
of: a commit and an abort seen by read_committed and read_uncommitted consumers (aborted records hidden
from read_committed only, control records never surfacing, offsets dense except the one marker after
each transaction); an open transaction holding back the last stable offset (non-transactional records
after it included) until it ends; fencing by a second producer with the same transactional.id; and
``send_offsets_to_transaction`` (the group's offset moves on commit only). Then, with confluent-kafka in
child processes (``compat_tests/txn_worker.py``): a producer killed with SIGKILL mid-transaction, aborted by
the coordinator once its transaction.timeout.ms is over; a consume-transform-produce group whose member is
killed mid-transaction, every input in the output exactly once; and a broker stopped or killed with
committed, aborted and open transactions in a partition.

The checks read with librdkafka (isolation.level both ways), with the producing client's own
read_committed consumer, and ask for end offsets with ListOffsets at both isolation levels from the wire
client, so that the last stable offset is seen exactly.

By default the tests run against trafka. ``TRAFKA_TXN_REFERENCE=1`` runs them against Apache Kafka (the
reference broker of compat_tests/reference/) instead, ``TRAFKA_TXN_REFERENCE=both`` against both: the
proof that the tests themselves are right.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from compat_tests.clients import (
    JS_DRIVER,
    OPERATION_TIMEOUT,
    ClientError,
    ConfluentClient,
    Consumed,
    Delivery,
    KafkajsClient,
    Message,
    _b64,
    _unb64,
    error_name,
    shared_java_driver,
)
from compat_tests.harness import BrokerProcess, wait_until
from compat_tests.ports import free_port
from compat_tests.reference import (
    KafkaBroker,
    ReferenceUnavailable,
    format_storage,
    java_command,
    jars_present,
    write_properties,
)
from compat_tests.wire_client import WireClient
from trafka.wire.messages import ListOffsetsRequest

WORKER = Path(__file__).with_name("txn_worker.py")

#: Broker settings of every test here; Kafka's names, which trafka takes too.
TXN_SETTINGS = {
    # The coordinator looks for transactions past their timeout this often (Kafka's default: 10 s).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    "transaction.max.timeout.ms": 900_000,
    "transaction.state.log.num.partitions": 1,
    "offsets.topic.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
    # The consume-transform-produce members run with a short session, so a killed one is gone quickly.
    "group.min.session.timeout.ms": 1000,
}

PRODUCERS = ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs", "java"]

#: What the clients call being fenced by a newer producer with the same transactional.id.
FENCED_NAMES = {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FENCED", "ProducerFencedError", "ProducerFenced",
                "InvalidProducerEpochError", "InvalidProducerEpoch", "ProducerFencedException",
                "InvalidProducerEpochException"}

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION = {READ_UNCOMMITTED: "read_uncommitted", READ_COMMITTED: "read_committed"}


def _backends() -> list[str]:
    choice = os.environ.get("TRAFKA_TXN_REFERENCE", "").strip().lower()
    if choice in ("", "0", "no", "false"):
        return ["trafka"]
    if choice == "both":
        return ["trafka", "kafka"]
    return ["kafka"]


BACKENDS = _backends()


# ============================================================================ brokers: trafka or Kafka


class ReferenceKafka(KafkaBroker):
    """Apache Kafka that restarts on the ports it had (the producers still running must find it again),
    with trafka's `BrokerProcess` life-cycle: stop, kill, restart(crash=...)."""

    def __init__(self, data_dir: Path, *, overrides=None, name: str = "kafka"):
        super().__init__(data_dir, overrides=overrides, name=name)
        self.controller_port = 0

    def start(self) -> ReferenceKafka:
        if not jars_present() or shutil.which("java") is None:
            raise ReferenceUnavailable("Apache Kafka's jars or java are missing: run compat_tests/setup.sh")
        if not self.port:
            self.port, self.controller_port = free_port(), free_port()
            write_properties(self.properties_path, self.data_dir, self.port, self.controller_port, self.overrides)
            if not (self.data_dir / "meta.properties").exists():
                format_storage(self.properties_path)
        self._launch(java_command("kafka.Kafka", str(self.properties_path)))
        return self

    def restart(self, *, crash: bool = False) -> ReferenceKafka:
        self.kill() if crash else self.stop()
        return self.start()


#: Apache Kafka only: after a crash, the restarted KRaft controller waits out the old broker session
#: (9 s by default) before the broker serves; the transaction timeouts here are shorter than that.
REFERENCE_ONLY_SETTINGS = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 500}


def start_broker(backend: str, directory: Path, name: str, overrides: dict | None = None):
    settings = {**TXN_SETTINGS, **(overrides or {})}
    if backend == "kafka":
        return ReferenceKafka(directory / name, overrides={**settings, **REFERENCE_ONLY_SETTINGS},
                              name=f"kafka-{name}").start()
    return BrokerProcess(directory / name, overrides=settings, name=f"trafka-{name}").start()


@pytest.fixture(scope="module", params=BACKENDS)
def txn_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """One broker (trafka, or Apache Kafka with TRAFKA_TXN_REFERENCE) for the tests of this module that
    do not stop it; each test uses its own topics, transactional ids and groups."""
    broker = start_broker(request.param, tmp_path_factory.mktemp("txn"), "shared")
    yield broker
    broker.close()


@pytest.fixture(params=BACKENDS)
def private_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], object]]:
    """A factory of a broker of the test's own, to stop and kill."""
    started = []

    def start():
        broker = start_broker(request.param, tmp_path, f"private{len(started)}")
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def make_topic(broker, partitions: int = 1, prefix: str = "txn") -> str:
    name = unique(prefix)
    admin = ConfluentClient(broker.bootstrap)
    admin.create_topic(name, partitions)
    assert admin.partitions(name) == list(range(partitions))
    return name


# ============================================================================ transactional producers


class TxnError(Exception):
    """A transactional operation failed; `names` are the Kafka error names and exception types reported."""

    def __init__(self, client: str, names: set[str], detail: str):
        super().__init__(f"{client}: {sorted(names)}: {detail}")
        self.client = client
        self.names = names


def _messages(values: Sequence[bytes], partition: int | None) -> list[Message]:
    return [Message(key=b"k-" + value, value=value, partition=partition) for value in values]


class TxnProducer:
    """The transactional operations of one client, all synchronous: `send` waits until every record is
    acknowledged and returns where each went."""

    name: str

    def __init__(self, bootstrap: str, transactional_id: str, *, timeout_ms: int = 60_000):
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms

    def init(self) -> None: ...
    def begin(self) -> None: ...
    def send(self, topic: str, values: Sequence[bytes], partition: int = 0) -> list[Delivery]: ...
    def send_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None: ...
    def commit(self) -> None: ...
    def abort(self) -> None: ...
    def close(self) -> None: ...


class ConfluentTxn(TxnProducer):
    name = "confluent-kafka"

    def _call(self, action):
        from confluent_kafka import KafkaException

        try:
            return action()
        except KafkaException as exc:
            error = exc.args[0]
            raise TxnError(self.name, {error.name(), error_name(error.code()) or ""} - {""}, str(error)) from exc

    def init(self):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
                                  "transaction.timeout.ms": self.timeout_ms,
                                  "logger": ConfluentClient(self.bootstrap)._config()["logger"]})
        self.consumers = {}
        self._call(lambda: self.producer.init_transactions(OPERATION_TIMEOUT))

    def begin(self):
        self._call(self.producer.begin_transaction)

    def send(self, topic, values, partition=0):
        results: list = [None] * len(values)

        def report(index):
            def on_delivery(err, msg):
                results[index] = err if err else Delivery(msg.partition(), msg.offset())
            return on_delivery

        for index, m in enumerate(_messages(values, partition)):
            self._call(lambda: self.producer.produce(topic, key=m.key, value=m.value, partition=m.partition,
                                                     on_delivery=report(index)))
        self._call(lambda: self.producer.flush(OPERATION_TIMEOUT))
        for result in results:
            if not isinstance(result, Delivery):
                names = {result.name(), error_name(result.code()) or ""} - {""} if result is not None else set()
                raise TxnError(self.name, names, f"delivery: {result}")
        return results

    def send_offsets(self, group, topic, offsets):
        from confluent_kafka import Consumer, TopicPartition

        if group not in self.consumers:
            # The group metadata of a consumer that has not joined: generation -1, no member id.
            self.consumers[group] = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                                              "enable.auto.commit": False})
        metadata = self.consumers[group].consumer_group_metadata()
        partitions = [TopicPartition(topic, p, o) for p, o in offsets.items()]
        self._call(lambda: self.producer.send_offsets_to_transaction(partitions, metadata, OPERATION_TIMEOUT))

    def commit(self):
        self._call(lambda: self.producer.commit_transaction(OPERATION_TIMEOUT))

    def abort(self):
        self._call(lambda: self.producer.abort_transaction(OPERATION_TIMEOUT))

    def close(self):
        for consumer in getattr(self, "consumers", {}).values():
            consumer.close()
        self.producer = None


class KafkaPythonTxn(TxnProducer):
    name = "kafka-python"

    def _call(self, action):
        import kafka.errors

        try:
            return action()
        except kafka.errors.KafkaError as exc:
            names = {type(exc).__name__, error_name(getattr(exc, "errno", None)) or ""} - {""}
            raise TxnError(self.name, names, repr(exc)) from exc

    def init(self):
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=self.transactional_id,
                                      transaction_timeout_ms=self.timeout_ms, request_timeout_ms=15000,
                                      max_block_ms=15000)
        self._call(self.producer.init_transactions)

    def begin(self):
        self._call(self.producer.begin_transaction)

    def send(self, topic, values, partition=0):
        def run():
            futures = [self.producer.send(topic, key=m.key, value=m.value, partition=m.partition)
                       for m in _messages(values, partition)]
            self.producer.flush(OPERATION_TIMEOUT)
            return [Delivery(md.partition, md.offset) for md in (f.get(OPERATION_TIMEOUT) for f in futures)]

        return self._call(run)

    def send_offsets(self, group, topic, offsets):
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        self._call(lambda: self.producer.send_offsets_to_transaction(
            {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}, group))

    def commit(self):
        self._call(self.producer.commit_transaction)

    def abort(self):
        self._call(self.producer.abort_transaction)

    def close(self):
        try:
            self.producer.close(timeout=2)
        except Exception:  # a fenced producer may refuse to close cleanly; it is dropped all the same
            pass


class _LoopThread:
    """An asyncio loop on a thread of its own, so that aiokafka's producer outlives one call."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine, timeout: float = OPERATION_TIMEOUT * 2):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class AiokafkaTxn(TxnProducer):
    name = "aiokafka"

    def _call(self, coroutine):
        import aiokafka.errors

        try:
            return self.loop.run(coroutine)
        except aiokafka.errors.KafkaError as exc:
            names = {type(exc).__name__, error_name(getattr(exc, "errno", None)) or ""} - {""}
            raise TxnError(self.name, names, repr(exc)) from exc

    def init(self):
        from aiokafka import AIOKafkaProducer

        self.loop = _LoopThread()

        async def start():
            self.producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=self.transactional_id,
                                             transaction_timeout_ms=self.timeout_ms, enable_idempotence=True)
            await self.producer.start()

        self._call(start())

    def begin(self):
        self._call(self.producer.begin_transaction())

    def send(self, topic, values, partition=0):
        async def run():
            return [Delivery(md.partition, md.offset) for md in
                    [await self.producer.send_and_wait(topic, key=m.key, value=m.value, partition=m.partition)
                     for m in _messages(values, partition)]]

        return self._call(run())

    def send_offsets(self, group, topic, offsets):
        from aiokafka import TopicPartition

        self._call(self.producer.send_offsets_to_transaction(
            {TopicPartition(topic, p): o for p, o in offsets.items()}, group))

    def commit(self):
        self._call(self.producer.commit_transaction())

    def abort(self):
        self._call(self.producer.abort_transaction())

    def close(self):
        try:
            self._call(self.producer.stop())
        except Exception:
            pass
        self.loop.close()


class JsSession:
    """``node driver.js --session``: kafkajs producers kept alive between commands, one JSON line each way."""

    def __init__(self):
        if not (JS_DRIVER.parent / "node_modules" / "kafkajs").is_dir():
            raise ClientError("kafkajs", None, "kafkajs is not installed: run compat_tests/setup.sh")
        self.process = subprocess.Popen(["node", str(JS_DRIVER), "--session"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        cwd=JS_DRIVER.parent)
        self.answers: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.process.stdout, self.answers.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.process.stderr, self.stderr.append), daemon=True).start()
        self.ids = iter(range(1, 1 << 30))
        assert self._answer(20).get("ready"), "the kafkajs session did not start"

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            sink(line)
        sink(None)

    def _answer(self, timeout: float) -> dict:
        try:
            line = self.answers.get(timeout=timeout)
        except queue.Empty:
            raise TxnError("kafkajs", set(), f"no answer in {timeout} s; stderr:\n{self.stderr_text()}") from None
        if line is None:
            raise TxnError("kafkajs", set(), f"the session exited; stderr:\n{self.stderr_text()}")
        return json.loads(line)

    def stderr_text(self) -> str:
        return "".join(filter(None, self.stderr))[-3000:]

    def call(self, op: str, timeout: float = OPERATION_TIMEOUT * 2, **arguments):
        command_id = next(self.ids)
        self.process.stdin.write(json.dumps({"id": command_id, "op": op, **arguments}) + "\n")
        self.process.stdin.flush()
        output = self._answer(timeout)
        assert output["id"] == command_id, output
        if not output["ok"]:
            error = output["error"]
            names = {error_name(code) for code in error["codes"]} | set(error["types"]) | {error["name"]}
            raise TxnError("kafkajs", names - {None, ""}, error["message"])
        return output["result"]

    def close(self):
        try:
            self.process.stdin.close()
            self.process.wait(10)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


class KafkajsTxn(TxnProducer):
    """kafkajs initialises its producer id on its first transaction: `init` only connects."""

    name = "kafkajs"

    def init(self):
        self.session = JsSession()
        self.session.call("txn_open", name="p", bootstrap=self.bootstrap, transactional_id=self.transactional_id,
                          transaction_timeout_ms=self.timeout_ms)

    def begin(self):
        self.session.call("txn_begin", name="p")

    def send(self, topic, values, partition=0):
        messages = [{"key": _b64(m.key), "value": _b64(m.value), "partition": m.partition}
                    for m in _messages(values, partition)]
        return [Delivery(d["partition"], d["offset"])
                for d in self.session.call("txn_send", name="p", topic=topic, messages=messages)]

    def send_offsets(self, group, topic, offsets):
        self.session.call("txn_send_offsets", name="p", group_id=group,
                          offsets=[[topic, p, o] for p, o in offsets.items()])

    def commit(self):
        self.session.call("txn_commit", name="p")

    def abort(self):
        self.session.call("txn_abort", name="p")

    def close(self):
        try:
            self.session.call("txn_close", name="p", timeout=15)
        except TxnError:
            pass
        self.session.close()


class JavaTxn(TxnProducer):
    name = "java"

    def _call(self, op, **arguments):
        try:
            return shared_java_driver().call(op, **arguments)
        except ClientError as exc:
            names = set()
            for line in exc.detail.splitlines()[:1]:
                names |= {word.strip(":;,") for word in line.replace("<-", " ").split()}
            raise TxnError(self.name, names | ({exc.error} if exc.error else set()), exc.detail) from exc

    def init(self):
        self.handle = unique("txn")
        self._call("txn_open", name=self.handle, bootstrap=self.bootstrap, transactional_id=self.transactional_id,
                   settings={"transaction.timeout.ms": str(self.timeout_ms)})

    def begin(self):
        self._call("txn_begin", name=self.handle)

    def send(self, topic, values, partition=0):
        messages = [{"key": _b64(m.key), "value": _b64(m.value), "partition": m.partition}
                    for m in _messages(values, partition)]
        return [Delivery(d["partition"], d["offset"])
                for d in self._call("txn_send", name=self.handle, topic=topic, messages=messages)]

    def send_offsets(self, group, topic, offsets):
        self._call("txn_send_offsets", name=self.handle, group_id=group,
                   offsets=[[topic, p, o] for p, o in offsets.items()])

    def commit(self):
        self._call("txn_commit", name=self.handle)

    def abort(self):
        self._call("txn_abort", name=self.handle)

    def close(self):
        try:
            self._call("txn_close", name=self.handle, timeout_ms=2000)
        except TxnError:
            pass


TXN_PRODUCERS: dict[str, type[TxnProducer]] = {cls.name: cls for cls in
                                               (ConfluentTxn, KafkaPythonTxn, AiokafkaTxn, KafkajsTxn, JavaTxn)}


@pytest.fixture
def producers() -> Iterator[Callable[..., TxnProducer]]:
    """``producers(client, bootstrap, transactional_id)``: an initialised transactional producer, closed
    at the end of the test."""
    made: list[TxnProducer] = []

    def make(client: str, bootstrap: str, transactional_id: str, *, init: bool = True, **options) -> TxnProducer:
        producer = TXN_PRODUCERS[client](bootstrap, transactional_id, **options)
        made.append(producer)
        if init:
            producer.init()
        return producer

    yield make
    for producer in reversed(made):
        try:
            producer.close()
        except Exception:
            pass


# ============================================================================ what consumers see


def end_offset(broker, topic: str, partition: int, isolation: int) -> int:
    """ListOffsets(latest) at `isolation`: the high watermark, or the last stable offset."""
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
    with WireClient(broker.bootstrap) as client:
        [answer] = client.request(request, 7).topics[0].partitions
    assert answer.error_code == 0, f"ListOffsets {ISOLATION[isolation]} {topic}-{partition}: error {answer.error_code}"
    return answer.offset


def end_offsets(broker, topic: str, partition: int = 0) -> tuple[int, int]:
    """(high watermark, last stable offset)."""
    return end_offset(broker, topic, partition, READ_UNCOMMITTED), end_offset(broker, topic, partition, READ_COMMITTED)


def wait_stable(broker, topic: str, high_watermark: int, partition: int = 0, timeout: float = 15.0) -> None:
    """Wait until the partition ends at `high_watermark` with nothing pending: every marker written."""
    wait_until(lambda: end_offsets(broker, topic, partition) == (high_watermark, high_watermark), timeout=timeout,
               message=lambda: f"{topic}-{partition} at (high watermark, LSO) = ({high_watermark}, {high_watermark}); "
                               f"it is {end_offsets(broker, topic, partition)}")


def _confluent_consumer(broker, isolation: int):
    from confluent_kafka import Consumer

    return Consumer(ConfluentClient(broker.bootstrap)._config(**{
        "group.id": unique("txn-read"), "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": ISOLATION[isolation]}))


def _record(msg) -> Consumed:
    return Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                    msg.timestamp()[1])


def read_through(broker, topic: str, isolation: int, last: dict[int, int], timeout: float = 15.0) -> list[Consumed]:
    """librdkafka at `isolation` reading partitions `last` from the beginning until each has returned its
    record at offset `last[partition]`; every record returned, sorted."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = _confluent_consumer(broker, isolation)
    records: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in last])
        pending = dict(last)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                assert not msg.error(), msg.error()
                records.append(_record(msg))
                if pending.get(msg.partition()) == msg.offset():
                    del pending[msg.partition()]
        assert not pending, (f"{ISOLATION[isolation]} read of {topic} did not reach {pending} in {timeout} s; "
                             f"read {[(r.partition, r.offset, r.value) for r in records]}")
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def read_window(broker, topic: str, isolation: int, partitions: Sequence[int] = (0,), seconds: float = 1.0
                ) -> list[Consumed]:
    """Everything librdkafka at `isolation` returns from the beginning within `seconds`."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = _confluent_consumer(broker, isolation)
    records: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.1):
                assert not msg.error(), msg.error()
                records.append(_record(msg))
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def seen(records: Sequence[Consumed]) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in records]


def own_read_committed(client: str, broker, topic: str, expected: list[tuple[int, bytes]]) -> None:
    """The producing client's own consumer, read_committed, reads partition 0 of `topic` from the beginning
    to the last of `expected` ((offset, value) pairs) and returns exactly those records."""
    last_offset, last_value = expected[-1]
    if client == "confluent-kafka":
        return  # librdkafka's reads are the tests' own
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest", isolation_level="read_committed")
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            records = []
            deadline = time.monotonic() + OPERATION_TIMEOUT
            while not any(o == last_offset for o, _ in records) and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    records += [(r.offset, r.value) for r in batch]
        finally:
            consumer.close()
    elif client == "aiokafka":
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run():
            consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                                        auto_offset_reset="earliest", isolation_level="read_committed")
            await consumer.start()
            try:
                tp = TopicPartition(topic, 0)
                consumer.assign([tp])
                await consumer.seek_to_beginning(tp)
                found = []
                deadline = time.monotonic() + OPERATION_TIMEOUT
                while not any(o == last_offset for o, _ in found) and time.monotonic() < deadline:
                    for batch in (await consumer.getmany(timeout_ms=200)).values():
                        found += [(r.offset, r.value) for r in batch]
                return found
            finally:
                await consumer.stop()

        records = asyncio.run(run())
    elif client == "kafkajs":
        # The kafkajs consumer is read_committed by default; it reads through a group of its own.
        consumed = KafkajsClient(broker.bootstrap).consume(topic, len(expected))
        records = [(r.offset, r.value) for r in consumed]
    elif client == "java":
        consumed = shared_java_driver().call("isolated_consume", bootstrap=broker.bootstrap, topic=topic,
                                             partitions=[0], settings={"isolation.level": "read_committed"},
                                             until_value=_b64(last_value), timeout_ms=20000)
        records = [(r["offset"], _unb64(r["value"])) for r in consumed]
    else:
        raise ValueError(client)
    assert sorted(records) == expected, (client, sorted(records), expected)


def committed_offset(broker, group: str, topic: str, partition: int = 0) -> int | None:
    """The group's committed offset (OffsetFetch without require_stable), None where it has none."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(ConfluentClient(broker.bootstrap)._config())
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition)])
    [future] = admin.list_consumer_group_offsets([request], require_stable=False).values()
    [tp] = future.result(OPERATION_TIMEOUT).topic_partitions
    assert tp.error is None, tp.error
    return tp.offset if tp.offset >= 0 else None


def plain_produce(broker, topic: str, values: Sequence[bytes], partition: int = 0) -> list[int]:
    """Non-transactional records (confluent-kafka, acks=all); their offsets."""
    deliveries = ConfluentClient(broker.bootstrap).produce(topic, _messages(values, partition), acks="all")
    return [d.offset for d in deliveries]


def offsets_of(deliveries: Sequence[Delivery]) -> list[int]:
    return [d.offset for d in deliveries]


# ============================================================================ child processes


class Worker:
    """compat_tests/txn_worker.py in a child process: JSON events read from its stdout."""

    def __init__(self, *arguments: str, name: str, log_dir: Path):
        self.name = name
        self.log_path = log_dir / f"{name}.stderr.log"
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen([sys.executable, str(WORKER), *arguments], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=log, text=True,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.events: queue.Queue[dict | None] = queue.Queue()
        self.history: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                self.history.append(event)
                self.events.put(event)
        self.events.put(None)

    def wait_for(self, kind: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.events.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"{self.name}: no {kind!r} event in {timeout} s; "
                                     f"stderr:\n{self.stderr()}") from None
            if event is None:
                raise AssertionError(f"{self.name} exited ({self.process.wait()}) before {kind!r}; "
                                     f"stderr:\n{self.stderr()}")
            if event["event"] == kind:
                return event
            if event["event"] == "failed":
                raise AssertionError(f"{self.name} failed: {event}; stderr:\n{self.stderr()}")

    def tell(self, command: str) -> None:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def stderr(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def terminate(self, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop within {timeout} s of SIGTERM; stderr:\n{self.stderr()}")


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(*arguments: str, name: str) -> Worker:
        worker = Worker(*arguments, name=name, log_dir=tmp_path)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


# ============================================================================ per producer client


@pytest.mark.parametrize("client", PRODUCERS)
def test_commit_and_abort_as_seen_by_both_isolation_levels(txn_broker, producers, client):
    topic = make_topic(txn_broker)
    producer = producers(client, txn_broker.bootstrap, unique(f"txn-{client}"))
    committed, aborted, later = [b"c0", b"c1", b"c2"], [b"a0", b"a1", b"a2"], [b"d0", b"d1"]

    producer.begin()
    first = producer.send(topic, committed)
    producer.commit()
    producer.begin()
    second = producer.send(topic, aborted)
    producer.abort()
    producer.begin()
    third = producer.send(topic, later)
    producer.commit()

    # One partition, three transactions: each one's records at consecutive offsets, then its marker.
    assert (offsets_of(first), offsets_of(second), offsets_of(third)) == ([0, 1, 2], [4, 5, 6], [8, 9])
    wait_stable(txn_broker, topic, 11)
    every = list(zip([0, 1, 2, 4, 5, 6, 8, 9], committed + aborted + later))
    visible = list(zip([0, 1, 2, 8, 9], committed + later))
    assert seen(read_through(txn_broker, topic, READ_UNCOMMITTED, {0: 9})) == every
    assert seen(read_through(txn_broker, topic, READ_COMMITTED, {0: 9})) == visible
    own_read_committed(client, txn_broker, topic, visible)


@pytest.mark.parametrize("client", PRODUCERS)
def test_open_transaction_holds_back_the_last_stable_offset(txn_broker, producers, client):
    topic = make_topic(txn_broker)
    producer = producers(client, txn_broker.bootstrap, unique(f"lso-{client}"))
    assert plain_produce(txn_broker, topic, [b"before"]) == [0]

    producer.begin()
    assert offsets_of(producer.send(topic, [b"t0", b"t1"])) == [1, 2]
    assert plain_produce(txn_broker, topic, [b"after"]) == [3]

    # read_committed stops at the open transaction's first offset, the record produced after it included.
    assert end_offsets(txn_broker, topic) == (4, 1)
    assert seen(read_window(txn_broker, topic, READ_COMMITTED)) == [(0, b"before")]
    assert seen(read_through(txn_broker, topic, READ_UNCOMMITTED, {0: 3})) == [
        (0, b"before"), (1, b"t0"), (2, b"t1"), (3, b"after")]

    producer.commit()
    wait_stable(txn_broker, topic, 5)
    assert seen(read_through(txn_broker, topic, READ_COMMITTED, {0: 3})) == [
        (0, b"before"), (1, b"t0"), (2, b"t1"), (3, b"after")]

    # An aborted transaction holds back what follows it just the same, until its abort.
    producer.begin()
    assert offsets_of(producer.send(topic, [b"t2"])) == [5]
    assert plain_produce(txn_broker, topic, [b"after-abort"]) == [6]
    assert end_offsets(txn_broker, topic) == (7, 5)
    producer.abort()
    wait_stable(txn_broker, topic, 8)
    visible = [(0, b"before"), (1, b"t0"), (2, b"t1"), (3, b"after"), (6, b"after-abort")]
    assert seen(read_through(txn_broker, topic, READ_COMMITTED, {0: 6})) == visible
    own_read_committed(client, txn_broker, topic, visible)


@pytest.mark.parametrize("client", PRODUCERS)
def test_a_second_producer_with_the_same_transactional_id_fences_the_first(txn_broker, producers, client):
    topic = make_topic(txn_broker)
    transactional_id = unique(f"fence-{client}")
    first = producers(client, txn_broker.bootstrap, transactional_id)
    first.begin()
    assert offsets_of(first.send(topic, [b"zombie-0", b"zombie-1"])) == [0, 1]

    # The newcomer's initialisation aborts the open transaction (marker at 2) and fences the first.
    second = producers(client, txn_broker.bootstrap, transactional_id)
    second.begin()
    assert offsets_of(second.send(topic, [b"successor"])) == [3]
    second.commit()

    with pytest.raises(TxnError) as failure:
        first.commit()
    assert failure.value.names & FENCED_NAMES, failure.value

    wait_stable(txn_broker, topic, 5)
    assert seen(read_through(txn_broker, topic, READ_COMMITTED, {0: 3})) == [(3, b"successor")]
    assert seen(read_through(txn_broker, topic, READ_UNCOMMITTED, {0: 3})) == [
        (0, b"zombie-0"), (1, b"zombie-1"), (3, b"successor")]


@pytest.mark.parametrize("client", PRODUCERS)
def test_offsets_sent_to_a_transaction_are_committed_with_it(txn_broker, producers, client):
    source, sink = make_topic(txn_broker, prefix="in"), make_topic(txn_broker, prefix="out")
    plain_produce(txn_broker, source, [f"in-{i}".encode() for i in range(5)])
    group = unique(f"eos-group-{client}")
    producer = producers(client, txn_broker.bootstrap, unique(f"offsets-{client}"))

    producer.begin()
    producer.send(sink, [b"out-0"])
    producer.send_offsets(group, source, {0: 3})
    assert committed_offset(txn_broker, group, source) is None  # pending until the commit
    producer.commit()
    wait_until(lambda: committed_offset(txn_broker, group, source) == 3, timeout=10,
               message=lambda: f"{group}'s offset 3 on commit (it is {committed_offset(txn_broker, group, source)})")

    producer.begin()
    producer.send(sink, [b"out-1"])
    producer.send_offsets(group, source, {0: 5})
    assert committed_offset(txn_broker, group, source) == 3
    producer.abort()
    wait_stable(txn_broker, sink, 4)  # out-0, its marker, out-1, its marker: both transactions complete
    time.sleep(0.3)
    assert committed_offset(txn_broker, group, source) == 3

    plain_produce(txn_broker, sink, [b"end"])
    assert seen(read_through(txn_broker, sink, READ_COMMITTED, {0: 4})) == [(0, b"out-0"), (4, b"end")]


# ============================================================================ producers killed, brokers restarted


def test_a_killed_producers_transaction_is_aborted_at_its_timeout(txn_broker, workers):
    topic = make_topic(txn_broker)
    assert plain_produce(txn_broker, topic, [b"before"]) == [0]
    worker = workers("open", "--bootstrap", txn_broker.bootstrap, "--transactional-id", unique("timeout"),
                     "--transaction-timeout-ms", "3000", "--topic", topic, "--count", "3", "--prefix", "lost",
                     name="timeout-worker")
    opened = worker.wait_for("open")
    began = time.monotonic()
    assert opened["offsets"] == [1, 2, 3]
    worker.kill()
    assert plain_produce(txn_broker, topic, [b"after"]) == [4]
    assert end_offsets(txn_broker, topic) == (5, 1)

    # The coordinator aborts it once its 3 s are over (checked every 500 ms): marker at 5.
    wait_stable(txn_broker, topic, 6, timeout=20)
    assert time.monotonic() - began > 2.0, "aborted before the transaction's timeout"
    assert seen(read_through(txn_broker, topic, READ_COMMITTED, {0: 4})) == [(0, b"before"), (4, b"after")]
    assert seen(read_through(txn_broker, topic, READ_UNCOMMITTED, {0: 4})) == [
        (0, b"before"), (1, b"lost-0"), (2, b"lost-1"), (3, b"lost-2"), (4, b"after")]


def test_consume_transform_produce_with_a_member_killed_mid_transaction(txn_broker, workers):
    partitions, count = 4, 200
    source = make_topic(txn_broker, partitions, prefix="eos-in")
    sink = make_topic(txn_broker, partitions, prefix="eos-out")
    inputs = [f"in-{i:03d}".encode() for i in range(count)]
    for p in range(partitions):
        plain_produce(txn_broker, source, inputs[p::partitions], partition=p)
    group = unique("eos")
    ids = {"a": unique("eos-a"), "b": unique("eos-b")}

    def member(name: str, *extra: str) -> Worker:
        return workers("eos", "--bootstrap", txn_broker.bootstrap, "--transactional-id", ids[name[0]],
                       "--input", source, "--output", sink, "--group", group, "--batch", "10",
                       "--session-timeout-ms", "2000", "--transaction-timeout-ms", "30000", *extra, name=f"eos-{name}")

    a = member("a", "--hang-after", "3")
    # b joins once a has its partitions and a batch done: started together, b could take every
    # partition and process all inputs before a is assigned any, and a would never reach its hang.
    a.wait_for("committed", timeout=60)
    b = member("b")
    hanging = a.wait_for("hanging", timeout=60)
    a.kill()
    # Its successor (same transactional.id) aborts the open transaction on init_transactions.
    a2 = member("a2")

    def done() -> bool:
        for worker in (b, a2):
            assert worker.process.poll() is None, f"{worker.name} exited; stderr:\n{worker.stderr()}"
        batches = [e for w in (a, b, a2) for e in w.history if e["event"] == "committed"]
        return len({tuple(i) for e in batches for i in e["inputs"]}) == count

    wait_until(done, timeout=60, message=lambda: f"every input processed; a2: {a2.stderr()} b: {b.stderr()}")
    assert b.terminate() == 0 and a2.terminate() == 0

    ends = {p: end_offsets(txn_broker, sink, p)[0] for p in range(partitions)}
    for p, end in ends.items():
        wait_stable(txn_broker, sink, end, partition=p)
        plain_produce(txn_broker, sink, [b"end"], partition=p)
    committed = read_through(txn_broker, sink, READ_COMMITTED, ends)
    everything = read_through(txn_broker, sink, READ_UNCOMMITTED, ends)

    outputs = [r.value for r in committed if r.value != b"end"]
    assert Counter(outputs) == Counter(b"out:" + value for value in inputs), "not every input exactly once"
    for p in range(partitions):
        in_partition = [r.value for r in committed if r.partition == p and r.value != b"end"]
        assert in_partition == [b"out:" + value for value in inputs[p::partitions]], f"partition {p} out of order"
    # The killed member's last batch reached the log, aborted: read_uncommitted sees it twice.
    assert len(everything) - partitions >= count + len(hanging["inputs"])


@pytest.mark.parametrize("crash", [False, True], ids=["stopped-then-producer-commits", "killed-then-timeout-abort"])
def test_transactions_across_a_broker_restart(private_broker, workers, producers, crash):
    broker = private_broker()
    topic = make_topic(broker)
    producer = producers("confluent-kafka", broker.bootstrap, unique("restart-inline"))
    producer.begin()
    assert offsets_of(producer.send(topic, [b"c0", b"c1", b"c2"])) == [0, 1, 2]
    producer.commit()
    producer.begin()
    assert offsets_of(producer.send(topic, [b"a0", b"a1", b"a2"])) == [4, 5, 6]
    producer.abort()
    # The open transaction's producer lives in a process of its own, which outlives the broker's restart
    # (and commits), or is killed with the broker (and its transaction aborted at its timeout).
    # Long enough to outlast the restart and the checks after it (Kafka's JVM takes longer to come back).
    timeout_ms = (10_000 if isinstance(broker, ReferenceKafka) else 6000) if crash else 120_000
    worker = workers("open", "--bootstrap", broker.bootstrap, "--transactional-id", unique("restart-open"),
                     "--transaction-timeout-ms", str(timeout_ms), "--topic", topic, "--count", "2", "--prefix", "o",
                     name="open-worker")
    assert worker.wait_for("open")["offsets"] == [8, 9]
    began = time.monotonic()
    assert plain_produce(broker, topic, [b"after"]) == [10]
    assert end_offsets(broker, topic) == (11, 8)

    if crash:
        worker.kill()
    old_port = broker.port
    broker.restart(crash=crash)
    if not crash:
        assert broker.port == old_port, "restarted on another port: the producer cannot find it again"

    everything = [(0, b"c0"), (1, b"c1"), (2, b"c2"), (4, b"a0"), (5, b"a1"), (6, b"a2"), (8, b"o-0"),
                  (9, b"o-1"), (10, b"after")]
    # Right after recovery: committed visible, aborted not, the open transaction still holding back the LSO.
    elapsed, after_recovery = time.monotonic() - began, end_offsets(broker, topic)
    assert elapsed < timeout_ms / 1000 - 1, f"the restart took {elapsed:.1f} s, near the transaction's timeout"
    assert after_recovery == (11, 8)
    assert seen(read_through(broker, topic, READ_UNCOMMITTED, {0: 10})) == everything
    assert seen(read_window(broker, topic, READ_COMMITTED, seconds=1.0)) == [(0, b"c0"), (1, b"c1"), (2, b"c2")]
    assert end_offsets(broker, topic) == (11, 8)

    if crash:
        wait_stable(broker, topic, 12, timeout=timeout_ms / 1000 + 15)
        visible = [(0, b"c0"), (1, b"c1"), (2, b"c2"), (10, b"after")]
    else:
        worker.tell("commit")
        worker.wait_for("committed", timeout=60)
        wait_stable(broker, topic, 12)
        visible = [(0, b"c0"), (1, b"c1"), (2, b"c2"), (8, b"o-0"), (9, b"o-1"), (10, b"after")]
    assert seen(read_through(broker, topic, READ_COMMITTED, {0: 10})) == visible
    assert seen(read_through(broker, topic, READ_UNCOMMITTED, {0: 10})) == everything
