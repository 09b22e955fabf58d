"""A fuzz campaign against a real broker process.

``run_campaign`` sends mutated golden frames (``mutate.mutant``) to a ``BrokerProcess``, each on a
connection of its own (or a few per connection), from a pool of concurrent senders that read whatever
comes back until the broker closes the connection, answers every frame, or stays silent for a short
while. Against a SASL_PLAINTEXT listener (``start_sasl_broker``: the same broker also has its PLAINTEXT
listener) the mutants are ``mutate.sasl_mutant``'s, each after its prelude of golden frames (a
SaslHandshake, a whole login), and the served client logs in with SCRAM-SHA-512. Meanwhile:

- a served client (confluent-kafka, idempotent producer with acks=all, and a consumer by assignment)
  produces one numbered record at a time and reads it back, and records every failure and the longest
  gap between two successful operations;
- a probe sends a Metadata request on its own connection every few milliseconds and times the answer;
- a janitor deletes the topics and groups the mutated frames created, now and then and at the end;
- the broker's RSS (``VmRSS`` in ``/proc/<pid>/status``) is sampled, and its log is read as it grows:
  a ``Traceback`` is matched, through the peer port named in the log line before it, to the frame
  sent on that connection.

The result holds the figures and a list of problems, each naming the seed and the frame behind it, so
that ``replay`` can send that one frame again.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests.fuzz import sasl
from compat_tests.fuzz.corpus import GoldenFrame
from compat_tests.fuzz.mutate import Mutant, mutant
from compat_tests.harness import BIND_HOST, BrokerProcess

SERVED_TOPIC = "fuzz-served"
#: Settings of the broker under fuzzing: the logs of deleted topics are closed one second after the
#: deletion rather than a minute (Kafka's default), so that what the janitor sweeps away is gone by the
#: time RSS is measured.
BROKER_OVERRIDES = {"log.segment.delete.delay.ms": 1000}
#: How long the files of deleted logs take to close with BROKER_OVERRIDES (delay and housekeeping).
_CLOSE_DELAY = 3.0
#: The longest a served client may wait for any successful operation: a liveness bound, not a benchmark.
SERVED_MAX_GAP = 5.0
_PEER = re.compile(r"from 127\.0\.0\.1:(\d+)")
#: A connection the broker closed for a protocol error (its logger is trafka.broker.connection).
_PROTOCOL_ERROR = re.compile(r" WARNING (?:trafka\.)?broker\.connection: closing connection")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def broker_pid(broker: BrokerProcess) -> int:
    process = broker._process  # noqa: SLF001  (the harness keeps the Popen private)
    if process is None:
        raise RuntimeError(f"{broker.name} was never started")
    return process.pid


# --------------------------------------------------------------------------------------- served client

@dataclass
class ServedReport:
    produced: int = 0
    consumed: int = 0
    errors: list[str] = field(default_factory=list)
    max_gap: float = 0.0
    max_gap_at: float = 0.0  # seconds into the campaign


class ServedClient:
    """Produces numbered records one at a time and reads each back, until stopped. `settings` are more
    librdkafka settings of its producer and consumer (a SASL login)."""

    def __init__(self, bootstrap: str, topic: str = SERVED_TOPIC, timeout: float = 20.0,
                 settings: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.settings = dict(settings or {})
        self.topic = topic
        self.timeout = timeout
        self.report = ServedReport()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="served-client", daemon=True)
        self._started_at = 0.0
        self.ready = threading.Event()

    def start(self) -> None:
        self._started_at = time.monotonic()
        self._thread.start()
        if not self.ready.wait(30):
            raise AssertionError(f"the served client could not start: {self.report.errors}")

    def stop(self) -> ServedReport:
        self._stop.set()
        self._thread.join(self.timeout * 2 + 10)
        if self._thread.is_alive():
            self.report.errors.append("the served client did not stop")
        return self.report

    def _run(self) -> None:
        import logging

        from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

        quiet = {"logger": logging.getLogger("librdkafka"), **self.settings}
        report = self.report
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 0, **quiet})
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "fuzz-served-reader",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 50, **quiet})
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        last_success = time.monotonic()

        def success() -> None:
            nonlocal last_success
            now = time.monotonic()
            if now - last_success > report.max_gap:
                report.max_gap, report.max_gap_at = now - last_success, now - self._started_at
            last_success = now

        try:
            sequence = 0
            while not self._stop.is_set() and not report.errors:
                value = f"served-{sequence}".encode()
                outcome: list[object] = []
                producer.produce(self.topic, value, on_delivery=lambda err, msg: outcome.append(err or msg))
                if producer.flush(self.timeout) or not outcome:
                    report.errors.append(f"record {sequence} not acknowledged within {self.timeout} s")
                    break
                if not hasattr(outcome[0], "offset"):
                    report.errors.append(f"record {sequence} failed: {outcome[0]}")
                    break
                report.produced += 1
                success()
                self.ready.set()
                deadline = time.monotonic() + self.timeout
                while report.consumed <= sequence:
                    if time.monotonic() > deadline:
                        report.errors.append(f"record {sequence} not consumed within {self.timeout} s")
                        break
                    message = consumer.poll(0.1)
                    if message is None:
                        continue
                    if message.error():
                        report.errors.append(f"consumer error: {message.error()}")
                        break
                    expected = f"served-{report.consumed}".encode()
                    if message.value() != expected:
                        report.errors.append(f"consumed {message.value()!r} at offset {message.offset()}, "
                                             f"expected {expected!r}")
                        break
                    report.consumed += 1
                    success()
                sequence += 1
                self._stop.wait(0.01)
        except Exception as exc:  # noqa: BLE001  (any client failure is a finding)
            report.errors.append(f"served client failed: {exc!r}")
        finally:
            self.ready.set()
            consumer.close()
            producer.flush(1)


# --------------------------------------------------------------------------------------- probe

def metadata_request(correlation_id: int, topic: str = SERVED_TOPIC) -> bytes:
    """A Metadata v1 request for one topic, size prefix included."""
    name = topic.encode()
    payload = (struct.pack(">hhih", 3, 1, correlation_id, 5) + b"probe"
               + struct.pack(">ih", 1, len(name)) + name)
    return struct.pack(">i", len(payload)) + payload


class Probe:
    """Times a Metadata request on its own connection, again and again, until stopped."""

    def __init__(self, host: str, port: int, interval: float = 0.02, timeout: float = 30.0) -> None:
        self.address = (host, port)
        self.interval = interval
        self.timeout = timeout
        self.count = 0
        self.failures: list[str] = []
        self.worst = 0.0
        self.worst_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)
        self._started_at = 0.0

    def start(self) -> None:
        self._started_at = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 5)

    def _run(self) -> None:
        sock: socket.socket | None = None
        correlation_id = 0
        while not self._stop.is_set():
            try:
                if sock is None:
                    sock = socket.create_connection(self.address, timeout=self.timeout)
                correlation_id += 1
                started = time.monotonic()
                sock.sendall(metadata_request(correlation_id))
                (size,) = struct.unpack(">i", _read_exactly(sock, 4))
                answer = _read_exactly(sock, size)
                elapsed = time.monotonic() - started
                if struct.unpack_from(">i", answer)[0] != correlation_id:
                    raise ConnectionError(f"answer to correlation id {correlation_id} carries another")
                self.count += 1
                if elapsed > self.worst:
                    self.worst, self.worst_at = elapsed, started - self._started_at
            except OSError as exc:
                self.failures.append(f"{time.monotonic() - self._started_at:.1f} s: {exc!r}")
                if sock is not None:
                    sock.close()
                sock = None
            self._stop.wait(self.interval)
        if sock is not None:
            sock.close()


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


# --------------------------------------------------------------------------------------- janitor

class Janitor:
    """Deletes what the mutated frames created: topics other than the served one, and consumer groups.

    Mutated CreateTopics and CreatePartitions requests are often valid requests for topics with
    hundreds of partitions, and mutated group requests create groups; all of that is state the broker
    must keep. Sweeping it away now and then keeps the broker's legitimate state small, so that its RSS
    at the end measures what the fuzzing leaked rather than what it legitimately created.
    """

    def __init__(self, bootstrap: str, keep: frozenset[str] = frozenset({SERVED_TOPIC}), every: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.keep = keep
        self.every = every
        self.topics_deleted = 0
        self.groups_deleted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fuzz-janitor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sweep()

    def sweep(self) -> None:
        """Delete every topic but the kept ones and every consumer group (failures are ignored: a group
        with members stays until they leave or time out)."""
        import logging

        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": logging.getLogger("librdkafka")})
        try:
            topics = [name for name in admin.list_topics(timeout=20).topics
                      if name not in self.keep and not name.startswith("__")]
            if topics:
                for future in admin.delete_topics(topics, operation_timeout=30, request_timeout=60).values():
                    try:
                        future.result(60)
                        self.topics_deleted += 1
                    except Exception:  # noqa: BLE001  (already gone, or an invalid name)
                        pass
            listed = admin.list_consumer_groups(request_timeout=20).result(30)
            groups = [g.group_id for g in listed.valid if g.group_id]
            if groups:
                for future in admin.delete_consumer_groups(groups, request_timeout=60).values():
                    try:
                        future.result(60)
                        self.groups_deleted += 1
                    except Exception:  # noqa: BLE001  (a group with members cannot be deleted yet)
                        pass
        except Exception:  # noqa: BLE001  (a sweep that fails is retried at the next one)
            pass


# --------------------------------------------------------------------------------------- log watcher

class LogWatcher:
    """Reads the broker's log as it grows and ties each traceback to the frame that caused it."""

    def __init__(self, broker: BrokerProcess, frames_by_port: dict[int, list[Mutant]]) -> None:
        self.broker = broker
        self.frames_by_port = frames_by_port
        self.position = len(broker.log_text())
        self.tracebacks: list[str] = []
        self.protocol_errors = 0
        self.handler_failures = 0

    def poll(self) -> None:
        text = self.broker.log_text()
        if len(text) <= self.position:
            return
        # Only whole lines: a traceback being written is read on the next poll.
        end = text.rfind("\n", self.position) + 1
        if end <= self.position:
            return
        chunk, self.position = text[self.position : end], end
        lines = chunk.splitlines()
        self.protocol_errors += sum(_PROTOCOL_ERROR.search(line) is not None for line in lines)
        for number, line in enumerate(lines):
            if not line.startswith("Traceback"):
                continue
            self.handler_failures += 1
            context = lines[max(0, number - 1)]
            block = [context, line]
            for follow in lines[number + 1 :]:
                if follow[:4].isdigit() and " " in follow:  # the next log record (it starts with the date)
                    break
                block.append(follow)
            culprit = "no frame could be tied to it"
            match = _PEER.search(context)
            if match and int(match[1]) in self.frames_by_port:
                culprit = "\n".join(m.describe() for m in self.frames_by_port[int(match[1])])
            self.tracebacks.append(f"traceback in the broker log after {culprit}\n" + "\n".join(block[-40:]))


# --------------------------------------------------------------------------------------- campaign

@dataclass
class CampaignResult:
    seed: int
    frames: int = 0
    connections: int = 0
    answered: int = 0  # connections that got at least one byte back
    elapsed: float = 0.0
    rss_before: int = 0
    rss_after: int = 0
    rss_peak: int = 0
    probe_count: int = 0
    probe_worst: float = 0.0
    probe_worst_at: float = 0.0
    served: ServedReport = field(default_factory=ServedReport)
    problems: list[str] = field(default_factory=list)
    protocol_errors: int = 0
    topics_deleted: int = 0
    groups_deleted: int = 0
    connect_failures: int = 0

    def summary(self) -> str:
        mb = 1024 * 1024
        return (f"seed {self.seed}: {self.frames} frames on {self.connections} connections in {self.elapsed:.1f} s "
                f"({self.frames / max(self.elapsed, 1e-9):.0f} frames/s), {self.answered} connections answered, "
                f"{self.protocol_errors} closed for a protocol error; "
                f"broker RSS {self.rss_before / mb:.1f} MB before, {self.rss_after / mb:.1f} MB after "
                f"(peak {self.rss_peak / mb:.1f} MB); probe: {self.probe_count} Metadata requests, worst "
                f"{self.probe_worst * 1000:.0f} ms (at {self.probe_worst_at:.1f} s); served client: "
                f"{self.served.produced} produced, {self.served.consumed} consumed, longest gap "
                f"{self.served.max_gap * 1000:.0f} ms (at {self.served.max_gap_at:.1f} s)")


#: The served client's login on a SASL listener (compat_tests/fuzz/sasl.py's users).
SASL_SERVED_LOGIN = ("SCRAM-SHA-512", "bob", "bob-secret")


def start_sasl_broker(data_dir: Path, overrides: Mapping[str, object] = BROKER_OVERRIDES,
                      name: str = "fuzz-sasl") -> tuple[BrokerProcess, tuple[str, int]]:
    """A broker process with a PLAINTEXT listener (the harness's, the probe's and the janitor's) and a
    SASL_PLAINTEXT listener serving the users of compat_tests/fuzz/sasl.py (its SCRAM users written into
    `data_dir` first); returns it and the SASL listener's address."""
    sasl.write_scram_users(data_dir)
    ports = []
    for _ in range(2):
        with socket.create_server((BIND_HOST, 0)) as probe:
            ports.append(probe.getsockname()[1])
    broker = BrokerProcess(data_dir, overrides={**overrides, **sasl.sasl_overrides(*ports)}, name=name)
    broker.start(ports[0])
    return broker, (BIND_HOST, ports[1])


def sasl_served_settings(address: tuple[str, int]) -> dict[str, str]:
    """The served client's librdkafka settings on the SASL listener at `address`."""
    return sasl.confluent_settings(f"{address[0]}:{address[1]}", *SASL_SERVED_LOGIN)


def create_served_topic(broker: BrokerProcess, topic: str = SERVED_TOPIC) -> None:
    from compat_tests.clients import ClientError, ConfluentClient

    admin = ConfluentClient(broker.bootstrap)
    try:
        admin.create_topic(topic, 1)
    except ClientError as exc:
        if exc.error != "TOPIC_ALREADY_EXISTS":
            raise
    assert admin.partitions(topic) == [0]


def run_campaign(
    broker: BrokerProcess,
    corpus: Sequence[GoldenFrame],
    *,
    seed: int,
    frames: int,
    start: int = 0,
    workers: int = 16,
    per_connection: int = 1,
    reply_timeout: float = 0.3,
    max_rss_growth: int = 64 * 1024 * 1024,
    progress: Callable[[CampaignResult], None] | None = None,
    progress_every: float = 10.0,
    sweep_every: float = 5.0,
    target: tuple[str, int] | None = None,
    make_mutant: Callable[[Sequence[GoldenFrame], int, int], Mutant] = mutant,
    served_settings: Mapping[str, str] | None = None,
    settle: float | None = None,
) -> CampaignResult:
    """Send mutants ``start .. start+frames-1`` of `seed` (made by `make_mutant`: `mutant`, or
    `sasl_mutant` for a SASL listener) to `target` (default: the broker's own listener) while a served
    client and a probe run; returns the figures and the problems found (a dead broker stops the campaign).

    The served client uses `served_settings` (librdkafka settings: its bootstrap and login) when given; the
    probe and the janitor use the broker's own listener. After the final sweep, RSS is measured `settle`
    seconds later (default: long enough for the files of deleted topics to close)."""
    pid = broker_pid(broker)
    result = CampaignResult(seed)
    create_served_topic(broker)
    served_settings = dict(served_settings or {})
    served = ServedClient(served_settings.pop("bootstrap.servers", broker.bootstrap), settings=served_settings)
    result.served = served.report  # filled in as the client goes
    served.start()
    probe = Probe(broker.host, broker.port)
    probe.start()
    janitor = Janitor(broker.bootstrap, every=sweep_every)
    janitor.start()
    result.rss_before = result.rss_peak = rss_bytes(pid)
    frames_by_port: dict[int, list[Mutant]] = {}
    watcher = LogWatcher(broker, frames_by_port)
    recent: deque[list[Mutant]] = deque(maxlen=4 * workers)
    started = time.monotonic()
    last_progress = started
    stop = threading.Event()

    def monitor() -> None:
        nonlocal last_progress
        while not stop.wait(0.25):
            if not broker.running:
                stop.set()
                return
            try:
                result.rss_peak = max(result.rss_peak, rss_bytes(pid))
            except (OSError, RuntimeError):
                pass
            watcher.poll()
            if progress is not None and time.monotonic() - last_progress >= progress_every:
                last_progress = time.monotonic()
                result.elapsed = last_progress - started
                result.probe_count, result.probe_worst = probe.count, probe.worst
                result.protocol_errors = watcher.protocol_errors
                progress(result)

    monitor_thread = threading.Thread(target=monitor, name="fuzz-monitor", daemon=True)
    monitor_thread.start()
    try:
        asyncio.run(_send_all(broker, target or (broker.host, broker.port), corpus, make_mutant, seed, start,
                              frames, workers, per_connection, reply_timeout, result, frames_by_port, recent,
                              stop))
    finally:
        stop.set()
        monitor_thread.join()
        result.elapsed = time.monotonic() - started
        probe.stop()
        result.served = served.stop()
        janitor.stop()
    if broker.running:
        janitor.sweep()
        time.sleep(_CLOSE_DELAY if settle is None else settle)
    result.topics_deleted, result.groups_deleted = janitor.topics_deleted, janitor.groups_deleted
    watcher.poll()
    result.probe_count, result.probe_worst, result.probe_worst_at = probe.count, probe.worst, probe.worst_at
    result.protocol_errors = watcher.protocol_errors
    if not broker.running:
        in_flight = "\n".join(m.describe() for group in recent for m in group)
        result.problems.append(f"the broker exited with {broker.returncode} during seed {seed}; the last frames "
                               f"sent:\n{in_flight}\nlog tail:\n{broker.log_tail(40)}")
        return result
    result.rss_after = rss_bytes(pid)
    result.rss_peak = max(result.rss_peak, result.rss_after)
    result.problems += watcher.tracebacks
    if "Traceback" in broker.log_text() and not watcher.tracebacks:
        result.problems.append(f"the broker log holds a traceback (seed {seed}):\n{broker.log_tail(60)}")
    if result.rss_after - result.rss_before >= max_rss_growth:
        result.problems.append(f"broker RSS grew by {(result.rss_after - result.rss_before) / 2**20:.1f} MB "
                               f"during seed {seed} (frames {start}..{start + frames - 1})")
    if result.served.errors:
        result.problems.append(f"the served client failed during seed {seed}: {result.served.errors}")
    if result.served.max_gap > SERVED_MAX_GAP:
        result.problems.append(f"the served client waited {result.served.max_gap:.1f} s for the broker "
                               f"({result.served.max_gap_at:.1f} s into seed {seed})")
    if probe.failures:
        result.problems.append(f"the probe failed during seed {seed}: {probe.failures[:5]}")
    return result


async def _send_all(broker: BrokerProcess, target: tuple[str, int], corpus: Sequence[GoldenFrame],
                    make_mutant: Callable[[Sequence[GoldenFrame], int, int], Mutant], seed: int, start: int,
                    frames: int, workers: int, per_connection: int, reply_timeout: float, result: CampaignResult,
                    frames_by_port: dict[int, list[Mutant]], recent: deque[list[Mutant]],
                    stop: threading.Event) -> None:
    next_index = start
    end = start + frames

    async def worker() -> None:
        nonlocal next_index
        while not stop.is_set() and next_index < end:
            indices = range(next_index, min(next_index + per_connection, end))
            next_index = indices.stop
            group = [make_mutant(corpus, seed, index) for index in indices]
            recent.append(group)
            try:
                answered = await _send(*target, group, reply_timeout, frames_by_port)
            except (OSError, asyncio.TimeoutError) as exc:
                if not broker.running:
                    stop.set()
                    return
                result.connect_failures += 1
                if len(result.problems) < 20:
                    result.problems.append(f"could not send {group[0].describe()}: {exc!r}")
                answered = False
            result.frames += len(group)
            result.connections += 1
            result.answered += answered

    await asyncio.gather(*(worker() for _ in range(workers)))


async def _send(host: str, port: int, group: list[Mutant], reply_timeout: float,
                frames_by_port: dict[int, list[Mutant]]) -> bool:
    """Send a group of mutants (each after its prelude) on one connection and read until EOF, every
    answer or silence. Returns whether anything came back."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
    frames_by_port[writer.get_extra_info("sockname")[1]] = group
    received = bytearray()
    expected = sum(m.answers for m in group)
    try:
        writer.write(b"".join(m.prelude + m.data for m in group))
        try:
            await asyncio.wait_for(writer.drain(), reply_timeout * 4)
        except (OSError, asyncio.TimeoutError):
            pass
        answers = 0
        while answers < expected:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), reply_timeout)
            except (OSError, asyncio.TimeoutError):
                break
            if not chunk:
                break
            received += chunk
            while len(received) >= 4 and len(received) >= 4 + struct.unpack_from(">i", received)[0]:
                del received[: 4 + struct.unpack_from(">i", received)[0]]
                answers += 1
        return answers > 0 or bool(received)
    finally:
        writer.transport.abort()


def replay(broker: BrokerProcess, corpus: Sequence[GoldenFrame], seed: int, index: int,
           timeout: float = 2.0, *, target: tuple[str, int] | None = None,
           make_mutant: Callable[[Sequence[GoldenFrame], int, int], Mutant] = mutant) -> tuple[Mutant, bytes]:
    """Send one mutant (after its prelude) on a fresh connection to `target` (default: the broker's own
    listener); returns it and whatever the broker answered."""
    m = make_mutant(corpus, seed, index)
    with socket.create_connection(target or (broker.host, broker.port), timeout=timeout) as sock:
        sock.sendall(m.prelude + m.data)
        received = bytearray()
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, OSError):
            pass
    return m, bytes(received)
