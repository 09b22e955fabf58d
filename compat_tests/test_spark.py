"""PySpark's own Kafka connector (spark-sql-kafka-0-10, with its kafka-clients) against a real trafka process.

One local Spark session (master local[2], the connector's jars from compat_tests/spark/lib through
spark.jars) drives the connector's batch writer and reader and its Structured Streaming source and sink,
with the connector's own option names and row schema. The tests prove that:

- ``df.write.format("kafka")`` lands every row once, with its key, value, partition and headers,
  through the connector's producer, which is idempotent (and therefore acks=all);
- batch reads return exactly the records asked for: subscribe, subscribePattern and assign;
  startingOffsets and endingOffsets as earliest, latest and per-partition JSON;
  startingOffsetsByTimestamp, startingTimestamp and endingOffsetsByTimestamp; includeHeaders;
  kafka.isolation.level=read_committed over non-transactional records;
- over a topic where a confluent-kafka transactional producer committed and aborted transactions (the
  aborted records flushed to the log first), with plain records between and inside them, a batch read with
  kafka.isolation.level=read_committed (failOnDataLoss left true) returns exactly the committed and plain
  records at their offsets, in order per partition, and read_uncommitted the aborted ones too; a
  streaming query with read_committed sees the same, stops at the last stable offset while a transaction
  is open (plain records behind it wait too) and reads that transaction's records once it commits;
- a streaming query into a file sink with a checkpoint processes each record exactly once across a stop,
  more records and two restarts, and honours maxOffsetsPerTrigger, minPartitions and
  trigger(availableNow=True); one started at startingOffsets=latest reads only later records;
- a streaming query writes to a topic with a checkpoint, each source record once across a restart;
- once DeleteRecords has moved the start of the log past a query's checkpoint, failOnDataLoss=true
  fails the query (and a batch read) and failOnDataLoss=false skips the deleted records and goes on;
- throughout, the Spark JVM's log (driver and executor are one JVM with local[2]) shows no protocol
  error, unsupported version or retry, and the broker logs no warning: a test fails if they do.

Offsets that read_committed hides (transaction markers, aborted records) are no data loss to the
connector: its KafkaDataConsumer skips an offset the consumer does not return as long as it is not below
the log start, so read_committed needs no failOnDataLoss=false. The connector (4.2) has no transactional
writer: its producer is idempotent only.

Not covered yet: failOnDataLoss after retention (rather than DeleteRecords) moved the log start.

The JVM side is resolved from Maven Central by compat_tests/spark/setup.sh (part of
compat_tests/setup.sh); the session itself needs no network. Without a JDK, or without the jars and
Maven Central out of reach, every test here fails saying which.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyspark
import pytest
from py4j.protocol import Py4JJavaError
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from compat_tests.clients import OPERATION_TIMEOUT, ConfluentClient, Message
from compat_tests.harness import BrokerProcess
from trafka.wire.records import iter_batches

SPARK_DIR = Path(__file__).resolve().parent / "spark"
SPARK_LIB = SPARK_DIR / "lib"
SPARK_SETUP = SPARK_DIR / "setup.sh"
LOG4J_CONFIG = SPARK_DIR / "log4j2.properties"
#: How long one streaming run (trigger availableNow, or processAllAvailable) may take before the test fails.
QUERY_TIMEOUT = 120
#: A bound on compat_tests/spark/setup.sh, which bounds Maven itself (a no-op when the jars are there).
SETUP_TIMEOUT = 1000
#: A base for record timestamps: an hour ago, on a whole second.
BASE_TIMESTAMP = (int(time.time()) - 3600) * 1000

LOG_ENTRY = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} (?P<level>[A-Z]+) +\[(?P<thread>.*?)\] (?P<logger>\S+): ")
#: What a healthy connector never logs, at any level: protocol errors, unsupported versions, retries.
TROUBLE = re.compile(
    r"UNSUPPORTED_VERSION|UnsupportedVersion|does not support|CORRUPT_MESSAGE|INVALID_REQUEST|InvalidRequest"
    r"|UNKNOWN_SERVER_ERROR|[Uu]nexpected error|[Rr]etry|[Rr]etrying|Backing off|Error sending"
    r"|Error while fetching|Error in response|could not be established|NETWORK_EXCEPTION"
)
BROKER_TROUBLE = re.compile(r" (WARNING|ERROR|CRITICAL) |Traceback")


# --------------------------------------------------------------------------------------- the Spark JVM


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        pytest.fail("no JDK: Spark needs Java 17 or newer, and neither $JAVA_HOME/bin/java nor `java` on PATH "
                    "exists (compat_tests/setup.sh installs default-jdk-headless)", pytrace=False)
    return found


def _connector_jars() -> list[Path]:
    """The connector's jars, from compat_tests/spark/setup.sh: a no-op when compat_tests/setup.sh has run and
    pom.xml has not changed since, a download from Maven Central otherwise."""
    try:
        done = subprocess.run(["bash", str(SPARK_SETUP)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=SETUP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{SPARK_SETUP} did not finish in {SETUP_TIMEOUT} s", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"the Spark Kafka connector's jars are missing and {SPARK_SETUP} could not resolve them:\n"
                    f"{done.stderr.strip()}", pytrace=False)
    connector = SPARK_LIB / f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"
    if not connector.is_file():
        pytest.fail(f"{connector.name} is not in {SPARK_LIB}: the Spark version in {SPARK_DIR / 'pom.xml'} "
                    f"differs from the pyspark pin ({pyspark.__version__}) in pyproject.toml", pytrace=False)
    return sorted(SPARK_LIB.glob("*.jar"))


class SparkJvm:
    """The module's Spark session and the log file its JVM writes."""

    def __init__(self, session: SparkSession, log_path: Path):
        self.session = session
        self.log_path = log_path

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, position: int) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(position)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""


@pytest.fixture(scope="module")
def spark_jvm(tmp_path_factory: pytest.TempPathFactory, broker: BrokerProcess) -> Iterator[SparkJvm]:
    """One small local Spark session for the whole module, with the connector on its class path.

    It depends on the module's broker so that it stops first: Spark keeps its Kafka producers open.
    """
    _java()
    jars = _connector_jars()
    work = tmp_path_factory.mktemp("spark")
    log_path = work / "spark.log"
    java_options = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} -Dtrafka.spark.log={log_path}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # read by the JVM as it starts: loopback only
        session = _session(jars, java_options, work)
    yield SparkJvm(session, log_path)
    gateway = session.sparkContext._gateway
    session.stop()
    # The JVM outlives the session until its gateway is closed; later test modules want the memory back.
    gateway.shutdown()
    process = getattr(gateway, "proc", None)
    if process is not None:
        process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    pyspark.SparkContext._gateway = None
    pyspark.SparkContext._jvm = None


def _session(jars: Sequence[Path], java_options: str, work: Path) -> SparkSession:
    return (
        SparkSession.builder.master("local[2]")
        .appName("trafka-compat-tests")
        .config("spark.jars", ",".join(str(jar) for jar in jars))
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(work / "local"))
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .getOrCreate()
    )


@pytest.fixture(scope="module")
def spark(spark_jvm: SparkJvm) -> SparkSession:
    return spark_jvm.session


class LogCheck:
    """What the Spark JVM and the broker log during one test, and the lines a test expects there."""

    def __init__(self, jvm: SparkJvm, broker: BrokerProcess):
        self.jvm = jvm
        self.broker = broker
        self.spark_mark = jvm.log_size()
        self.broker_mark = len(broker.log_text())
        self.allowed: list[re.Pattern[str]] = []

    def allow(self, pattern: str) -> None:
        """Accept Spark log entries (with their stack traces) matching `pattern`: a test's expected failure."""
        self.allowed.append(re.compile(pattern, re.DOTALL))

    def spark_text(self) -> str:
        return self.jvm.log_since(self.spark_mark)

    def spark_entries(self) -> list[tuple[str, str, str]]:
        """(level, logger, text with any stack trace) of each Spark log entry since the test began."""
        entries: list[tuple[str, str, str]] = []
        for line in self.spark_text().splitlines():
            match = LOG_ENTRY.match(line)
            if match:
                entries.append((match["level"], match["logger"], line))
            elif entries:
                level, logger, text = entries[-1]
                entries[-1] = (level, logger, f"{text}\n{line}")
        return entries

    def problems(self) -> list[str]:
        found = []
        for level, logger, text in self.spark_entries():
            bad = (level in ("ERROR", "FATAL") or (level == "WARN" and logger.startswith("org.apache.kafka."))
                   or TROUBLE.search(text.split("\n", 1)[0]))
            if bad and not any(pattern.search(text) for pattern in self.allowed):
                found.append(text if len(text) < 3000 else text[:3000] + " ...")
        broker_lines = self.broker.log_text()[self.broker_mark:].splitlines()
        found += [f"broker: {line}" for line in broker_lines if BROKER_TROUBLE.search(line)]
        return found


@pytest.fixture(autouse=True)
def log_check(spark_jvm: SparkJvm, broker: BrokerProcess) -> Iterator[LogCheck]:
    """Fails the test when the Spark JVM logged a protocol error, a Kafka client warning or a retry, or
    the broker a warning, while it ran."""
    check = LogCheck(spark_jvm, broker)
    print(f"Spark JVM log: {spark_jvm.log_path}; broker log: {broker.log_path}")
    yield check
    problems = check.problems()
    assert not problems, (f"{len(problems)} unexpected log entries (Spark log {spark_jvm.log_path}):\n"
                          + "\n".join(problems[:20]))


# --------------------------------------------------------------------------------------- helpers


def _produce(broker: BrokerProcess, topic: str, partitions: int, count: int, *, start: int = 0) -> None:
    """`count` records per partition, numbered from `start`: key k<p>-<i>, value v<p>-<i>, a header h=x<i>,
    and timestamp BASE_TIMESTAMP + i seconds."""
    ConfluentClient(broker.bootstrap).produce(topic, [
        Message(f"v{p}-{i}".encode(), key=f"k{p}-{i}".encode(), headers=(("h", f"x{i}".encode()),),
                timestamp=BASE_TIMESTAMP + i * 1000, partition=p)
        for i in range(start, start + count) for p in range(partitions)
    ])


def _read(spark: SparkSession, broker: BrokerProcess, **options: str) -> DataFrame:
    """A batch read with the connector's options (pass dotted names as ``**{"kafka.x": ...}``)."""
    return spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).options(**options).load()


def _stream(spark: SparkSession, broker: BrokerProcess, **options: str) -> DataFrame:
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            .options(**options).load())


def _positions(frame: DataFrame) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of each row, sorted."""
    return sorted((r.topic, r.partition, r.offset) for r in frame.select("topic", "partition", "offset").collect())


def _expected(topic: str, ranges: dict[int, range]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, offsets in ranges.items() for o in offsets)


def _offsets_json(topic: str, offsets: dict[int, int]) -> str:
    return json.dumps({topic: {str(p): o for p, o in offsets.items()}})


def _run_available_now(writer: DataStreamWriter) -> StreamingQuery:
    """Start a query with trigger(availableNow=True) and wait until it has processed what was there."""
    query = writer.trigger(availableNow=True).start()
    if not query.awaitTermination(QUERY_TIMEOUT):
        query.stop()
        pytest.fail(f"the availableNow query did not finish in {QUERY_TIMEOUT} s")
    return query


def _file_sink(frame: DataFrame, output: Path, checkpoint: Path) -> DataStreamWriter:
    return (frame.selectExpr("partition", "offset", "CAST(value AS STRING) AS value").writeStream
            .format("json").option("path", str(output)).option("checkpointLocation", str(checkpoint)))


def _sink_rows(spark: SparkSession, output: Path) -> list[tuple[int, int, str]]:
    """What a file sink committed (Spark reads its _spark_metadata log, so only committed files count)."""
    rows = spark.read.schema("partition INT, offset BIGINT, value STRING").json(str(output)).collect()
    return [(r.partition, r.offset, r.value) for r in rows]


def _input_rows(queries: Sequence[StreamingQuery]) -> list[int]:
    """The row count of each micro-batch that read something."""
    return [p.numInputRows for q in queries for p in q.recentProgress if p.numInputRows]


def _batches(broker: BrokerProcess, topic: str, partition: int) -> list:
    """The record batches on disk in one partition's segments, in order."""
    directory = broker.data_dir / f"{topic}-{partition}"
    found = []
    for segment in sorted(directory.glob("*.log")):
        found += list(iter_batches(segment.read_bytes()))
    return found


def _delete_records(broker: BrokerProcess, topic: str, partition: int, before: int) -> int:
    """DeleteRecords through confluent-kafka's admin client; returns the new log start offset."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.delete_records([TopicPartition(topic, partition, before)],
                                    request_timeout=OPERATION_TIMEOUT).values()
    return future.result(OPERATION_TIMEOUT).low_watermark


def _send(producer, topic: str, records: Sequence[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """Produce (partition, value) pairs with a confluent-kafka producer and flush them to the log; returns
    (partition, offset, value) of each, from its delivery report."""
    results: list = [None] * len(records)

    def report(index: int):
        def on_delivery(err, msg):
            results[index] = err if err else (msg.partition(), msg.offset(), msg.value().decode())
        return on_delivery

    for index, (partition, value) in enumerate(records):
        producer.produce(topic, value=value.encode(), key=value.encode(), partition=partition,
                         on_delivery=report(index))
    assert producer.flush(OPERATION_TIMEOUT) == 0, "records left undelivered"
    assert all(isinstance(r, tuple) for r in results), results
    return results


def _transactional_producer(broker: BrokerProcess, transactional_id: str):
    producer = ConfluentClient(broker.bootstrap).producer(**{"transactional.id": transactional_id})
    producer.init_transactions(OPERATION_TIMEOUT)
    return producer


def _write_transactions(topic: str, txn, plain) -> list[tuple[int, int, str]]:
    """Committed and aborted transactions over both partitions of `topic`, with plain records between
    them and one inside an aborted transaction; every record is flushed to the log before its transaction
    ends. Partition 0 ends with an abort marker, partition 1 with a commit marker. Returns (partition,
    offset, value) of every record written, in order; the value says what it is: plain-*, committed-*,
    aborted-*."""
    both = (0, 1)
    written = _send(plain, topic, [(p, f"plain-0-{p}") for p in both])
    txn.begin_transaction()
    written += _send(txn, topic, [(p, f"committed-1-{p}.{i}") for i in range(3) for p in both])
    txn.commit_transaction(OPERATION_TIMEOUT)
    txn.begin_transaction()
    written += _send(txn, topic, [(p, f"aborted-2-{p}.{i}") for i in range(2) for p in both])
    written += _send(plain, topic, [(p, f"plain-3-{p}") for p in both])  # within the aborted range
    written += _send(txn, topic, [(p, f"aborted-2-{p}.2") for p in both])
    txn.abort_transaction(OPERATION_TIMEOUT)
    written += _send(plain, topic, [(p, f"plain-4-{p}") for p in both])
    txn.begin_transaction()
    written += _send(txn, topic, [(p, f"committed-5-{p}.{i}") for i in range(2) for p in both])
    txn.commit_transaction(OPERATION_TIMEOUT)
    txn.begin_transaction()
    written += _send(txn, topic, [(0, f"aborted-6-0.{i}") for i in range(2)])
    txn.abort_transaction(OPERATION_TIMEOUT)
    return written


def _committed(records: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    return [r for r in records if not r[2].startswith("aborted-")]


def _per_partition(rows: Sequence[tuple[int, int, str]]) -> dict[int, list[tuple[int, str]]]:
    """{partition: [(offset, value), ...]} keeping the order of `rows` within each partition."""
    found: dict[int, list[tuple[int, str]]] = {}
    for partition, offset, value in rows:
        found.setdefault(partition, []).append((offset, value))
    return found


def _sorted_per_partition(rows: Sequence[tuple[int, int, str]]) -> dict[int, list[tuple[int, str]]]:
    return _per_partition(sorted(rows))


def _values_read(frame: DataFrame) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of each row, in the order Spark returned them."""
    rows = frame.selectExpr("partition", "offset", "CAST(value AS STRING) AS value").collect()
    return [(r.partition, r.offset, r.value) for r in rows]


# --------------------------------------------------------------------------------------- batch


def test_batch_write_lands_each_row_once_through_an_idempotent_producer(spark, broker, topic):
    name = topic(partitions=3)
    frame = spark.createDataFrame(
        [(f"k{i}".encode(), f"v{i}".encode(), i % 3) for i in range(30)], "key BINARY, value BINARY, partition INT",
    ).selectExpr("key", "value", "partition",
                 "array(named_struct('key', 'origin', 'value', CAST('spark' AS BINARY)),"
                 "      named_struct('key', 'copy', 'value', value)) AS headers")
    frame.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", name).save()

    consumed = ConfluentClient(broker.bootstrap).consume(name, 30)
    assert sorted((c.partition, c.key, c.value, c.headers) for c in consumed) == sorted(
        (i % 3, f"k{i}".encode(), f"v{i}".encode(), (("origin", b"spark"), ("copy", f"v{i}".encode())))
        for i in range(30))
    assert {p: sorted(c.offset for c in consumed if c.partition == p) for p in range(3)} == {
        p: list(range(10)) for p in range(3)}
    # The connector leaves kafka-clients' defaults: an idempotent producer (which implies acks=all), so
    # every batch it wrote carries a producer id and sequence numbers.
    batches = [batch for p in range(3) for batch in _batches(broker, name, p)]
    assert batches and all(b.producer_id >= 0 and b.base_sequence >= 0 for b in batches), batches


def test_batch_read_row_schema_offsets_and_headers(spark, broker, topic):
    name = topic(partitions=3)
    _produce(broker, name, 3, 10)

    with_headers = _read(spark, broker, subscribe=name, includeHeaders="true")
    assert [(f.name, f.dataType.simpleString()) for f in with_headers.schema] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"), ("headers", "array<struct<key:string,value:binary>>")]
    rows = with_headers.selectExpr("partition", "offset", "key", "value", "unix_millis(timestamp) AS ts",
                                   "timestampType", "headers").collect()
    assert sorted((r.partition, r.offset, r.key, r.value, r.ts, r.timestampType,
                   [(h.key, h.value) for h in r.headers]) for r in rows) == [
        (p, i, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), BASE_TIMESTAMP + i * 1000, 0, [("h", f"x{i}".encode())])
        for p in range(3) for i in range(10)]

    without_headers = _read(spark, broker, subscribe=name, startingOffsets="earliest", endingOffsets="latest")
    assert [f.name for f in without_headers.schema] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert _positions(without_headers) == _expected(name, {p: range(10) for p in range(3)})

    # Per-partition JSON: -2 is earliest, -1 latest; an ending offset is exclusive.
    ranged = _read(spark, broker, subscribe=name, startingOffsets=_offsets_json(name, {0: 2, 1: -2, 2: 5}),
                   endingOffsets=_offsets_json(name, {0: 7, 1: 4, 2: -1}))
    assert _positions(ranged) == _expected(name, {0: range(2, 7), 1: range(0, 4), 2: range(5, 10)})


def test_batch_read_from_timestamps(spark, broker, topic):
    name = topic(partitions=2)
    _produce(broker, name, 2, 10)

    by_partition = _read(spark, broker, subscribe=name, startingOffsetsByTimestamp=_offsets_json(
        name, {0: BASE_TIMESTAMP + 3000, 1: BASE_TIMESTAMP + 7500}))
    assert _positions(by_partition) == _expected(name, {0: range(3, 10), 1: range(8, 10)})

    everywhere = _read(spark, broker, subscribe=name, startingTimestamp=str(BASE_TIMESTAMP + 5000))
    assert _positions(everywhere) == _expected(name, {0: range(5, 10), 1: range(5, 10)})

    window = _read(spark, broker, subscribe=name, startingTimestamp=str(BASE_TIMESTAMP + 2000),
                   endingOffsetsByTimestamp=_offsets_json(name, {0: BASE_TIMESTAMP + 6000, 1: BASE_TIMESTAMP + 4500}))
    assert _positions(window) == _expected(name, {0: range(2, 6), 1: range(2, 5)})

    # No record is that recent: ListOffsets finds no offset, and the "latest" strategy starts at the end.
    beyond = _read(spark, broker, subscribe=name, startingTimestamp=str(BASE_TIMESTAMP + 3_600_000),
                   startingOffsetsByTimestampStrategy="latest")
    assert _positions(beyond) == []


def test_batch_read_subscribe_pattern_and_assign(spark, broker, topic):
    first, second = topic(partitions=1), topic(partitions=2)
    _produce(broker, first, 1, 3)
    _produce(broker, second, 2, 3)

    # Both names are "<this test's name>-<number>"; the pattern matches this test's topics only.
    pattern = re.escape(first.rsplit("-", 1)[0]) + r"-\d+"
    assert _positions(_read(spark, broker, subscribePattern=pattern)) == sorted(
        _expected(first, {0: range(3)}) + _expected(second, {0: range(3), 1: range(3)}))

    assigned = _read(spark, broker, assign=json.dumps({first: [0], second: [1]}))
    assert _positions(assigned) == sorted(_expected(first, {0: range(3)}) + _expected(second, {1: range(3)}))


def test_read_committed_reads_non_transactional_records(spark, broker, topic, tmp_path):
    # No transaction in this topic: read_committed must see every record (the last stable offset is the
    # high watermark). Transactions are in test_read_committed_batch_read_skips_aborted_transactions.
    name = topic(partitions=2)
    _produce(broker, name, 2, 5)
    committed = _read(spark, broker, subscribe=name, **{"kafka.isolation.level": "read_committed"})
    assert _positions(committed) == _expected(name, {0: range(5), 1: range(5)})
    _produce(broker, name, 2, 3, start=5)
    streamed = _stream(spark, broker, subscribe=name, startingOffsets="earliest",
                       **{"kafka.isolation.level": "read_committed"})
    query = _run_available_now(streamed.selectExpr("topic", "partition", "offset").writeStream.format("memory")
                               .queryName(f"committed_{name.rsplit('-', 1)[1]}")
                               .option("checkpointLocation", str(tmp_path / "checkpoint")))
    assert _positions(spark.table(query.name)) == _expected(name, {0: range(8), 1: range(8)})


def test_read_committed_batch_read_skips_aborted_transactions(spark, broker, topic):
    name = topic(partitions=2)
    plain = ConfluentClient(broker.bootstrap).producer(acks="all")
    txn = _transactional_producer(broker, f"spark-{name}")
    written = _write_transactions(name, txn, plain)
    committed = _committed(written)
    assert len(committed) < len(written)

    def read(isolation: str) -> list[tuple[int, int, str]]:
        return _values_read(_read(spark, broker, subscribe=name, startingOffsets="earliest", endingOffsets="latest",
                                  failOnDataLoss="true", **{"kafka.isolation.level": isolation}))

    # Each Kafka partition is one Spark task that reads its records in offset order: the rows of one
    # partition come back in log order, the markers' and aborted records' offsets skipped.
    assert _per_partition(read("read_committed")) == _sorted_per_partition(committed)
    assert _per_partition(read("read_uncommitted")) == _sorted_per_partition(written)


# --------------------------------------------------------------------------------------- streaming


def test_streaming_file_sink_processes_each_record_once_across_restarts(spark, broker, topic, tmp_path):
    name = topic(partitions=2)
    output, checkpoint = tmp_path / "output", tmp_path / "checkpoint"
    _produce(broker, name, 2, 10)

    def source() -> DataFrame:
        return _stream(spark, broker, subscribe=name, startingOffsets="earliest", maxOffsetsPerTrigger="6")

    # A long-running query (the default trigger), stopped once it has caught up.
    running = _file_sink(source(), output, checkpoint).start()
    try:
        running.processAllAvailable()
    finally:
        running.stop()
    assert running.exception() is None
    assert len(_sink_rows(spark, output)) == 20

    # More records, then two restarts from the checkpoint: the second finds nothing new.
    _produce(broker, name, 2, 5, start=10)
    restarted = _run_available_now(_file_sink(source(), output, checkpoint))
    idle = _run_available_now(_file_sink(source(), output, checkpoint))

    rows = _sink_rows(spark, output)
    assert Counter(Counter(rows).values()) == {1: 30}, "a record was processed twice"
    assert sorted(rows) == sorted((p, i, f"v{p}-{i}") for p in range(2) for i in range(15))
    batches = _input_rows([running, restarted, idle])
    assert sum(batches) == 30 and max(batches) <= 6, batches
    assert _input_rows([idle]) == []


def test_streaming_from_latest_reads_only_what_comes_after_the_start(spark, broker, topic, tmp_path):
    name = topic(partitions=2)
    _produce(broker, name, 2, 3)
    frame = _stream(spark, broker, subscribe=name, startingOffsets="latest")
    query = (frame.selectExpr("topic", "partition", "offset").writeStream.format("memory")
             .queryName(f"latest_{name.rsplit('-', 1)[1]}").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .start())
    try:
        query.processAllAvailable()
        assert _positions(spark.table(query.name)) == []
        _produce(broker, name, 2, 2, start=3)
        query.processAllAvailable()
        assert _positions(spark.table(query.name)) == _expected(name, {0: range(3, 5), 1: range(3, 5)})
    finally:
        query.stop()
    assert query.exception() is None


def test_streaming_min_partitions_splits_a_partition_into_tasks(spark, broker, topic, tmp_path):
    name = topic(partitions=1)
    _produce(broker, name, 1, 12)
    output = tmp_path / "output"
    frame = _stream(spark, broker, subscribe=name, startingOffsets="earliest", minPartitions="3")
    _run_available_now(_file_sink(frame, output, tmp_path / "checkpoint"))
    assert sorted(_sink_rows(spark, output)) == [(0, i, f"v0-{i}") for i in range(12)]
    # One task per offset range, each writing its own file: three ranges over the one Kafka partition.
    assert len(list(output.glob("part-*.json"))) == 3


def test_streaming_write_to_a_topic_with_a_checkpoint(spark, broker, topic, tmp_path):
    source, target = topic(partitions=2), topic(partitions=2)
    checkpoint = tmp_path / "checkpoint"
    _produce(broker, source, 2, 4)

    def run() -> None:
        upper = _stream(spark, broker, subscribe=source, startingOffsets="earliest", includeHeaders="true").selectExpr(
            "key", "upper(CAST(value AS STRING)) AS value", "partition", "headers")
        _run_available_now(upper.writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                           .option("topic", target).option("checkpointLocation", str(checkpoint)))

    run()
    _produce(broker, source, 2, 3, start=4)
    run()

    consumed = ConfluentClient(broker.bootstrap).consume(target, 14)
    assert sorted((c.partition, c.key, c.value, c.headers) for c in consumed) == sorted(
        (p, f"k{p}-{i}".encode(), f"V{p}-{i}".encode(), (("h", f"x{i}".encode()),)) for p in range(2) for i in range(7))
    assert sum(len(_batches(broker, target, p)) for p in range(2)) > 0
    assert all(b.producer_id >= 0 for p in range(2) for b in _batches(broker, target, p))


@pytest.mark.parametrize("fail_on_data_loss", [True, False], ids=["failOnDataLoss=true", "failOnDataLoss=false"])
def test_fail_on_data_loss_after_delete_records(spark, broker, topic, tmp_path, log_check, fail_on_data_loss):
    name = topic(partitions=1)
    output, checkpoint = tmp_path / "output", tmp_path / "checkpoint"
    option = str(fail_on_data_loss).lower()
    _produce(broker, name, 1, 10)

    def run() -> StreamingQuery:
        frame = _stream(spark, broker, subscribe=name, startingOffsets="earliest", failOnDataLoss=option)
        return _run_available_now(_file_sink(frame, output, checkpoint))

    run()
    assert len(_sink_rows(spark, output)) == 10
    _produce(broker, name, 1, 10, start=10)
    assert _delete_records(broker, name, 0, 15) == 15
    from_deleted = _offsets_json(name, {0: 10})

    if fail_on_data_loss:
        # Spark's failure of the query and of the batch job is this test's expected outcome.
        log_check.allow(r"data may have been lost|DATA_LOSS|aborting job|terminated with error"
                        r"|Task attempt \S+ aborted")
        with pytest.raises(StreamingQueryException, match="(?i)lost|DATA_LOSS"):
            run()
        assert sorted(_sink_rows(spark, output)) == [(0, i, f"v0-{i}") for i in range(10)]
        with pytest.raises((Py4JJavaError, PySparkException), match="(?i)lost|DATA_LOSS"):
            _read(spark, broker, subscribe=name, startingOffsets=from_deleted, failOnDataLoss=option).collect()
    else:
        run()
        assert sorted(_sink_rows(spark, output)) == [(0, i, f"v0-{i}") for i in [*range(10), *range(15, 20)]]
        skipped = _read(spark, broker, subscribe=name, startingOffsets=from_deleted, failOnDataLoss=option)
        assert _positions(skipped) == _expected(name, {0: range(15, 20)})


def test_read_committed_streaming_skips_aborted_and_waits_for_open_transactions(spark, broker, topic, tmp_path):
    name = topic(partitions=2)
    output, checkpoint = tmp_path / "output", tmp_path / "checkpoint"
    plain = ConfluentClient(broker.bootstrap).producer(acks="all")
    txn = _transactional_producer(broker, f"spark-{name}")
    written = _write_transactions(name, txn, plain)

    def run() -> list[tuple[int, int, str]]:
        frame = _stream(spark, broker, subscribe=name, startingOffsets="earliest", failOnDataLoss="true",
                        **{"kafka.isolation.level": "read_committed"})
        _run_available_now(_file_sink(frame, output, checkpoint))
        return _sink_rows(spark, output)

    assert _sorted_per_partition(run()) == _sorted_per_partition(_committed(written))

    # An open transaction holds the last stable offset: neither its records nor the plain ones behind it
    # are read until it commits; then each of them is, once.
    txn.begin_transaction()
    pending = _send(txn, name, [(p, f"committed-7-{p}.{i}") for i in range(2) for p in (0, 1)])
    pending += _send(plain, name, [(p, f"plain-8-{p}") for p in (0, 1)])
    assert _sorted_per_partition(run()) == _sorted_per_partition(_committed(written))
    txn.commit_transaction(OPERATION_TIMEOUT)
    assert _sorted_per_partition(run()) == _sorted_per_partition(_committed(written) + pending)
