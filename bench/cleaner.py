"""The log cleaner: compaction throughput, the broker's memory while it cleans, and what cleaning does to
the produce latency of another topic.

    python -m bench --cleaner            # 1 GB topic, 10,000 keys, 20 s windows (about 45 s on 2 cores)
    python -m bench --cleaner --quick    # 100 MB, 1,000 keys, 5 s windows (about 15 s)

One trafka broker, one data directory, in three steps (every client in a fresh process, ``bench.workloads``):

1. **Fill**, cleaner off (``log.cleaner.enable=false``): a topic with ``segment.bytes`` of 100 MiB (so that
   all but the last segment can be cleaned; Kafka's 1 GiB default would leave the whole log in the active
   segment), ``cleanup.policy=delete`` and ``retention.ms=-1`` for now, gets 1 GB of 1000 B random values
   under 10,000 keys taken in turn (about 100 versions of each key), from confluent-kafka with acks=1,
   ``linger.ms=20``, ``batch.size`` 1 MiB, compression none.
2. **Cleaner off**: a paced producer writes 1 KB records at 5 MB/s (acks=1, ``linger.ms=5``) into another
   topic (cleanup.policy=delete) for a fixed window: every record's produce() to acknowledgement latency,
   and the broker's RSS meanwhile.
3. **Cleaner on**: the broker is stopped (SIGTERM, a clean shutdown) and started again on the same data
   directory with the cleaner on (``log.cleaner.backoff.ms=500``, every other cleaner setting Kafka's
   default: one thread, 128 MiB dedupe buffer, no I/O limit). The same paced producer starts; a few seconds
   into its window the topic becomes ``cleanup.policy=compact`` and the cleaner compacts it while the
   producer runs; the broker's RSS is sampled every 50 ms. The cleaner's own log lines (``cleaning ...``
   and ``cleaned ...: <figures>``, timestamped to the millisecond) give its start, end and figures; the
   partition's size after comes from DescribeLogDirs.

Throughput is the size of the section cleaned (the ``.log`` files below the active segment, on disk) over
the wall time between those two lines. The whole log was just written, so it is read from the page cache.
Latency is reported per window and, from every record's own figure, for the records produced while the
cleaner ran and for those produced as far into the cleaner-off window.

Results: ``bench/results/<date>-cleaner.json`` and ``.md`` (``-cleaner-quick`` for ``--quick``).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import queue
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import brokers, machine
from bench.common import RESULTS_DIR, Progress, write_results
from bench.workloads import run_workload

MB = 1_000_000
WORKLOAD_TIMEOUT_S = 400.0
CLEANING_TIMEOUT_S = 600.0
COMPACTED = "compacted"
LATENCY = "latency"


@dataclass(frozen=True)
class CleanerPlan:
    mode: str
    log_bytes: int  # values written to the compacted topic
    keys: int
    record_size: int
    segment_bytes: int
    latency_seconds: float
    latency_mb_per_s: float = 5.0
    latency_linger_ms: int = 5
    backoff_ms: int = 500
    compact_after_s: float = 3.0  # into the cleaner-on latency window, the topic becomes compacted


FULL = CleanerPlan(mode="cleaner", log_bytes=1_000_000_000, keys=10_000, record_size=1000,
                   segment_bytes=100 * 1024 * 1024, latency_seconds=20.0)
QUICK = CleanerPlan(mode="cleaner-quick", log_bytes=100_000_000, keys=1_000, record_size=1000,
                    segment_bytes=10 * 1024 * 1024, latency_seconds=5.0)


class CleanerBenchError(RuntimeError):
    pass


def broker_spec(data_dir: Path, overrides: dict[str, str]) -> brokers.BrokerSpec:
    """bench.brokers' trafka on a data directory of our own (kept across restarts), with ``overrides``
    and the cleaner's INFO lines on its output."""
    flags = [arg for name, value in overrides.items() for arg in ("--override", f"{name}={value}")]
    base = brokers.SPECS["trafka"]
    return dataclasses.replace(base, command=lambda tmp, port: [
        sys.executable, "-m", "trafka", "--port", "0", "--data-dir", str(data_dir), "--log-level", "INFO", *flags])


def stop_keeping_data(broker: brokers.BrokerProcess) -> None:
    """SIGTERM (a clean shutdown, as a restart does it), keeping the data directory; removes the temp dir
    holding the broker's output."""
    if broker.process.poll() is None:
        if broker.process.stdin is not None:
            broker.process.stdin.close()
        broker.process.send_signal(signal.SIGTERM)
        try:
            broker.process.wait(timeout=60)
        except Exception:
            broker.process.kill()
            broker.process.wait()
    shutil.rmtree(broker.temp_dir, ignore_errors=True)


def create_topics(bootstrap: str, plan: CleanerPlan) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics([
        # Compacted only once the cleaner-on window is under way (run, step 3); until then nothing to clean.
        NewTopic(COMPACTED, 1, 1, config={"cleanup.policy": "delete", "retention.ms": "-1",
                                          "segment.bytes": str(plan.segment_bytes)}),
        NewTopic(LATENCY, 1, 1, config={"cleanup.policy": "delete"}),
    ], operation_timeout=30, request_timeout=30)
    for future in futures.values():
        future.result(timeout=30)


def partition_size(bootstrap: str, topic: str) -> int:
    """The partition's size in bytes, as DescribeLogDirs reports it."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        (answer,) = admin.describe_log_dirs({topic: [0]})
    finally:
        admin.close()
    return sum(p["partition_size"] for d in answer["log_dirs"] for t in d["topics"] for p in t["partitions"])


class RssSampler:
    """The broker's VmRSS every ``interval`` seconds, in a thread, with the time of each sample."""

    def __init__(self, broker: brokers.BrokerProcess, interval: float = 0.05) -> None:
        self.broker = broker
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), self.broker.rss_mb()))
            except (OSError, brokers.BrokerError):
                return
            self._stop.wait(self.interval)

    def between(self, start: float, end: float) -> list[float]:
        return [rss for at, rss in self.samples if start <= at <= end]


_CLEANED = re.compile(
    r"cleaned (?P<log>\S+) up to offset (?P<offset>\d+): (?P<mapped_records>\d+) records \((?P<mapped_mb>[\d.]+) MB\) "
    r"mapped, (?P<read_mb>[\d.]+) MB read into (?P<groups>\d+) segment\(s\), (?P<written_mb>[\d.]+) MB written "
    r"\((?P<kept>\d+)/(?P<records>\d+) records kept\), (?P<seconds>[\d.]+) s")
_CLEANING = re.compile(r"cleaning (?P<log>\S+): dirty from offset (?P<first>\d+) to (?P<last>\d+) "
                       r"\((?P<ratio>\d+)% of (?P<total>\d+) bytes\)")
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def line_time(line: str) -> float:
    """When the broker wrote a log line (its logging's local time, to the millisecond), on this process's
    monotonic clock."""
    match = _LOG_TIME.match(line)
    if match is None:
        return time.monotonic()
    epoch = time.mktime(time.strptime(match[1], "%Y-%m-%d %H:%M:%S")) + int(match[2]) / 1000
    return epoch - (time.time() - time.monotonic())


def watch_cleaning(broker: brokers.BrokerProcess, log_name: str, timeout: float) -> dict[str, Any]:
    """Wait for the cleaner's lines about ``log_name`` on the broker's output: the first ``cleaning`` and
    the ``cleaned`` that follows it; when the broker wrote them (monotonic clock) and their figures."""
    started: dict[str, Any] | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = broker._lines.get(timeout=0.5)
        except queue.Empty:
            if not broker.alive():
                raise CleanerBenchError(f"the broker exited:\n{broker.log_tail()}") from None
            continue
        if started is None and (match := _CLEANING.search(line)) and match["log"] == log_name:
            started = {"at": line_time(line), "dirty_from": int(match["first"]), "dirty_to": int(match["last"]),
                       "log_bytes": int(match["total"])}
        elif started is not None and (match := _CLEANED.search(line)) and match["log"] == log_name:
            done_at = line_time(line)
            return {"started_at": started["at"], "done_at": done_at,
                    **{k: v for k, v in started.items() if k != "at"},
                    "wall_s": done_at - started["at"], "cleaner_s": float(match["seconds"]),
                    "mapped_mb": float(match["mapped_mb"]), "read_mb": float(match["read_mb"]),
                    "written_mb": float(match["written_mb"]), "records_read": int(match["records"]),
                    "records_kept": int(match["kept"]), "segment_groups": int(match["groups"]),
                    "end_offset": int(match["offset"])}
        elif "cannot clean" in line or "Traceback" in line:
            raise CleanerBenchError(f"the cleaner failed: {line}")
    raise CleanerBenchError(f"{log_name} was not cleaned within {timeout:.0f} s:\n{broker.log_tail()}")


def latency_params(broker: brokers.BrokerProcess, plan: CleanerPlan) -> dict[str, Any]:
    return {"workload": "produce_latency", "bootstrap": broker.bootstrap, "topic": LATENCY, "acks": 1,
            "linger_ms": plan.latency_linger_ms, "size": 1024, "mb_per_s": plan.latency_mb_per_s,
            "seconds": plan.latency_seconds, "broker_pid": broker.pid, "samples": True}


def percentiles(latencies_ms: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies_ms)
    if not ordered:
        return {"measured": 0}
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731  (as bench.workloads)
    return {"measured": len(ordered), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "p999_ms": pick(0.999),
            "max_ms": ordered[-1]}


def in_window(samples: list[list[float]], start: float, end: float) -> list[float]:
    """The latencies of the records produced between ``start`` and ``end`` (monotonic seconds)."""
    return [latency for sent_ns, latency in samples if start <= sent_ns / 1e9 <= end]


def set_cleanup_policy(bootstrap: str, topic: str, policy: str) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    resource = ConfigResource("TOPIC", topic, set_config={"cleanup.policy": policy})
    for future in admin.alter_configs([resource], request_timeout=30).values():
        future.result(timeout=30)


def run(plan: CleanerPlan, progress: Progress, live: list[brokers.BrokerProcess]) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="bench-cleaner-"))
    results: dict[str, Any] = {}
    try:
        # 1. Fill, cleaner off.
        off = brokers.start(broker_spec(data_dir, {"log.cleaner.enable": "false"}))
        live.append(off)
        create_topics(off.bootstrap, plan)
        fill = run_workload({"workload": "keyed_produce", "bootstrap": off.bootstrap, "topic": COMPACTED,
                             "bytes": plan.log_bytes, "keys": plan.keys, "size": plan.record_size},
                            WORKLOAD_TIMEOUT_S)
        fill["partition_bytes"] = partition_size(off.bootstrap, COMPACTED)
        results["fill"] = fill
        progress.step("trafka", f"fill {plan.log_bytes / MB:,.0f} MB, {plan.keys:,} keys", fill)
        if "error" in fill:
            raise CleanerBenchError(f"filling the topic failed: {fill['error']}")

        # 2. The latency workload with the cleaner off.
        with RssSampler(off) as rss:
            window_start = time.monotonic()
            latency_off = run_workload(latency_params(off, plan), WORKLOAD_TIMEOUT_S)
            window_end = time.monotonic()
        samples_off = latency_off.pop("samples", [])
        latency_off["rss_mb_max"] = max(rss.between(window_start, window_end), default=None)
        results["cleaner_off"] = latency_off
        progress.step("trafka", "produce latency, cleaner off", latency_off)
        stop_keeping_data(off)
        live.remove(off)
        segments = sorted((data_dir / f"{COMPACTED}-0").glob("*.log"))
        section_bytes = sum(path.stat().st_size for path in segments[:-1])  # all but the active segment

        # 3. Restart with the cleaner on; the same latency workload; the topic becomes compacted a few
        #    seconds into it, and the cleaner compacts it while the workload runs.
        on = brokers.start(broker_spec(data_dir, {"log.cleaner.backoff.ms": str(plan.backoff_ms)}))
        live.append(on)
        results["restart_ready_s"] = on.ready_s
        with RssSampler(on) as rss:
            holder: dict[str, Any] = {}
            latency_thread = threading.Thread(
                target=lambda: holder.update(result=run_workload(latency_params(on, plan), WORKLOAD_TIMEOUT_S)))
            window_start = time.monotonic()
            latency_thread.start()
            time.sleep(plan.compact_after_s)
            set_cleanup_policy(on.bootstrap, COMPACTED, "compact")
            cleaning = watch_cleaning(on, f"{COMPACTED}-0", CLEANING_TIMEOUT_S)
            latency_thread.join()
            window_end = time.monotonic()
            time.sleep(1.0)  # RSS after the cleaning
        latency_on = holder["result"]
        samples_on = latency_on.pop("samples", [])
        start, done = cleaning["started_at"], cleaning["done_at"]
        before = rss.between(window_start, start)
        during = rss.between(start, done)
        after = rss.between(done + 0.5, time.monotonic())
        cleaning["rss_mb_before"] = before[-1] if before else None
        cleaning["rss_mb_max"] = max(during, default=None)
        cleaning["rss_mb_median"] = statistics.median(during) if during else None
        cleaning["rss_mb_after"] = after[-1] if after else None
        cleaning["partition_bytes_after"] = partition_size(on.bootstrap, COMPACTED)
        # The section cleaned: the log below its active segment. (The cleaner's own read figures count
        # what it read from the files, which is more where batches are larger than its I/O buffer.)
        cleaning["section_mb"] = section_bytes / MB
        cleaning["throughput_mb_per_s"] = cleaning["section_mb"] / cleaning["wall_s"]
        cleaning["io_mb_per_s"] = (cleaning["mapped_mb"] + cleaning["read_mb"] + cleaning["written_mb"]) \
            / cleaning["wall_s"]
        # The latency of the records produced while the cleaner ran, and of the same stretch of the
        # cleaner-off window (as far from its start).
        offset_start, offset_end = start - window_start, done - window_start
        latency_on["while_cleaning"] = percentiles(in_window(samples_on, start, done))
        latency_on["window_s"] = [round(offset_start, 2), round(offset_end, 2)]
        first_off = min((sent for sent, _ in samples_off), default=0) / 1e9 - 1.0  # the off window's start
        latency_off["same_stretch"] = percentiles(
            in_window(samples_off, first_off + offset_start, first_off + offset_end))
        latency_on["rss_mb_max"] = max(rss.between(window_start, window_end), default=None)
        for key in ("started_at", "done_at"):
            cleaning[key.replace("_at", "_s_into_window")] = round(cleaning.pop(key) - window_start, 3)
        results["cleaning"] = cleaning
        results["cleaner_on"] = latency_on
        progress.step("trafka", f"cleaning {cleaning['section_mb']:,.0f} MB", {
            "mb_per_s": cleaning["throughput_mb_per_s"], "records_per_s": cleaning["records_read"] / cleaning["wall_s"],
            "rss_mb": cleaning["rss_mb_max"] or 0.0})
        progress.step("trafka", "produce latency, cleaner on", latency_on)
        stop_keeping_data(on)
        live.remove(on)
    finally:
        for broker in live:  # stopped before their data directory goes
            broker.stop()
        live.clear()
        shutil.rmtree(data_dir, ignore_errors=True)
    return results


def _ms(result: dict[str, Any], key: str) -> str:
    value = result.get(key)
    return f"{value:.1f} ms" if isinstance(value, (int, float)) else "n/a"


def _mb(value: Any) -> str:
    return f"{value:.0f}" if isinstance(value, (int, float)) else "n/a"


def report(plan: CleanerPlan, document: dict[str, Any]) -> str:
    r = document["results"]
    fill, cleaning, off, on = r["fill"], r["cleaning"], r["cleaner_off"], r["cleaner_on"]
    begin, end = on["window_s"]
    lines = [
        f"Log cleaner, {document['started_at']} ({document['duration_s']:.0f} s), `{document['command']}`",
        "",
        "| figure | value |",
        "|---|---|",
        f"| fill: {fill['records']:,} records of {plan.record_size} B under {plan.keys:,} keys "
        f"| {fill['seconds']:.1f} s ({fill['mb_per_s']:.0f} MB/s of values), partition "
        f"{fill['partition_bytes'] / MB:,.0f} MB |",
        f"| section cleaned (the log below its active segment) | {cleaning['section_mb']:,.0f} MB, "
        f"{cleaning['records_read']:,} records, rewritten in {cleaning['segment_groups']} segment group(s) |",
        f"| cleaning wall time | {cleaning['wall_s']:.2f} s |",
        f"| **cleaner throughput** | **{cleaning['throughput_mb_per_s']:.0f} MB/s** of log "
        f"({cleaning['records_read'] / cleaning['wall_s']:,.0f} records/s; "
        f"the cleaner's files: {cleaning['mapped_mb'] + cleaning['read_mb']:,.0f} MB read, "
        f"{cleaning['written_mb']:,.0f} MB written, {cleaning['io_mb_per_s']:.0f} MB/s in all) |",
        f"| records kept | {cleaning['records_kept']:,} of {cleaning['records_read']:,}; partition "
        f"{fill['partition_bytes'] / MB:,.0f} MB -> {cleaning['partition_bytes_after'] / MB:,.1f} MB |",
        f"| broker RSS: before cleaning / **peak while cleaning** / median while cleaning / after | "
        f"{_mb(cleaning['rss_mb_before'])} / **{_mb(cleaning['rss_mb_max'])}** / {_mb(cleaning['rss_mb_median'])} / "
        f"{_mb(cleaning['rss_mb_after'])} MB |",
        "",
        f"Produce latency into another topic: 1 KB records at {plan.latency_mb_per_s:g} MB/s, acks=1, "
        f"linger.ms={plan.latency_linger_ms}, for {plan.latency_seconds:g} s (the first second is warm-up). With the "
        f"cleaner on, the cleaner ran from {begin:.1f} s to {end:.1f} s into the window; 'same stretch' is the "
        f"records produced as far into the cleaner-off window.",
        "",
        "| | records | p50 | p99 | p99.9 | max | broker RSS max |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [
        ("cleaner off (log.cleaner.enable=false), whole window", off, off.get("rss_mb_max")),
        ("cleaner off, same stretch", off.get("same_stretch", {}), None),
        ("cleaner on, whole window", on, on.get("rss_mb_max")),
        ("**cleaner on, while it cleans**", on.get("while_cleaning", {}), None),
    ]
    for name, result, rss in rows:
        lines.append(f"| {name} | {result.get('measured', 0):,} | {_ms(result, 'p50_ms')} | {_ms(result, 'p99_ms')} | "
                     f"{_ms(result, 'p999_ms')} | {_ms(result, 'max_ms')} | {_mb(rss) + ' MB' if rss else ''} |")
    for name, result in (("cleaner off", off), ("cleaner on", on)):
        if "error" in result:
            lines.append(f"\n{name}: ERROR {result['error']}")
    return "\n".join(lines) + "\n"


def settings(plan: CleanerPlan) -> dict[str, str]:
    return {
        "broker": "python -m trafka --port 0 --data-dir <tmp> --log-level INFO; fill and cleaner-off steps with "
                  "--override log.cleaner.enable=false, cleaner-on step restarted on the same data directory with "
                  f"--override log.cleaner.backoff.ms={plan.backoff_ms} (the other cleaner settings Kafka's "
                  "defaults: log.cleaner.threads=1, log.cleaner.dedupe.buffer.size=134217728, "
                  "log.cleaner.io.max.bytes.per.second unlimited)",
        "compacted_topic": f"1 partition, cleanup.policy=compact, segment.bytes={plan.segment_bytes}, "
                           "min.cleanable.dirty.ratio 0.5 and min.compaction.lag.ms 0 (defaults)",
        "fill": f"confluent-kafka, acks=1, linger.ms=20, batch.size=1048576, compression none, "
                f"{plan.record_size} B random values, keys key-000000.. taken in turn ({plan.keys} keys), "
                f"{plan.log_bytes} bytes of values",
        "latency": f"confluent-kafka, topic '{LATENCY}' (1 partition, cleanup.policy=delete), 1 KB records paced at "
                   f"{plan.latency_mb_per_s:g} MB/s, acks=1, linger.ms={plan.latency_linger_ms}, batch.size=1048576, "
                   f"{plan.latency_seconds:g} s; latency = librdkafka's Message.latency() (produce() to "
                   "acknowledgement); the first second is warm-up; with the cleaner on it starts as soon as the "
                   "restarted broker is ready",
        "rss": "VmRSS of the broker process every 50 ms",
        "throughput": "bytes of the section cleaned (the cleaner's 'mapped' figure: the log below the active "
                      "segment) over the wall time between the cleaner's 'cleaning' and 'cleaned' log lines",
    }


def main(argv: list[str] | None = None, quick: bool = False, output: Path | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench --cleaner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", default=quick)
    parser.add_argument("--output", type=Path, default=output)
    args = parser.parse_args(argv or [])
    plan = QUICK if args.quick else FULL
    brokers.byte_compile_trafka()
    signal.signal(signal.SIGTERM, lambda signum, frame: (_ for _ in ()).throw(KeyboardInterrupt()))
    started_at = datetime.datetime.now(datetime.timezone.utc)
    started = time.perf_counter()
    live: list[brokers.BrokerProcess] = []
    try:
        version = brokers.SPECS["trafka"].version()
        results = run(plan, Progress(4), live)
    except KeyboardInterrupt:
        print("\nbench: interrupted; broker stopped, temp dirs removed, nothing written", file=sys.stderr)
        return 130
    finally:
        for broker in live:
            broker.stop()
    document = {
        "mode": plan.mode,
        "started_at": started_at.isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "command": "python -m bench --cleaner" + (" --quick" if args.quick else ""),
        "machine": machine.describe({"trafka": version}),
        "plan": asdict(plan),
        "settings": settings(plan),
        "results": results,
    }
    text = report(plan, document)
    print(text)
    output_path = args.output or RESULTS_DIR / f"{started_at:%Y-%m-%d}-{plan.mode}.json"
    write_results(output_path, document, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
