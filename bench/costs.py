"""How a broker's cost grows with what its users grow: connections, partitions, topics, consumer groups and
producers, on trafka and Apache Kafka side by side, as tables and charts.

    python -m bench --costs            # the points below: about 12 minutes on 2 cores
    python -m bench --costs --quick    # smaller points: about 2 minutes, a check that the mode works
    python -m bench.costs --curves metadata,commits --quick --output /tmp/costs-trial.json   # some curves only

Five curves, each on brokers of its own (started for it, stopped after it), every client a process of its
own (``bench.costs_clients``):

1. **connections**: 0, 100, 1,000, 5,000 and 10,000 idle client connections (each connects, asks
   ApiVersions and reads the answer, as every client does first, then stays idle), opened in steps by
   one client process; at each step the broker's RSS (1 s after the last connection answered) and the
   produce latency of a separate confluent-kafka producer meanwhile (1 KB records at 1 MB/s, acks=1,
   ``linger.ms=0``; p50/p99 of produce() to acknowledgement, the first second left out). Before the first
   step, 5 s of the same producer, not counted: Kafka's JIT compiler is seconds old otherwise.
2. **partitions**: 1, 1,000, 5,000 and 10,000 partitions (topics of at most 1,000 partitions), then the
   broker stopped (SIGTERM, a clean shutdown) and started again on the same data directory: start to
   ready (the broker's own ready signal, as ``bench.brokers`` defines it) and to serving (Metadata lists
   every partition with a leader), RSS 1 s after that, and the descriptors and memory maps the broker
   holds, which tell how many partitions the machine's limits allow.
3. **metadata**: a Metadata request for all topics (v12) with 1, 100, 1,000 and 10,000 topics of one
   partition: the time from sending it to reading the last byte of the answer, median and p99. The topics
   are created 100 to a CreateTopics request within 240 s for the whole curve; a broker that cannot create
   them in that time is measured with the topics it has, and its curve ends there.
4. **commits**: 1,000 consumer groups committing an offset every second for a minute, one connection
   each: OffsetCommit (v9, generation -1, empty member id, as a consumer with manually assigned
   partitions commits) built with trafka's wire codec; commit latency, and how ``__consumer_offsets``
   grows on disk over the run. Both brokers with ``offsets.topic.num.partitions=50`` (Kafka's default,
   and trafka's).
5. **producers**: 1, 10 and 100 concurrent producer instances (each its own librdkafka client with its
   own connections) writing 200,000 x 1 KB records between them to a topic of 16 partitions (acks=1,
   ``linger.ms=5``, ``batch.size`` 1 MiB); the instances live in up to 2 client processes (one per core),
   each handing records to its instances in turn from one thread; every instance connected before the
   clock starts; one run of 1 producer on each broker first, not counted (Kafka's JIT), then 3 rounds
   with the brokers in turns, the median.

A curve that fails on one broker (an error, a broker that stops answering) keeps the points it measured,
records the error and the broker's last output lines, and the run goes on with the next.

The bench process raises its RLIMIT_NOFILE (soft and hard, as root may) and the brokers inherit it; the
limits, ``fs.nr_open``, ``fs.file-max`` and ``vm.max_map_count`` are in the results. ``--quick`` takes
smaller points of each curve.

Results: ``bench/results/<date>-costs.json`` and ``.md``, and a chart per curve,
``<date>-costs-<curve>.png`` (``-costs-quick`` for ``--quick``). The charts need matplotlib
(``pip install -e '.[bench]'``).
"""
from __future__ import annotations

import json
import os
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import brokers, common
from bench.cleaner import RssSampler, stop_keeping_data
from bench.common import Progress, in_turns
from bench.costs_clients import percentiles
from bench.workloads import _process_cpu_s, _workload_result
from bench.workloads import run_workload as main_workload

SUPPORTED = ("trafka", "kafka")
CURVES = ("connections", "partitions", "metadata", "commits", "producers")
DESCRIPTOR_LIMIT = 262_144  # RLIMIT_NOFILE asked for the bench process and its brokers
SETTLE_S = 1.0
TOPIC_CHUNK = 1_000  # partitions per topic, and topics per CreateTopics request of the partitions curve
TOPICS_PER_REQUEST = 100  # topics per CreateTopics request of the metadata curve
TOPICS_BUDGET_S = 240.0  # creating the metadata curve's topics, all points together
SERVING_TIMEOUT_S = 300.0
CLIENT_TIMEOUT_S = 400.0
HOLDER_TIMEOUT_S = 330.0
METADATA_VERSION = 12
METADATA_WINDOW_S = 30.0
CLIENT_PROCESSES = 2  # producer instances spread over this many processes: one per core here
LATENCY_TOPIC, COMMIT_TOPIC, PRODUCE_TOPIC = "costs-latency", "costs-commits", "costs-produce"
COMMIT_PROPERTIES = {"offsets.topic.num.partitions": "50"}
MB = 1_000_000
Live = list[brokers.BrokerProcess]  # the brokers running, for the harness to stop whatever happens


@dataclass(frozen=True)
class CostsPlan:
    mode: str
    connections: tuple[int, ...]
    latency_seconds: float  # produce latency window at each connection count
    partitions: tuple[int, ...]
    topics: tuple[int, ...]
    metadata_repeats: int  # Metadata requests per topic count (within METADATA_WINDOW_S)
    groups: int
    commit_seconds: int
    commit_partitions: int  # partitions of the committed topic; group i commits partition i % this
    producers: tuple[int, ...]
    producer_records: int
    repeats: int  # rounds of the producer runs
    warmup_seconds: float  # produce latency not counted before the first connection count (Kafka's JIT)
    latency_mb_per_s: float = 1.0
    record_size: int = 1024
    produce_partitions: int = 16
    linger_ms: int = 5
    batch_size: int = 1_048_576


FULL = CostsPlan(mode="costs", connections=(0, 100, 1_000, 5_000, 10_000), latency_seconds=6.0,
                 partitions=(1, 1_000, 5_000, 10_000), topics=(1, 100, 1_000, 10_000), metadata_repeats=200,
                 groups=1_000, commit_seconds=60, commit_partitions=10, producers=(1, 10, 100),
                 producer_records=200_000, repeats=3, warmup_seconds=5.0)
QUICK = CostsPlan(mode="costs-quick", connections=(0, 100, 1_000), latency_seconds=3.0,
                  partitions=(1, 100, 1_000), topics=(1, 100, 1_000), metadata_repeats=50,
                  groups=200, commit_seconds=10, commit_partitions=10, producers=(1, 10),
                  producer_records=50_000, repeats=1, warmup_seconds=2.0)


# ---------------------------------------------------------------------------------------------------
# Limits


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def raise_descriptor_limit() -> dict[str, Any]:
    """Raise this process's RLIMIT_NOFILE to ``DESCRIPTOR_LIMIT`` (soft and hard; within ``fs.nr_open``),
    which the brokers and clients it starts inherit; the limits before and after, and the kernel's."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    nr_open = _read_int("/proc/sys/fs/nr_open") or before[1]
    target = max(before[1], min(DESCRIPTOR_LIMIT, nr_open))
    refused = None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, target))
    except (ValueError, OSError) as exc:  # raising the hard limit needs CAP_SYS_RESOURCE: as far as it goes
        refused = f"raising the hard limit to {target:,}: {exc}"
        resource.setrlimit(resource.RLIMIT_NOFILE, (before[1], before[1]))
    return {"bench_nofile_before": list(before), "bench_nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
            "refused": refused,
            "fs_nr_open": nr_open, "fs_file_max": _read_int("/proc/sys/fs/file-max"),
            "vm_max_map_count": _read_int("/proc/sys/vm/max_map_count"),
            "ip_local_port_range": Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()}


def process_nofile(pid: int) -> list[int]:
    """A running process's RLIMIT_NOFILE, soft and hard."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return [int(soft), int(hard)]
    return []


def held(pid: int) -> dict[str, int]:
    """The descriptors and memory maps a process holds."""
    return {"open_fds": len(os.listdir(f"/proc/{pid}/fd")),
            "memory_maps": len(Path(f"/proc/{pid}/maps").read_text().splitlines())}


# ---------------------------------------------------------------------------------------------------
# Brokers


def broker_spec(name: str, properties: dict[str, str] | None = None, root: Path | None = None,
                restart: bool = False) -> brokers.BrokerSpec:
    """``name``'s spec (``bench.brokers``) with ``properties`` set (trafka's ``--override``s, Kafka's
    server.properties). With ``root`` its data directory is ``root/data`` and outlives the broker;
    ``restart`` starts it again on what is there (Kafka: the same controller port, no new format)."""
    from compat_tests import reference

    base = brokers.SPECS[name]
    properties = properties or {}
    home = (lambda tmp: root) if root is not None else (lambda tmp: tmp)
    if name == "trafka":
        flags = [a for k, v in properties.items() for a in ("--override", f"{k}={v}")]
        return replace(base, command=lambda tmp, port: [*base.command(home(tmp), port), *flags])

    def prepare(tmp: Path, port: int) -> None:
        path = brokers._kafka_properties(home(tmp))
        controller = _controller_port(path) if restart else brokers.free_port()
        reference.write_properties(path, home(tmp) / "data", port, controller, properties)
        if not restart:
            reference.format_storage(path, jvm_options=brokers.kafka_jvm_options(brokers.KAFKA_TOOL_HEAP_OPTIONS))

    return replace(base, prepare=prepare, command=lambda tmp, port: base.command(home(tmp), port))


def _controller_port(properties: Path) -> int:
    for line in properties.read_text().splitlines():
        if line.startswith("controller.quorum.voters="):
            return int(line.rsplit(":", 1)[1])
    raise brokers.BrokerError(f"no controller.quorum.voters in {properties}")


def start(spec: brokers.BrokerSpec, live: Live) -> brokers.BrokerProcess:
    broker = brokers.start(spec)
    live.append(broker)
    return broker


def stop(broker: brokers.BrokerProcess, live: Live) -> float:
    """Stop the broker cleanly (SIGTERM; its data directory kept where it is the harness's); the seconds."""
    started = time.perf_counter()
    stop_keeping_data(broker)
    live.remove(broker)
    return time.perf_counter() - started


def _metadata(bootstrap: str) -> Any:
    from compat_tests.wire_client import WireClient
    from trafka.wire.messages import MetadataRequest

    with WireClient(bootstrap, client_id="costs-metadata", timeout=60) as client:
        return client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), METADATA_VERSION)


def wait_until_served(bootstrap: str, partitions: int, since: float) -> float:
    """Seconds from ``since`` (perf_counter) until Metadata lists ``partitions`` partitions of the bench's
    topics, every one with a leader."""
    deadline = since + SERVING_TIMEOUT_S
    while time.perf_counter() < deadline:
        try:
            answer = _metadata(bootstrap)
            led = sum(1 for t in answer.topics if t.name.startswith("costs-") and t.error_code == 0
                      for p in t.partitions if p.error_code == 0 and p.leader_id >= 0)
            if led >= partitions:
                return time.perf_counter() - since
        except OSError:
            pass
        time.sleep(0.02)
    raise brokers.BrokerError(f"{partitions} partitions not served within {SERVING_TIMEOUT_S:.0f} s")


def create_topics(bootstrap: str, topics: dict[str, int], per_request: int = TOPIC_CHUNK,
                  deadline: float | None = None) -> tuple[float, int]:
    """Create ``topics`` (name -> partitions), ``per_request`` to a CreateTopics request, no new request
    after ``deadline`` (perf_counter); the seconds it took and how many were created."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    started = time.perf_counter()
    names = list(topics)
    created = 0
    for first in range(0, len(names), per_request):
        if deadline is not None and time.perf_counter() > deadline:
            break
        chunk = [NewTopic(n, topics[n], 1) for n in names[first:first + per_request]]
        futures = admin.create_topics(chunk, operation_timeout=SERVING_TIMEOUT_S, request_timeout=SERVING_TIMEOUT_S)
        for future in futures.values():
            future.result(timeout=SERVING_TIMEOUT_S)
        created += len(chunk)
    return time.perf_counter() - started, created


# ---------------------------------------------------------------------------------------------------
# 1. Idle connections


class Holder:
    """The client process holding idle connections (``bench.costs_clients hold``)."""

    def __init__(self, bootstrap: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "bench.costs_clients", "hold", bootstrap],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        readable, _, _ = select.select([self.process.stdout], [], [], HOLDER_TIMEOUT_S)
        line = self.process.stdout.readline() if readable else ""
        if not line:
            return {"error": f"no answer to {command!r} (exit {self.process.poll()})"}
        return json.loads(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def connections_curve(name: str, plan: CostsPlan, progress: Progress, live: Live, result: dict[str, Any]) -> None:
    broker = start(broker_spec(name), live)
    broker.create_topic(LATENCY_TOPIC, 1)
    result.update(start_to_ready_s=broker.ready_s, nofile=process_nofile(broker.pid), points=[])
    latency_params = {"workload": "produce_latency", "bootstrap": broker.bootstrap, "topic": LATENCY_TOPIC, "acks": 1,
                      "linger_ms": 0, "size": plan.record_size, "mb_per_s": plan.latency_mb_per_s,
                      "broker_pid": broker.pid}
    result["warmup"] = main_workload({**latency_params, "seconds": plan.warmup_seconds}, CLIENT_TIMEOUT_S)
    holder = Holder(broker.bootstrap)
    try:
        for count in plan.connections:
            point: dict[str, Any] = {"connections": count}
            if count:
                point.update(holder.ask(f"open {count}"))
            time.sleep(SETTLE_S)
            point.update(rss_mb=broker.rss_mb(), **held(broker.pid))
            latency = main_workload({**latency_params, "seconds": plan.latency_seconds}, CLIENT_TIMEOUT_S)
            point.update({k: latency[k] for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "measured", "broker_cores")
                          if k in latency})
            if "error" in latency:
                point["error"] = "; ".join(filter(None, [point.get("error"), f"produce: {latency['error']}"]))
            point["closed_by_broker"] = holder.ask("check").get("closed_by_broker")
            point["rss_mb_after_produce"] = broker.rss_mb()
            result["points"].append(point)
            progress.step(name, f"{count:,} idle connections", point)
    finally:
        holder.close()
    result["shutdown_s"] = stop(broker, live)


# ---------------------------------------------------------------------------------------------------
# 2. Partitions and restarts


def topic_sizes(made: int, target: int) -> dict[str, int]:
    """Topics that take the partition count from ``made`` to ``target``, ``TOPIC_CHUNK`` at most each,
    named after their first partition's place."""
    topics = {}
    while made < target:
        size = min(TOPIC_CHUNK, target - made)
        topics[f"costs-p{made:06d}"] = size
        made += size
    return topics


def partitions_curve(name: str, plan: CostsPlan, progress: Progress, live: Live, result: dict[str, Any]) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"bench-costs-{name}-"))
    result["points"] = []
    try:
        broker = start(broker_spec(name, root=root), live)
        result.update(start_to_ready_s=broker.ready_s, nofile=process_nofile(broker.pid), empty=held(broker.pid))
        made = 0
        for count in plan.partitions:
            point: dict[str, Any] = {"partitions": count}
            point["create_s"], _ = create_topics(broker.bootstrap, topic_sizes(made, count))
            made = count
            wait_until_served(broker.bootstrap, count, time.perf_counter())
            point.update(rss_mb_before_restart=broker.rss_mb(), held_before_restart=held(broker.pid))
            point["shutdown_s"] = stop(broker, live)
            spawned = time.perf_counter()
            broker = start(broker_spec(name, root=root, restart=True), live)
            point["ready_s"] = broker.ready_s
            point["serving_s"] = wait_until_served(broker.bootstrap, count, spawned)
            time.sleep(SETTLE_S)
            point.update(rss_mb=broker.rss_mb(), **held(broker.pid))
            point["data_mb"] = sum(f.stat().st_blocks * 512 for f in (root / "data").rglob("*") if f.is_file()) / MB
            result["points"].append(point)
            progress.step(name, f"{count:,} partitions, restarted", point)
        stop(broker, live)
    finally:
        common.stop_all(live)
        live.clear()
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# 3. Metadata for all topics


def metadata_latency(bootstrap: str, repeats: int) -> dict[str, Any]:
    """``repeats`` Metadata requests for all topics (within ``METADATA_WINDOW_S``, after 3 not counted),
    one at a time on one connection: from sending each to reading its answer's last byte."""
    from compat_tests.wire_client import WireClient, decode_response, encode_frame, read_frame
    from trafka.wire.messages import MetadataRequest

    frame = encode_frame(MetadataRequest(topics=None, allow_auto_topic_creation=False), METADATA_VERSION)
    latencies: list[float] = []
    with WireClient(bootstrap, client_id="costs-metadata", timeout=60) as client:
        for _ in range(3):
            client.sock.sendall(frame)
            answer = read_frame(client.sock)
        deadline = time.perf_counter() + METADATA_WINDOW_S
        while len(latencies) < repeats and time.perf_counter() < deadline:
            sent = time.perf_counter()
            client.sock.sendall(frame)
            answer = read_frame(client.sock)
            latencies.append(time.perf_counter() - sent)
    _, body = decode_response(answer, MetadataRequest.API_KEY, METADATA_VERSION)
    return {"requests": len(latencies), "response_bytes": len(answer), "topics_listed": len(body.topics),
            "mean_ms": statistics.fmean(latencies) * 1000, **percentiles(latencies)}


def metadata_curve(name: str, plan: CostsPlan, progress: Progress, live: Live, result: dict[str, Any]) -> None:
    broker = start(broker_spec(name), live)
    result["points"] = []
    made = 0
    deadline = time.perf_counter() + TOPICS_BUDGET_S
    for count in plan.topics:
        point: dict[str, Any] = {"topics": count}
        point["create_s"], created = create_topics(
            broker.bootstrap, {f"costs-t{i:05d}": 1 for i in range(made, count)}, TOPICS_PER_REQUEST, deadline)
        made += created
        if made < count:  # out of time: Metadata with the topics there are, and the curve ends
            point.update(topics=made, topics_asked=count,
                         note=f"{made:,} of {count:,} topics created within {TOPICS_BUDGET_S:.0f} s")
        wait_until_served(broker.bootstrap, made, time.perf_counter())
        point.update(metadata_latency(broker.bootstrap, plan.metadata_repeats))
        point["rss_mb"] = broker.rss_mb()
        result["points"].append(point)
        progress.step(name, f"Metadata, {made:,} topics", point)
        if made < count:
            break
    stop(broker, live)


# ---------------------------------------------------------------------------------------------------
# 4. Consumer groups committing every second


def offsets_on_disk(data_dir: Path) -> tuple[int, int]:
    """``__consumer_offsets``' bytes on disk: its segments' sizes, and the blocks of all its files."""
    files = [f for d in data_dir.glob("__consumer_offsets-*") for f in d.iterdir() if f.is_file()]
    return (sum(f.stat().st_size for f in files if f.suffix == ".log"), sum(f.stat().st_blocks * 512 for f in files))


class DiskSampler(RssSampler):
    """``__consumer_offsets``' size on disk and the broker's RSS every ``interval`` seconds, in a thread, and
    once more as it stops: ``samples`` are (monotonic, segment bytes, allocated bytes, RSS MiB)."""

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._sample()

    def _sample(self) -> bool:
        try:
            log, allocated = offsets_on_disk(self.broker.temp_dir / "data")
            self.samples.append((time.monotonic(), log, allocated, self.broker.rss_mb()))  # type: ignore[arg-type]
        except (OSError, brokers.BrokerError):
            return False
        return True

    def _run(self) -> None:
        while not self._stop.is_set() and self._sample():
            self._stop.wait(self.interval)


def commits_curve(name: str, plan: CostsPlan, progress: Progress, live: Live, result: dict[str, Any]) -> None:
    broker = start(broker_spec(name, COMMIT_PROPERTIES), live)
    broker.create_topic(COMMIT_TOPIC, plan.commit_partitions)
    with DiskSampler(broker, interval=0.5) as disk:
        result |= common.run_workload("bench.costs", {
            "workload": "commit", "bootstrap": broker.bootstrap, "topic": COMMIT_TOPIC, "groups": plan.groups,
            "partitions": plan.commit_partitions, "seconds": plan.commit_seconds}, CLIENT_TIMEOUT_S)
    start_at, end_at = result.get("window_start_monotonic"), result.get("window_end_monotonic")
    if start_at is not None and end_at is not None:
        before = [s for s in disk.samples if s[0] <= start_at] or disk.samples[:1]
        first, last = before[-1], disk.samples[-1]
        result.update(offsets_log_bytes_start=first[1], offsets_log_bytes_end=last[1],
                      offsets_allocated_bytes_start=first[2], offsets_allocated_bytes_end=last[2],
                      rss_mb_start=first[3], rss_mb_end=last[3])
        result["offsets_log_growth_bytes"] = last[1] - first[1]
        result["offsets_log_bytes_per_commit"] = (last[1] - first[1]) / max(1, result.get("commits", 0))
        result["offsets_series"] = [[round(at - start_at, 2), log, allocated, round(rss, 1)]
                                    for at, log, allocated, rss in disk.samples if at >= first[0]]
    result["offsets_partitions"] = len(list((broker.temp_dir / "data").glob("__consumer_offsets-*")))
    result["shutdown_s"] = stop(broker, live)
    progress.step(name, f"{plan.groups:,} groups committing every second", result)


# ---------------------------------------------------------------------------------------------------
# 5. Concurrent producers


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


def producers_run(broker: brokers.BrokerProcess, producers: int, plan: CostsPlan) -> dict[str, Any]:
    """``producers`` instances in up to ``CLIENT_PROCESSES`` processes, all connected, then released together:
    records/s from the first record handed to a producer to the last flush() returning."""
    shares = _split(producers, min(producers, CLIENT_PROCESSES))
    counts = _split(plan.producer_records, len(shares))
    processes = [subprocess.Popen(
        [sys.executable, "-m", "bench.costs_clients", "produce", json.dumps({
            "bootstrap": broker.bootstrap, "topic": PRODUCE_TOPIC, "producers": share, "count": count,
            "size": plan.record_size, "linger_ms": plan.linger_ms, "batch_size": plan.batch_size})],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for share, count in zip(shares, counts)]
    try:
        for process in processes:
            assert process.stdout is not None
            readable, _, _ = select.select([process.stdout], [], [], 120)
            if not readable or process.stdout.readline().strip() != "ready":
                raise brokers.BrokerError(f"a producer process did not get ready (exit {process.poll()})")
        cpu_before = _process_cpu_s(broker.pid)
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = [_workload_result(process, CLIENT_TIMEOUT_S) for process in processes]
        cpu_after = _process_cpu_s(broker.pid)
    except brokers.BrokerError as exc:
        return {"error": str(exc)}
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    errors = [o["error"] for o in outcomes if "error" in o]
    if any("started_monotonic" not in o for o in outcomes):
        return {"error": "; ".join(errors)}
    seconds = max(o["ended_monotonic"] for o in outcomes) - min(o["started_monotonic"] for o in outcomes)
    records = sum(o["records"] for o in outcomes)
    result: dict[str, Any] = {"producers": producers, "processes": len(processes), "records": records,
                              "seconds": seconds, "records_per_s": records / seconds,
                              "mb_per_s": records * plan.record_size / seconds / MB}
    if cpu_before is not None and cpu_after is not None:
        result["broker_cores"] = round((cpu_after - cpu_before) / seconds, 2)
    if errors:
        result["error"] = "; ".join(errors)
    return result


def producers_curve(names: list[str], plan: CostsPlan, progress: Progress,
                    live: Live) -> dict[str, dict[str, Any]]:
    started = {name: start(broker_spec(name), live) for name in names}
    warmups = {}
    for name, broker in started.items():
        broker.create_topic(PRODUCE_TOPIC, plan.produce_partitions)
        warmups[name] = producers_run(broker, plan.producers[0], plan)  # not counted: Kafka's JIT warms up
        progress.step(name, f"warm-up, {plan.producers[0]} producer(s), not counted", warmups[name])

    def one(key: tuple[str, int]) -> dict[str, Any]:
        name, producers = key
        result = producers_run(started[name], producers, plan)
        progress.step(name, f"{producers} producers", result)
        return result

    cells = in_turns([(name, n) for n in plan.producers for name in names], plan.repeats, one)
    for broker in started.values():
        stop(broker, live)
    return {name: {"warmup": warmups[name], "points": [{"producers": n, **cells[(name, n)]} for n in plan.producers]}
            for name in names}


# ---------------------------------------------------------------------------------------------------
# The run


def run(names: list[str], curves: list[str], plan: CostsPlan, progress: Progress,
        live: Live) -> dict[str, dict[str, Any]]:
    """Every curve of ``curves``, on each broker of ``names`` in turn (the producers' on both at once)."""
    one_broker = {"connections": connections_curve, "partitions": partitions_curve, "metadata": metadata_curve,
                  "commits": commits_curve}
    results: dict[str, dict[str, Any]] = {name: {} for name in names}
    for curve in curves:
        if curve == "producers":
            for name, result in producers_curve(names, plan, progress, live).items():
                results[name][curve] = result
            continue
        for name in names:
            result = results[name][curve] = {}
            try:
                one_broker[curve](name, plan, progress, live, result)
            except Exception as exc:  # noqa: BLE001  (the curve ends here, with what it measured; the others run)
                result["error"] = f"{type(exc).__name__}: {exc}"
                result["broker_output_tail"] = [line for broker in live for line in broker.log_tail(40).splitlines()]
                print(f"bench: {name} {curve}: {result['error']}", file=sys.stderr, flush=True)
                common.stop_all(live)
                live.clear()
    return results


def steps(names: list[str], curves: list[str], plan: CostsPlan) -> int:
    per_broker = {"connections": len(plan.connections), "partitions": len(plan.partitions),
                  "metadata": len(plan.topics), "commits": 1, "producers": 1 + len(plan.producers) * plan.repeats}
    return len(names) * sum(per_broker[c] for c in curves)


def settings(plan: CostsPlan) -> dict[str, str]:
    return {
        "brokers": "trafka: python -m trafka --port 0 --data-dir <dir> --log-level WARNING; kafka: "
                   + brokers.kafka_settings(),
        "connections": "one client process opens them 32 at a time: connect, ApiVersions v3, read the answer; then "
                       f"idle. RSS {SETTLE_S:g} s after the last answer; then a confluent-kafka producer, "
                       f"{plan.record_size} B records at {plan.latency_mb_per_s:g} MB/s, acks=1, linger.ms=0, for "
                       f"{plan.latency_seconds:g} s (the first second left out), to a topic of 1 partition",
        "partitions": f"topics of up to {TOPIC_CHUNK} partitions created with confluent-kafka's AdminClient; SIGTERM, "
                      "then started again on the same data directory (kafka: the same properties but a new client "
                      "port, no new format); ready = bench.brokers' ready (trafka's ready line; kafka's first "
                      "Metadata listing itself), serving = Metadata v12 listing every partition with a leader "
                      "(polled every 20 ms); RSS, descriptors and maps 1 s later",
        "metadata": f"Metadata v{METADATA_VERSION}, topics null (all), one request at a time on one connection, "
                    f"3 not counted, then up to {plan.metadata_repeats} within {METADATA_WINDOW_S:g} s; topics of 1 "
                    "partition",
        "commits": f"{plan.groups} groups, one connection each; FindCoordinator v4 for all; OffsetCommit v9, "
                   "generation -1, member id empty, one partition each (group i: partition i % "
                   f"{plan.commit_partitions} of a topic of {plan.commit_partitions}), the offset counting up; one "
                   f"commit per group not counted, then one per group per second for {plan.commit_seconds} s, spread "
                   "evenly; a group whose last commit is unanswered skips its turn; both brokers with "
                   + ", ".join(f"{k}={v}" for k, v in COMMIT_PROPERTIES.items())
                   + "; __consumer_offsets' .log sizes sampled every 0.5 s",
        "producers": f"{plan.producer_records:,} x {plan.record_size} B records in all, split between the producer "
                     f"instances; acks=1, linger.ms={plan.linger_ms}, batch.size={plan.batch_size}, compression none, "
                     f"no key, random payload; topic of {plan.produce_partitions} partitions; instances in "
                     f"min(N, {CLIENT_PROCESSES}) processes, each handing records to its instances in turn from one "
                     "thread; time from the first produce() to the last flush() returning (the machine's monotonic "
                     f"clock); {plan.repeats} round(s) in turns, median",
    }


def main(argv: list[str] | None = None, quick: bool = False, output: Path | None = None,
         brokers_arg: str = ",".join(SUPPORTED)) -> int:
    from bench import costs_clients, costs_report

    parser = common.mode_parser("python -m bench --costs", __doc__, quick, output, brokers_arg, SUPPORTED)
    parser.add_argument("--curves", default=",".join(CURVES), help="comma-separated: " + ",".join(CURVES))
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    if args.workload:
        params = json.loads(args.workload)
        print(json.dumps(costs_clients.WORKLOADS[params["workload"]](params)), flush=True)
        return 0
    curves = [c for c in CURVES if c in args.curves.split(",")]
    if not curves:
        parser.error(f"no curve to run: --curves takes {', '.join(CURVES)}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("bench --costs draws its charts with matplotlib, which is not installed: "
              "pip install -e '.[bench]'", file=sys.stderr)
        return 2
    notes: list[str] = []
    names = common.choose_brokers(parser, args.brokers, SUPPORTED, notes)
    plan = QUICK if args.quick else FULL
    limits = raise_descriptor_limit()
    start_ = common.RunStart()
    progress = Progress(steps(names, curves, plan))
    live: Live = []
    try:
        versions = {n: brokers.SPECS[n].version() for n in names}
        print(f"bench: RLIMIT_NOFILE {limits['bench_nofile']} (was {limits['bench_nofile_before']}), fs.nr_open "
              f"{limits['fs_nr_open']:,}, vm.max_map_count {limits['vm_max_map_count']:,}", file=sys.stderr, flush=True)
        results = run(names, curves, plan, progress, live)
    except KeyboardInterrupt:
        return common.interrupted()
    finally:
        common.stop_all(live)
    command = "python -m bench --costs" + (" --quick" if args.quick else "")
    if curves != list(CURVES):
        command += f" --curves {','.join(curves)}"
    document = {**start_.document(plan, command, versions), "curves": curves, "limits": limits,
                "settings": settings(plan), "notes": notes, "results": results}
    path = args.output or common.RESULTS_DIR / f"{start_.started_at:%Y-%m-%d}-{plan.mode}.json"
    charts = costs_report.charts(document, path)
    document["charts"] = [chart.name for chart in charts]
    text = costs_report.report(document)
    print(text)
    common.write_results(path, document, text, *charts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
