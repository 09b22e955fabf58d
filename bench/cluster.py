"""The replicated cluster: three trafka brokers on a real ZooKeeper, beside single-node trafka.

    python -m bench --cluster            # full run (about 5 minutes on 2 cores)
    python -m bench --cluster --quick    # smaller counts, one run of each (under a minute)
    python -m bench.cluster --skip produce,latency   # some parts only

Two measurements, each in fresh client processes (``bench.workloads``):

- **Produce**: the single-node produce workload (the same record sizes, counts and client settings)
  against single-node trafka with acks=1 and against a 3-broker cluster, topic with replication factor
  3 and ``min.insync.replicas=2``, with acks=all (and, for the breakdown, acks=1), in turns, the median
  of ``repeats`` runs. Apache Kafka 3.9 takes the same turns as one broker (acks=1) and as three
  (acks=all), so that Kafka's own price of replication on this machine stands beside trafka's
  (``bench.kafka_cluster``; ``--skip kafka`` leaves it out). Then produce latency at a fixed rate:
  every record's time from ``produce()`` to its acknowledgement (librdkafka's own per-message latency).
- **Failover**: an idempotent acks=all producer writes 0, 1, 2, ... at a steady rate to one RF 3
  partition; the partition's leader is killed with SIGKILL; the time from the kill to the next
  acknowledged write is measured, along with the two steps in between (the killed broker's
  ZooKeeper session expiring, and Metadata naming a new leader). Then the partition is read back and
  compared with what was acknowledged: lost, duplicated, out of order. The killed broker is started
  again and must rejoin the ISR before the next run. This runs once with a short ZooKeeper session
  timeout and once with Kafka's default.

Every broker (and ZooKeeper) runs in its own process with its own temporary directory; Ctrl-C or
SIGTERM stops them all and removes the directories. Results: ``bench/results/<date>-cluster.json`` and
``.md`` (``-cluster-quick`` for ``--quick``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from bench import brokers, machine
from bench.kafka_cluster import VERSION as KAFKA_VERSION
from bench.kafka_cluster import KafkaReference
from bench.common import RESULTS_DIR, Progress, in_turns, size_label, write_results
from bench.workloads import run_workload

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKLOAD_TIMEOUT_S = 400.0
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
TOPIC_TIMEOUT_S = 60.0
MB = 1_000_000

SINGLE = "single-node acks=1"
CLUSTER_ALL = "RF3 acks=all"
CLUSTER_ONE = "RF3 acks=1"
KAFKA_SINGLE = "Kafka single-node acks=1"
KAFKA_ALL = "Kafka RF3 acks=all"
WARM_UP_TOPIC = "bench-warm-up"
WARM_UP_RECORDS = 300_000  # of 1 KB, to each of Kafka's targets before its first measured run


@dataclass(frozen=True)
class ClusterPlan:
    mode: str
    records: tuple[tuple[int, int], ...]  # (record size, count): the single-node produce workload's
    partitions: tuple[int, ...]
    repeats: int
    latency_seconds: float
    # (MB/s, linger.ms): the produce workload's linger at a rate every target keeps up with, and one
    # record per request (linger.ms=0) at a rate low enough that requests do not queue (see README).
    latency_settings: tuple[tuple[float, int], ...]
    failover_session_timeouts_ms: tuple[int, ...]
    failover_runs: int  # kills per session timeout
    failover_rate: int = 500  # records/s written by the failover producer
    failover_size: int = 100
    failover_before_kill_s: float = 3.0  # steady writing before the kill
    failover_after_ack_s: float = 3.0  # writing goes on this long after the first acknowledgement after the kill
    min_insync_replicas: int = 2
    failover_producer: tuple[tuple[str, Any], ...] = ()  # extra settings of the failover producer
    # Broker settings of every cluster (besides broker.id, zookeeper.connect and the session timeout).
    broker_overrides: tuple[tuple[str, str], ...] = (
        ("offsets.topic.num.partitions", "3"),
    )


FULL = ClusterPlan(
    mode="cluster",
    records=((100, 1_000_000), (1024, 200_000)),
    partitions=(1, 16),
    repeats=3,
    latency_seconds=10.0,
    latency_settings=((5.0, 5), (0.2, 0)),
    failover_session_timeouts_ms=(6_000, 18_000),
    failover_runs=3,
)

QUICK = ClusterPlan(
    mode="cluster-quick",
    records=((100, 100_000), (1024, 20_000)),
    partitions=(1,),
    repeats=1,
    latency_seconds=3.0,
    latency_settings=((5.0, 5), (0.2, 0)),
    failover_session_timeouts_ms=(6_000,),
    failover_runs=1,
)


class ClusterError(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------------------
# Processes


class Node:
    """One trafka broker of the cluster: ``python -m trafka`` with ``broker.id`` and ``zookeeper.connect``,
    its own data directory (kept across a kill and restart), its output appended to ``broker.log``."""

    def __init__(self, node_id: int, root: Path, overrides: dict[str, str]) -> None:
        self.node_id = node_id
        self.root = root
        self.overrides = overrides
        self.log_path = root / "broker.log"
        self.port = 0
        self.host = "127.0.0.1"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> float:
        """Start (on the port of the last start, if any) and wait for the ready line; returns the seconds."""
        self.root.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "trafka", "--host", self.host, "--port", str(self.port),
                   "--data-dir", str(self.root / "data"), "--log-level", "INFO"]
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        self.starts += 1
        with open(self.log_path, "a") as log:
            log.write(f"===== start #{self.starts} at {time.time():.3f}: {' '.join(command)}\n")
        started = time.perf_counter()
        self.process = subprocess.Popen(
            command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # Ctrl-C reaches the harness only; it stops the brokers itself
        )
        ready: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.process, ready), daemon=True).start()
        deadline = started + READY_TIMEOUT_S
        while True:
            try:
                address = ready.get(timeout=0.05)
                break
            except queue.Empty:
                pass
            if self.process.poll() is not None or time.perf_counter() > deadline:
                self.kill()
                raise ClusterError(f"broker {self.node_id} did not become ready:\n{self.log_tail()}")
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        return time.perf_counter() - started

    def _pump(self, process: subprocess.Popen[bytes], ready: queue.Queue[str]) -> None:
        assert process.stdout is not None
        told = False
        with open(self.log_path, "a") as log:
            for raw in process.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                if not told and line.startswith("trafka ready: bootstrap="):
                    ready.put(line.split("bootstrap=", 1)[1].split()[0])
                    told = True

    def kill(self) -> float:
        """SIGKILL; returns time.monotonic() just before the signal was sent."""
        assert self.process is not None
        at = time.monotonic()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(STOP_TIMEOUT_S)
        return at

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def zookeeper_available() -> None:
    """ZooKeeper's jars (compat_tests/zookeeper/setup.sh fetches them if absent) and java."""
    from compat_tests import zookeeper

    if shutil.which("java") is None:
        raise ClusterError("java is not installed (ZooKeeper runs on a JVM): apt-get install default-jdk-headless")
    if not zookeeper.jars_present():
        print("bench: fetching Apache ZooKeeper's jars (compat_tests/zookeeper/setup.sh)", file=sys.stderr, flush=True)
        subprocess.run(["bash", str(zookeeper.HERE / "setup.sh")], check=True, stdin=subprocess.DEVNULL)
    zookeeper.check_available()


class Cluster:
    """A ZooKeeper and three trafka brokers in one temporary directory."""

    def __init__(self, session_timeout_ms: int, plan: ClusterPlan, size: int = 3) -> None:
        from compat_tests.zookeeper import ZooKeeperServer

        self.root = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
        self.session_timeout_ms = session_timeout_ms
        self.zookeeper = ZooKeeperServer(self.root / "zookeeper" / "data", name="zookeeper")
        self.chroot = f"/trafka-bench-{uuid.uuid4().hex[:8]}"
        self.nodes: list[Node] = []
        self.size = size
        self.plan = plan
        self.overrides: dict[str, str] = {}
        self.ready_s: list[float] = []
        self.logs: dict[str, str] = {}

    def start(self) -> Cluster:
        self.zookeeper.start()
        self.overrides = {
            "zookeeper.connect": f"{self.zookeeper.connect_string}{self.chroot}",
            "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
            **dict(self.plan.broker_overrides),
        }
        for node_id in range(1, self.size + 1):
            node = Node(node_id, self.root / f"broker{node_id}", {"broker.id": str(node_id), **self.overrides})
            self.nodes.append(node)
            self.ready_s.append(node.start())
        self.wait(lambda: len(self.admin().list_topics(timeout=5).brokers) == self.size, "every broker registered")
        return self

    def close(self) -> None:
        """Stop every process; keep the brokers' logs (``logs``) and remove the directory."""
        for node in self.nodes:
            try:
                node.stop()
            except Exception:  # noqa: BLE001 - the rest must stop too
                if node.process is not None:
                    node.process.kill()
        try:
            self.zookeeper.stop()
        finally:
            for node in self.nodes:
                try:
                    self.logs[f"zookeeper.session.timeout.ms={self.session_timeout_ms} broker{node.node_id}"] = \
                        node.log_path.read_text(errors="replace")[-200_000:]
                except OSError:
                    pass
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes if node.alive())

    @property
    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes if node.alive()]

    def node(self, node_id: int) -> Node:
        return next(node for node in self.nodes if node.node_id == node_id)

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        # Quiet: while a broker is down, every client made here would log its refused connections.
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})

    def partitions(self, topic: str, timeout: float = 5.0) -> dict[int, tuple[int, list[int], list[int]]]:
        """(leader, replicas, ISR) of every partition of ``topic``, as Metadata tells the client."""
        described = self.admin().list_topics(topic, timeout=timeout).topics.get(topic)
        if described is None or described.error is not None:
            return {}
        return {p.id: (p.leader, list(p.replicas), sorted(p.isrs)) for p in described.partitions.values()}

    def controller(self) -> int:
        return self.admin().list_topics(timeout=5).controller_id

    def wait(self, condition: Callable[[], object], what: str, timeout: float = TOPIC_TIMEOUT_S) -> Any:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                result = condition()
            except Exception as exc:  # noqa: BLE001 - a cluster in the middle of a change: look again
                result, last = None, exc
            if result:
                return result
            time.sleep(0.05)
        raise ClusterError(f"{what}: not after {timeout:.0f} s (last error: {last!r})\n"
                           + "\n".join(f"--- broker {n.node_id}\n{n.log_tail(10)}" for n in self.nodes))

    def create_topic(self, topic: str, partitions: int) -> float:
        """Create ``topic`` with replication factor 3 and wait until every partition has a leader and a
        full ISR; returns the seconds it took."""
        from confluent_kafka.admin import NewTopic

        started = time.perf_counter()
        admin = self.admin()  # kept alive until the futures are done
        futures = admin.create_topics(
            [NewTopic(topic, partitions, self.size,
                      config={"min.insync.replicas": str(self.plan.min_insync_replicas)})],
            operation_timeout=TOPIC_TIMEOUT_S, request_timeout=TOPIC_TIMEOUT_S,
        )
        for future in futures.values():
            future.result(timeout=TOPIC_TIMEOUT_S)
        full = sorted(n.node_id for n in self.nodes)
        self.wait(lambda: (lambda layout: len(layout) == partitions and all(
            leader >= 0 and isr == full for leader, _, isr in layout.values()))(self.partitions(topic)),
            f"topic {topic}: a leader and a full ISR for every partition")
        return time.perf_counter() - started


def delete_topic(admin: Any, topic: str) -> None:
    """Free the disk between cells; a failure here costs only disk space."""
    try:
        for future in admin.delete_topics([topic], operation_timeout=30, request_timeout=30).values():
            future.result(timeout=30)
    except Exception as exc:  # noqa: BLE001
        print(f"bench: deleting {topic}: {exc}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------
# Produce: single node, acks=1 beside the cluster, acks=all


def produce_keys(with_kafka: bool) -> list[str]:
    return [SINGLE, CLUSTER_ALL, CLUSTER_ONE] + ([KAFKA_SINGLE, KAFKA_ALL] if with_kafka else [])


def produce_side_by_side(single: brokers.BrokerProcess, cluster: Cluster, plan: ClusterPlan,
                         progress: Progress, kafka: KafkaReference | None = None) -> dict[str, Any]:
    """Every cell on every target in turns: trafka's single node and cluster, and Kafka's when given."""
    out: dict[str, Any] = {}
    keys = produce_keys(kafka is not None)
    for size, count in plan.records:
        for partitions in plan.partitions:
            cell_name = f"{size_label(size)} p={partitions}"
            # A fresh topic per target, so that each starts from an empty log.
            topics = {key: f"bench-{size}-{partitions}-{'single' if key == SINGLE else key.split()[1].replace('=', '')}"
                      for key in (SINGLE, CLUSTER_ALL, CLUSTER_ONE)}
            single.create_topic(topics[SINGLE], partitions)
            cluster.create_topic(topics[CLUSTER_ALL], partitions)
            cluster.create_topic(topics[CLUSTER_ONE], partitions)
            if kafka is not None:
                topics[KAFKA_SINGLE] = topics[KAFKA_ALL] = f"bench-{size}-{partitions}"
                kafka.create_topics(topics[KAFKA_ALL], partitions)
            targets = {
                SINGLE: ("single", single.bootstrap, single.pid),
                CLUSTER_ALL: ("RF3", cluster.bootstrap, cluster.pids),
                CLUSTER_ONE: ("RF3", cluster.bootstrap, cluster.pids),
                **({KAFKA_SINGLE: ("kafka", kafka.single_bootstrap, kafka.single.pid),
                    KAFKA_ALL: ("kafka RF3", kafka.cluster_bootstrap, kafka.cluster_pids)} if kafka else {}),
            }

            def run_one(key: str) -> dict[str, Any]:
                name, bootstrap, pids = targets[key]
                acks = "all" if key in (CLUSTER_ALL, KAFKA_ALL) else "1"
                # Nothing left to write back from the runs before (any target's), which would throttle this one.
                os.sync()
                result = run_workload(
                    {"workload": "produce", "topic": topics[key], "count": count, "size": size, "acks": acks,
                     "bootstrap": bootstrap, "broker_pid": pids},
                    WORKLOAD_TIMEOUT_S,
                )
                progress.step(name, f"produce {count:,} x {cell_name} acks={acks}", result)
                return result

            out[cell_name] = {"records": count, "size": size, "partitions": partitions,
                              **in_turns(keys, plan.repeats, run_one)}
            _delete_all(single, cluster, topics)
            if kafka is not None:
                kafka.delete_topics(topics[KAFKA_ALL], delete_topic)
                out[cell_name]["kafka_ratio_all_rf3_to_single_acks1"] = _ratio(out[cell_name][KAFKA_ALL],
                                                                               out[cell_name][KAFKA_SINGLE])
            ratio = _ratio(out[cell_name][CLUSTER_ALL], out[cell_name][SINGLE])
            out[cell_name]["ratio_all_rf3_to_single_acks1"] = ratio
    return out


def _delete_all(single: brokers.BrokerProcess, cluster: Cluster, topics: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient

    single_admin = AdminClient({"bootstrap.servers": single.bootstrap, "log_level": 3})
    delete_topic(single_admin, topics[SINGLE])
    for key in (CLUSTER_ALL, CLUSTER_ONE):
        delete_topic(cluster.admin(), topics[key])


def _cpu_per_mb(run: dict[str, Any]) -> tuple[float, float] | None:
    """CPU time per MB produced in ``run``, in ms: the brokers' (all of them) and the client's."""
    if not run.get("mb_per_s") or "broker_cores" not in run:
        return None
    return run["broker_cores"] / run["mb_per_s"] * 1000, run["client_cores"] / run["mb_per_s"] * 1000


def _cpu_per_mb_table(produce: dict[str, Any], cores: int | None) -> list[str]:
    """Where the cluster's produce time goes: CPU per MB produced, and the throughput the machine's cores
    allow at that cost (brokers and client sharing them), beside what was measured."""
    lines = ["| CPU per MB produced, ms: brokers / client | single node, acks=1 | 3 brokers RF3, acks=all | "
             f"RF3 acks=all: ceiling on {cores or '?'} cores / measured |",
             "|---|---|---|---|"]
    for cell_name, cell in produce.items():
        single, replicated = _cpu_per_mb(cell[SINGLE]), _cpu_per_mb(cell[CLUSTER_ALL])
        if single is None or replicated is None:
            continue
        ceiling = f"{cores / sum(replicated) * 1000:,.0f} MB/s" if cores else "n/a"
        measured = cell[CLUSTER_ALL]["mb_per_s"]
        lines.append(f"| {cell['records']:,} x {cell_name} | {single[0]:.2f} / {single[1]:.2f} | "
                     f"{replicated[0]:.2f} / {replicated[1]:.2f} | {ceiling} / {measured:.1f} MB/s |")
    return lines if len(lines) > 2 else []


def _kafka_table(produce: dict[str, Any], fmt: Callable[[dict[str, Any]], str], error: str | None) -> list[str]:
    """Apache Kafka's own cluster beside its single broker, from the same turns, and trafka's cluster
    against Kafka's."""
    if error:
        return [f"Apache Kafka {KAFKA_VERSION}: not measured ({error})", ""]
    cells = {name: cell for name, cell in produce.items() if KAFKA_ALL in cell}
    if not cells:
        return []
    lines = [f"| Apache Kafka {KAFKA_VERSION}, in the same turns | single node, acks=1 | 3 brokers RF3, acks=all | "
             "RF3 acks=all / single acks=1 | trafka RF3 acks=all / Kafka RF3 acks=all |",
             "|---|---|---|---|---|"]
    for cell_name, cell in cells.items():
        ratio, against = cell.get("kafka_ratio_all_rf3_to_single_acks1"), _ratio(cell[CLUSTER_ALL], cell[KAFKA_ALL])
        lines.append(f"| {cell['records']:,} x {cell_name} | {fmt(cell[KAFKA_SINGLE])} | {fmt(cell[KAFKA_ALL])} | "
                     f"{f'{ratio:.2f}x' if ratio else 'n/a'} | {f'{against:.2f}x' if against else 'n/a'} |")
    return [*lines, ""]


def _ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    x, y = a.get("records_per_s"), b.get("records_per_s")
    return x / y if x and y else None


def produce_latency(single: brokers.BrokerProcess, cluster: Cluster, plan: ClusterPlan,
                    progress: Progress) -> dict[str, Any]:
    """Produce latency at a fixed rate, 1 KB records, one partition: each target in turn."""
    single.create_topic("bench-produce-latency", 1)
    cluster.create_topic("bench-produce-latency", 1)
    out: dict[str, Any] = {}
    for mb_per_s, linger_ms in plan.latency_settings:
        params = {"workload": "produce_latency", "topic": "bench-produce-latency", "size": 1024,
                  "mb_per_s": mb_per_s, "seconds": plan.latency_seconds, "linger_ms": linger_ms}
        setting = out[latency_key(mb_per_s, linger_ms)] = {}
        for key in (SINGLE, CLUSTER_ALL, CLUSTER_ONE):
            target_single = key == SINGLE
            setting[key] = run_workload(
                {**params, "acks": "all" if key == CLUSTER_ALL else "1",
                 "bootstrap": single.bootstrap if target_single else cluster.bootstrap,
                 "broker_pid": single.pid if target_single else cluster.pids},
                WORKLOAD_TIMEOUT_S,
            )
            progress.step("single" if target_single else "RF3",
                          f"produce latency {mb_per_s:g} MB/s linger.ms={linger_ms} {key}", setting[key])
    return out


def latency_key(mb_per_s: float, linger_ms: int) -> str:
    return f"1 KB at {mb_per_s:g} MB/s, linger.ms={linger_ms}"


# ---------------------------------------------------------------------------------------------------
# Failover


class _Writer:
    """The failover workload's process: writes until told to stop on stdin; reports ``acked N`` lines."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.workloads", json.dumps(params)],
            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.acked = 0
        self.result: dict[str, Any] | None = None
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("acked "):
                self.acked = int(line.split()[1])
            elif line.startswith("{"):
                self.result = json.loads(line)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line.rstrip())
            del self._stderr[:-20]

    def wait_acked(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.acked < count and time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.02)
        return self.acked >= count

    def finish(self, timeout: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write("stop\n")
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return {"error": f"the writer gave no result in {timeout:.0f} s"}
        time.sleep(0.1)  # the reader thread takes the last line
        if self.result is None:
            return {"error": f"writer exit {self.process.returncode}: {' | '.join(self._stderr[-3:])}"}
        return self.result

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _watch(condition: Callable[[], bool], deadline_s: float, interval: float = 0.02) -> Callable[[], float | None]:
    """Poll ``condition`` from a thread until true; the returned function gives the time.monotonic() at
    which it was first seen true (None if not within the deadline)."""
    seen: list[float] = []

    def poll() -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                if condition():
                    seen.append(time.monotonic())
                    return
            except Exception:  # noqa: BLE001 - the cluster is changing: look again
                pass
            time.sleep(interval)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()

    def result(join_s: float = 0.0) -> float | None:
        thread.join(join_s)
        return seen[0] if seen else None

    return result


def failover_once(cluster: Cluster, plan: ClusterPlan, run: int, progress: Progress) -> dict[str, Any]:
    """Kill the leader of a fresh RF 3 partition under an idempotent acks=all writer; measure; read back;
    restart the killed broker and wait for it to rejoin the ISR."""
    from kazoo.client import KazooClient

    topic = f"bench-failover-{cluster.session_timeout_ms}-{run}"
    cluster.create_topic(topic, 1)
    leader, replicas, isr = cluster.partitions(topic)[0]
    controller = cluster.controller()
    victim = cluster.node(leader)
    message_timeout_ms = max(60_000, cluster.session_timeout_ms * 5)
    writer = _Writer({"workload": "failover_writer", "bootstrap": cluster.bootstrap, "topic": topic,
                      "rate": plan.failover_rate, "size": plan.failover_size,
                      "message_timeout_ms": message_timeout_ms, "producer_config": dict(plan.failover_producer),
                      "deadline_s": plan.failover_before_kill_s + cluster.session_timeout_ms / 1000 + 120})
    zk = KazooClient(hosts=f"{cluster.zookeeper.connect_string}{cluster.chroot}", timeout=10)
    zk.start(timeout=10)
    result: dict[str, Any] = {"topic": topic, "leader_killed": leader, "controller_at_kill": controller,
                              "killed_leader_was_controller": leader == controller, "replicas": replicas,
                              "isr_before": isr}
    try:
        if not writer.wait_acked(int(plan.failover_rate * plan.failover_before_kill_s), 60):
            raise ClusterError(f"failover: the writer did not get going (acked {writer.acked})")
        watch_limit = cluster.session_timeout_ms / 1000 + 60
        znode = f"/brokers/ids/{leader}"
        result["killed_at_unix_s"] = round(time.time(), 3)  # to find the moment in the brokers' logs
        kill_at = victim.kill()
        acked_at_kill = writer.acked
        session_gone = _watch(lambda: zk.exists(znode) is None, watch_limit)
        new_leader_seen = _watch(
            lambda: (lambda p: p[0] not in (-1, leader))(cluster.partitions(topic, timeout=2)[0]), watch_limit, 0.05)
        # Writing goes on until the first acknowledgement after the kill, and a while longer.
        resumed = writer.wait_acked(acked_at_kill + 1, watch_limit)
        if resumed:
            writer.wait_acked(writer.acked + int(plan.failover_rate * plan.failover_after_ack_s),
                              plan.failover_after_ack_s * 3)
        session_at, leader_at = session_gone(5.0), new_leader_seen(5.0)
        written = writer.finish(message_timeout_ms / 1000 + 90)
        result.update(_failover_figures(written, kill_at, session_at, leader_at))
        result["new_leader"], _, result["isr_after_failover"] = cluster.partitions(topic)[0]
    finally:
        writer.kill()
        zk.stop()
        zk.close()
    # The killed broker comes back and catches up before the next run.
    victim.start()
    full = sorted(n.node_id for n in cluster.nodes)
    rejoin_started = time.monotonic()
    cluster.wait(lambda: cluster.partitions(topic)[0][2] == full, f"broker {leader} back in the ISR of {topic}")
    result["rejoined_isr_s_after_restart"] = time.monotonic() - rejoin_started
    progress.step(f"zk{cluster.session_timeout_ms // 1000}s", f"failover run {run}: kill leader {leader}",
                  {k: result[k] for k in ("error",) if k in result})
    print(f"        session expired {_s(result.get('kill_to_session_expired_s'))}, new leader in Metadata "
          f"{_s(result.get('kill_to_new_leader_in_metadata_s'))}, next ack {_s(result.get('kill_to_next_ack_s'))}; "
          f"acknowledged {result.get('acknowledged')}, lost {result.get('lost')}, duplicated "
          f"{result.get('duplicated')}, unacknowledged in log {result.get('unacknowledged_in_log')}",
          file=sys.stderr, flush=True)
    return result


def _s(value: Any) -> str:
    return f"{value:.2f} s" if isinstance(value, (int, float)) else "n/a"


def _failover_figures(written: dict[str, Any], kill_at: float, session_at: float | None,
                      leader_at: float | None) -> dict[str, Any]:
    out = {k: v for k, v in written.items() if k != "acks"}
    acks = sorted(t for _, t in written.get("acks", []))
    before = [t for t in acks if t <= kill_at]
    after = [t for t in acks if t > kill_at]
    # The acknowledgement that ends the stall: the end of the longest gap between acknowledgements that
    # ends after the kill (an answer already on its way when the leader died can arrive just after it).
    resume_at = None
    if after:
        previous = before[-1] if before else kill_at
        longest = -1.0
        for t in after:
            if t - previous > longest:
                longest, resume_at = t - previous, t
            previous = t
        out["longest_ack_gap_s"] = longest
        out["first_ack_after_kill_s"] = after[0] - kill_at
    out["kill_to_next_ack_s"] = resume_at - kill_at if resume_at is not None else None
    out["kill_to_session_expired_s"] = session_at - kill_at if session_at is not None else None
    out["kill_to_new_leader_in_metadata_s"] = leader_at - kill_at if leader_at is not None else None
    out["acked_before_kill"] = len(before)
    out["acked_after_kill"] = len(after)
    return out


def failover(plan: ClusterPlan, session_timeout_ms: int, cluster: Cluster | None, live: list[Cluster],
             closed: list[Cluster], progress: Progress) -> dict[str, Any]:
    own = cluster is None
    if cluster is None:
        cluster = Cluster(session_timeout_ms, plan)
        live.append(cluster)
        cluster.start()
    try:
        runs = [failover_once(cluster, plan, run, progress) for run in range(1, plan.failover_runs + 1)]
    finally:
        if own:
            live.remove(cluster)
            cluster.close()
            closed.append(cluster)
    times = [r["kill_to_next_ack_s"] for r in runs if r.get("kill_to_next_ack_s") is not None]
    return {
        "zookeeper.session.timeout.ms": session_timeout_ms,
        "runs": runs,
        "median_kill_to_next_ack_s": statistics.median(times) if times else None,
        "acknowledged": sum(r.get("acknowledged", 0) for r in runs),
        "lost": sum(r.get("lost", 0) for r in runs),
        "duplicated": sum(r.get("duplicated", 0) for r in runs),
    }


# ---------------------------------------------------------------------------------------------------
# Reporting


def report(plan: ClusterPlan, document: dict[str, Any]) -> str:
    results = document["results"]
    lines = []
    produce = results.get("produce", {})
    if produce:
        def fmt(r: dict[str, Any]) -> str:
            if "records_per_s" not in r:
                return f"error: {r.get('error', '?')[:60]}"
            cores = f" ({r['broker_cores']:.2f} / {r['client_cores']:.2f} cores)" if "broker_cores" in r else ""
            return f"{r['records_per_s']:,.0f} rec/s, {r['mb_per_s']:.1f} MB/s{cores}"

        lines += [
            "| produce (confluent-kafka, linger.ms=5, batch.size=1 MiB) | single node, acks=1 | 3 brokers RF3, "
            "acks=all | 3 brokers RF3, acks=1 | RF3 acks=all / single acks=1 |",
            "|---|---|---|---|---|",
        ]
        for cell_name, cell in produce.items():
            ratio = cell.get("ratio_all_rf3_to_single_acks1")
            lines.append(
                f"| {cell['records']:,} x {cell_name} | {fmt(cell[SINGLE])} | {fmt(cell[CLUSTER_ALL])} | "
                f"{fmt(cell[CLUSTER_ONE])} | {f'{ratio:.2f}x' if ratio else 'n/a'} |"
            )
        ratios = [c["ratio_all_rf3_to_single_acks1"] for c in produce.values() if c.get("ratio_all_rf3_to_single_acks1")]
        if ratios:
            lines.append("")
            lines.append(f"RF3 acks=all / single-node acks=1: {', '.join(f'{r:.2f}x' for r in ratios)} "
                         f"(cells as above; cores: brokers' / client's, on average over each run)")
        lines += ["", *_cpu_per_mb_table(produce, document.get("machine", {}).get("cpu_cores"))]
        page_cache = document.get("machine", {}).get("page_cache_writes")
        if page_cache:
            lines += ["", f"{machine.page_cache_line(page_cache)} Three replicas store every byte three times: "
                          f"into memory not used lately, the cluster stores at most about "
                          f"{page_cache['new_memory_mb_per_s'] / 3:,.0f} MB/s, whatever its CPU."]
        lines.append("")
        lines += _kafka_table(produce, fmt, results.get("kafka_error"))
    latency = results.get("produce_latency", {})
    if latency:
        lines += [
            "| produce latency (produce() to acknowledgement), 1 partition | p50 | p99 | p99.9 | max |",
            "|---|---|---|---|---|",
        ]
        for setting, by_target in latency.items():
            for key, r in by_target.items():
                if "p99_ms" in r:
                    lines.append(f"| {setting}, {key} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | "
                                 f"{r['p999_ms']:.2f} ms | {r['max_ms']:.2f} ms |")
                else:
                    lines.append(f"| {setting}, {key} | error: {r.get('error', '?')[:80]} | | | |")
        lines.append("")
    for name, fo in results.get("failover", {}).items():
        lines += [
            f"Failover, zookeeper.session.timeout.ms={fo['zookeeper.session.timeout.ms']}: "
            f"median kill to next acknowledged write "
            + (f"{fo['median_kill_to_next_ack_s']:.2f} s" if fo.get("median_kill_to_next_ack_s") else "n/a")
            + f"; {fo['acknowledged']:,} acknowledged, {fo['lost']} lost, {fo['duplicated']} duplicated",
            "",
            "| run | killed (controller?) | session expired | new leader in Metadata | next ack | acked / in log "
            "/ lost / duplicated / unacked in log | order | rejoin ISR after restart |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for i, r in enumerate(fo["runs"], 1):
            s = _s
            lines.append(
                f"| {i} | {r['leader_killed']} ({'yes' if r['killed_leader_was_controller'] else 'no'}) | "
                f"{s(r.get('kill_to_session_expired_s'))} | {s(r.get('kill_to_new_leader_in_metadata_s'))} | "
                f"{s(r.get('kill_to_next_ack_s'))} | {r.get('acknowledged', '?')} / {r.get('in_log', '?')} / "
                f"{r.get('lost', '?')} / {r.get('duplicated', '?')} / {r.get('unacknowledged_in_log', '?')} | "
                f"{'in order, no gap' if r.get('in_order') and not r.get('gaps') else 'OUT OF ORDER or gaps'} | "
                f"{s(r.get('rejoined_isr_s_after_restart'))} |"
            )
            if r.get("error") or r.get("delivery_errors"):
                lines.append(f"|   | errors: {r.get('error', '')} {r.get('delivery_errors', '')} | | | | | | |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None, quick: bool = False, output: Path | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench --cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", default=quick)
    parser.add_argument("--output", type=Path, default=output)
    parser.add_argument("--skip", default="", help="comma-separated: produce,latency,failover,kafka")
    args = parser.parse_args(argv or [])
    plan = QUICK if args.quick else FULL
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    zookeeper_available()
    brokers.byte_compile_trafka()
    page_cache = machine.page_cache_write_speed(tempfile.gettempdir())
    print(f"bench: {machine.page_cache_line(page_cache)}", file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, lambda signum, frame: (_ for _ in ()).throw(KeyboardInterrupt()))
    started_at = datetime.datetime.now(datetime.timezone.utc)
    started = time.perf_counter()
    matrix = len(plan.records) * len(plan.partitions)
    total = (0 if "produce" in skip else matrix * len(produce_keys("kafka" not in skip)) * plan.repeats) \
        + (0 if "latency" in skip else 3 * len(plan.latency_settings)) \
        + (0 if "failover" in skip else plan.failover_runs * len(plan.failover_session_timeouts_ms))
    progress = Progress(total)
    live_clusters: list[Cluster] = []
    closed: list[Cluster] = []  # their logs go next to the results
    single: brokers.BrokerProcess | None = None
    kafka: KafkaReference | None = None
    results: dict[str, Any] = {}
    try:
        version = brokers.SPECS["trafka"].version()
        first_timeout = plan.failover_session_timeouts_ms[0]
        cluster = Cluster(first_timeout, plan)
        live_clusters.append(cluster)
        cluster.start()
        print(f"bench: cluster of {cluster.size} brokers up (ZooKeeper {cluster.zookeeper.connect_string}, "
              f"zookeeper.session.timeout.ms={first_timeout})", file=sys.stderr, flush=True)
        results["cluster_start_to_ready_s"] = cluster.ready_s
        if not {"produce", "latency"} <= skip:
            single = brokers.start(brokers.SPECS["trafka"])
            if "produce" not in skip:
                if "kafka" not in skip:
                    kafka = start_kafka(plan, results)
                results["produce"] = produce_side_by_side(single, cluster, plan, progress, kafka)
                if kafka is not None:
                    kafka.close()
                    kafka = None
            if "latency" not in skip:
                results["produce_latency"] = produce_latency(single, cluster, plan, progress)
            single.stop()
            single = None
        if "failover" not in skip:
            results["failover"] = {}
            for timeout_ms in plan.failover_session_timeouts_ms:
                reuse = cluster if timeout_ms == first_timeout else None
                results["failover"][f"zookeeper.session.timeout.ms={timeout_ms}"] = failover(
                    plan, timeout_ms, reuse, live_clusters, closed, progress)
    except KeyboardInterrupt:
        print("\nbench: interrupted; brokers and ZooKeeper stopped, temp dirs removed, nothing written",
              file=sys.stderr)
        return 130
    finally:
        if single is not None:
            single.stop()
        if kafka is not None:
            kafka.close()
        for cluster in list(live_clusters):
            cluster.close()
            closed.append(cluster)
    logs = {name: text for cluster in closed for name, text in cluster.logs.items()}

    output_path = args.output or RESULTS_DIR / f"{started_at:%Y-%m-%d}-{plan.mode}.json"
    document = {
        "mode": plan.mode,
        "started_at": started_at.isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "command": "python -m bench --cluster" + (" --quick" if args.quick else ""),
        "machine": {**machine.describe({"trafka": version}), "page_cache_writes": page_cache},
        "plan": asdict(plan),
        "settings": settings(plan),
        "results": results,
    }
    text = report(plan, document)
    print(text)
    log_path = output_path.with_suffix(".broker-logs.txt")
    output_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("".join(f"===== {name}\n{text}" for name, text in logs.items()))
    write_results(output_path, document, text, log_path)
    return 0


def start_kafka(plan: ClusterPlan, results: dict[str, Any]) -> KafkaReference | None:
    """Apache Kafka's single broker and cluster, warmed up, or None (and why, in ``results``) where they
    cannot run."""
    kafka = KafkaReference(dict(plan.broker_overrides), plan.min_insync_replicas)
    try:
        kafka.start()
        # Unmeasured: the JVMs compile their produce path before the first measured run.
        kafka.create_topics(WARM_UP_TOPIC, 16)
        for bootstrap, acks in ((kafka.single_bootstrap, "1"), (kafka.cluster_bootstrap, "all")):
            run_workload({"workload": "produce", "topic": WARM_UP_TOPIC, "count": WARM_UP_RECORDS, "size": 1024,
                          "acks": acks, "bootstrap": bootstrap}, WORKLOAD_TIMEOUT_S)
        kafka.delete_topics(WARM_UP_TOPIC, delete_topic)
    except Exception as exc:  # noqa: BLE001 - no jars or no Java here: trafka's figures still come
        kafka.close()
        results["kafka_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        print(f"bench: Apache Kafka {KAFKA_VERSION} not measured: {results['kafka_error']}", file=sys.stderr)
        return None
    return kafka


def settings(plan: ClusterPlan) -> dict[str, str]:
    return {
        "cluster": "3 trafka brokers (python -m trafka --override broker.id=N --override zookeeper.connect="
                   "127.0.0.1:PORT/chroot ...), one standalone Apache ZooKeeper (compat_tests.zookeeper, "
                   "tickTime=500), all on 127.0.0.1; broker settings: "
                   + ", ".join(f"{k}={v}" for k, v in plan.broker_overrides)
                   + "; everything else trafka's defaults, which are Kafka's: replica.lag.time.max.ms=30000, "
                     "replica.fetch.wait.max.ms=500, replica.fetch.min.bytes=1, replica.fetch.max.bytes=1048576, "
                     "replica.fetch.backoff.ms=1000",
        "kafka": f"Apache Kafka {KAFKA_VERSION} (compat_tests/reference_zk), one broker and a cluster of three on a "
                 "ZooKeeper of their own, alive beside trafka's, their runs in the same turns "
                 "(bench/kafka_cluster.py); "
                 f"JVM: {' '.join(brokers.kafka_jvm_options())}; the cluster's settings: offsets.topic.replication."
                 "factor=3, " + ", ".join(f"{k}={v}" for k, v in plan.broker_overrides) + ", the rest Kafka's "
                 "defaults; the same topics and producer as trafka's; before the first measured run, "
                 f"{WARM_UP_RECORDS:,} records of 1 KB to each, unmeasured, for the JVMs' compilers",
        "topics": f"replication factor 3, min.insync.replicas={plan.min_insync_replicas}; single node: "
                  f"replication factor 1",
        "single_node": "python -m trafka --port 0 --data-dir <tmp> --log-level WARNING (bench.brokers' trafka)",
        "producer": "confluent-kafka, the produce workload of bench.workloads: linger.ms=5, batch.size=1048576, "
                    "compression none, no key, random payload, enable.idempotence=false; bootstrap: all three "
                    "brokers",
        "produce_latency": "1 KB records paced at "
                           + " and ".join(f"{mb:g} MB/s with linger.ms={lg}" for mb, lg in plan.latency_settings)
                           + ", batch.size=1048576, one partition, for "
                           f"{plan.latency_seconds:g} s; latency = librdkafka's Message.latency() (produce() to "
                           "acknowledgement); the first second is warm-up",
        "failover": f"confluent-kafka, enable.idempotence=true, acks=all, linger.ms=0, "
                    f"{plan.failover_rate} records/s of {plan.failover_size} B to partition 0, "
                    f"message.timeout.ms=max(60000, 5 x session timeout), retries and backoffs librdkafka's defaults "
                    f"(retry.backoff.ms=100, retry.backoff.max.ms=1000); the leader gets SIGKILL after "
                    f"{plan.failover_before_kill_s:g} s of writing; kill to next ack = end of the longest pause "
                    f"between acknowledgements that ends after the kill; session expired = /brokers/ids/N gone in "
                    f"ZooKeeper (polled every 20 ms); new leader = Metadata naming another leader (polled every "
                    f"50 ms); afterwards partition 0 is read back from the beginning and compared",
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
