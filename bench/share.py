"""Share groups (KIP-932, queues for Kafka): records per second through a share group of 1, 3 and 6
consumers, on trafka and Apache Kafka side by side.

    python -m bench --share            # about 4-5 minutes on 2 cores
    python -m bench --share --quick    # a check that the mode works: about a minute
    python -m bench --share --brokers trafka   # one broker only (trafka, kafka)

Both brokers are started first, with the same settings beside their defaults (``BROKER_PROPERTIES``): the
share state topic ``__share_group_state`` with replication factor 1 and min ISR 1 (Kafka's default of 3
cannot be met by one node, and its share groups then never get an assignment; trafka's default is 1
already), and share heartbeats every second instead of every 5 s (``group.share.heartbeat.interval.ms``
and its minimum), which only shortens the wait for the group's assignment before the clock starts. Every
other share setting is the default of both: ``group.share.partition.max.record.locks`` 2000 (records in
flight per share partition), a 30 s acquisition lock, ``group.share.assignment.interval.ms`` 1 s.

**Topics.** A queue of ``count`` x 1 KB records, filled once per broker before anything is measured
(confluent-kafka producer in a client process of its own, the main benchmark's settings: ``batch.size``
1 MiB, compression none, random payload, no key, acks=1, but ``linger.ms`` 2 s: a ShareFetch hands out
whole record batches, so every batch is filled to ``batch.size``, 967 records, on both brokers alike, where
5 ms would cut them by how fast each broker answers the producer), the records spread round-robin over the
partitions so that every partition holds the same number:

- **6 partitions** for the cells of 1, 3 and 6 consumers: the share assignor hands each member its own
  partitions while members are no more than partitions (1 consumer: all 6; 3: two each; 6: one each), so
  the consumers' work does not overlap and what is measured is the group's throughput as a queue grows its
  workers, the way a share group is meant to be scaled;
- **1 partition, 6 consumers** (one more cell): every member is assigned the same partition and they
  share its records, each ShareFetch acquiring the next available batch: pure sharing, what a share group
  does that a consumer group cannot. Here the 2,000 record locks of the one share partition (two batches)
  bound what is in flight for all six, and the share partition's bookkeeping (acquisitions, acknowledgements,
  the share state written for each) is all on one partition.

**A run** (one broker, one cell) uses a fresh group id. Before the clock:
1. the group's ``share.auto.offset.reset`` is set to ``earliest`` with IncrementalAlterConfigs on the
   GROUP resource (type 32; sent with trafka's wire codec, ``compat_tests.wire_client.WireClient``, to both
   brokers), so that its share partitions start at the beginning of the pre-filled topic;
2. the consumers start, each a client process of its own (``python -m bench.share --workload JSON``: six
   consumers are not one GIL), each a confluent-kafka ``ShareConsumer`` (librdkafka;
   ``share.acknowledgement.mode=implicit``: the records of a poll are accepted with the next poll, or the
   ``commit_sync()`` at the end; other settings default), and subscribe; librdkafka joins the group in the
   background;
3. the harness asks ShareGroupDescribe until the group is settled: every consumer a member at the
   assignment epoch, which equals the group epoch, and every partition assigned;
4. the consumers are released together (a flag in a shared memory map) and poll, 50 ms at most each.

**Measured**: from the first record any consumer receives (a ``poll()`` returning it) to the moment all
``count`` records have been delivered and acknowledged: the consumer whose poll completes the set (a
byte per record in the shared map, written by whoever received it) raises a flag; each consumer, seeing
it, calls ``commit_sync()``, which sends and waits for the acceptance of the records of its last poll if
they are still pending; the end is the latest such ``commit_sync()`` return (a consumer idle in its poll
had nothing pending: its acknowledgements went with the poll that followed its last records). Records/s
is ``count`` over that time. Each consumer reports every offset it received: no record may be missing
(every offset of every partition seen, else the run has an ``error``); duplicates (a record delivered
twice, e.g. after a lock expired) are counted and reported, not fatal. After the consumers close,
DescribeShareGroupOffsets must show a lag of 0 on every partition (every record acknowledged, as the
broker's share state has it), and the group is deleted.

Also reported per run: the cores the broker and the consumers kept busy and their CPU time per record (what
the work costs whatever share of the cores a busy machine gave each process), the records each consumer got,
the records of each consumer's first poll and the time from the release to it, the records per poll that
delivered any and the time between two such polls of one consumer (librdkafka's share consumer hands out
one ShareFetch's records per poll, one whole batch here, and the next ShareFetch carries the acknowledgement
of the last: that time is the consumer's round trip through the broker), and the time the group took to
settle (not measured).

Order: a warm-up run on each broker (6 partitions, 3 consumers, not counted: Kafka's JIT compiler is
seconds old otherwise); then every (broker, cell) pair in turns (``bench.common.in_turns``), ``repeats``
rounds, each starting one pair further on: the median, and trafka/kafka of the medians and round by round.
Results: ``bench/results/<date>-share.json`` and ``.md`` (``-share-quick`` for ``--quick``).

``python -m bench.share --profile 1x6`` (``PARTITIONSxCONSUMERS``) samples trafka's broker with py-spy through
runs of one cell instead (``profile_main``).
"""
from __future__ import annotations

import mmap
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import brokers, common
from bench.common import Progress, in_turns, lookup, size_label
from bench.variants import num as _num
from bench.workloads import _process_cpu_s, _quiet, _rate, _workload_result

SUPPORTED = ("trafka", "kafka")
BROKER_PROPERTIES = {
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
}
GROUP_CONFIGS = {"share.auto.offset.reset": "earliest"}
GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
ACKNOWLEDGEMENT_MODE = "implicit"
POLL_TIMEOUT_S = 0.05
START_TIMEOUT_S = 60.0  # the consumers' processes up and subscribed
SETTLE_TIMEOUT_S = 60.0  # the group's assignment settled
RUN_DEADLINE_S = 120.0  # from the release to the last record
RESULT_TIMEOUT_S = 60.0  # from the end to the consumers' results (close() leaves the group)
MAX_CONSUMERS = 16
# Long enough for every batch of the fill to reach batch.size (1 MiB: 967 records of 1 KB) whatever the broker: a
# ShareFetch hands out whole batches, so the topic's batches must be the same on both brokers.
FILL_LINGER_MS = 2000

# The shared map: a header of int64 slots, then one byte per record (partition by partition).
GO, DONE, ABORT = 0, 1, 2
READY = 8  # READY + i: consumer i is subscribed and waits for GO
COUNT = READY + MAX_CONSUMERS  # COUNT + i: records consumer i has received so far
HEADER_SLOTS = COUNT + MAX_CONSUMERS
HEADER_BYTES = HEADER_SLOTS * 8


@dataclass(frozen=True)
class Cell:
    partitions: int
    consumers: int

    @property
    def label(self) -> str:
        return (f"{self.partitions} partition{'s' if self.partitions > 1 else ''}, {self.consumers} "
                f"consumer{'s' if self.consumers > 1 else ''}")


@dataclass(frozen=True)
class SharePlan:
    mode: str
    size: int  # record size, bytes
    count: int  # records in each topic, all consumed by each run
    cells: tuple[Cell, ...]
    repeats: int
    warmup: Cell  # one run on each broker before anything is measured


CELLS = (Cell(6, 1), Cell(6, 3), Cell(6, 6), Cell(1, 6))
FULL = SharePlan(mode="share", size=1024, count=200_000, cells=CELLS, repeats=5, warmup=Cell(6, 3))
QUICK = SharePlan(mode="share-quick", size=1024, count=50_000, cells=CELLS, repeats=1, warmup=Cell(6, 3))


def topic_name(partitions: int) -> str:
    return f"bench.share.p{partitions}"


# ---------------------------------------------------------------------------------------------------
# Client processes (``python -m bench.share --workload JSON``)


def fill(p: dict[str, Any]) -> dict[str, Any]:
    """``count`` records of ``size`` bytes, round-robin over ``partitions`` (explicit partitions), acks=1;
    then each partition's end offset."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:  # failed records only
        if err is not None and len(failures) < 5:
            failures.append(str(err))

    producer = Producer(_quiet({
        "bootstrap.servers": p["bootstrap"], "acks": "1", "linger.ms": FILL_LINGER_MS, "batch.size": 1_048_576,
        "compression.type": "none", "queue.buffering.max.messages": 1_000_000, "delivery.report.only.error": True,
        "on_delivery": on_delivery}, p))
    topic, count, partitions = p["topic"], p["count"], p["partitions"]
    producer.list_topics(topic, timeout=30)
    value = os.urandom(p["size"])
    started = time.perf_counter()
    sent = 0
    while sent < count:
        try:
            producer.produce(topic, value, partition=sent % partitions)
            sent += 1
        except BufferError:
            producer.poll(0.001)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    consumer = Consumer(_quiet({"bootstrap.servers": p["bootstrap"], "group.id": "bench-share-fill"}, p))
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, i), timeout=30)[1] for i in range(partitions)]
    finally:
        consumer.close()
    result: dict[str, Any] = {**_rate(count - remaining, p["size"], elapsed), "records": count - remaining,
                              "end_offsets": ends}
    if failures or remaining or sum(ends) != count:
        result["error"] = f"{remaining} undelivered, end offsets {ends}; {'; '.join(failures)}"
    return result


def _ranges(offsets: list[int]) -> list[list[int]]:
    """Sorted offsets as [first, last] ranges."""
    out: list[list[int]] = []
    for offset in sorted(offsets):
        if out and offset <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], offset)
        else:
            out.append([offset, offset])
    return out


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def share_consumer(p: dict[str, Any]) -> dict[str, Any]:
    """One member of the share group: subscribe, say so, wait for the release, then poll until every record
    of the topic has been received by some member (the shared map says), ``commit_sync()``, close. Times are
    ``time.monotonic()``, one clock for every process of the machine."""
    from confluent_kafka import ShareConsumer

    index, consumers, total = p["index"], p["consumers"], p["total"]
    bases = p["bases"]  # where each partition's bytes start in the map
    with open(p["map"], "r+b") as file:
        shared = mmap.mmap(file.fileno(), 0)
    slots = memoryview(shared)[:HEADER_BYTES].cast("q")
    seen = memoryview(shared)[HEADER_BYTES:]
    end_of_map = HEADER_BYTES + total
    created = time.monotonic()
    consumer = ShareConsumer(_quiet({
        "bootstrap.servers": p["bootstrap"], "group.id": p["group"], "client.id": f"bench-share-{index}",
        "share.acknowledgement.mode": ACKNOWLEDGEMENT_MODE}, p))
    consumer.subscribe([p["topic"]])
    slots[READY + index] = 1
    deadline = time.monotonic() + START_TIMEOUT_S + SETTLE_TIMEOUT_S
    while not slots[GO] and not slots[ABORT] and time.monotonic() < deadline:
        time.sleep(0.001)
    released = time.monotonic()
    cpu_started = _cpu_s()
    deadline = released + p.get("deadline_s", RUN_DEADLINE_S)
    offsets: dict[int, list[int]] = {}
    received = polls = empty_polls = 0
    first_at = last_at = None
    first_poll_records = 0
    errors: list[str] = []
    poll = consumer.poll
    timeout = p.get("poll_timeout_s", POLL_TIMEOUT_S)
    completed_here = False
    try:
        while slots[GO] and not slots[DONE] and not slots[ABORT]:
            messages = poll(timeout)
            now = time.monotonic()
            polls += 1
            got = 0
            for message in messages:
                if message.error() is not None:
                    if len(errors) < 5:
                        errors.append(str(message.error()))
                    continue
                partition, offset = message.partition(), message.offset()
                seen[bases[partition] + offset] = 1
                offsets.setdefault(partition, []).append(offset)
                got += 1
            if got:
                if first_at is None:
                    first_at, first_poll_records = now, got
                last_at = now
                received += got
                slots[COUNT + index] = received
                if sum(slots[COUNT:COUNT + consumers]) >= total and shared.find(b"\x00", HEADER_BYTES, end_of_map) < 0:
                    completed_here = True
                    slots[DONE] = 1
            else:
                empty_polls += 1
            if now > deadline:
                errors.append(f"deadline: {RUN_DEADLINE_S:.0f} s after the release")
                break
        finished_polling = time.monotonic()
        pending = consumer.commit_sync(30)
        committed = time.monotonic()
        commit_errors = [f"{tp.partition}: {error}" for tp, error in (pending or {}).items() if error is not None]
        cpu_s = _cpu_s() - cpu_started
    finally:
        closing = time.monotonic()
        consumer.close()
        closed = time.monotonic()
        slots.release()
        seen.release()
        shared.close()
    result: dict[str, Any] = {
        "index": index, "records": received, "polls": polls, "empty_polls": empty_polls,
        "created": created, "released": released, "first_at": first_at, "last_at": last_at,
        "first_poll_records": first_poll_records, "finished_polling": finished_polling,
        "pending_at_commit": len(pending or {}), "committed": committed, "commit_s": committed - finished_polling,
        "close_s": closed - closing, "completed_here": completed_here, "cpu_s": cpu_s,
        "offsets": {str(partition): _ranges(values) for partition, values in offsets.items()},
    }
    if errors or commit_errors:
        result["error"] = "; ".join(errors + commit_errors)
    return result


WORKLOADS = {"fill": fill, "share_consumer": share_consumer}


def run_workload(params: dict[str, Any], timeout: float = common.WORKLOAD_TIMEOUT_S) -> dict[str, Any]:
    return common.run_workload("bench.share", params, timeout)


def _spawn(params: dict[str, Any]) -> subprocess.Popen[str]:
    import json

    return subprocess.Popen([sys.executable, "-m", "bench.share", "--workload", json.dumps(params)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ---------------------------------------------------------------------------------------------------
# The harness


def broker_spec(name: str) -> brokers.BrokerSpec:
    """``name``'s spec with ``BROKER_PROPERTIES`` set: trafka's ``--override``s, Kafka's server.properties."""
    spec = brokers.SPECS[name]
    if name == "trafka":
        command = spec.command
        overrides = [a for k, v in BROKER_PROPERTIES.items() for a in ("--override", f"{k}={v}")]
        return replace(spec, command=lambda tmp, port: [*command(tmp, port), *overrides])
    if name == "kafka":
        from compat_tests import reference

        def prepare(tmp: Path, port: int) -> None:
            properties = brokers._kafka_properties(tmp)
            reference.write_properties(properties, tmp / "data", port, brokers.free_port(), BROKER_PROPERTIES)
            reference.format_storage(properties,
                                     jvm_options=brokers.kafka_jvm_options(brokers.KAFKA_TOOL_HEAP_OPTIONS))

        return replace(spec, prepare=prepare)
    raise brokers.BrokerError(f"{name}: the share mode runs trafka and kafka only")


class Subject:
    """One broker: its process, its topics' end offsets, its results so far."""

    def __init__(self, name: str, live: list[brokers.BrokerProcess]) -> None:
        self.name = name
        self.broker = brokers.start(broker_spec(name))
        live.append(self.broker)
        self.end_offsets: dict[int, list[int]] = {}
        self.results: dict[str, Any] = {"start_to_ready_s": self.broker.ready_s, "fill": {}, "cells": {}}

    def prepare(self, plan: SharePlan, progress: Progress) -> None:
        for partitions in sorted({c.partitions for c in (*plan.cells, plan.warmup)}, reverse=True):
            topic = topic_name(partitions)
            self.broker.create_topic(topic, partitions)
            result = run_workload({"workload": "fill", "bootstrap": self.broker.bootstrap, "topic": topic,
                                   "partitions": partitions, "count": plan.count, "size": plan.size})
            self.results["fill"][str(partitions)] = result
            progress.step(self.name, f"fill {plan.count:,} x {size_label(plan.size)}, {partitions} partition(s)",
                          result)
            if "error" in result:
                raise brokers.BrokerError(f"{self.name}: filling {topic}: {result['error']}")
            self.end_offsets[partitions] = result["end_offsets"]

    def run(self, plan: SharePlan, cell: Cell) -> dict[str, Any]:
        result = one_run(self.broker, topic_name(cell.partitions), self.end_offsets[cell.partitions], cell, plan)
        if not self.broker.alive():
            result["error"] = f"broker exited: {self.broker.log_tail(5)}"
        return result


def _client(bootstrap: str) -> Any:
    from compat_tests.wire_client import WireClient

    return WireClient(bootstrap, client_id="bench-share-admin")


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    from trafka.wire.messages import IncrementalAlterConfigsRequest as Inc

    with _client(bootstrap) as client:
        response = client.request(Inc(resources=[Inc.AlterConfigsResource(
            resource_type=GROUP_RESOURCE, resource_name=group, configs=[
                Inc.AlterableConfig(name=name, config_operation=0, value=value) for name, value in configs.items()])]),
            1)
    if [r.error_code for r in response.responses] != [0]:
        raise brokers.BrokerError(f"IncrementalAlterConfigs on group {group}: {response}")


def describe_group(bootstrap: str, group: str) -> Any:
    from trafka.wire.messages import ShareGroupDescribeRequest

    with _client(bootstrap) as client:
        return client.request(ShareGroupDescribeRequest(group_ids=[group]), 1).groups[0]


def settled(described: Any, consumers: int, partitions: int) -> dict[str, Any] | None:
    """The members' assignments when the group is settled (every consumer a member at the assignment epoch,
    which is the group epoch, and every partition assigned), else None."""
    if described.error_code != 0 or len(described.members) != consumers:
        return None
    if described.assignment_epoch != described.group_epoch:
        return None
    assignments = {}
    for member in described.members:
        if member.member_epoch != described.assignment_epoch:
            return None
        assignments[member.client_id] = sorted(p for tp in member.assignment.topic_partitions for p in tp.partitions)
    if {p for assigned in assignments.values() for p in assigned} != set(range(partitions)):
        return None
    return dict(sorted(assignments.items()))


def share_group_lag(bootstrap: str, group: str, topic: str, partitions: int) -> dict[str, Any]:
    """DescribeShareGroupOffsets: each partition's start offset and lag (-1 where unknown)."""
    from trafka.wire.messages import DescribeShareGroupOffsetsRequest as D

    with _client(bootstrap) as client:
        response = client.request(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
            D.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=list(range(partitions)))])]), 1)
    group_result = response.groups[0]
    out: dict[str, Any] = {"error_code": group_result.error_code, "partitions": {}}
    for t in group_result.topics:
        for partition in t.partitions:
            out["partitions"][str(partition.partition_index)] = {
                "start_offset": partition.start_offset, "lag": partition.lag, "error_code": partition.error_code}
    return out


def delete_group(bootstrap: str, group: str) -> int:
    from trafka.wire.messages import DeleteGroupsRequest

    with _client(bootstrap) as client:
        return client.request(DeleteGroupsRequest(groups_names=[group]), 2).results[0].error_code


def check_offsets(consumers: list[dict[str, Any]], end_offsets: list[int]) -> dict[str, Any]:
    """Every offset of every partition received by some consumer? Records delivered more than once?"""
    by_partition: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(end_offsets))}
    for result in consumers:
        for partition, ranges in (result.get("offsets") or {}).items():
            by_partition.setdefault(int(partition), []).extend((a, b) for a, b in ranges)
    delivered = distinct = 0
    missing: list[str] = []
    out_of_range = 0
    for partition, ranges in by_partition.items():
        end = end_offsets[partition] if partition < len(end_offsets) else 0
        covered_to = -1  # the highest offset covered so far
        for first, last in sorted(ranges):
            delivered += last - first + 1
            if last > covered_to:
                distinct += last - max(first, covered_to + 1) + 1
                if first > covered_to + 1 and len(missing) < 10:
                    missing.append(f"{partition}:{covered_to + 1}-{first - 1}")
                covered_to = last
        if covered_to < end - 1 and len(missing) < 10:
            missing.append(f"{partition}:{covered_to + 1}-{end - 1}")
        out_of_range += max(0, covered_to - (end - 1))
    expected = sum(end_offsets)
    return {"delivered": delivered, "distinct": distinct, "duplicates": delivered - distinct,
            "lost": expected - distinct + out_of_range, "missing_examples": missing}


def one_run(broker: brokers.BrokerProcess, topic: str, end_offsets: list[int], cell: Cell,
            plan: SharePlan) -> dict[str, Any]:
    """One share group of ``cell.consumers`` consumers draining ``topic`` (see the module's docstring)."""
    group = f"bench-share-{uuid.uuid4().hex[:12]}"
    total = sum(end_offsets)
    bases = [sum(end_offsets[:i]) for i in range(len(end_offsets))]
    result: dict[str, Any] = {"group": group, "consumers": cell.consumers, "partitions": cell.partitions}
    set_group_configs(broker.bootstrap, group, GROUP_CONFIGS)
    directory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    handle, map_path = tempfile.mkstemp(prefix="bench-share-", dir=directory)
    processes: list[subprocess.Popen[str]] = []
    try:
        os.ftruncate(handle, HEADER_BYTES + total)
        with mmap.mmap(handle, 0) as shared:
            slots = memoryview(shared)[:HEADER_BYTES].cast("q")
            try:
                spawned = time.monotonic()
                for index in range(cell.consumers):
                    processes.append(_spawn({
                        "workload": "share_consumer", "bootstrap": broker.bootstrap, "topic": topic, "group": group,
                        "index": index, "consumers": cell.consumers, "total": total, "bases": bases,
                        "map": map_path}))
                timing = _release(broker, group, cell, slots, processes, spawned, result)
            except (brokers.BrokerError, OSError) as exc:
                slots[ABORT] = 1
                result["error"] = str(exc)
                timing = None
            except BaseException:
                slots[ABORT] = 1
                raise
            finally:
                consumers = [_workload_result(p, RESULT_TIMEOUT_S) for p in processes]
                slots.release()
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        os.close(handle)
        os.unlink(map_path)
    if timing is None:
        errors = [f"consumer {i}: {r['error']}" for i, r in enumerate(consumers) if "error" in r]
        result["error"] = "; ".join([result["error"], *errors])
        return result
    return summarize(result, consumers, end_offsets, plan, broker, topic, group, *timing)


def _release(broker: brokers.BrokerProcess, group: str, cell: Cell, slots: memoryview,
             processes: list[subprocess.Popen[str]], spawned: float,
             result: dict[str, Any]) -> tuple[float, float, float | None, float | None]:
    """Wait for the consumers to subscribe and the group to settle, release them, wait until every record is
    delivered (or the deadline). Returns the release and the end as seen here, and the broker's CPU seconds
    at both."""
    deadline = spawned + START_TIMEOUT_S
    while sum(slots[READY:READY + cell.consumers]) < cell.consumers:
        if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
            raise brokers.BrokerError(f"{sum(slots[READY:READY + cell.consumers])} of {cell.consumers} consumers "
                                      "subscribed")
        time.sleep(0.005)
    subscribed = time.monotonic()
    deadline = subscribed + SETTLE_TIMEOUT_S
    while (assignments := settled(describe_group(broker.bootstrap, group), cell.consumers, cell.partitions)) is None:
        if time.monotonic() > deadline:
            raise brokers.BrokerError(f"the group did not settle in {SETTLE_TIMEOUT_S:.0f} s: "
                                      f"{describe_group(broker.bootstrap, group)}")
        time.sleep(0.05)
    result.update(start_s=round(subscribed - spawned, 3), settle_s=round(time.monotonic() - subscribed, 3),
                  assignments=assignments)
    broker_cpu_at_go = _process_cpu_s(broker.pid)
    released = time.monotonic()
    slots[GO] = 1
    deadline = released + RUN_DEADLINE_S + 5
    while not slots[DONE] and time.monotonic() < deadline and all(p.poll() is None for p in processes):
        time.sleep(0.002)
    done_at = time.monotonic()
    return released, done_at, broker_cpu_at_go, _process_cpu_s(broker.pid)


def summarize(result: dict[str, Any], consumers: list[dict[str, Any]], end_offsets: list[int], plan: SharePlan,
              broker: brokers.BrokerProcess, topic: str, group: str, released: float, done_at: float,
              broker_cpu_at_go: float | None, broker_cpu_at_done: float | None) -> dict[str, Any]:
    errors = [f"consumer {r.get('index', i)}: {r['error']}" for i, r in enumerate(consumers) if "error" in r]
    check = check_offsets(consumers, end_offsets)
    firsts = [r["first_at"] for r in consumers if r.get("first_at") is not None]
    # The end: the latest commit_sync() that had acknowledgements to send (the records of a last poll), or
    # the completing consumer's.
    ends = [r["committed"] for r in consumers if r.get("pending_at_commit") or r.get("completed_here")]
    result.update(check)
    result["per_consumer_records"] = [r.get("records") for r in consumers]
    result["first_poll"] = [{"records": r.get("first_poll_records"),
                             "after_release_ms": round((r["first_at"] - r["released"]) * 1000, 1)}
                            for r in consumers if r.get("first_at") is not None]
    result["commit_ms"] = [round(r["commit_s"] * 1000, 1) for r in consumers if "commit_s" in r]
    result["close_ms"] = [round(r["close_s"] * 1000, 1) for r in consumers if "close_s" in r]
    result["polls"] = sum(r.get("polls", 0) for r in consumers)
    result["empty_polls"] = sum(r.get("empty_polls", 0) for r in consumers)
    # Each poll that delivers hands out what one ShareFetch acquired; the time between two such polls of one
    # consumer is its round: acknowledge the last records and fetch the next (with the records' processing).
    delivering = [(r["records"], r["polls"] - r["empty_polls"], r["last_at"] - r["first_at"]) for r in consumers
                  if r.get("first_at") is not None and r.get("polls", 0) - r.get("empty_polls", 0) > 1]
    if delivering:
        result["records_per_delivering_poll"] = round(sum(n for n, _, _ in delivering)
                                                      / sum(d for _, d, _ in delivering), 1)
        result["ms_between_delivering_polls"] = round(
            sum(span / (d - 1) for _, d, span in delivering) / len(delivering) * 1000, 2)
    if firsts and ends and check["lost"] == 0:
        first, end = min(firsts), max(ends)
        seconds = end - first
        result.update(_rate(sum(end_offsets), plan.size, seconds))
        result["release_to_first_record_ms"] = round((first - released) * 1000, 1)
        window = max(done_at - released, 1e-9)
        consumers_cpu_s = sum(r.get("cpu_s", 0.0) for r in consumers)
        if broker_cpu_at_go is not None and broker_cpu_at_done is not None:
            result["broker_cores"] = round((broker_cpu_at_done - broker_cpu_at_go) / window, 2)
            # CPU time per record: what the work costs, whatever share of the cores the machine gave the process.
            result["broker_us_per_record"] = round((broker_cpu_at_done - broker_cpu_at_go) / sum(end_offsets) * 1e6, 2)
        result["client_cores"] = round(consumers_cpu_s / window, 2)
        result["consumers_us_per_record"] = round(consumers_cpu_s / sum(end_offsets) * 1e6, 2)
    try:
        lag = share_group_lag(broker.bootstrap, group, topic, len(end_offsets))
        result["share_group_offsets"] = lag
        lags = [p["lag"] for p in lag["partitions"].values()]
        result["acknowledged"] = lag["error_code"] == 0 and len(lags) == len(end_offsets) and all(x == 0 for x in lags)
        if not result["acknowledged"]:
            errors.append(f"DescribeShareGroupOffsets after the run: {lag}")
        result["delete_group_error"] = delete_group(broker.bootstrap, group)
    except (OSError, ConnectionError) as exc:
        errors.append(f"DescribeShareGroupOffsets: {exc}")
    if check["lost"]:
        errors.append(f"{check['lost']} record(s) not delivered, e.g. {', '.join(check['missing_examples'])}")
    if errors:
        result["error"] = "; ".join(errors)
    return result


def run(plan: SharePlan, subjects: list[Subject], progress: Progress) -> None:
    for s in subjects:
        result = s.results["warmup"] = s.run(plan, plan.warmup)
        progress.step(s.name, f"warm-up: {plan.warmup.label}", result)

    keys = [(s, cell) for cell in plan.cells for s in subjects]
    runs: dict[tuple[Subject, Cell], list[dict[str, Any]]] = {key: [] for key in keys}

    def one(key: tuple[Subject, Cell]) -> dict[str, Any]:
        s, cell = key
        result = s.run(plan, cell)
        runs[key].append(result)
        progress.step(s.name, cell.label, result)
        return result

    measured = in_turns(keys, plan.repeats, one)
    for (s, cell), result in measured.items():
        s.results["cells"][cell.label] = {**result, "all_runs": runs[(s, cell)]}


# ---------------------------------------------------------------------------------------------------
# Reporting


def derive(plan: SharePlan, by_broker: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """trafka's records/s over kafka's per cell: of the medians, and round by round (a round runs both brokers'
    runs of a cell within the same pass over every pair, so a slow spell of the machine tends to fall on both)."""
    versus: dict[str, Any] = {}
    per_round: dict[str, Any] = {}
    if "trafka" in by_broker and "kafka" in by_broker:
        for cell in plan.cells:
            t = lookup(by_broker["trafka"], ("cells", cell.label, "records_per_s"))
            k = lookup(by_broker["kafka"], ("cells", cell.label, "records_per_s"))
            versus[cell.label] = t / k if t and k else None
            rounds = [a / b if a and b else None for a, b in zip(
                lookup(by_broker["trafka"], ("cells", cell.label, "runs_records_per_s")) or [],
                lookup(by_broker["kafka"], ("cells", cell.label, "runs_records_per_s")) or [], strict=False)]
            known = sorted(r for r in rounds if r is not None)
            per_round[cell.label] = {"ratios": [round(r, 3) if r is not None else None for r in rounds],
                                     "median": known[len(known) // 2] if known else None}
    return versus, per_round


def report(plan: SharePlan, document: dict[str, Any]) -> str:
    from bench import variants

    by_broker: dict[str, dict[str, Any]] = document["results"]
    versus: dict[str, Any] = document["trafka_over_kafka"]
    per_round: dict[str, Any] = document.get("trafka_over_kafka_per_round") or {}
    names = list(by_broker)
    both = bool(versus)
    rounds = both and plan.repeats > 1
    what = (f"{plan.count:,} x {size_label(plan.size)} records through a share group of confluent-kafka "
            f"ShareConsumers ({ACKNOWLEDGEMENT_MODE} acknowledgement), each in its own process, median of "
            f"{plan.repeats} run{'s' if plan.repeats > 1 else ''} in turns")
    lines = variants.heading("Share groups", document, what)
    header = ["records/s (MB/s)", *names, *(["trafka/kafka"] if both else []),
              *(["trafka/kafka round by round: median (range)"] if rounds else [])]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell in plan.cells:
        cells = []
        for n in names:
            r = lookup(by_broker[n], ("cells", cell.label)) or {}
            cells.append(f"{_num(r.get('records_per_s'), ',.0f')} ({_num(r.get('mb_per_s'), '.1f')})"
                         if "records_per_s" in r else "n/a")
        if both:
            cells.append(f"{_num(versus.get(cell.label), '.2f')}x")
        if rounds:
            r = per_round.get(cell.label) or {}
            known = [x for x in r.get("ratios", []) if x is not None]
            cells.append(f"{_num(r.get('median'), '.2f')}x ({min(known):.2f}-{max(known):.2f})" if known else "n/a")
        lines.append(f"| **{cell.label}** | " + " | ".join(cells) + " |")
    lines += ["", "| per cell (the median run) | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]

    def row(label: str, render: Any) -> None:
        for cell in plan.cells:
            values = []
            for n in names:
                r = lookup(by_broker[n], ("cells", cell.label)) or {}
                values.append(render(r) if r else "n/a")
            lines.append(f"| {cell.label}: {label} | " + " | ".join(values) + " |")

    if plan.repeats > 1:
        row("records/s, every round", lambda r: ", ".join(_num(x, ",.0f") for x in r.get("runs_records_per_s", [])))
    row("CPU per record, broker / all consumers (µs; median of the runs)",
        lambda r: f"{_num(_median_of_runs(r, 'broker_us_per_record'), '.2f')} / "
                  f"{_num(_median_of_runs(r, 'consumers_us_per_record'), '.2f')}")
    row("cores busy, broker / consumers",
        lambda r: f"{_num(r.get('broker_cores'), '.2f')} / {_num(r.get('client_cores'), '.2f')}")
    row("records per consumer", lambda r: ", ".join(_num(x, ",") for x in r.get("per_consumer_records", [])))
    row("release to first record; records in first polls",
        lambda r: f"{_num(r.get('release_to_first_record_ms'), '.0f')} ms; "
                  + ", ".join(str(f["records"]) for f in r.get("first_poll", [])))
    row("records per delivering poll; ms between a consumer's delivering polls",
        lambda r: f"{_num(r.get('records_per_delivering_poll'), ',.0f')}; "
                  f"{_num(r.get('ms_between_delivering_polls'), '.1f')}")
    row("group settled (s, not measured)", lambda r: _num(r.get("settle_s"), ".2f"))

    lines += ["", "Every run of every broker (warm-up included): records delivered more than once, records lost, "
              "acknowledged (DescribeShareGroupOffsets lag 0 on every partition after the run):", "",
              "| | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for n in names:
        by_broker[n].setdefault("totals", totals(by_broker[n]))
    for key, label in (("runs", "runs"), ("duplicates", "duplicates"), ("lost", "lost"),
                       ("unacknowledged_runs", "runs not all acknowledged"), ("error_runs", "runs with an error")):
        lines.append(f"| {label} | " + " | ".join(_num(by_broker[n]["totals"].get(key), ",") for n in names) + " |")
    errors = []
    for n in names:
        for label, r in all_runs(by_broker[n]):
            if "error" in r:
                errors.append(f"- {n} {label}: {r['error'][:400]}")
    if errors:
        lines += ["", "Errors:", "", *errors]
    for note in document.get("notes", []):
        lines += ["", note]
    return "\n".join(lines) + "\n"


def _median_of_runs(cell: dict[str, Any], key: str) -> float | None:
    values = sorted(r[key] for r in cell.get("all_runs", [cell]) if isinstance(r.get(key), (int, float)))
    return values[len(values) // 2] if values else None


def all_runs(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every run of a broker: the warm-up, then each cell's runs."""
    out = [("warm-up", results["warmup"])] if isinstance(results.get("warmup"), dict) else []
    for label, cell in (results.get("cells") or {}).items():
        out += [(label, r) for r in cell.get("all_runs", [cell])]
    return out


def totals(results: dict[str, Any]) -> dict[str, int]:
    runs = [r for _, r in all_runs(results)]
    return {"runs": len(runs), "duplicates": sum(r.get("duplicates", 0) for r in runs),
            "lost": sum(r.get("lost", 0) for r in runs),
            "unacknowledged_runs": sum(1 for r in runs if not r.get("acknowledged")),
            "error_runs": sum(1 for r in runs if "error" in r)}


def settings(plan: SharePlan) -> dict[str, Any]:
    return {
        "broker_properties": dict(BROKER_PROPERTIES),
        "group_configs": f"{GROUP_CONFIGS} (IncrementalAlterConfigs, resource type {GROUP_RESOURCE}, before the "
                         "consumers start; a fresh group id each run, deleted after it)",
        "topics": f"{plan.count:,} x {size_label(plan.size)} per topic, round-robin over its partitions, filled once "
                  "per broker by confluent-kafka (linger.ms=5, batch.size=1048576, compression none, random payload, "
                  f"no key, acks=1): {', '.join(topic_name(p) for p in sorted({c.partitions for c in plan.cells}))}",
        "consumers": f"confluent-kafka ShareConsumer, share.acknowledgement.mode={ACKNOWLEDGEMENT_MODE}, other "
                     f"settings default; each in its own process; poll({POLL_TIMEOUT_S}); released together once the "
                     "group is settled; commit_sync() once every record is delivered, then close()",
        "measured": "from the first record any consumer receives to the latest commit_sync() return with "
                    "acknowledgements to send; count / that time",
        "order": f"warm-up: one run of '{plan.warmup.label}' per broker, not counted; then every (broker, cell) in "
                 f"turns, {plan.repeats} round(s), median",
        "trafka": "python -m trafka --port 0 --data-dir <tmp> --log-level WARNING --override <broker_properties>",
        "kafka": brokers.kafka_settings() + "; plus broker_properties",
    }


def main(argv: list[str] | None = None, quick: bool = False, output: Path | None = None,
         brokers_arg: str = ",".join(SUPPORTED)) -> int:
    notes: list[str] = []
    parsed = common.parse_mode("python -m bench --share", __doc__, argv, quick, output, brokers_arg, SUPPORTED,
                               notes, client=lambda params: WORKLOADS[params["workload"]](params))
    if parsed is None:
        return 0
    args, names = parsed
    plan = QUICK if args.quick else FULL

    start = common.RunStart()
    fills = len({c.partitions for c in (*plan.cells, plan.warmup)})
    progress = Progress(len(names) * (fills + 1 + len(plan.cells) * plan.repeats))
    live: list[brokers.BrokerProcess] = []
    by_broker: dict[str, dict[str, Any]] = {}
    try:
        versions = {n: brokers.SPECS[n].version() for n in names}
        subjects = []
        for name in names:
            subject = Subject(name, live)
            print(f"bench: {name} ready at {subject.broker.bootstrap} in {subject.broker.ready_s:.2f} s",
                  file=sys.stderr, flush=True)
            subjects.append(subject)
        for subject in subjects:
            subject.prepare(plan, progress)
        run(plan, subjects, progress)
        for s in subjects:
            output_tail = common.stop_broker(s.broker, live, s.results, tail=100)
            by_broker[s.name] = {"version": versions[s.name], **s.results, "broker_output_tail": output_tail}
    except KeyboardInterrupt:
        return common.interrupted()
    finally:
        common.stop_all(live)
    document = {
        **start.document(plan, "python -m bench --share" + (" --quick" if args.quick else ""), versions),
        "settings": settings(plan),
        "notes": notes,
        "results": by_broker,
    }
    document["trafka_over_kafka"], document["trafka_over_kafka_per_round"] = derive(plan, by_broker)
    common.publish(document, report(plan, document), args.output, start.started_at)
    return 0


# ---------------------------------------------------------------------------------------------------
# Where trafka's time goes: py-spy on its broker through runs of one cell

#: The functions whose share of the broker's samples (callees included) the profile's summary gives first.
PROFILED = (
    "handle_share_fetch", "SharePartitionManager.acknowledge", "SharePartition.acknowledge",
    "SharePartitionManager._persist", "SharePartition.persistent_state", "SharePartitionManager.acquire",
    "SharePartition._acquire_new", "SharePartition.next_fetch_offset", "SharePartition.can_acquire",
    "ServedConnection.send_chunks", "ServedConnection._sendfile", "EpollIOManager.get_events",
)


def profile_shares(collapsed: Path, functions: tuple[str, ...] = PROFILED) -> str:
    """Each function's share of the samples in py-spy's collapsed stacks, callees included, whatever the line."""
    import re

    total = 0
    found = dict.fromkeys(functions, 0)
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        total += int(count)
        names = {re.sub(r" \(.*\)$", "", frame) for frame in stack.split(";")}
        for name in functions:
            if name in names:
                found[name] += int(count)
    if not total:
        return "no samples"
    return "\n".join([f"{total} samples (broker busy); share of them, callees included:"]
                     + [f"  {100 * n / total:5.1f}%  {name}" for name, n in found.items()])


def profile_main(argv: list[str]) -> int:
    """``python -m bench.share --profile 1x6 [--rounds 6] [--count N] [--output FILE]``: trafka alone, its topic
    filled, one run of the cell (partitions x consumers) not sampled, then py-spy samples the broker (250 a
    second, idle time left out) through ``rounds`` runs: collapsed stacks to
    ``bench/results/profile-share-<partitions>x<consumers>.txt``, the summary printed."""
    import argparse
    import shutil
    import signal

    from bench import profile

    parser = argparse.ArgumentParser(prog="python -m bench.share --profile", description=profile_main.__doc__)
    parser.add_argument("--profile", required=True, help="the cell: PARTITIONSxCONSUMERS, e.g. 1x6")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--count", type=int, default=FULL.count)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    tool = shutil.which("py-spy")
    if tool is None:
        parser.error("py-spy is not installed (pip install py-spy)")
    partitions, consumers = (int(x) for x in args.profile.lower().split("x"))
    cell = Cell(partitions, consumers)
    plan = replace(FULL, mode="share-profile", count=args.count, cells=(cell,), warmup=cell)
    output = args.output or common.RESULTS_DIR / f"profile-share-{partitions}x{consumers}.txt"
    brokers.ready_to_run(["trafka"], [])
    live: list[brokers.BrokerProcess] = []
    recorder: subprocess.Popen[bytes] | None = None
    progress = Progress(2 + args.rounds)
    try:
        subject = Subject("trafka", live)
        subject.prepare(plan, progress)
        progress.step("trafka", f"not sampled: {cell.label}", subject.run(plan, cell))
        recorder = subprocess.Popen([tool, "record", "--pid", str(subject.broker.pid), "--rate", "250", "--format",
                                     "raw", "--output", str(output), "--nonblocking"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # the sampler attaches
        for _ in range(args.rounds):
            progress.step("trafka", f"sampled: {cell.label}", subject.run(plan, cell))
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)
    except KeyboardInterrupt:
        return common.interrupted()
    finally:
        if recorder is not None and recorder.poll() is None:
            recorder.kill()
            recorder.wait()
        common.stop_all(live)
    print(f"collapsed stacks: {output}\n\n{profile_shares(output)}\n\n{profile.summarize(output, 25)}")
    return 0


if __name__ == "__main__":
    sys.exit(profile_main(sys.argv[1:]) if "--profile" in sys.argv else main())
