"""Run every broker through the same workloads, print a table, write the results.

    python -m bench            # full run (about 8 minutes on 2 cores)
    python -m bench --quick    # smaller counts, fewer workloads (under 2 minutes)
    python -m bench --brokers trafka,kafka
    python -m bench --cluster  # 3 trafka brokers on ZooKeeper beside one, and failover (bench/cluster.py)
    python -m bench --cleaner  # the log cleaner: throughput, memory, produce latency on and off (bench/cleaner.py)
    python -m bench --transactions  # transactions on trafka and Kafka: txn/s, throughput, read_committed (bench/transactions.py)
    python -m bench --security  # PLAINTEXT, SSL and SASL_SSL listeners on trafka and Kafka: throughput (bench/security.py)
    python -m bench --authorizer  # the StandardAuthorizer with 1,000 ACLs against none, on trafka and Kafka (bench/authorizer.py)
    python -m bench --nemesis  # a cluster under network faults and pauses, trafka and Kafka 3.9: what clients saw (bench/nemesis.py)
    python -m bench --share  # share groups of 1, 3 and 6 consumers draining a queue, trafka and Kafka (bench/share.py)

Every broker runs in its own process on loopback, and every workload in fresh client processes (see
``bench.workloads``). The brokers are all started first; each produce and consume workload then runs on
them in turn, round after round, so that the machine's slow spells fall on all of them alike. What is
measured on one broker alone comes before (latency, on brokers that hold no data yet) and after
(second client, group, partitions, RSS with data), broker by broker.
Results go to ``bench/results/<date>-<mode>.json`` (figures plus the machine's description) and
``.md`` (the table). Ctrl-C stops everything and removes temp dirs.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from bench import brokers, machine
from bench.common import RESULTS_DIR, WORKLOAD_TIMEOUT_S, Progress, in_turns, lookup, size_label, write_results
from bench.workloads import run_workload

RAW_KEY = "1 MiB requests of 1 KB records, acks=1 p=1"
MB = 1_000_000


@dataclass(frozen=True)
class Plan:
    mode: str
    records: tuple[tuple[int, int], ...]  # (record size in bytes, record count)
    acks: tuple[str, ...]
    partitions: tuple[int, ...]
    start_probes: int
    kafka_python_records: int
    latency_seconds: float
    latency_linger_ms: tuple[int, ...]
    scaling_partitions: tuple[int, ...]
    scaling_records: int
    rss_written_bytes: int  # written in all by the end of the run (the last fill tops up to it)
    rss_fill_bytes: int  # written by the last step alone, RSS measured before and after it
    raw_requests: int  # 1 MiB produce requests per raw (client-free) run
    # Each consume run reads what this many produce runs wrote (the topic holds repeats x len(acks) of them),
    # so that its steady window lasts seconds rather than half of one.
    consume_produce_runs: int = 1
    repeats: int = 1  # throughput runs per workload; the table shows the median
    latency_runs: int = 1  # runs per latency setting; the table shows the run with the median p99
    latency_mb_per_s: float = 20.0
    group_deadline_s: float = 60.0
    group_members: int = 3
    group_partitions: int = 16


FULL = Plan(
    mode="full",
    records=((100, 1_000_000), (1024, 200_000)),
    acks=("1", "all"),
    partitions=(1, 16),
    start_probes=3,
    kafka_python_records=100_000,
    latency_seconds=10.0,
    latency_linger_ms=(0, 5),
    scaling_partitions=(1, 100, 1000),
    scaling_records=500_000,
    rss_written_bytes=2_000_000_000,
    rss_fill_bytes=1_000_000_000,
    raw_requests=200,
    repeats=5,
    latency_runs=3,
    consume_produce_runs=5,
)

QUICK = Plan(
    mode="quick",
    records=((100, 100_000), (1024, 20_000)),
    acks=("1",),
    partitions=(1, 16),
    start_probes=1,
    kafka_python_records=10_000,
    latency_seconds=3.0,
    latency_linger_ms=(0,),
    scaling_partitions=(1, 100, 1000),
    scaling_records=100_000,
    rss_written_bytes=200_000_000,
    rss_fill_bytes=100_000_000,
    raw_requests=30,
    group_deadline_s=10.0,
)


def total_steps(plan: Plan, names: list[str]) -> int:
    matrix = len(plan.records) * len(plan.partitions)
    steps = 0
    for name in names:
        steps += plan.start_probes + 1 + matrix * len(plan.acks) + 1 + matrix + len(plan.scaling_partitions) + 1
        if name == "trafka":
            steps += 1  # start to ready as a test fixture sees it
        if name != "mock":
            steps += 3 + len(plan.latency_linger_ms) * plan.latency_runs  # kafka-python, latency, group
    return steps


class Subject:
    """One broker under test: its working process, its results so far, the bytes written to it."""

    def __init__(
        self, spec: brokers.BrokerSpec, plan: Plan, progress: Progress, live: list[brokers.BrokerProcess]
    ) -> None:
        self.spec, self.name, self.progress, self.live = spec, spec.name, progress, live
        self.results: dict[str, Any] = {"description": spec.description}
        self.written = 0
        ready_times = []
        for _ in range(plan.start_probes):
            probe = self._start()
            ready_times.append(probe.ready_s)
            self._stop(probe)
            progress.step(self.name, "start to ready (probe)", {"ready_s": ready_times[-1]})
        self.broker = self._start()
        ready_times.append(self.broker.ready_s)
        self.results["start_to_ready_s"] = {"runs": ready_times, "median": statistics.median(ready_times)}
        if spec.name == "trafka":
            fixture_times = brokers.trafka_fixture_starts(plan.start_probes + 2)
            self.results["fixture_start_to_ready_s"] = {
                "first": fixture_times[0], "runs": fixture_times[1:], "median": statistics.median(fixture_times[1:])}
            progress.step(self.name, "start to ready (test fixture)", {"ready_s": fixture_times[-1]})
        time.sleep(1.0)
        self.results["idle_rss_mb"] = self.broker.rss_mb()
        progress.step(self.name, "idle RSS", {"rss_mb": self.results["idle_rss_mb"]})

    def _start(self) -> brokers.BrokerProcess:
        broker = brokers.start(self.spec)
        self.live.append(broker)
        return broker

    def _stop(self, broker: brokers.BrokerProcess) -> float | None:
        stopped = broker.stop()
        self.live.remove(broker)
        return stopped

    def run_once(self, params: dict[str, Any]) -> dict[str, Any]:
        # Each run starts with nothing left to write back: the dirty pages of earlier runs (either
        # broker's) would otherwise be flushed during this one and throttle whichever broker writes.
        os.sync()
        result = run_workload(
            {"bootstrap": self.broker.bootstrap, "broker_pid": self.broker.pid, "wraps": self.spec.wraps, **params},
            WORKLOAD_TIMEOUT_S,
        )
        if not self.broker.alive():
            result["error"] = f"broker exited: {self.broker.log_tail(5)}"
        return result

    def run(self, what: str, params: dict[str, Any]) -> dict[str, Any]:
        result = self.run_once(params)
        self.progress.step(self.name, what, result)
        return result

    def stop(self) -> None:
        self.results["shutdown_s"] = self._stop(self.broker)


def median_latency_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The latency run with the median p99, with every run's p99 and p99.9 beside it."""
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=lambda r: r.get("p99_ms", float("inf")))
    return {
        **ordered[len(ordered) // 2],
        "runs_p99_ms": [r.get("p99_ms") for r in runs],
        "runs_p999_ms": [r.get("p999_ms") for r in runs],
    }


def side_by_side(subjects: list[Subject], plan: Plan, what: str, params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One workload on every broker, in turns. A consumer of a broker that keeps only a window (the
    mock) spends its time rewinding, and its figure is compared with no target: it runs once, after
    the rounds."""
    consuming = params["workload"] == "consume"
    paired = [s for s in subjects if not (consuming and s.spec.wraps)]
    cell = in_turns(paired, plan.repeats, lambda subject: subject.run_once(params)) if paired else {}
    for subject in subjects:
        if subject not in cell:
            cell[subject] = subject.run_once(params)
    for subject, result in cell.items():
        subject.progress.step(subject.name, what, result)
    return {subject.name: result for subject, result in cell.items()}


def throughput_matrix(subjects: list[Subject], plan: Plan) -> None:
    """Produce, then consume the same records back, every cell measured side by side."""
    for subject in subjects:
        subject.results["produce"], subject.results["consume"] = {}, {}
    for size, count in plan.records:
        for partitions in plan.partitions:
            topic = f"bench-{size}-{partitions}"
            for subject in subjects:
                subject.broker.create_topic(topic, partitions)
            for acks in plan.acks:
                key = f"{size_label(size)} acks={acks} p={partitions}"
                cell = side_by_side(
                    subjects, plan, f"produce {count:,} x {key}",
                    {"workload": "produce", "topic": topic, "count": count, "size": size, "acks": acks},
                )
                for subject in subjects:
                    subject.results["produce"][key] = cell[subject.name]
                    subject.written += cell[subject.name].get("records", 0) * size
    # The broker alone: a client that only copies pre-encoded 1 MiB requests to its socket.
    for subject in subjects:
        subject.broker.create_topic("bench-raw", 1)
    cell = side_by_side(
        subjects, plan, f"raw produce {plan.raw_requests} x 1 MiB requests of 1 KB records",
        {"workload": "raw_produce", "topic": "bench-raw", "size": 1024, "requests": plan.raw_requests},
    )
    for subject in subjects:
        subject.results["raw_produce"] = {RAW_KEY: cell[subject.name]}
        subject.written += cell[subject.name].get("records", 0) * 1024
    for size, produced in plan.records:
        count = produced * plan.consume_produce_runs
        for partitions in plan.partitions:
            key = f"{size_label(size)} p={partitions}"
            cell = side_by_side(
                subjects, plan, f"consume {count:,} x {key}",
                {"workload": "consume", "topic": f"bench-{size}-{partitions}", "count": count, "size": size,
                 "partitions": partitions},
            )
            for subject in subjects:
                subject.results["consume"][key] = cell[subject.name]


def latency_workloads(subject: Subject, plan: Plan) -> None:
    """End-to-end latency at a fixed rate, on a broker that holds no data yet.

    It runs before every other workload. Data left idle in the page cache is what this machine's memory
    agent reclaims (the machine description lists it: DAMON pages out what has not been touched for a
    minute), and while it does, every process on the machine stalls now and then: with 6 GB of segment
    data a minute old, trafka's p99 measured 8-419 ms over eight runs, and 1.6-8 ms (one run 41 ms)
    with the same data dropped from the page cache. That is the machine reclaiming the leftovers of
    the throughput rounds, not the broker serving the records under test.

    The mock answers a long-poll Fetch only when fetch.wait.max.ms runs out and keeps 5 MB per
    partition, so at 20 MB/s its consumer falls out of range: no latency figure for it.
    """
    if subject.name == "mock":
        return
    results, broker = subject.results, subject.broker
    results["latency"] = {}
    for linger_ms in plan.latency_linger_ms:
        topic = f"bench-latency-{linger_ms}"
        broker.create_topic(topic, 1)
        runs = []
        for _ in range(plan.latency_runs):
            runs.append(subject.run(
                f"latency at {plan.latency_mb_per_s:g} MB/s, linger.ms={linger_ms}",
                {"workload": "latency", "topic": topic, "mb_per_s": plan.latency_mb_per_s, "size": 1024,
                 "seconds": plan.latency_seconds, "acks": "1", "linger_ms": linger_ms},
            ))
            subject.written += int(runs[-1].get("records", 0)) * 1024
        results["latency"][f"linger.ms={linger_ms}"] = median_latency_run(runs)


def one_broker_workloads(subject: Subject, plan: Plan) -> None:
    """What each broker is measured on alone after the throughput rounds: second client, group,
    partitions, RSS with data."""
    results, broker = subject.results, subject.broker
    if subject.name != "mock":  # kafka-python cannot bootstrap from the mock cluster
        count = plan.kafka_python_records
        broker.create_topic("bench-kafka-python", 1)
        kp_produce = subject.run(
            f"kafka-python produce {count:,} x 100 B",
            {"workload": "kafka_python_produce", "topic": "bench-kafka-python", "count": count, "size": 100,
             "acks": "1"},
        )
        subject.written += kp_produce.get("records", 0) * 100
        kp_consume = subject.run(
            f"kafka-python consume {count:,} x 100 B",
            {"workload": "kafka_python_consume", "topic": "bench-kafka-python", "count": count, "size": 100,
             "partitions": 1},
        )
        results["kafka_python"] = {"produce 100 B acks=1 p=1": kp_produce, "consume 100 B p=1": kp_consume}

        # The mock's consumer groups never settle with default client settings: no group figure for it.
        broker.create_topic("bench-group", plan.group_partitions)
        results["group"] = subject.run(
            f"{plan.group_members}-member group to stable",
            {"workload": "group", "topic": "bench-group", "partitions": plan.group_partitions,
             "members": plan.group_members, "group_id": f"bench-group-{int(time.time())}",
             "deadline_s": plan.group_deadline_s},
        )

    create_s = {n: broker.create_topic(f"bench-scale-{n}", n) for n in plan.scaling_partitions}
    scaling = in_turns(
        list(plan.scaling_partitions),
        plan.repeats,
        lambda n: subject.run_once(
            {"workload": "produce", "topic": f"bench-scale-{n}", "count": plan.scaling_records, "size": 100,
             "acks": "1"}
        ),
    )
    for partitions, result in scaling.items():
        result["create_topic_s"] = create_s[partitions]
        subject.written += result.get("records", 0) * 100
        subject.progress.step(
            subject.name, f"produce {plan.scaling_records:,} x 100 B to {partitions} partitions", result
        )
    results["partitions"] = {str(n): result for n, result in scaling.items()}

    # The last step only writes: RSS before and after it shows whether memory grows with data, apart
    # from what the workloads above left behind (a thousand partitions' open files, group state).
    broker.create_topic("bench-fill", 1)
    time.sleep(1.0)
    results["rss_before_fill"] = {"written_mb": subject.written / MB, "rss_mb": broker.rss_mb()}
    fill = run_workload(
        {"bootstrap": broker.bootstrap, "workload": "produce", "topic": "bench-fill",
         "count": max(plan.rss_fill_bytes, plan.rss_written_bytes - subject.written) // 1024, "size": 1024,
         "acks": "1"},
        WORKLOAD_TIMEOUT_S,
    )
    subject.written += fill.get("records", 0) * 1024
    time.sleep(1.0)
    results["rss_after_writing"] = {
        "written_mb": subject.written / MB,
        "rss_mb": broker.rss_mb(),
        "peak_rss_mb": broker.peak_rss_mb(),
    }
    subject.progress.step(
        subject.name, f"RSS after {subject.written / MB:,.0f} MB written", results["rss_after_writing"]
    )


# ---------------------------------------------------------------------------------------------------
# Reporting


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


Row = tuple[str, tuple[str, ...], Callable[[Any], str], bool]  # label, path, format, is_throughput


def _rows(plan: Plan) -> list[Row]:
    rate = lambda v: f"{v:,.0f}"  # noqa: E731
    ms = lambda v: f"{v * 1000:.0f} ms"  # noqa: E731
    rows: list[Row] = [
        ("start to ready (median)", ("start_to_ready_s", "median"), ms, False),
        ("start to ready, test fixture, from its 2nd start (median)", ("fixture_start_to_ready_s", "median"), ms,
         False),
        ("idle RSS", ("idle_rss_mb",), lambda v: f"{v:.1f} MB", False),
    ]
    for size, count in plan.records:
        for partitions in plan.partitions:
            for acks in plan.acks:
                key = f"{size_label(size)} acks={acks} p={partitions}"
                rows.append((f"produce {key} (rec/s)", ("produce", key, "records_per_s"), rate, True))
    rows.append(
        ("produce, raw client, 1 MiB requests of 1 KB records (MB/s)", ("raw_produce", RAW_KEY, "mb_per_s"),
         lambda v: f"{v:,.0f}", True)
    )
    for size, count in plan.records:
        for partitions in plan.partitions:
            key = f"{size_label(size)} p={partitions}"
            rows.append((f"consume {key} (rec/s)", ("consume", key, "records_per_s"), rate, True))
            rows.append((f"consume {key} first record", ("consume", key, "first_record_s"), ms, False))
    rows += [
        ("kafka-python produce 100 B (rec/s)", ("kafka_python", "produce 100 B acks=1 p=1", "records_per_s"), rate, False),
        ("kafka-python consume 100 B (rec/s)", ("kafka_python", "consume 100 B p=1", "records_per_s"), rate, False),
    ]
    for linger_ms in plan.latency_linger_ms:
        for q, label in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
            rows.append(
                (f"e2e latency {label}, {plan.latency_mb_per_s:g} MB/s, linger {linger_ms} ms",
                 ("latency", f"linger.ms={linger_ms}", q), lambda v: f"{v:.2f} ms", False)
            )
    rows.append((f"{plan.group_members}-member group stable", ("group", "stable_s"), ms, False))
    for partitions in plan.scaling_partitions:
        rows.append((f"produce 100 B to {partitions} partitions (rec/s)", ("partitions", str(partitions), "records_per_s"), rate, False))
    for partitions in plan.scaling_partitions:
        rows.append((f"create topic, {partitions} partitions", ("partitions", str(partitions), "create_topic_s"), ms, False))
    rows += [
        ("RSS before the last fill", ("rss_before_fill", "rss_mb"), lambda v: f"{v:.1f} MB", False),
        ("RSS after writing", ("rss_after_writing", "rss_mb"), lambda v: f"{v:.1f} MB", False),
        ("data written", ("rss_after_writing", "written_mb"), lambda v: f"{v:,.0f} MB", False),
    ]
    return rows


def table(plan: Plan, by_broker: dict[str, dict[str, Any]]) -> str:
    names = list(by_broker)
    header = ["workload", *names]
    compare = [n for n in ("tansu", "mock", "kafka") if n in names and "trafka" in names]
    header += [f"trafka/{n}" for n in compare]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, path, fmt, is_throughput in _rows(plan):
        values = [lookup(by_broker[n], path) for n in names]
        cells = [fmt(v) if isinstance(v, (int, float)) else "n/a" for v in values]
        if is_throughput:
            trafka = lookup(by_broker.get("trafka", {}), path)
            cells += [_fmt_ratio(_ratio(trafka, lookup(by_broker[n], path))) for n in compare]
        else:
            cells += [""] * len(compare)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_table(plan: Plan, by_broker: dict[str, dict[str, Any]]) -> str:
    """Cores busy on average during each produce and consume run: the broker's, then the client's."""
    names = list(by_broker)
    lines = ["| cores busy: broker / client | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for label, path, _, is_throughput in _rows(plan):
        if not is_throughput:
            continue
        cells = []
        for n in names:
            broker = lookup(by_broker[n], (*path[:-1], "broker_cores"))
            client = lookup(by_broker[n], (*path[:-1], "client_cores"))
            cells.append(f"{broker:.2f} / {client:.2f}" if broker is not None and client is not None else "n/a")
        lines.append(f"| {label.removesuffix(' (rec/s)')} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt_ratio(ratio: float | None) -> str:
    return f"{ratio:.2f}x" if ratio is not None else "n/a"


def _ratios(plan: Plan, by_broker: dict[str, dict[str, Any]], section: str, keys: list[str], other: str) -> list[float]:
    out = []
    for key in keys:
        mine = lookup(by_broker.get("trafka", {}), (section, key, "records_per_s"))
        theirs = lookup(by_broker.get(other, {}), (section, key, "records_per_s"))
        ratio = _ratio(mine, theirs)
        if ratio is not None:
            out.append(ratio)
    return out


def targets(plan: Plan, by_broker: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target of the benchmark issue with trafka's measured figure and whether it is met."""
    trafka = by_broker.get("trafka")
    if trafka is None:
        return []
    produce_keys = list(trafka.get("produce", {}))
    consume_keys = list(trafka.get("consume", {}))
    out: list[dict[str, Any]] = []

    def add(target: str, measured: str, met: bool | None) -> None:
        out.append({"target": target, "measured": measured, "met": met})

    for section, keys in (("produce", produce_keys), ("consume", consume_keys)):
        for other, bound in (("tansu", 1.2), ("mock", 0.75)):
            if section == "consume" and other == "mock":
                # The mock keeps 5 MB per partition; reading a topic's worth means rewinding that window,
                # and each rewind costs the client about half a second: its figure is no ceiling.
                add("consume throughput >= 0.75x mock", "no ceiling: the mock keeps 5 MB per partition", None)
                continue
            ratios = _ratios(plan, by_broker, section, keys, other)
            if ratios:
                geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
                add(
                    f"{section} throughput >= {bound}x {other}",
                    f"min {min(ratios):.2f}x, geomean {geomean:.2f}x, max {max(ratios):.2f}x over {len(ratios)} workloads",
                    min(ratios) >= bound,
                )
    p99 = lookup(trafka, ("latency", "linger.ms=0", "p99_ms"))
    if p99 is not None:
        runs = lookup(trafka, ("latency", "linger.ms=0", "runs_p99_ms"))
        each = f"; the {len(runs)} runs: {', '.join(f'{r:.2f}' for r in runs)} ms" if runs else ""
        add(
            f"p99 e2e latency <= 5 ms at {plan.latency_mb_per_s:g} MB/s",
            f"{p99:.2f} ms (linger.ms=0{each})",
            p99 <= 5,
        )
    ready = lookup(trafka, ("start_to_ready_s", "median"))
    if ready is not None:
        add("start to ready <= 0.25 s", f"{ready:.3f} s", ready <= 0.25)
    fixture_ready = lookup(trafka, ("fixture_start_to_ready_s", "median"))
    if fixture_ready is not None:
        add("a test fixture's start to ready <= 0.1 s", f"{fixture_ready:.3f} s", fixture_ready <= 0.1)
    idle = trafka.get("idle_rss_mb")
    if idle is not None:
        add("idle RSS <= 40 MB", f"{idle:.1f} MB", idle <= 40)
    before = lookup(trafka, ("rss_before_fill", "rss_mb"))
    before_written = lookup(trafka, ("rss_before_fill", "written_mb"))
    after = lookup(trafka, ("rss_after_writing", "rss_mb"))
    written = lookup(trafka, ("rss_after_writing", "written_mb"))
    if after is not None and before is not None and idle is not None:
        add(
            "RSS does not grow with data written (<= 5 MB over the last fill)",
            f"{idle:.1f} MB idle; {before:.1f} MB -> {after:.1f} MB ({after - before:+.1f} MB) while the "
            f"last {written - before_written:,.0f} MB were written, {written:,.0f} MB in all",
            after - before <= 5,
        )
    stable = lookup(trafka, ("group", "stable_s"))
    if stable is not None:
        add("3-member group stable <= 0.2 s (default client settings)", f"{stable:.3f} s", stable <= 0.2)
    one = lookup(trafka, ("partitions", "1", "records_per_s"))
    many = lookup(trafka, ("partitions", str(max(plan.scaling_partitions)), "records_per_s"))
    if one and many:
        add(
            f"throughput at {max(plan.scaling_partitions)} partitions within 20% of 1 partition",
            f"{many / one:.2f}x of 1 partition ({many:,.0f} vs {one:,.0f} rec/s)",
            many / one >= 0.8,
        )
    return out


def targets_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| target | trafka measured | met |", "|---|---|---|"]
    for row in rows:
        met = {True: "met", False: "**not met**", None: "n/a"}[row["met"]]
        lines.append(f"| {row['target']} | {row['measured']} | {met} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts and fewer workloads (< 2 minutes)")
    parser.add_argument(
        "--brokers", default="trafka,tansu,mock,kafka", help="comma-separated: trafka,tansu,mock,kafka"
    )
    parser.add_argument("--output", type=Path, help="results file (default bench/results/<date>-<mode>.json)")
    parser.add_argument(
        "--cluster", action="store_true",
        help="trafka alone: a 3-broker cluster on ZooKeeper (RF 3, acks=all) beside one broker (acks=1), "
        "and leader failover (see bench/cluster.py; --brokers does not apply)",
    )
    parser.add_argument(
        "--cleaner", action="store_true",
        help="trafka alone: the log cleaner's throughput on a 1 GB compacted topic, the broker's memory while it "
        "cleans, and produce latency beside it with the cleaner on and off (see bench/cleaner.py)",
    )
    parser.add_argument(
        "--transactions", action="store_true",
        help="trafka and kafka (of --brokers): small transactions per second and commit latency, a transactional "
        "producer's throughput beside an idempotent one, a read_committed consumer (see bench/transactions.py)",
    )
    parser.add_argument(
        "--security", action="store_true",
        help="trafka and kafka (of --brokers), each serving PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512): 1 KB produce "
        "and consume throughput over each listener, as a ratio of the broker's own PLAINTEXT figures (see "
        "bench/security.py)",
    )
    parser.add_argument(
        "--authorizer", action="store_true",
        help="trafka and kafka (of --brokers), each without an authorizer and with the StandardAuthorizer and 1,000 "
        "ACLs, clients over SASL_PLAINTEXT as a user that is no super user: 1 KB produce and consume throughput, as "
        "a ratio of the broker's own figures without an authorizer (see bench/authorizer.py)",
    )
    parser.add_argument(
        "--share", action="store_true",
        help="trafka and kafka (of --brokers): records/s through a share group (KIP-932) of 1, 3 and 6 confluent-kafka "
        "ShareConsumers, each in its own process, draining a pre-filled topic of 6 partitions, and 6 on 1 partition "
        "(see bench/share.py)",
    )
    parser.add_argument(
        "--nemesis", action="store_true",
        help="trafka and kafka (of --brokers): a three-broker cluster on a test network of its own under a random mix "
        "of partitions, pauses and lossy links while clients write and read, then a verdict on what they saw (see "
        "bench/nemesis.py; its own options follow --nemesis: --minutes, --seed, --unclean, --keep)",
    )
    parser.add_argument(
        "--costs", action="store_true",
        help="trafka and kafka (of --brokers): how memory, start time and latency grow with idle connections, "
        "partitions, topics, committing consumer groups and concurrent producers; a table and a chart per curve "
        "(see bench/costs.py; needs matplotlib: pip install -e '.[bench]')",
    )
    args, rest = parser.parse_known_args(argv)
    if args.nemesis:
        from bench import nemesis

        return nemesis.main(rest, quick=args.quick, output=args.output, brokers_arg=args.brokers)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.costs:
        from bench import costs

        return costs.main([], quick=args.quick, output=args.output, brokers_arg=args.brokers)
    if args.share:
        from bench import share

        return share.main([], quick=args.quick, output=args.output, brokers_arg=args.brokers)
    if args.authorizer:
        from bench import authorizer

        return authorizer.main([], quick=args.quick, output=args.output, brokers_arg=args.brokers)
    if args.security:
        from bench import security

        return security.main([], quick=args.quick, output=args.output, brokers_arg=args.brokers)
    if args.transactions:
        from bench import transactions

        return transactions.main([], quick=args.quick, output=args.output, brokers_arg=args.brokers)
    if args.cleaner:
        from bench import cleaner

        return cleaner.main([], quick=args.quick, output=args.output)
    if args.cluster:
        from bench import cluster

        return cluster.main([], quick=args.quick, output=args.output)
    plan = QUICK if args.quick else FULL
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    unknown = [n for n in names if n not in brokers.SPECS]
    if unknown:
        parser.error(f"unknown broker(s): {', '.join(unknown)}")
    if "tansu" in names:
        brokers.tansu_binary(install=True)
    if "kafka" in names:
        brokers.kafka_jars(install=True)
    if "trafka" in names:
        brokers.byte_compile_trafka()

    # SIGTERM stops the run like Ctrl-C does: through the finally below.
    signal.signal(signal.SIGTERM, lambda signum, frame: (_ for _ in ()).throw(KeyboardInterrupt()))
    live: list[brokers.BrokerProcess] = []
    started_at = datetime.datetime.now(datetime.timezone.utc)
    started = time.perf_counter()
    by_broker: dict[str, dict[str, Any]] = {}
    progress = Progress(total_steps(plan, names))
    try:
        versions = {n: brokers.SPECS[n].version() for n in names}
        page_cache = machine.page_cache_write_speed(tempfile.gettempdir())
        print(f"bench: page-cache writes {page_cache['new_memory_mb_per_s']:,} MB/s on new memory, "
              f"{page_cache['recycled_memory_mb_per_s']:,} MB/s on just-freed memory", file=sys.stderr, flush=True)
        subjects = [Subject(brokers.SPECS[name], plan, progress, live) for name in names]
        for subject in subjects:
            latency_workloads(subject, plan)
        throughput_matrix(subjects, plan)
        for subject in subjects:
            one_broker_workloads(subject, plan)
            subject.stop()
            by_broker[subject.name] = {"version": versions[subject.name], **subject.results}
    except KeyboardInterrupt:
        print("\nbench: interrupted; brokers stopped, temp dirs removed, nothing written", file=sys.stderr)
        return 130
    finally:
        for broker in live:
            broker.stop()

    goals = targets(plan, by_broker)
    report = f"{table(plan, by_broker)}\n\n{cpu_table(plan, by_broker)}\n\n"
    if goals:
        report += f"{targets_table(goals)}\n\n"
    report += machine.page_cache_line(page_cache) + "\n"
    print(report)
    output = args.output or RESULTS_DIR / f"{started_at:%Y-%m-%d}-{plan.mode}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "mode": plan.mode,
        "started_at": started_at.isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "command": "python -m bench" + (" --quick" if args.quick else ""),
        "machine": {**machine.describe(versions), "page_cache_writes": page_cache},
        "plan": asdict(plan),
        "settings": {
            "producer": "confluent-kafka, linger.ms=5, batch.size=1048576, compression none, no key, "
            "random payload; latency producer: acks=1, linger.ms as listed",
            "consumer": "confluent-kafka, metadata then assign() from the start of each partition (no group), "
            "fetch.queue.backoff.ms=10, other fetch settings default",
            "loopback": "all brokers bind 127.0.0.1; clients and broker share the machine's cores",
            **({"kafka": brokers.kafka_settings()} if "kafka" in names else {}),
        },
        "results": by_broker,
        "targets": goals,
    }
    write_results(output, document, report)
    return 0
