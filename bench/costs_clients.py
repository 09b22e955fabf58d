"""The clients of ``python -m bench --costs``, each in a process of its own, speaking to one broker over
real sockets: requests built with trafka's wire codec (``trafka.wire``), or confluent-kafka producers.

    python -m bench.costs_clients hold BOOTSTRAP    # idle connections, on command from stdin
    python -m bench.costs_clients produce JSON      # producer instances, released together from stdin
    python -m bench.costs --workload JSON           # {"workload": "commit", ...}: groups committing offsets

- **hold**: reads ``open N`` (connect until N connections are open; each sends ApiVersions and reads
  the answer, as every Kafka client does first, then stays idle), ``check`` (how many the broker
  closed) and ``exit`` from stdin, and answers each with one JSON line.
- **commit**: one connection per group, as each consumer has its own to its group coordinator;
  FindCoordinator for every group, then every group commits one offset per second, the groups spread
  evenly over each second: OffsetCommit with generation -1 and an empty member id, as a consumer with
  manually assigned partitions commits. Each commit's latency is the time from sending the request to
  reading the whole response.
- **produce**: ``producers`` confluent-kafka producer instances (each its own librdkafka client, its
  own connections and queues) in this process, set up and connected; prints ``ready``, waits for
  ``go`` on stdin, then hands records to its producers in turn from one thread and flushes them all.

Every loop has a deadline; a stalled broker gives a partial figure and an ``error``, never a hang.
"""
from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import time
from typing import Any

from compat_tests.wire_client import decode_response, encode_frame, read_frame
from trafka.wire.messages import ApiVersionsRequest, FindCoordinatorRequest, OffsetCommitRequest

CONNECT_BATCH = 32  # connections opened before their answers are read: within Kafka's listen backlog of 50
CONNECT_TIMEOUT_S = 30.0
OPEN_DEADLINE_S = 300.0
COORDINATOR_DEADLINE_S = 60.0
API_VERSIONS_VERSION = 3
FIND_COORDINATOR_VERSION = 4
OFFSET_COMMIT_VERSION = 9
PRODUCE_DEADLINE_S = 300.0


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def percentiles(latencies_s: list[float]) -> dict[str, float]:
    """p50, p99, p99.9 and max of ``latencies_s`` in milliseconds."""
    ordered = sorted(latencies_s)
    if not ordered:
        return {}
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"p50_ms": pick(0.5), "p99_ms": pick(0.99), "p999_ms": pick(0.999), "max_ms": ordered[-1] * 1000}


# ---------------------------------------------------------------------------------------------------
# Idle connections


def _api_versions_frame() -> bytes:
    request = ApiVersionsRequest(client_software_name="trafka-bench-costs", client_software_version="1")
    return encode_frame(request, API_VERSIONS_VERSION, client_id="costs-idle")


def open_connections(address: tuple[str, int], held: list[socket.socket], target: int) -> dict[str, Any]:
    """Open connections until ``held`` has ``target``, ``CONNECT_BATCH`` at a time: connect, send
    ApiVersions, read every answer of the batch (so that no more than a batch waits in the broker's
    accept queue) and check it."""
    frame = _api_versions_frame()
    started = time.perf_counter()
    deadline = started + OPEN_DEADLINE_S
    errors = 0
    while len(held) < target and time.perf_counter() < deadline:
        batch = [socket.create_connection(address, timeout=CONNECT_TIMEOUT_S)
                 for _ in range(min(CONNECT_BATCH, target - len(held)))]
        for sock in batch:
            sock.sendall(frame)
        for sock in batch:
            _, answer = decode_response(read_frame(sock), ApiVersionsRequest.API_KEY, API_VERSIONS_VERSION)
            errors += answer.error_code != 0
        held.extend(batch)
    result: dict[str, Any] = {"open": len(held), "open_s": time.perf_counter() - started}
    if errors or len(held) < target:
        result["error"] = f"{errors} ApiVersions errors; {len(held)} of {target} open"
    return result


def closed_by_broker(held: list[socket.socket]) -> int:
    """How many of ``held`` the broker has closed (readable, and the read finds the end of the stream)."""
    with selectors.DefaultSelector() as selector:
        for sock in held:
            selector.register(sock, selectors.EVENT_READ)
        ready = [key.fileobj for key, _ in selector.select(0)]
    closed = 0
    for sock in ready:
        try:
            closed += sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def hold(bootstrap: str) -> int:
    """Idle connections to ``bootstrap`` on command from stdin (see the module's docstring)."""
    address = _address(bootstrap)
    held: list[socket.socket] = []
    for line in sys.stdin:
        command, *args = line.split()
        if command == "open":
            try:
                answer = open_connections(address, held, int(args[0]))
            except OSError as exc:
                answer = {"open": len(held), "error": f"{type(exc).__name__}: {exc}"}
        elif command == "check":
            answer = {"open": len(held), "closed_by_broker": closed_by_broker(held)}
        else:
            break
        print(json.dumps(answer), flush=True)
    for sock in held:
        sock.close()
    return 0


# ---------------------------------------------------------------------------------------------------
# Consumer groups committing offsets


class GroupConnection:
    """One group's connection to its coordinator: the request in flight and the bytes read so far."""

    def __init__(self, address: tuple[str, int], group: str) -> None:
        self.sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT_S)
        self.group = group
        self.sent_at: float | None = None
        self.buffer = bytearray()

    def frames(self) -> list[bytes]:
        """The whole response frames read so far (without their sizes), taken off the buffer."""
        out = []
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < 4 + size:
                break
            out.append(bytes(self.buffer[4:4 + size]))
            del self.buffer[:4 + size]
        return out


def find_coordinators(address: tuple[str, int], groups: list[str]) -> dict[str, Any]:
    """FindCoordinator for every group in one request, repeated until every group has its coordinator
    (a broker answers COORDINATOR_NOT_AVAILABLE while it creates ``__consumer_offsets``)."""
    started = time.perf_counter()
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=groups)
    frame = encode_frame(request, FIND_COORDINATOR_VERSION, client_id="costs-groups")
    with socket.create_connection(address, timeout=CONNECT_TIMEOUT_S) as sock:
        while True:
            sock.sendall(frame)
            _, answer = decode_response(read_frame(sock), FindCoordinatorRequest.API_KEY, FIND_COORDINATOR_VERSION)
            waiting = [c for c in answer.coordinators if c.error_code != 0]
            if not waiting:
                break
            if time.perf_counter() - started > COORDINATOR_DEADLINE_S:
                raise TimeoutError(f"{len(waiting)} groups without a coordinator after {COORDINATOR_DEADLINE_S:.0f} s")
            time.sleep(0.2)
    nodes = sorted({c.node_id for c in answer.coordinators})
    return {"find_coordinator_s": time.perf_counter() - started, "coordinator_nodes": nodes}


def _commit_frame(group: str, topic: str, partition: int, offset: int, correlation_id: int) -> bytes:
    partition_entry = OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=partition,
                                                                        committed_offset=offset)
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                      name=topic, partitions=[partition_entry])])
    return encode_frame(request, OFFSET_COMMIT_VERSION, correlation_id, client_id=group)


def commit(p: dict[str, Any]) -> dict[str, Any]:
    """``groups`` groups, each committing an offset of ``topic`` once a second for ``seconds`` after one
    commit each not counted; latency of every commit, the figures of every second, errors by code."""
    address = _address(p["bootstrap"])
    groups = [f"costs-group-{i:05d}" for i in range(p["groups"])]
    result: dict[str, Any] = find_coordinators(address, groups)
    connections = [GroupConnection(address, group) for group in groups]
    selector = selectors.DefaultSelector()
    for connection in connections:
        selector.register(connection.sock, selectors.EVENT_READ, connection)
    latencies: list[tuple[float, float]] = []  # (seconds into the window, latency in seconds)
    errors: dict[int, int] = {}
    skipped = 0
    window_start = float("inf")  # until the window opens, answers are not counted

    def read_answers(timeout: float) -> None:
        for key, _ in selector.select(timeout):
            connection: GroupConnection = key.data
            chunk = connection.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"the broker closed {connection.group}'s connection")
            connection.buffer += chunk
            for frame in connection.frames():
                now = time.perf_counter()
                _, answer = decode_response(frame, OffsetCommitRequest.API_KEY, OFFSET_COMMIT_VERSION)
                for topic in answer.topics:
                    for partition in topic.partitions:
                        if partition.error_code:
                            errors[partition.error_code] = errors.get(partition.error_code, 0) + 1
                if connection.sent_at is not None and connection.sent_at >= window_start:
                    latencies.append((connection.sent_at - window_start, now - connection.sent_at))
                connection.sent_at = None

    def send(index: int, offset: int) -> bool:
        connection = connections[index]
        if connection.sent_at is not None:  # its last commit is unanswered: a consumer would wait too
            return False
        frame = _commit_frame(connection.group, p["topic"], index % p["partitions"], offset, offset + 1)
        connection.sent_at = time.perf_counter()
        connection.sock.sendall(frame)
        return True

    deadline = time.perf_counter() + p["seconds"] + 120
    error = None
    try:
        # One commit per group before the window, not counted: the group and its offsets come to exist.
        for index in range(len(groups)):
            send(index, 0)
        while any(c.sent_at is not None for c in connections) and time.perf_counter() < deadline:
            read_answers(0.05)
        time.sleep(1.0)  # a quiet second: what the first commits wrote is on disk before the window opens
        window_start = time.perf_counter()
        result["window_start_monotonic"] = time.monotonic()
        total, count = len(groups) * int(p["seconds"]), len(groups)
        sent = 0
        while time.perf_counter() < deadline:
            now = time.perf_counter()
            while sent < total and window_start + sent / count <= now:
                if not send(sent % count, 1 + sent // count):
                    skipped += 1
                sent += 1
            if sent >= total and not any(c.sent_at is not None for c in connections):
                break
            next_due = window_start + sent / count if sent < total else now + 0.05
            read_answers(max(0.0, min(next_due - time.perf_counter(), 0.05)))
        result["window_end_monotonic"] = time.monotonic()
        result["window_s"] = time.perf_counter() - window_start
    except (OSError, ConnectionError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        for connection in connections:
            connection.sock.close()
    by_second: dict[int, list[float]] = {}
    for at, latency in latencies:
        by_second.setdefault(int(at), []).append(latency)
    result.update({
        "commits": len(latencies), "skipped": skipped, "errors_by_code": {str(k): v for k, v in errors.items()},
        **percentiles([latency for _, latency in latencies]),
        "per_second": [{"second": s, "commits": len(v), **percentiles(v)} for s, v in sorted(by_second.items())],
    })
    unanswered = sum(c.sent_at is not None for c in connections)
    if error or errors or unanswered:
        result["error"] = "; ".join(filter(None, [error, f"errors {errors}" if errors else "",
                                                  f"{unanswered} unanswered" if unanswered else ""]))
    return result


# ---------------------------------------------------------------------------------------------------
# Concurrent producers


def produce(p: dict[str, Any]) -> dict[str, Any]:
    """``producers`` producer instances, connected before ``go``; ``count`` records of ``size`` bytes handed
    to them in turn, then every one flushed. Start and end on the machine's monotonic clock."""
    from confluent_kafka import Producer

    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:  # failed records only
        if err is not None and len(failures) < 5:
            failures.append(str(err))

    producers = [Producer({
        "bootstrap.servers": p["bootstrap"], "log_level": 3, "acks": "1", "linger.ms": p["linger_ms"],
        "batch.size": p["batch_size"], "compression.type": "none", "queue.buffering.max.messages": 1_000_000,
        "delivery.report.only.error": True, "on_delivery": on_delivery,
    }) for _ in range(p["producers"])]
    for producer in producers:
        producer.list_topics(p["topic"], timeout=30)  # connected, leaders known, before the clock
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return {"error": "not released"}
    value = os.urandom(p["size"])
    topic, count = p["topic"], p["count"]
    started = time.monotonic()
    deadline = started + PRODUCE_DEADLINE_S
    sent = 0
    turn = 0
    while sent < count and time.monotonic() < deadline:
        producer = producers[turn]
        try:
            producer.produce(topic, value)
            sent += 1
            turn = (turn + 1) % len(producers)
        except BufferError:
            producer.poll(0.001)
    remaining = sum(producer.flush(max(0.0, deadline - time.monotonic())) for producer in producers)
    ended = time.monotonic()
    result: dict[str, Any] = {"started_monotonic": started, "ended_monotonic": ended, "records": sent - remaining}
    if failures or remaining or sent < count:
        result["error"] = f"{count - sent + remaining} undelivered; {'; '.join(failures)}"
    return result


WORKLOADS = {"commit": commit}


def main(argv: list[str]) -> int:
    role, argument = argv[0], argv[1]
    if role == "hold":
        return hold(argument)
    print(json.dumps(produce(json.loads(argument))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
