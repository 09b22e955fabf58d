"""Workloads: unmodified clients driving a broker. Each runs in a fresh process and prints one JSON line.

    python -m bench.workloads '{"workload": "produce", "bootstrap": "127.0.0.1:9092", ...}'

confluent-kafka (librdkafka) is the load generator; kafka-python gives a second opinion;
``raw_produce`` measures the broker alone, with a client that does little more than copy requests to its
socket. Every loop is bounded by a deadline, so a stalled broker yields a partial figure and an
``error``, never a hang.
Payloads are random bytes (incompressible; compression is off).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from typing import Any, Callable

MB = 1_000_000
PRODUCE_DEADLINE_S = 300.0
CONSUME_IDLE_S = 15.0  # give up when nothing at all arrives for this long


def _quiet(config: dict[str, Any], p: dict[str, Any] | None = None) -> dict[str, Any]:
    """A client's configuration: librdkafka's log quiet, and the workload's ``client_config`` (a listener's
    security settings, say) over ``config``."""
    return {"log_level": 3, **config, **((p or {}).get("client_config") or {})}


class _CpuWindow:
    """CPU time (user + system, every thread) of this client process and of the broker over a window.

    Reported as cores busy on average (CPU seconds over the window's seconds): when the client is near
    its ceiling while the broker idles, the client bounds the figure, whatever the broker.
    """

    def __init__(self, broker_pid: int | list[int] | None) -> None:
        # A cluster's brokers are several processes: their CPU adds up.
        self.broker_pids = broker_pid if isinstance(broker_pid, list) else [broker_pid]
        self.started = self._read()

    def restart(self) -> None:
        self.started = self._read()

    def _read(self) -> tuple[float, float | None]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        brokers = [_process_cpu_s(pid) for pid in self.broker_pids]
        return usage.ru_utime + usage.ru_stime, None if None in brokers else sum(brokers)  # type: ignore[arg-type]

    def cores(self, seconds: float) -> dict[str, float]:
        client, broker = self._read()
        out = {"client_cores": round((client - self.started[0]) / seconds, 2)}
        if broker is not None and self.started[1] is not None:
            out["broker_cores"] = round((broker - self.started[1]) / seconds, 2)
        return out


def _process_cpu_s(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rate(records: int, size: int, seconds: float) -> dict[str, float]:
    seconds = max(seconds, 1e-9)
    return {"records_per_s": records / seconds, "mb_per_s": records * size / seconds / MB, "seconds": seconds}


def produce(p: dict[str, Any]) -> dict[str, Any]:
    """``count`` records of ``size`` bytes, no key; time from the first produce() to flush() returning."""
    from confluent_kafka import Producer

    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:  # called for failed records only
        if err is not None and len(failures) < 5:
            failures.append(str(err))

    producer = Producer(
        _quiet(
            {
                "bootstrap.servers": p["bootstrap"],
                "acks": str(p["acks"]),
                "linger.ms": p.get("linger_ms", 5),
                "batch.size": p.get("batch_size", 1_048_576),
                "compression.type": "none",
                "queue.buffering.max.messages": 1_000_000,
                "delivery.report.only.error": True,
                "on_delivery": on_delivery,
            },
            p,
        )
    )
    producer.list_topics(p["topic"], timeout=30)  # connect and learn the leaders before the clock starts
    value = os.urandom(p["size"])
    topic, count = p["topic"], p["count"]
    produce_one, poll = producer.produce, producer.poll
    cpu = _CpuWindow(p.get("broker_pid"))
    started = time.perf_counter()
    deadline = started + PRODUCE_DEADLINE_S
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        try:
            produce_one(topic, value)
            sent += 1
        except BufferError:
            poll(0.001)
    remaining = producer.flush(max(0.0, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - started
    result: dict[str, Any] = {
        **_rate(sent - remaining, p["size"], elapsed),
        "records": sent - remaining,
        **cpu.cores(elapsed),
    }
    if failures or remaining or sent < count:
        result["error"] = f"{count - sent + remaining} undelivered; {'; '.join(failures)}"
    return result


def keyed_produce(p: dict[str, Any]) -> dict[str, Any]:
    """Records of ``size`` bytes under ``keys`` distinct keys, taken in turn, until ``bytes`` of values are
    sent (for a compacted topic: every key gets about bytes / size / keys versions); acks=1, large batches,
    compression none. Time from the first produce() to flush() returning."""
    from confluent_kafka import Producer

    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:  # called for failed records only
        if err is not None and len(failures) < 5:
            failures.append(str(err))

    producer = Producer(
        _quiet(
            {
                "bootstrap.servers": p["bootstrap"],
                "acks": "1",
                "linger.ms": p.get("linger_ms", 20),
                "batch.size": p.get("batch_size", 1_048_576),
                "compression.type": "none",
                "queue.buffering.max.messages": 1_000_000,
                "queue.buffering.max.kbytes": 1_048_576,
                "delivery.report.only.error": True,
                "on_delivery": on_delivery,
            }
        )
    )
    producer.list_topics(p["topic"], timeout=30)
    keys = [f"key-{n:06d}".encode() for n in range(p["keys"])]
    values = [os.urandom(p["size"]) for _ in range(64)]  # random, so incompressible; reused to save time
    count = -(-p["bytes"] // p["size"])
    topic = p["topic"]
    produce_one, poll = producer.produce, producer.poll
    started = time.perf_counter()
    deadline = started + PRODUCE_DEADLINE_S
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        try:
            produce_one(topic, values[sent & 63], keys[sent % len(keys)])
            sent += 1
        except BufferError:
            poll(0.001)
    remaining = producer.flush(max(0.0, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - started
    result: dict[str, Any] = {**_rate(sent - remaining, p["size"], elapsed), "records": sent - remaining,
                              "seconds": elapsed}
    if failures or remaining or sent < count:
        result["error"] = f"{count - sent + remaining} undelivered; {'; '.join(failures)}"
    return result


def consume(p: dict[str, Any]) -> dict[str, Any]:
    """Read ``count`` records from the start of every partition (assign, no group).

    Reports the time from creating the consumer to the first record, and the steady rate from the first
    record to the last. Against a broker that keeps only a window (``wraps``), each partition is re-read
    from its start whenever it is exhausted.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    created = time.perf_counter()
    cpu = _CpuWindow(p.get("broker_pid"))
    consumer = Consumer(
        _quiet(
            {
                "bootstrap.servers": p["bootstrap"],
                "group.id": "bench-consume",
                "enable.auto.commit": False,
                "enable.partition.eof": bool(p.get("wraps")),
                # librdkafka stops fetching a partition once 100,000 records (queued.min.messages) wait
                # in its queue and then holds off fetch.queue.backoff.ms, 1 s by default: with 100 B
                # records that caps every broker near 200,000 records/s. Re-check after 10 ms instead.
                "fetch.queue.backoff.ms": 10,
                # Re-reading a window: do not let the fetch parked at its end hold up the rewind.
                **({"fetch.wait.max.ms": 10} if p.get("wraps") else {}),
            },
            p,
        )
    )
    topic, count = p["topic"], p["count"]
    # Learn the leaders first: assign() before metadata arrives makes librdkafka retry its offset
    # lookup on a 500 ms timer, whatever the broker.
    consumer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(p["partitions"])])
    # Where each window starts, so that a rewind is a plain seek (no offset lookup round trip).
    window_start = (
        {i: consumer.get_watermark_offsets(TopicPartition(topic, i), timeout=10)[0] for i in range(p["partitions"])}
        if p.get("wraps")
        else {}
    )
    received = 0
    first_at = last_at = None
    first_batch = 0
    idle_since = time.perf_counter()
    error = None
    try:
        while received < count:
            messages = consumer.consume(10_000, 0.5)
            now = time.perf_counter()
            got = 0
            for message in messages:
                err = message.error()
                if err is None:
                    got += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    consumer.seek(TopicPartition(topic, message.partition(), window_start[message.partition()]))
                else:
                    error = str(err)
            if got:
                if first_at is None:
                    first_at, first_batch = now, got
                    cpu.restart()
                received += got
                last_at = idle_since = now
            elif now - idle_since > CONSUME_IDLE_S:
                error = error or f"nothing received for {CONSUME_IDLE_S:.0f} s"
                break
        steady_s = last_at - first_at if first_at is not None and last_at is not None else 0.0
        cores = cpu.cores(steady_s) if steady_s > 0 else {}
    finally:
        consumer.close()
    result: dict[str, Any] = {"records": received}
    if first_at is not None and steady_s > 0:
        result.update(_rate(received - first_batch, p["size"], steady_s))
        result["first_record_s"] = first_at - created
        result.update(cores)
    if error or received < count:
        result["error"] = error or f"{received}/{count} records"
    return result


def raw_produce(p: dict[str, Any]) -> dict[str, Any]:
    """The broker alone: one connection sends the same ProduceRequest (acks=1, one batch of about
    1 MiB of ``size``-byte records to partition 0) ``requests`` times, pipelined, while a thread reads
    the responses. The batch is built before the clock starts; framing a request copies its megabyte
    once (some tens of microseconds), so what the client costs is close to nothing and the figure is
    the broker's own capacity for storing large batches. Every response is decoded and must carry no
    error."""
    import socket

    from trafka.wire.client import NEED_DATA, ClientConnection, ProtocolError
    from trafka.wire.messages import ProduceRequest
    from trafka.wire.records import SimpleRecord, build_batch

    version, size, requests = 7, p["size"], p["requests"]
    per_batch = max(1, (1 << 20) // (size + 10))
    batch = build_batch([SimpleRecord(None, os.urandom(size))] * per_batch)
    request = ProduceRequest(
        acks=1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=p["topic"], partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    # One thread sends while another receives: the connection allows that (see wire.client).
    protocol = ClientConnection(client_id="bench-raw")

    host, port = p["bootstrap"].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=PRODUCE_DEADLINE_S)
    errors: list[str] = []
    answered = 0

    def read_responses() -> None:
        nonlocal answered
        while answered < requests:
            try:
                response = protocol.next_response()
            except ProtocolError as exc:
                errors.append(str(exc))
                return
            if response is NEED_DATA:
                with protocol.receive_buffer() as room:
                    count = sock.recv_into(room)
                if not count:
                    errors.append("the broker closed the connection")
                    return
                protocol.received(count)
                continue
            codes = {part.error_code for topic in response.body.responses for part in topic.partition_responses}
            if codes != {0} and len(errors) < 5:
                errors.append(f"error codes {sorted(codes)}")
            answered += 1

    reader = threading.Thread(target=read_responses, daemon=True)
    cpu = _CpuWindow(p.get("broker_pid"))
    started = time.perf_counter()
    reader.start()
    try:
        for _ in range(requests):
            sock.sendall(protocol.send_request(request, version))
        reader.join(PRODUCE_DEADLINE_S)
    finally:
        elapsed = time.perf_counter() - started
        sock.close()
    result: dict[str, Any] = {
        "mb_per_s": answered * len(batch) / elapsed / MB,
        "records_per_s": answered * per_batch / elapsed,
        "seconds": elapsed,
        "records": answered * per_batch,
        **cpu.cores(elapsed),
    }
    if errors or answered < requests:
        result["error"] = f"{answered}/{requests} answered; {'; '.join(errors)}"
    return result


def kafka_python_produce(p: dict[str, Any]) -> dict[str, Any]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=p["bootstrap"],
        acks=int(p["acks"]) if str(p["acks"]) != "all" else "all",
        linger_ms=p.get("linger_ms", 5),
        batch_size=p.get("batch_size", 1_048_576),
        max_request_size=p.get("batch_size", 1_048_576) + 1024,
    )
    producer.partitions_for(p["topic"])
    value = os.urandom(p["size"])
    send = producer.send
    started = time.perf_counter()
    futures = [send(p["topic"], value) for _ in range(p["count"])]
    producer.flush(timeout=PRODUCE_DEADLINE_S)
    elapsed = time.perf_counter() - started
    failed = sum(1 for f in futures if f.failed())
    producer.close(timeout=10)
    result: dict[str, Any] = {**_rate(p["count"] - failed, p["size"], elapsed), "records": p["count"] - failed}
    if failed:
        result["error"] = f"{failed} failed"
    return result


def kafka_python_consume(p: dict[str, Any]) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    created = time.perf_counter()
    consumer = KafkaConsumer(bootstrap_servers=p["bootstrap"], enable_auto_commit=False, group_id=None)
    partitions = [TopicPartition(p["topic"], i) for i in range(p["partitions"])]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    count = p["count"]
    received = first_batch = 0
    first_at = last_at = None
    idle_since = time.perf_counter()
    while received < count:
        batches = consumer.poll(timeout_ms=500, max_records=10_000)
        now = time.perf_counter()
        got = sum(len(records) for records in batches.values())
        if got:
            if first_at is None:
                first_at, first_batch = now, got
            received += got
            last_at = idle_since = now
        elif now - idle_since > CONSUME_IDLE_S:
            break
        if p.get("wraps"):
            _rewind_exhausted(consumer, partitions)
    consumer.close()
    result: dict[str, Any] = {"records": received}
    if first_at is not None and last_at is not None and last_at > first_at:
        result.update(_rate(received - first_batch, p["size"], last_at - first_at))
        result["first_record_s"] = first_at - created
    if received < count:
        result["error"] = f"{received}/{count} records"
    return result


def _rewind_exhausted(consumer: Any, partitions: list[Any]) -> None:
    ends = consumer.end_offsets(partitions)
    for tp in partitions:
        if consumer.position(tp) >= ends[tp]:
            consumer.seek_to_beginning(tp)


def paced_produce(p: dict[str, Any]) -> dict[str, Any]:
    """Produce at a fixed byte rate for ``seconds``; each value starts with its send time (ns, wall clock)."""
    from confluent_kafka import Producer

    producer = Producer(
        _quiet(
            {
                "bootstrap.servers": p["bootstrap"],
                "acks": str(p["acks"]),
                "linger.ms": p["linger_ms"],
                "batch.size": 1_048_576,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
    )
    producer.list_topics(p["topic"], timeout=30)
    padding = os.urandom(p["size"] - 8)
    per_second = p["mb_per_s"] * MB / p["size"]
    topic = p["topic"]
    started = time.perf_counter()
    end = started + p["seconds"]
    sent = 0
    while (now := time.perf_counter()) < end:
        due = int((now - started) * per_second)
        while sent < due:
            producer.produce(topic, time.time_ns().to_bytes(8, "big") + padding)
            sent += 1
        producer.poll(0)
        time.sleep(0.0005)
    producer.flush(30)
    elapsed = time.perf_counter() - started
    return {"records": sent, "mb_per_s": sent * p["size"] / elapsed / MB}


def latency(p: dict[str, Any]) -> dict[str, Any]:
    """End-to-end latency at a fixed rate: a paced producer process, this process consuming.

    Latency is the consumer's wall clock when a record arrives minus the producer's wall clock when it
    called produce() (same machine, same clock). The first second is warm-up and is left out.
    """
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer(
        _quiet({"bootstrap.servers": p["bootstrap"], "group.id": "bench-latency", "enable.auto.commit": False, **p.get("consumer_config", {})})
    )
    consumer.assign([TopicPartition(p["topic"], 0, OFFSET_END)])
    consumer.consume(1, 1.0)  # resolves the end offset and opens the fetch session
    producer = _spawn_workload({**p, "workload": "paced_produce"})
    warm_up_ns = time.time_ns() + 1_000_000_000
    latencies_ns: list[int] = []
    deadline = time.perf_counter() + p["seconds"] + 30
    try:
        while producer.poll() is None and time.perf_counter() < deadline:
            # poll() hands over each record as soon as it is there (consume(n) waits for n of them).
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                now = time.time_ns()
                sent = int.from_bytes(message.value()[:8], "big")
                if sent >= warm_up_ns:
                    latencies_ns.append(now - sent)
        produced = _workload_result(producer, timeout=30)
        # Records still in flight when the producer finished.
        drain_until = time.perf_counter() + 2
        while time.perf_counter() < drain_until:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                latencies_ns.append(time.time_ns() - int.from_bytes(message.value()[:8], "big"))
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
        consumer.close()
    latencies_ns.sort()
    result: dict[str, Any] = {"records": len(latencies_ns), "produced_mb_per_s": produced.get("mb_per_s")}
    if latencies_ns:
        for name, q in (("p50_ms", 0.50), ("p99_ms", 0.99), ("p999_ms", 0.999), ("max_ms", 1.0)):
            result[name] = latencies_ns[min(len(latencies_ns) - 1, int(q * len(latencies_ns)))] / 1e6
    else:
        result["error"] = "no records received"
    return result


def group(p: dict[str, Any]) -> dict[str, Any]:
    """Time for ``members`` consumers with default settings to form a stable group.

    All members subscribe at once; the group is stable when every member holds a non-empty assignment
    and together they hold each partition exactly once.
    """
    from confluent_kafka import Consumer

    members = p["members"]
    group_id = p["group_id"]
    assignments: list[set[int]] = [set() for _ in range(members)]
    lock = threading.Lock()
    stable = threading.Event()
    done = threading.Event()
    go = threading.Barrier(members + 1)
    started_at: list[float] = []
    stable_at: list[float] = []
    deadline_s = p.get("deadline_s", 60.0)

    def check() -> None:
        with lock:
            owned = [partition for held in assignments for partition in held]
            if all(assignments) and len(owned) == p["partitions"] and len(set(owned)) == len(owned):
                if not stable.is_set():
                    stable_at.append(time.perf_counter())
                    stable.set()

    def member(index: int) -> None:
        consumer = Consumer(_quiet({"bootstrap.servers": p["bootstrap"], "group.id": group_id}))

        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            with lock:
                assignments[index] = {tp.partition for tp in partitions}
            check()

        def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
            with lock:
                assignments[index] = set()

        go.wait()
        consumer.subscribe([p["topic"]], on_assign=on_assign, on_revoke=on_revoke)
        end = time.perf_counter() + deadline_s
        while not done.is_set() and time.perf_counter() < end:
            consumer.poll(0.02)
        consumer.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for thread in threads:
        thread.start()
    go.wait()
    started_at.append(time.perf_counter())
    stable.wait(deadline_s)
    done.set()
    for thread in threads:
        thread.join(30)
    if not stable_at:
        return {"error": f"not stable after {deadline_s:.0f} s", "assignments": [sorted(a) for a in assignments]}
    return {"stable_s": stable_at[0] - started_at[0]}


def produce_latency(p: dict[str, Any]) -> dict[str, Any]:
    """Produce latency at a fixed rate: each record's time from produce() to its acknowledgement, as
    librdkafka measures it (``Message.latency()``). Records produced in the first second are warm-up
    and left out. Each value starts with its produce time (ns, monotonic clock)."""
    from confluent_kafka import Producer

    latencies_s: list[float] = []
    failures: list[str] = []
    warm_up_ns = time.monotonic_ns() + 1_000_000_000
    # With "samples": every record's (produce time in monotonic ns, latency in ms), for the caller to cut
    # into windows (CLOCK_MONOTONIC is the same in every process of the machine).
    samples: list[tuple[int, float]] | None = [] if p.get("samples") else None

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            if len(failures) < 5:
                failures.append(str(err))
            return
        sent_ns = int.from_bytes(msg.value()[:8], "big")
        if sent_ns >= warm_up_ns:
            latency = msg.latency()
            if latency is not None and latency >= 0:
                latencies_s.append(latency)
                if samples is not None:
                    samples.append((sent_ns, round(latency * 1000, 3)))

    producer = Producer(
        _quiet(
            {
                "bootstrap.servers": p["bootstrap"],
                "acks": str(p["acks"]),
                "linger.ms": p["linger_ms"],
                "batch.size": 1_048_576,
                "queue.buffering.max.messages": 1_000_000,
                "on_delivery": on_delivery,
            }
        )
    )
    producer.list_topics(p["topic"], timeout=30)
    padding = os.urandom(p["size"] - 8)
    per_second = p["mb_per_s"] * MB / p["size"]
    topic = p["topic"]
    cpu = _CpuWindow(p.get("broker_pid"))
    started = time.perf_counter()
    end = started + p["seconds"]
    sent = 0
    while (now := time.perf_counter()) < end:
        due = int((now - started) * per_second)
        while sent < due:
            producer.produce(topic, time.monotonic_ns().to_bytes(8, "big") + padding)
            sent += 1
        producer.poll(0)
        time.sleep(0.0005)
    remaining = producer.flush(30)
    elapsed = time.perf_counter() - started
    latencies_s.sort()
    result: dict[str, Any] = {"records": sent - remaining, "measured": len(latencies_s),
                              "mb_per_s": (sent - remaining) * p["size"] / elapsed / MB, **cpu.cores(elapsed)}
    if latencies_s:
        for name, q in (("p50_ms", 0.50), ("p99_ms", 0.99), ("p999_ms", 0.999), ("max_ms", 1.0)):
            result[name] = latencies_s[min(len(latencies_s) - 1, int(q * len(latencies_s)))] * 1000
    if samples is not None:
        result["samples"] = samples
    if failures or remaining or not latencies_s:
        result["error"] = f"{remaining} undelivered; {'; '.join(failures)}"
    return result


def failover_writer(p: dict[str, Any]) -> dict[str, Any]:
    """An idempotent acks=all producer writing 0, 1, 2, ... to partition 0 at ``rate`` records/s until
    a ``stop`` line arrives on stdin (or ``deadline_s`` passes); meanwhile it prints ``acked N`` after
    each acknowledgement batch. Then it flushes, reads the partition back from the beginning and
    compares it with what was acknowledged. Returns the acknowledgement time (``time.monotonic()``,
    the clock every process on the machine shares) of every acknowledged record, for the harness to
    set against the moment it killed the leader."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    acks: list[tuple[int, float]] = []
    failures: list[str] = []
    failed = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            if len(failures) < 5:
                failures.append(str(err))
        else:
            acks.append((int(msg.value()[:12]), time.monotonic()))

    producer = Producer(
        _quiet(
            {
                "bootstrap.servers": p["bootstrap"],
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 0,
                "message.timeout.ms": p["message_timeout_ms"],
                "on_delivery": on_delivery,
                **p.get("producer_config", {}),
            }
        )
    )
    producer.list_topics(p["topic"], timeout=30)
    stop = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=read_stdin, daemon=True).start()
    padding = b"." * max(0, p["size"] - 12)
    topic, rate = p["topic"], p["rate"]
    started = time.perf_counter()
    deadline = started + p["deadline_s"]
    sent = 0
    reported = 0
    while not stop.is_set() and (now := time.perf_counter()) < deadline:
        due = int((now - started) * rate)
        while sent < due:
            try:
                producer.produce(topic, f"{sent:012d}".encode() + padding, partition=0)
                sent += 1
            except BufferError:
                break
        producer.poll(0.001)
        if len(acks) != reported:
            reported = len(acks)
            print(f"acked {reported}", flush=True)
    remaining = producer.flush(p["message_timeout_ms"] / 1000 + 10)

    consumer = Consumer(_quiet({"bootstrap.servers": p["bootstrap"], "group.id": "bench-failover-check",
                                "enable.auto.commit": False}))
    tp = TopicPartition(topic, 0, OFFSET_BEGINNING)
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([tp])
    values: list[int] = []
    read_error = None
    position = low
    read_deadline = time.perf_counter() + 120
    while position < high and time.perf_counter() < read_deadline:
        for message in consumer.consume(10_000, 0.5):
            if message.error() is not None:
                read_error = str(message.error())
                continue
            values.append(int(message.value()[:12]))
            position = message.offset() + 1
    consumer.close()

    acknowledged = {seq for seq, _ in acks}
    in_log = set(values)
    result: dict[str, Any] = {
        "produced": sent,
        "acknowledged": len(acknowledged),
        "delivery_failures": failed,
        "undelivered_at_end": remaining,
        "log_start_offset": low,
        "high_watermark": high,
        "in_log": len(values),
        "lost": len(acknowledged - in_log),
        "lost_examples": sorted(acknowledged - in_log)[:10],
        "duplicated": len(values) - len(in_log),
        "unacknowledged_in_log": len(in_log - acknowledged),
        "in_order": values == sorted(values),
        "gaps": values != list(range(len(values))),
        "acks": [[seq, round(t, 6)] for seq, t in acks],
    }
    if failures:
        result["delivery_errors"] = "; ".join(failures)
    if read_error or position < high:
        result["error"] = f"read back {len(values)} of {high - low}; {read_error or ''}"
    return result


WORKLOADS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "produce": produce,
    "raw_produce": raw_produce,
    "consume": consume,
    "kafka_python_produce": kafka_python_produce,
    "kafka_python_consume": kafka_python_consume,
    "paced_produce": paced_produce,
    "latency": latency,
    "group": group,
    "produce_latency": produce_latency,
    "keyed_produce": keyed_produce,
    "failover_writer": failover_writer,
}


def _spawn_workload(params: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.workloads", json.dumps(params)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _workload_result(process: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return {"error": f"no result after {timeout:.0f} s"}
    except BaseException:  # Ctrl-C: the workload goes with the harness
        process.kill()
        process.wait()
        raise
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        tail = " | ".join(err.strip().splitlines()[-3:])
        return {"error": f"exit {process.returncode}: {tail}"}
    return json.loads(lines[-1])


def run_workload(params: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run one workload in a fresh process; a timeout kills it and reports an error."""
    return _workload_result(_spawn_workload(params), timeout)


def main() -> int:
    params = json.loads(sys.argv[1])
    result = WORKLOADS[params["workload"]](params)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
