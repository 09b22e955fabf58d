"""One adapter per real Kafka client, all behind the same small interface.

The compatibility tests speak in `Message`s (what to produce), `Delivery`s (where the broker put them)
and `Consumed` records (what a consumer read back). Every adapter drives an unmodified client with its
own defaults, except where a test asks for something (a compression codec, a bigger timeout):

- ``kafka-python`` and ``aiokafka`` in-process (aiokafka inside its own asyncio loop),
- ``confluent-kafka`` (librdkafka) in-process,
- ``kafkajs`` through ``compat_tests/js/driver.js`` (one node process per operation, JSON on stdio),
- ``kcat`` as a subprocess (Debian's build, librdkafka 2.0.x),
- ``java``, Apache Kafka's Java client (kafka-clients), through ``compat_tests/java/Driver.java``: one JVM
  shared by the whole session, one JSON command and one JSON answer per line on its stdin and stdout.

Consumers read with manual partition assignment from the beginning, without a consumer group, except
kafkajs whose consumer always joins a group. Failures that carry a Kafka error surface as `ClientError`
with the Kafka error name, whichever client reported them.
"""

from __future__ import annotations

import asyncio
import base64
import atexit
import concurrent.futures
import hashlib
import itertools
import json
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple

from trafka.wire.errors import ErrorCode

#: Bound for every client operation, so that a broker that stops answering fails a test instead of hanging it.
OPERATION_TIMEOUT = 20.0
JS_DRIVER = Path(__file__).parent / "js" / "driver.js"
JAVA_DIR = Path(__file__).parent / "java"
_LIBRDKAFKA_LOGGER = logging.getLogger("librdkafka")
CODECS = ("gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class Message:
    """A record to produce. `timestamp` None lets the client stamp it; `partition` None lets it choose."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None
    partition: int | None = None


class Delivery(NamedTuple):
    """Where the broker acknowledged a produced record (offset None when the client does not tell)."""

    partition: int
    offset: int | None


@dataclass(frozen=True)
class Consumed:
    """A record as a consumer read it back."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


class ClientError(Exception):
    """A client reported a failure; `error` is the Kafka error name when the client gave a Kafka code."""

    def __init__(self, client: str, error: str | None, detail: str):
        super().__init__(f"{client}: {error or 'error'}: {detail}")
        self.client = client
        self.error = error
        self.detail = detail


def error_name(code: int | None) -> str | None:
    """The Kafka name of a protocol error code (None for codes outside Kafka's table)."""
    try:
        return None if code is None else ErrorCode(code).name
    except ValueError:
        return None


class Client:
    """The operations every test uses; an adapter sets `capabilities` for what its client cannot do."""

    name: ClassVar[str]
    #: What the client can do beyond produce, consume and metadata: per_message_headers,
    #: per_message_timestamps, per_message_partition (when producing), admin, list_offsets.
    capabilities: ClassVar[frozenset[str]]

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def produce(self, topic: str, messages: Sequence[Message], *, compression: str = "none",
                **settings: object) -> list[Delivery]:
        """Produce `messages` in order and wait for every acknowledgement; raises ClientError.
        `settings` are producer settings in the client's own names (``acks=0``, ``linger.ms``...)."""
        raise NotImplementedError

    def consume(self, topic: str, count: int, *, partitions: Iterable[int] | None = None, offset: int | None = None,
                timeout: float = OPERATION_TIMEOUT) -> list[Consumed]:
        """Read exactly `count` records of `partitions` (default: all) from `offset` (default: the
        beginning), sorted by (partition, offset)."""
        raise NotImplementedError

    def list_topics(self) -> set[str]:
        raise NotImplementedError

    def partitions(self, topic: str) -> list[int]:
        """The partition ids of `topic` from metadata (ClientError UNKNOWN_TOPIC_OR_PARTITION if absent)."""
        raise NotImplementedError

    # Admin and offset look-ups (capabilities "admin" and "list_offsets").
    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        raise NotImplementedError

    def delete_topic(self, topic: str) -> None:
        raise NotImplementedError

    def create_partitions(self, topic: str, total: int) -> None:
        raise NotImplementedError

    def describe_configs(self, topic: str) -> dict[str, str | None]:
        raise NotImplementedError

    def watermarks(self, topic: str) -> dict[int, tuple[int, int]]:
        """{partition: (earliest offset, latest offset)} from ListOffsets."""
        raise NotImplementedError

    def offsets_for_time(self, topic: str, timestamp: int) -> dict[int, int | None]:
        """{partition: first offset whose timestamp >= `timestamp`, None where there is none}."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.name} client for {self.bootstrap}>"


def _sorted(records: Iterable[Consumed]) -> list[Consumed]:
    return sorted(records, key=lambda r: (r.partition, r.offset))


def _timed_out(client: str, records: Sequence[Consumed], count: int, timeout: float) -> ClientError:
    return ClientError(client, None, f"consumed {len(records)} of {count} records within {timeout} s: {records!r:.2000}")


# --------------------------------------------------------------------------------------- kafka-python


class KafkaPythonClient(Client):
    name = "kafka-python"
    capabilities = frozenset({"per_message_headers", "per_message_timestamps", "per_message_partition",
                              "admin", "list_offsets"})

    def _error(self, exc: Exception) -> ClientError:
        return ClientError(self.name, error_name(getattr(exc, "errno", None)), repr(exc))

    def produce(self, topic, messages, *, compression="none", **settings):
        from kafka import KafkaProducer
        import kafka.errors

        # Default settings otherwise: kafka-python 3 is idempotent with acks=all out of the box.
        producer = KafkaProducer(bootstrap_servers=self.bootstrap,
                                 compression_type=None if compression == "none" else compression, **settings)
        try:
            futures = [producer.send(topic, value=m.value, key=m.key, headers=list(m.headers),
                                     partition=m.partition, timestamp_ms=m.timestamp) for m in messages]
            producer.flush(OPERATION_TIMEOUT)
            deliveries = []
            for future in futures:
                metadata = future.get(OPERATION_TIMEOUT)
                deliveries.append(Delivery(metadata.partition, metadata.offset))
            return deliveries
        except kafka.errors.KafkaError as exc:
            raise self._error(exc) from exc
        finally:
            producer.close(timeout=5)

    def _consumer(self, **config):
        from kafka import KafkaConsumer

        return KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=15000, **config)

    def _topic_partitions(self, consumer, topic):
        from kafka import TopicPartition

        ids = _wait_for(lambda: consumer.partitions_for_topic(topic), f"{self.name} metadata for {topic}")
        return [TopicPartition(topic, p) for p in sorted(ids)]

    def consume(self, topic, count, *, partitions=None, offset=None, timeout=OPERATION_TIMEOUT):
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            assignment = ([TopicPartition(topic, p) for p in partitions] if partitions is not None
                          else self._topic_partitions(consumer, topic))
            consumer.assign(assignment)
            if offset is None:
                consumer.seek_to_beginning(*assignment)
            else:
                for tp in assignment:
                    consumer.seek(tp, offset)
            records: list[Consumed] = []
            deadline = time.monotonic() + timeout
            while len(records) < count and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    records += [Consumed(r.partition, r.offset, r.key, r.value,
                                         tuple((k, v) for k, v in r.headers), r.timestamp) for r in batch]
            if len(records) < count:
                raise _timed_out(self.name, records, count, timeout)
            return _sorted(records)
        finally:
            consumer.close()

    def watermarks(self, topic):
        consumer = self._consumer()
        try:
            assignment = self._topic_partitions(consumer, topic)
            earliest = consumer.beginning_offsets(assignment)
            latest = consumer.end_offsets(assignment)
            return {tp.partition: (earliest[tp], latest[tp]) for tp in assignment}
        finally:
            consumer.close()

    def offsets_for_time(self, topic, timestamp):
        consumer = self._consumer()
        try:
            assignment = self._topic_partitions(consumer, topic)
            found = consumer.offsets_for_times({tp: timestamp for tp in assignment})
            return {tp.partition: (None if found[tp] is None else found[tp].offset) for tp in assignment}
        finally:
            consumer.close()

    def _admin(self, action):
        from kafka import KafkaAdminClient
        import kafka.errors

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15000)
        try:
            return action(admin)
        except kafka.errors.KafkaError as exc:
            raise self._error(exc) from exc
        finally:
            admin.close()

    def create_topic(self, topic, partitions, replication_factor=1, configs=None):
        spec = {"num_partitions": partitions, "replication_factor": replication_factor, "configs": configs or {}}
        self._admin(lambda admin: admin.create_topics({topic: spec}))

    def delete_topic(self, topic):
        self._admin(lambda admin: admin.delete_topics([topic]))

    def list_topics(self):
        return set(self._admin(lambda admin: admin.list_topics()))

    def partitions(self, topic):
        [description] = self._admin(lambda admin: admin.describe_topics([topic]))
        if description["error_code"]:
            raise ClientError(self.name, error_name(description["error_code"]), repr(description))
        return sorted(p["partition_index"] for p in description["partitions"])

    def create_partitions(self, topic, total):
        self._admin(lambda admin: admin.create_partitions({topic: total}))

    def describe_configs(self, topic):
        from kafka.admin import ConfigResource, ConfigResourceType

        result = self._admin(lambda admin: admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"))
        [by_name] = result.values()
        entries = by_name[topic]
        return {name: (entry["value"] if isinstance(entry, dict) else entry) for name, entry in entries.items()}


# --------------------------------------------------------------------------------------- confluent-kafka


class ConfluentClient(Client):
    name = "confluent-kafka"
    capabilities = frozenset({"per_message_headers", "per_message_timestamps", "per_message_partition",
                              "admin", "list_offsets"})

    def _error(self, kafka_error) -> ClientError:
        return ClientError(self.name, error_name(kafka_error.code()), f"{kafka_error.name()}: {kafka_error.str()}")

    def _config(self, **config) -> dict:
        # librdkafka logs through Python logging (pytest shows it with a failing test) rather than
        # straight to stderr, where a client still alive after its test would go on reconnecting aloud.
        return {"bootstrap.servers": self.bootstrap, "logger": _LIBRDKAFKA_LOGGER, **config}

    def producer(self, **config):
        """A confluent-kafka Producer with the client's defaults plus `config`."""
        from confluent_kafka import Producer

        return Producer(self._config(**config))

    def produce(self, topic, messages, *, compression="none", **settings):
        producer = self.producer(**{"compression.type": compression, **settings})
        results: list[Delivery | ClientError | None] = [None] * len(messages)

        def on_delivery(index):
            def report(err, msg):
                # With acks=0 the broker says nothing, and librdkafka reports no offset (or an invalid one).
                offset = msg.offset()
                offset = offset if offset is not None and offset >= 0 else None
                results[index] = self._error(err) if err else Delivery(msg.partition(), offset)
            return report

        for index, m in enumerate(messages):
            optional = {}
            if m.partition is not None:
                optional["partition"] = m.partition
            if m.timestamp is not None:
                optional["timestamp"] = m.timestamp
            producer.produce(topic, value=m.value, key=m.key, headers=list(m.headers) or None,
                             on_delivery=on_delivery(index), **optional)
            producer.poll(0)
        remaining = producer.flush(OPERATION_TIMEOUT)
        if remaining:
            raise ClientError(self.name, None, f"{remaining} messages undelivered after {OPERATION_TIMEOUT} s")
        for result in results:
            if isinstance(result, ClientError):
                raise result
        return results

    def _consumer(self):
        from confluent_kafka import Consumer

        # librdkafka insists on a group.id, but assign() reads without joining the group.
        return Consumer(self._config(**{"group.id": f"compat-assign-{uuid.uuid4()}", "enable.auto.commit": False,
                                        "auto.offset.reset": "earliest"}))

    def _partition_ids(self, client, topic):
        def lookup():
            metadata = client.list_topics(topic, timeout=5)
            found = metadata.topics.get(topic)
            return sorted(found.partitions) if found is not None and found.error is None else None
        return _wait_for(lookup, f"{self.name} metadata for {topic}")

    def consume(self, topic, count, *, partitions=None, offset=None, timeout=OPERATION_TIMEOUT):
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer = self._consumer()
        try:
            ids = list(partitions) if partitions is not None else self._partition_ids(consumer, topic)
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING if offset is None else offset) for p in ids])
            records: list[Consumed] = []
            deadline = time.monotonic() + timeout
            while len(records) < count and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=count - len(records), timeout=0.2):
                    if msg.error():
                        raise self._error(msg.error())
                    records.append(Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                            tuple(msg.headers() or ()), msg.timestamp()[1]))
            if len(records) < count:
                raise _timed_out(self.name, records, count, timeout)
            return _sorted(records)
        finally:
            consumer.close()

    def watermarks(self, topic):
        from confluent_kafka import KafkaException, TopicPartition

        consumer = self._consumer()
        try:
            return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=OPERATION_TIMEOUT,
                                                      cached=False)
                    for p in self._partition_ids(consumer, topic)}
        except KafkaException as exc:
            raise self._error(exc.args[0]) from exc
        finally:
            consumer.close()

    def offsets_for_time(self, topic, timestamp):
        from confluent_kafka import KafkaException, TopicPartition

        consumer = self._consumer()
        try:
            ids = self._partition_ids(consumer, topic)
            found = consumer.offsets_for_times([TopicPartition(topic, p, timestamp) for p in ids],
                                               timeout=OPERATION_TIMEOUT)
            for tp in found:
                if tp.error:
                    raise self._error(tp.error)
            # librdkafka reports "no such offset" as OFFSET_END (-1).
            return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in found}
        except KafkaException as exc:
            raise self._error(exc.args[0]) from exc
        finally:
            consumer.close()

    def _admin_call(self, operation: str, *arguments, **options):
        """Run one AdminClient operation and wait for its results (the client must outlive its futures)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self._config())
        try:
            return [future.result(OPERATION_TIMEOUT)
                    for future in getattr(admin, operation)(*arguments, **options).values()]
        except KafkaException as exc:
            raise self._error(exc.args[0]) from exc
        except concurrent.futures.TimeoutError as exc:
            raise ClientError(self.name, None, f"{operation} got no answer in {OPERATION_TIMEOUT} s") from exc

    def _metadata(self, topic: str | None = None):
        from confluent_kafka.admin import AdminClient

        return AdminClient(self._config()).list_topics(topic, timeout=OPERATION_TIMEOUT)

    def create_topic(self, topic, partitions, replication_factor=1, configs=None):
        from confluent_kafka.admin import NewTopic

        self._admin_call("create_topics", [NewTopic(topic, partitions, replication_factor, config=configs or {})],
                         operation_timeout=10)

    def delete_topic(self, topic):
        self._admin_call("delete_topics", [topic], operation_timeout=10)

    def list_topics(self):
        return set(self._metadata().topics)

    def partitions(self, topic):
        found = self._metadata(topic).topics[topic]
        if found.error is not None:
            raise self._error(found.error)
        return sorted(found.partitions)

    def create_partitions(self, topic, total):
        from confluent_kafka.admin import NewPartitions

        self._admin_call("create_partitions", [NewPartitions(topic, total)], operation_timeout=10)

    def describe_configs(self, topic):
        from confluent_kafka.admin import ConfigResource, ResourceType

        [entries] = self._admin_call("describe_configs", [ConfigResource(ResourceType.TOPIC, topic)])
        return {name: entry.value for name, entry in entries.items()}


# --------------------------------------------------------------------------------------- aiokafka


class AiokafkaClient(Client):
    name = "aiokafka"
    capabilities = frozenset({"per_message_headers", "per_message_timestamps", "per_message_partition",
                              "list_offsets"})

    def _error(self, exc: Exception) -> ClientError:
        return ClientError(self.name, error_name(getattr(exc, "errno", None)), repr(exc))

    def _run(self, coroutine):
        import aiokafka.errors

        try:
            return asyncio.run(asyncio.wait_for(coroutine, OPERATION_TIMEOUT * 2))
        except aiokafka.errors.KafkaError as exc:
            raise self._error(exc) from exc

    def produce(self, topic, messages, *, compression="none", **settings):
        from aiokafka import AIOKafkaProducer

        async def run():
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap,
                                        compression_type=None if compression == "none" else compression, **settings)
            await producer.start()
            try:
                futures = [await producer.send(topic, value=m.value, key=m.key, partition=m.partition,
                                               timestamp_ms=m.timestamp, headers=list(m.headers))
                           for m in messages]
                return [Delivery(metadata.partition, metadata.offset)
                        for metadata in await asyncio.gather(*futures)]
            finally:
                await producer.stop()

        return self._run(run())

    async def _with_consumer(self, action):
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            return await action(consumer)
        finally:
            await consumer.stop()

    async def _topic_partitions(self, consumer, topic):
        from aiokafka import TopicPartition

        # The consumer's own metadata only covers assigned topics; ask the cluster (as topics() does).
        deadline = time.monotonic() + OPERATION_TIMEOUT
        while not (ids := (await consumer._client.fetch_all_metadata()).partitions_for_topic(topic)):
            if time.monotonic() > deadline:
                raise ClientError(self.name, None, f"no metadata for {topic}")
            await asyncio.sleep(0.05)
        return [TopicPartition(topic, p) for p in sorted(ids)]

    def consume(self, topic, count, *, partitions=None, offset=None, timeout=OPERATION_TIMEOUT):
        from aiokafka import TopicPartition

        async def read(consumer):
            assignment = ([TopicPartition(topic, p) for p in partitions] if partitions is not None
                          else await self._topic_partitions(consumer, topic))
            consumer.assign(assignment)
            if offset is None:
                await consumer.seek_to_beginning(*assignment)
            else:
                for tp in assignment:
                    consumer.seek(tp, offset)
            records: list[Consumed] = []
            deadline = time.monotonic() + timeout
            while len(records) < count and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    records += [Consumed(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                                for r in batch]
            if len(records) < count:
                raise _timed_out(self.name, records, count, timeout)
            return _sorted(records)

        return self._run(self._with_consumer(read))

    def list_topics(self):
        async def look_up(consumer):
            return set(await consumer.topics())

        return self._run(self._with_consumer(look_up))

    def partitions(self, topic):
        async def look_up(consumer):
            return sorted(tp.partition for tp in await self._topic_partitions(consumer, topic))

        return self._run(self._with_consumer(look_up))

    def watermarks(self, topic):
        async def look_up(consumer):
            assignment = await self._topic_partitions(consumer, topic)
            earliest = await consumer.beginning_offsets(assignment)
            latest = await consumer.end_offsets(assignment)
            return {tp.partition: (earliest[tp], latest[tp]) for tp in assignment}

        return self._run(self._with_consumer(look_up))

    def offsets_for_time(self, topic, timestamp):
        async def look_up(consumer):
            assignment = await self._topic_partitions(consumer, topic)
            found = await consumer.offsets_for_times({tp: timestamp for tp in assignment})
            return {tp.partition: (None if found[tp] is None else found[tp].offset) for tp in assignment}

        return self._run(self._with_consumer(look_up))


# --------------------------------------------------------------------------------------- kafkajs


class KafkajsClient(Client):
    name = "kafkajs"
    # kafkajs ships gzip only; its consumer always joins a consumer group.
    capabilities = frozenset({"per_message_headers", "per_message_timestamps", "per_message_partition",
                              "admin", "list_offsets"})
    codecs = frozenset({"gzip"})

    def call(self, op: str, timeout: float = OPERATION_TIMEOUT * 2, **arguments):
        """Run one driver.js operation; returns its result or raises ClientError."""
        if not (JS_DRIVER.parent / "node_modules" / "kafkajs").is_dir():
            raise ClientError(self.name, None, "kafkajs is not installed: run compat_tests/setup.sh")
        command = json.dumps({"op": op, "bootstrap": self.bootstrap, **arguments})
        try:
            completed = subprocess.run(["node", str(JS_DRIVER)], input=command, capture_output=True, text=True,
                                       timeout=timeout, cwd=JS_DRIVER.parent)
        except subprocess.TimeoutExpired as exc:
            raise ClientError(self.name, None, f"{op} did not finish in {timeout} s; stderr:\n{exc.stderr}") from exc
        try:
            output = json.loads(completed.stdout)
        except json.JSONDecodeError:
            raise ClientError(self.name, None, f"{op}: exit {completed.returncode}, stdout {completed.stdout!r}, "
                                               f"stderr:\n{completed.stderr}") from None
        if not output["ok"]:
            error = output["error"]
            names = [error_name(code) for code in error["codes"]] + error["types"]
            kafka_name = next((name for name in names if name and name in ErrorCode.__members__), None)
            raise ClientError(self.name, kafka_name, f"{error}; stderr:\n{completed.stderr[-3000:]}")
        return output["result"]

    def produce(self, topic, messages, *, compression="none", **settings):
        """`settings`: ``idempotent`` (producer option) and ``acks`` (per send), as kafkajs names them."""
        if compression not in self.codecs | {"none"}:
            raise ValueError(f"kafkajs has no built-in {compression} codec")
        payload = [{"key": _b64(m.key), "value": _b64(m.value), "partition": m.partition, "timestamp": m.timestamp,
                    "headers": [[name, _b64(value)] for name, value in m.headers]} for m in messages]
        result = self.call("produce", topic=topic, messages=payload, compression=compression, **settings)
        return [Delivery(d["partition"], d["offset"]) for d in result]

    def consume(self, topic, count, *, partitions=None, offset=None, timeout=OPERATION_TIMEOUT, group_id=None):
        if partitions is not None or offset is not None:
            raise ValueError("the kafkajs consumer reads whole topics from the beginning through a consumer group")
        result = self.call("consume", timeout=timeout + 15, topic=topic, count=count, timeout_ms=int(timeout * 1000),
                           group_id=group_id or f"compat-kafkajs-{uuid.uuid4()}")
        return _sorted(Consumed(r["partition"], r["offset"], _unb64(r["key"]), _unb64(r["value"]),
                                tuple((name, _unb64(value)) for name, value in r["headers"]), r["timestamp"])
                       for r in result)

    def create_topic(self, topic, partitions, replication_factor=1, configs=None):
        created = self.call("create_topic", topic=topic, partitions=partitions, replication_factor=replication_factor,
                            configs=configs or {})
        if created is False:  # kafkajs reports TOPIC_ALREADY_EXISTS as a false result, not an error
            raise ClientError(self.name, ErrorCode.TOPIC_ALREADY_EXISTS.name, "createTopics returned false")

    def delete_topic(self, topic):
        self.call("delete_topic", topic=topic)

    def list_topics(self):
        return set(self.call("list_topics"))

    def partitions(self, topic):
        return sorted(p["partition"] for p in self.call("describe_topic", topic=topic))

    def create_partitions(self, topic, total):
        self.call("create_partitions", topic=topic, count=total)

    def describe_configs(self, topic):
        return self.call("describe_configs", topic=topic)

    def watermarks(self, topic):
        return {p["partition"]: (p["low"], p["high"]) for p in self.call("watermarks", topic=topic)}

    def offsets_for_time(self, topic, timestamp):
        # kafkajs substitutes the latest offset where no record is that recent; report that as is.
        return {p["partition"]: p["offset"] for p in self.call("offsets_for_timestamp", topic=topic,
                                                               timestamp=timestamp)}


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


# --------------------------------------------------------------------------------------- kcat

_KCAT_KEY_DELIMITER = b"\x1f"
_KCAT_MESSAGE_DELIMITER = b"\x1e"


class KcatClient(Client):
    """kcat in produce (-P) and consume (-C -J) modes.

    kcat sets headers and the partition per invocation, so `produce` runs it once per (partition,
    headers) group; it cannot set timestamps, tell offsets, or tell an empty key or value from a null
    one (-Z sends empty as null).
    """

    name = "kcat"
    capabilities = frozenset({"per_message_partition"})

    def _run(self, arguments: list[str], stdin: bytes = b"", timeout: float = OPERATION_TIMEOUT):
        executable = shutil.which("kcat")
        if executable is None:
            raise ClientError(self.name, None, "kcat is not installed: run compat_tests/setup.sh")
        try:
            return subprocess.run([executable, "-b", self.bootstrap, "-m", "10", *arguments], input=stdin,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClientError(self.name, None, f"kcat {arguments} did not finish in {timeout} s; "
                                               f"stderr: {exc.stderr!r}") from exc

    def produce(self, topic, messages, *, compression="none", **settings):
        """`settings` are librdkafka properties, passed as ``-X name=value``."""
        if any(m.timestamp is not None for m in messages):
            raise ValueError("kcat cannot set record timestamps")
        # Only the order within a partition matters: group each partition's messages together.
        in_partition_order = sorted(messages, key=lambda m: -1 if m.partition is None else m.partition)
        groups = itertools.groupby(in_partition_order, key=lambda m: (m.partition, m.headers))
        for (partition, headers), group in groups:
            arguments = ["-P", "-t", topic, "-K", r"\x1f", "-D", r"\x1e", "-Z",
                         "-X", f"compression.codec={compression}"]
            for name, value in settings.items():
                arguments += ["-X", f"{name}={value}"]
            if partition is not None:
                arguments += ["-p", str(partition)]
            for name, value in headers:
                arguments += ["-H", f"{name}={value.decode()}"]
            stdin = b"".join((m.key or b"") + _KCAT_KEY_DELIMITER + (m.value or b"") + _KCAT_MESSAGE_DELIMITER
                             for m in group)
            completed = self._run(arguments, stdin)
            stderr = completed.stderr.decode(errors="replace")
            if completed.returncode != 0 or "Delivery failed" in stderr or "ERROR" in stderr:
                raise ClientError(self.name, _kcat_error_name(stderr), f"exit {completed.returncode}: {stderr}")
        return [Delivery(m.partition if m.partition is not None else -1, None) for m in messages]

    def consume(self, topic, count, *, partitions=None, offset=None, timeout=OPERATION_TIMEOUT):
        records: list[Consumed] = []
        start = "beginning" if offset is None else str(offset)
        for partition in (list(partitions) if partitions is not None else [None]):
            arguments = ["-C", "-t", topic, "-o", start, "-e", "-J", "-c", str(count - len(records))]
            if partition is not None:
                arguments += ["-p", str(partition)]
            completed = self._run(arguments, timeout=timeout)
            stderr = completed.stderr.decode(errors="replace")
            if completed.returncode != 0:
                raise ClientError(self.name, _kcat_error_name(stderr), f"exit {completed.returncode}: {stderr}")
            for line in completed.stdout.decode().splitlines():
                if not line.startswith("{"):
                    continue
                envelope = json.loads(line)
                headers = envelope.get("headers") or []
                records.append(Consumed(
                    envelope["partition"], envelope["offset"], _encode(envelope["key"]), _encode(envelope["payload"]),
                    tuple((headers[i], _encode(headers[i + 1])) for i in range(0, len(headers), 2)),
                    envelope["ts"]))
        if len(records) < count:
            raise _timed_out(self.name, records, count, timeout)
        return _sorted(records)


    def _metadata(self, topic: str | None = None) -> dict:
        completed = self._run(["-L", "-J", *(["-t", topic] if topic else [])])
        if completed.returncode != 0:
            stderr = completed.stderr.decode(errors="replace")
            raise ClientError(self.name, _kcat_error_name(stderr), f"exit {completed.returncode}: {stderr}")
        return json.loads(completed.stdout)

    def list_topics(self):
        return {entry["topic"] for entry in self._metadata()["topics"]}

    def partitions(self, topic):
        [entry] = [entry for entry in self._metadata(topic)["topics"] if entry["topic"] == topic]
        if entry.get("error"):
            raise ClientError(self.name, _kcat_error_name(entry["error"]), entry["error"])
        return sorted(p["partition"] for p in entry["partitions"])


def _encode(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


#: librdkafka's texts for the broker errors the tests provoke through kcat.
_LIBRDKAFKA_ERROR_TEXTS = {
    "Message size too large": ErrorCode.MESSAGE_TOO_LARGE,
    "Unknown topic or partition": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    "Corrupt message": ErrorCode.CORRUPT_MESSAGE,
    "Invalid message": ErrorCode.CORRUPT_MESSAGE,
}


def _kcat_error_name(stderr: str) -> str | None:
    return next((code.name for text, code in _LIBRDKAFKA_ERROR_TEXTS.items() if text in stderr), None)


# --------------------------------------------------------------------------------------- java

#: The driver's JVM starts in about half a second with these: a small heap, one GC thread, the C1 compiler.
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx512m", "-Xshare:auto")


def java_classpath() -> str:
    """The classpath of the Java driver: the jars setup.sh put in java/lib and the driver's classes,
    compiled here on first use into java/build/<hash of the sources> (so an edited source is rebuilt)."""
    jars = sorted((JAVA_DIR / "lib").glob("*.jar"))
    for library in ("kafka-clients", "gson"):
        if not any(jar.name.startswith(f"{library}-") for jar in jars):
            raise ClientError(JavaClient.name, None, f"{library} is not installed: run compat_tests/setup.sh")
    sources = sorted(JAVA_DIR.glob("*.java"))
    digest = hashlib.sha256(b"".join(path.name.encode() + path.read_bytes() for path in sources)).hexdigest()[:16]
    classes = JAVA_DIR / "build" / digest
    if not classes.is_dir():
        javac = shutil.which("javac")
        if javac is None:
            raise ClientError(JavaClient.name, None, "javac is not installed: run compat_tests/setup.sh")
        classes.parent.mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=classes.parent))
        completed = subprocess.run([javac, "-d", str(staging), "-cp", str(JAVA_DIR / "lib" / "*"),
                                    *map(str, sources)], capture_output=True, text=True)
        if completed.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ClientError(JavaClient.name, None, f"javac failed:\n{completed.stdout}{completed.stderr}")
        try:
            staging.rename(classes)
        except OSError:  # built meanwhile by another process
            shutil.rmtree(staging, ignore_errors=True)
        for old in classes.parent.iterdir():
            if old != classes and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
    return os.pathsep.join([str(classes), *map(str, jars)])


class JavaDriver:
    """One JVM running the Java driver (compat_tests/java/Driver.java).

    ``call(op, **arguments)`` sends one command and waits for its answer; a failure the client reported
    raises `ClientError` with the Kafka error name when there is one, and what the JVM wrote to stderr
    meanwhile (the Java client's warnings). Commands run one at a time; the group members a command
    starts keep running in the JVM until stopped or until the driver closes.
    """

    #: Every driver started, so that a failing test can show what the JVMs wrote to stderr meanwhile.
    started: list[JavaDriver] = []

    def __init__(self) -> None:
        classpath = java_classpath()
        java = shutil.which("java")
        if java is None:
            raise ClientError(JavaClient.name, None, "java is not installed: run compat_tests/setup.sh")
        level = os.environ.get("TRAFKA_COMPAT_JAVA_LOG", "warn")
        self.stderr_path = Path(tempfile.mkstemp(prefix="trafka-java-driver-", suffix=".log")[1])
        atexit.register(self.stderr_path.unlink, missing_ok=True)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._answers: queue.Queue[str | None] = queue.Queue()
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={JAVA_DIR / 'log4j2.properties'}",
                 f"-Dcompat.java.log.level={level}", "-cp", classpath, "Driver"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=JAVA_DIR)
        JavaDriver.started.append(self)
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._answer(30.0, "start")
        if not ready.get("ready"):
            raise ClientError(JavaClient.name, None, f"the driver did not start: {ready}")
        self.version = ready["version"]

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._answers.put(line)
        self._answers.put(None)

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _stderr_since(self, position: int) -> str:
        return self.stderr_text()[position:][-5000:]

    def _answer(self, timeout: float, what: str, stderr_from: int = 0) -> dict:
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise ClientError(JavaClient.name, None, f"{what}: no answer in {timeout} s (driver killed); stderr:\n"
                                                     f"{self._stderr_since(stderr_from)}") from None
        if line is None:
            self.process.wait(5)
            raise ClientError(JavaClient.name, None, f"{what}: the driver exited with {self.process.returncode}; "
                                                     f"stderr:\n{self._stderr_since(stderr_from)}")
        return json.loads(line)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, op: str, *, timeout: float = OPERATION_TIMEOUT * 2, **arguments: object):
        """Run one command; returns its result or raises ClientError."""
        with self._lock:
            if not self.alive:
                raise ClientError(JavaClient.name, None, f"{op}: the driver is not running "
                                                         f"(exit {self.process.returncode})")
            position = len(self.stderr_text())
            command_id = next(self._ids)
            assert self.process.stdin is not None
            try:
                self.process.stdin.write(json.dumps({"id": command_id, "op": op, **arguments}) + "\n")
                self.process.stdin.flush()
            except BrokenPipeError:
                raise ClientError(JavaClient.name, None, f"{op}: the driver exited; stderr:\n"
                                                         f"{self._stderr_since(position)}") from None
            output = self._answer(timeout, op, position)
        assert output.get("id") == command_id, (command_id, output)
        if not output["ok"]:
            error = output["error"]
            kafka_name = next((name for name in error["names"] if name in ErrorCode.__members__), None)
            raise ClientError(JavaClient.name, kafka_name,
                              f"{op}: {error['message']}; stderr:\n{self._stderr_since(position)}")
        return output["result"]

    def kill(self) -> None:
        if self.alive:
            self.process.kill()
        self.process.wait()

    def close(self, timeout: float = 20.0) -> None:
        """End the driver: closing its stdin stops its members (they leave their groups) and the JVM."""
        if self.alive:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.kill()

    def __enter__(self) -> JavaDriver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_shared_java: JavaDriver | None = None
_shared_java_lock = threading.Lock()


def shared_java_driver() -> JavaDriver:
    """The JVM every `JavaClient` shares (started on first use, started again if it died)."""
    global _shared_java
    with _shared_java_lock:
        if _shared_java is None or not _shared_java.alive:
            if _shared_java is not None:
                _shared_java.close()
            _shared_java = JavaDriver()
            atexit.register(_shared_java.close)
        return _shared_java


class JavaClient(Client):
    """Apache Kafka's Java client (kafka-clients) with its defaults: the producer is idempotent with
    acks=all; consumers read by manual assignment without a group."""

    name = "java"
    capabilities = frozenset({"per_message_headers", "per_message_timestamps", "per_message_partition",
                              "admin", "list_offsets"})

    def call(self, op: str, timeout: float = OPERATION_TIMEOUT * 2, **arguments):
        """Run one driver command against this client's broker."""
        return shared_java_driver().call(op, timeout=timeout, bootstrap=self.bootstrap, **arguments)

    def produce(self, topic, messages, *, compression="none", **settings):
        """`settings` are producer properties (``acks="all"``, ``**{"linger.ms": 5}``), passed as strings."""
        payload = [{"key": _b64(m.key), "value": _b64(m.value), "partition": m.partition, "timestamp": m.timestamp,
                    "headers": [[name, _b64(value)] for name, value in m.headers]} for m in messages]
        result = self.call("produce", topic=topic, messages=payload, compression=compression,
                           settings={key: str(value) for key, value in settings.items()})
        return [Delivery(d["partition"], d["offset"]) for d in result]

    def consume(self, topic, count, *, partitions=None, offset=None, timeout=OPERATION_TIMEOUT):
        result = self.call("consume", timeout=timeout + 30, topic=topic, count=count,
                           partitions=None if partitions is None else list(partitions), offset=offset,
                           timeout_ms=int(timeout * 1000))
        return _sorted(_java_record(r) for r in result)

    def create_topic(self, topic, partitions, replication_factor=1, configs=None):
        self.call("create_topic", topic=topic, partitions=partitions, replication_factor=replication_factor,
                  configs=configs or {})

    def delete_topic(self, topic):
        self.call("delete_topic", topic=topic)

    def list_topics(self):
        return set(self.call("list_topics"))

    def partitions(self, topic):
        return sorted(p["partition"] for p in self.call("describe_topic", topic=topic)["partitions"])

    def create_partitions(self, topic, total):
        self.call("create_partitions", topic=topic, count=total)

    def describe_configs(self, topic):
        return {name: entry["value"] for name, entry in self.call("describe_configs", name=topic).items()}

    def watermarks(self, topic):
        return {partition: (low, high) for partition, low, high in self.call("watermarks", topic=topic)}

    def offsets_for_time(self, topic, timestamp):
        return dict(self.call("offsets_for_time", topic=topic, timestamp=timestamp))


def _java_record(r: dict) -> Consumed:
    return Consumed(r["partition"], r["offset"], _unb64(r["key"]), _unb64(r["value"]),
                    tuple((name, _unb64(value)) for name, value in r["headers"]), r["timestamp"])


# --------------------------------------------------------------------------------------- registry and helpers

CLIENTS: dict[str, type[Client]] = {cls.name: cls for cls in
                                    (KafkaPythonClient, ConfluentClient, AiokafkaClient, KafkajsClient, KcatClient,
                                     JavaClient)}


def client_names(*capabilities: str) -> list[str]:
    """Names of the clients that have every one of `capabilities`."""
    return [name for name, cls in CLIENTS.items() if set(capabilities) <= cls.capabilities]


def supports_codec(client: str, codec: str) -> str | None:
    """Why `client` cannot use `codec` here, or None when it can."""
    if client == "kafkajs" and codec not in KafkajsClient.codecs:
        return f"kafkajs has no built-in {codec} codec"
    if client == "kafka-python":
        import kafka.codec

        available = {"gzip": kafka.codec.has_gzip, "snappy": kafka.codec.has_snappy, "lz4": kafka.codec.has_lz4,
                     "zstd": kafka.codec.has_zstd}
        if not available[codec]():
            return f"kafka-python's {codec} codec needs a library that is not installed (python-snappy for snappy)"
    return None


def _wait_for(lookup, what: str, timeout: float = OPERATION_TIMEOUT):
    deadline = time.monotonic() + timeout
    while not (result := lookup()):
        if time.monotonic() > deadline:
            raise ClientError("metadata", None, f"timed out waiting for {what}")
        time.sleep(0.05)
    return result


def sample_messages(count: int, partitions: int = 1, *, client: str = "kafka-python",
                    base_timestamp: int | None = None) -> list[Message]:
    """A deterministic mix of keyed and unkeyed records, null values, headers and explicit timestamps,
    spread round-robin over `partitions`, limited to what `client` can produce (kcat: the same headers
    for a whole partition, no timestamps)."""
    capabilities = CLIENTS[client].capabilities
    base_timestamp = base_timestamp if base_timestamp is not None else 1_700_000_000_000
    messages = []
    for i in range(count):
        partition = i % partitions
        headers: tuple[tuple[str, bytes], ...] = (("source", b"compat"), ("partition-hint", str(partition).encode()))
        if "per_message_headers" in capabilities and i % 3 == 2:
            headers = ()
        key = None if i % 4 == 1 else f"key-{i}".encode()
        messages.append(Message(
            key=key,
            # Null values (tombstones) only on keyed records: the Python clients refuse a record with neither.
            value=None if i % 7 == 3 and key is not None else f"value-{i}-{'x' * (i % 13)}".encode(),
            headers=headers,
            timestamp=base_timestamp + i * 1000 if "per_message_timestamps" in capabilities else None,
            partition=partition if partitions > 1 or "per_message_partition" in capabilities else None,
        ))
    return messages


def numbered_messages(count: int, prefix: str = "m", *, size: int = 0, partitions: int | None = None
                      ) -> list[Message]:
    """`count` simple keyed records, values padded to at least `size` bytes, spread round-robin over
    `partitions` (None: the client's partitioner chooses)."""
    return [Message(key=f"{prefix}-key-{i}".encode(), value=f"{prefix}-{i}-".encode().ljust(size, b"z"),
                    partition=None if partitions is None else i % partitions)
            for i in range(count)]


def by_partition(messages: Sequence[Message], deliveries: Sequence[Delivery] | None = None
                 ) -> dict[int, list[Message]]:
    """Group produced messages by the partition they went to (from `deliveries` when given)."""
    grouped: dict[int, list[Message]] = {}
    for index, message in enumerate(messages):
        partition = deliveries[index].partition if deliveries is not None else message.partition
        grouped.setdefault(partition if partition is not None else 0, []).append(message)
    return grouped


def assert_round_trip(produced: Sequence[Message], deliveries: Sequence[Delivery], consumed: Sequence[Consumed]
                      ) -> None:
    """Every produced message of a fresh topic was read back unchanged, in produce order within each
    partition, at dense offsets from 0, matching the offsets the producer was told."""
    assert len(consumed) == len(produced), (len(consumed), len(produced))
    expected = by_partition(produced, deliveries if all(d.partition >= 0 for d in deliveries) else None)
    actual: dict[int, list[Consumed]] = {}
    for record in consumed:
        actual.setdefault(record.partition, []).append(record)
    assert sorted(actual) == sorted(expected), (sorted(actual), sorted(expected))
    for partition, records in actual.items():
        offsets = [r.offset for r in records]
        assert offsets == list(range(len(offsets))), (partition, offsets)
        for message, record in zip(expected[partition], records, strict=True):
            assert (record.key, record.value) == (message.key, message.value), (partition, record, message)
            assert record.headers == message.headers, (partition, record, message)
            if message.timestamp is not None:
                assert record.timestamp == message.timestamp, (partition, record, message)
    delivered_offsets = {d for d in deliveries if d.offset is not None}
    if delivered_offsets:
        assert delivered_offsets == {(r.partition, r.offset) for r in consumed}
