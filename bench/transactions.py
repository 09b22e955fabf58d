"""Transactions: small transactions per second, a transactional producer's throughput beside an idempotent
one, and a read_committed consumer reading the transactional topics back, on trafka and Apache Kafka side
by side.

    python -m bench --transactions            # about 2 minutes on 2 cores
    python -m bench --transactions --quick    # about 40 s
    python -m bench --transactions --brokers trafka   # one broker only (trafka, kafka)

confluent-kafka (librdkafka) is the client, every step in a fresh client process
(``python -m bench.transactions --workload JSON``, one JSON line out). Both brokers are started first and
each step then runs on them in turns (the order alternating), so that the machine's slow spells fall on
both alike. Steps:

0. **Warm-up** (not reported but for its first ``init_transactions()``): a transactional producer's first
   InitProducerId, which on both brokers creates the transaction state topic, then 5 s (the quick run:
   2 s) of small transactions: Kafka's JIT compiler is seconds old otherwise, and its figures climb
   run after run for the first 10-20 s. Each small-transaction window below is preceded by 1 s (0.5 s)
   of the same, not counted.
1. **Small transactions**: one transactional producer, ``begin_transaction()`` / ``produce()`` N records
   of 100 B to partition 0 of a 1-partition topic / ``commit_transaction()``, in a loop for a fixed
   window, N = 1 and N = 10: transactions per second, and the duration of each ``commit_transaction()``
   call (p50, p99, max; it includes sending the records, since librdkafka flushes them in the commit)
   and of each whole transaction.
2. **Transactional beside idempotent producer**: the same record sizes (100 B and 1 KB), the same client
   settings (``linger.ms=5``, ``batch.size`` 1 MiB, compression none, random payload, no key, acks=all,
   which both imply), each on its own 1-partition topic; the transactional one commits every
   ``commit_every`` records. Time from the first ``produce()`` to the last ``commit_transaction()`` (to
   ``flush()`` for the idempotent one) returning; ``repeats`` runs of each, in turns, median.
3. **Aborted transactions** (a check): another transactional producer writes ``aborted`` transactions of
   ``commit_every`` records into each transactional topic and aborts them, then commits one more.
4. **read_committed consumer**: each transactional topic read back from its start (assign, no group) up
   to its end (``enable.partition.eof``), with ``isolation.level=read_committed``, then with
   ``read_uncommitted`` for comparison: records/s from the first batch to the last, and the check that
   read_committed returned exactly the records of committed transactions (and read_uncommitted those
   plus the aborted ones).

Results: ``bench/results/<date>-transactions.json`` and ``.md`` (``-transactions-quick`` for ``--quick``).
"""
from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import brokers, common
from bench.common import in_turns, lookup, size_label
from bench.workloads import _CpuWindow, _quiet, _rate

WORKLOAD_TIMEOUT_S = 300.0
INIT_TIMEOUT_S = 60.0  # the first InitProducerId creates the transaction state topic (50 partitions)
OPERATION_TIMEOUT_S = 30.0
CONSUME_IDLE_S = 15.0
MB = 1_000_000
SUPPORTED = ("trafka", "kafka")
TRANSACTIONAL, IDEMPOTENT = "transactional", "idempotent"


@dataclass(frozen=True)
class TxnPlan:
    mode: str
    small_records: tuple[int, ...]  # records per small transaction
    small_size: int
    small_seconds: float  # window of each small-transaction run
    first_warmup_seconds: float  # small transactions on each broker before anything is measured
    warmup_seconds: float  # small transactions before each small-transaction window, not counted
    records: tuple[tuple[int, int], ...]  # (record size, record count) per throughput run
    commit_every: int
    repeats: int
    aborted: int  # aborted transactions (of commit_every records) written for the read_committed check
    linger_ms: int = 5
    batch_size: int = 1_048_576


FULL = TxnPlan(mode="transactions", small_records=(1, 10), small_size=100, small_seconds=8.0,
               first_warmup_seconds=5.0, warmup_seconds=1.0, records=((100, 500_000), (1024, 200_000)),
               commit_every=1000, repeats=3, aborted=5)
QUICK = TxnPlan(mode="transactions-quick", small_records=(1, 10), small_size=100, small_seconds=2.0,
                first_warmup_seconds=2.0, warmup_seconds=0.5, records=((100, 100_000), (1024, 30_000)),
                commit_every=1000, repeats=1, aborted=3)


# ---------------------------------------------------------------------------------------------------
# Workloads: each runs in a fresh client process and returns one JSON-able dict.


def _percentiles(values_s: list[float]) -> dict[str, float]:
    ordered = sorted(values_s)
    if not ordered:
        return {}
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": ordered[-1] * 1000,
            "mean_ms": sum(ordered) / len(ordered) * 1000}


def _transactional_producer(p: dict[str, Any], errors: list[str]) -> tuple[Any, float]:
    """A transactional producer after init_transactions(), retried until INIT_TIMEOUT_S (a broker answers
    COORDINATOR_NOT_AVAILABLE until its transaction state topic is ready); with the seconds it took."""
    from confluent_kafka import KafkaException, Producer

    def on_delivery(err: Any, msg: Any) -> None:  # called for failed records only
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    producer = Producer(_quiet({
        "bootstrap.servers": p["bootstrap"],
        "transactional.id": p["transactional_id"],
        "linger.ms": p.get("linger_ms", 5),
        "batch.size": p.get("batch_size", 1_048_576),
        "compression.type": "none",
        "queue.buffering.max.messages": 1_000_000,
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
    }))
    started = time.perf_counter()
    deadline = started + p.get("init_timeout_s", INIT_TIMEOUT_S)
    while True:
        try:
            producer.init_transactions(max(1.0, min(OPERATION_TIMEOUT_S, deadline - time.perf_counter())))
            break
        except KafkaException as exc:
            error = exc.args[0]
            if time.perf_counter() >= deadline or not (error.retriable() or error.code() in (-185,)):  # _TIMED_OUT
                raise
            time.sleep(0.2)
    return producer, time.perf_counter() - started


def small_transactions(p: dict[str, Any]) -> dict[str, Any]:
    """begin / ``records`` x ``size`` B to partition 0 / commit, for ``warmup_s`` (not counted) and then
    for ``seconds``: transactions/s, commit_transaction() durations, whole-transaction durations."""
    errors: list[str] = []
    producer, init_s = _transactional_producer(p, errors)
    topic, n = p["topic"], p["records"]
    producer.list_topics(topic, timeout=OPERATION_TIMEOUT_S)
    value = os.urandom(p["size"])
    produce_one = producer.produce

    def one() -> tuple[float, float]:
        begun = time.perf_counter()
        producer.begin_transaction()
        for _ in range(n):
            produce_one(topic, value, partition=0)
        committing = time.perf_counter()
        producer.commit_transaction(OPERATION_TIMEOUT_S)
        done = time.perf_counter()
        return done - committing, done - begun

    warmup_end = time.perf_counter() + p.get("warmup_s", 0.0)
    while time.perf_counter() < warmup_end:
        one()
    cpu = _CpuWindow(p.get("broker_pid"))
    commits: list[float] = []
    whole: list[float] = []
    started = time.perf_counter()
    end = started + p["seconds"]
    error = None
    try:
        while time.perf_counter() < end:
            commit_s, txn_s = one()
            commits.append(commit_s)
            whole.append(txn_s)
    except Exception as exc:  # noqa: BLE001  (a broker error ends the window; the figure so far stands)
        error = f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - started
    result: dict[str, Any] = {
        "init_transactions_s": init_s,
        "transactions": len(commits),
        "records": len(commits) * n,
        "txn_per_s": len(commits) / elapsed,
        "records_per_s": len(commits) * n / elapsed,
        "seconds": elapsed,
        "commit": _percentiles(commits),
        "transaction": _percentiles(whole),
        **cpu.cores(elapsed),
    }
    if error or errors:
        result["error"] = "; ".join(filter(None, [error, *errors]))
    return result


def producer_throughput(p: dict[str, Any]) -> dict[str, Any]:
    """``count`` records of ``size`` bytes from an idempotent producer (time to flush()) or a transactional
    one committing every ``commit_every`` records (time to the last commit_transaction())."""
    from confluent_kafka import Producer

    errors: list[str] = []
    transactional = p["producer"] == TRANSACTIONAL
    init_s = None
    if transactional:
        producer, init_s = _transactional_producer(p, errors)
    else:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None and len(errors) < 5:
                errors.append(str(err))

        producer = Producer(_quiet({
            "bootstrap.servers": p["bootstrap"],
            "enable.idempotence": True,
            "linger.ms": p.get("linger_ms", 5),
            "batch.size": p.get("batch_size", 1_048_576),
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
        }))
    topic, count, every = p["topic"], p["count"], p.get("commit_every", 0)
    producer.list_topics(topic, timeout=OPERATION_TIMEOUT_S)  # leaders known before the clock starts
    value = os.urandom(p["size"])
    if not transactional:
        # The producer id before the clock starts, as init_transactions() gets it for the transactional
        # one: librdkafka asks for it on a 500 ms retry timer when no broker connection was up at its
        # first try, which on a broker that answers the first Metadata quickly is every time.
        producer.produce(topic, value)
        producer.flush(OPERATION_TIMEOUT_S)
    produce_one, poll = producer.produce, producer.poll
    commits: list[float] = []
    cpu = _CpuWindow(p.get("broker_pid"))
    started = time.perf_counter()
    deadline = started + WORKLOAD_TIMEOUT_S - 30
    sent = committed = in_txn = 0
    error = None
    try:
        while sent < count and time.perf_counter() < deadline:
            if transactional and in_txn == 0:
                producer.begin_transaction()
            try:
                produce_one(topic, value)
            except BufferError:
                poll(0.001)
                continue
            sent += 1
            in_txn += 1
            if transactional and (in_txn == every or sent == count):
                at = time.perf_counter()
                producer.commit_transaction(OPERATION_TIMEOUT_S)
                commits.append(time.perf_counter() - at)
                committed += in_txn
                in_txn = 0
        if transactional and in_txn:
            producer.commit_transaction(OPERATION_TIMEOUT_S)
            committed += in_txn
            in_txn = 0
        if not transactional:
            remaining = producer.flush(max(0.0, deadline - time.perf_counter()))
            committed = sent - remaining
    except Exception as exc:  # noqa: BLE001
        error = f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - started
    result: dict[str, Any] = {**_rate(committed, p["size"], elapsed), "records": committed, "sent": sent,
                              **cpu.cores(elapsed)}
    if transactional:
        result.update(init_transactions_s=init_s, commits=len(commits), commit=_percentiles(commits))
    if error or errors or committed < count:
        result["error"] = "; ".join(filter(None, [error, *errors])) or f"{committed}/{count} records"
    return result


def aborted_transactions(p: dict[str, Any]) -> dict[str, Any]:
    """``aborted`` transactions of ``per_txn`` records, each flushed and then aborted; then one committed
    transaction of ``per_txn`` records (so that the aborted ones lie below the last stable offset)."""
    errors: list[str] = []
    producer, _ = _transactional_producer(p, errors)
    topic, per_txn = p["topic"], p["per_txn"]
    producer.list_topics(topic, timeout=OPERATION_TIMEOUT_S)
    value = os.urandom(p["size"])
    aborted = committed = 0
    for _ in range(p["aborted"]):
        producer.begin_transaction()
        for _ in range(per_txn):
            producer.produce(topic, value)
        producer.flush(OPERATION_TIMEOUT_S)  # on the broker, in the log, before the abort
        producer.abort_transaction(OPERATION_TIMEOUT_S)
        aborted += per_txn
    producer.begin_transaction()
    for _ in range(per_txn):
        producer.produce(topic, value)
    producer.commit_transaction(OPERATION_TIMEOUT_S)
    committed += per_txn
    result: dict[str, Any] = {"aborted_records": aborted, "committed_records": committed}
    if errors:
        result["error"] = "; ".join(errors)
    return result


def read_back(p: dict[str, Any]) -> dict[str, Any]:
    """Partition 0 of ``topic`` from its start to its end (the first partition EOF: the topic is no longer
    written, so the end is the high watermark, or the last stable offset for read_committed) with
    ``isolation``: records, records/s from the first batch to the last."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    created = time.perf_counter()
    consumer = Consumer(_quiet({
        "bootstrap.servers": p["bootstrap"],
        "group.id": "bench-transactions",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": p["isolation"],
        "fetch.queue.backoff.ms": 10,  # as bench.workloads.consume: no 1 s pause at 100,000 queued records
    }))
    topic = p["topic"]
    consumer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    cpu = _CpuWindow(p.get("broker_pid"))
    received = first_batch = 0
    first_at = last_at = None
    idle_since = time.perf_counter()
    error = None
    eof = False
    last_offset = -1
    try:
        while not eof:
            messages = consumer.consume(10_000, 0.01)  # a longer wait would end the last batch late
            now = time.perf_counter()
            got = 0
            for message in messages:
                err = message.error()
                if err is None:
                    got += 1
                    if message.offset() <= last_offset:
                        error = error or f"offset {message.offset()} after {last_offset}"
                    last_offset = message.offset()
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof = True
                else:
                    error = error or str(err)
            if got:
                if first_at is None:
                    first_at, first_batch = now, got
                    cpu.restart()
                received += got
                last_at = idle_since = now
            elif not eof and now - idle_since > CONSUME_IDLE_S:
                error = error or f"no end of partition after {CONSUME_IDLE_S:.0f} s idle"
                break
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    result: dict[str, Any] = {"records": received, "high_watermark": high, "last_offset": last_offset}
    steady_s = last_at - first_at if first_at is not None and last_at is not None else 0.0
    if steady_s > 0:
        result.update(_rate(received - first_batch, p["size"], steady_s))
        result["first_record_s"] = first_at - created
        result.update(cpu.cores(steady_s))
    if error:
        result["error"] = error
    return result


WORKLOADS = {
    "small_transactions": small_transactions,
    "producer_throughput": producer_throughput,
    "aborted_transactions": aborted_transactions,
    "read_back": read_back,
}


def run_workload(params: dict[str, Any], timeout: float = WORKLOAD_TIMEOUT_S) -> dict[str, Any]:
    return common.run_workload("bench.transactions", params, timeout)


# ---------------------------------------------------------------------------------------------------
# The harness


class Progress:
    def __init__(self, total: int) -> None:
        self.total, self.done, self.started = total, 0, time.perf_counter()

    def step(self, broker: str, what: str, result: dict[str, Any]) -> None:
        self.done += 1
        elapsed = int(time.perf_counter() - self.started)
        parts = []
        if "txn_per_s" in result:
            parts.append(f"{result['txn_per_s']:,.0f} txn/s, commit p50 {result['commit'].get('p50_ms', 0):.2f} ms "
                         f"p99 {result['commit'].get('p99_ms', 0):.2f} ms")
        elif "records_per_s" in result:
            parts.append(f"{result['records_per_s']:,.0f} rec/s {result.get('mb_per_s', 0):.1f} MB/s")
        if "records" in result and "txn_per_s" not in result:
            parts.append(f"{result['records']:,} records")
        if "aborted_records" in result:
            parts.append(f"{result['aborted_records']:,} aborted, {result['committed_records']:,} committed")
        if "init_transactions_s" in result and result["init_transactions_s"] is not None and "txn_per_s" in result:
            parts.append(f"init_transactions {result['init_transactions_s']:.2f} s")
        if "error" in result:
            parts.append(f"ERROR {result['error'][:160]}")
        print(f"[{self.done:3d}/{self.total} {elapsed // 60:02d}:{elapsed % 60:02d}] {broker:<6} {what:<44} "
              f"{'; '.join(parts)}", file=sys.stderr, flush=True)


class Subject:
    """One broker: its process, its results, whether it serves transactional producers."""

    def __init__(self, broker: brokers.BrokerProcess, progress: Progress) -> None:
        self.broker, self.name, self.progress = broker, broker.spec.name, progress
        self.results: dict[str, Any] = {"start_to_ready_s": broker.ready_s}
        self.serves_transactions = True

    def run(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.serves_transactions:
            return {"error": "skipped: the broker did not serve a transactional producer (warm-up)"}
        params = {"bootstrap": self.broker.bootstrap, "broker_pid": self.broker.pid, **params}
        if params["workload"] != "read_back" and params.get("producer") != IDEMPOTENT:
            params["transactional_id"] = f"bench-{params['topic']}-{uuid.uuid4().hex[:8]}"
        result = run_workload(params)
        if not self.broker.alive():
            result["error"] = f"broker exited: {self.broker.log_tail(5)}"
        return result

    def topic(self, name: str) -> None:
        self.broker.create_topic(name, 1)


def throughput_topic(size: int, producer: str) -> str:
    return f"txn-{size}-{producer}"


def run(plan: TxnPlan, subjects: list[Subject], progress: Progress) -> None:
    for s in subjects:
        throughput = [throughput_topic(size, kind) for size, _ in plan.records for kind in (IDEMPOTENT, TRANSACTIONAL)]
        for name in ["txn-warmup", *(f"txn-small-{n}" for n in plan.small_records), *throughput]:
            s.topic(name)
        s.results.update(small={}, produce={}, aborted={}, read_back={})

    # 0. Warm-up: the first transactional producer on each broker.
    for s in subjects:
        warm = s.run({"workload": "small_transactions", "topic": "txn-warmup", "records": 10,
                      "size": plan.small_size, "seconds": plan.first_warmup_seconds, "warmup_s": 0.0})
        s.results["warmup"] = warm
        progress.step(s.name, "warm-up (first init_transactions)", warm)
        if "txn_per_s" not in warm or not warm.get("transactions"):
            s.serves_transactions = False

    # 1. Small transactions, on each broker in turn.
    for n in plan.small_records:
        cell = in_turns(subjects, 1, lambda s: s.run({
            "workload": "small_transactions", "topic": f"txn-small-{n}", "records": n, "size": plan.small_size,
            "seconds": plan.small_seconds, "warmup_s": plan.warmup_seconds}))
        for s in subjects:
            s.results["small"][f"{n} x {size_label(plan.small_size)}"] = cell[s]
            progress.step(s.name, f"small transactions, {n} x {size_label(plan.small_size)}", cell[s])

    # 2. Transactional beside idempotent: every (broker, producer) pair in turns, repeats rounds.
    committed: dict[tuple[str, int], int] = {}
    for size, count in plan.records:
        keys = [(s, kind) for kind in (IDEMPOTENT, TRANSACTIONAL) for s in subjects]
        runs: dict[tuple[Subject, str], list[dict[str, Any]]] = {key: [] for key in keys}

        def one(key: tuple[Subject, str]) -> dict[str, Any]:
            s, kind = key
            result = s.run({"workload": "producer_throughput", "producer": kind, "topic": throughput_topic(size, kind),
                            "count": count, "size": size, "commit_every": plan.commit_every,
                            "linger_ms": plan.linger_ms, "batch_size": plan.batch_size})
            runs[key].append(result)
            progress.step(s.name, f"{kind} produce {count:,} x {size_label(size)}", result)
            return result

        cell = in_turns(keys, plan.repeats, one)
        for (s, kind), result in cell.items():
            result = {**result, "records": sum(r.get("records", 0) for r in runs[(s, kind)]),
                      "runs_records_per_s": [r.get("records_per_s") for r in runs[(s, kind)]]}
            s.results["produce"][f"{size_label(size)} {kind}"] = result
            if kind == TRANSACTIONAL:
                committed[(s.name, size)] = result["records"]

    # 3. Aborted transactions into each transactional topic, then 4. read back.
    for size, _ in plan.records:
        for s in subjects:
            result = s.run({"workload": "aborted_transactions", "topic": throughput_topic(size, TRANSACTIONAL),
                            "per_txn": plan.commit_every, "aborted": plan.aborted, "size": size})
            s.results["aborted"][size_label(size)] = result
            progress.step(s.name, f"{plan.aborted} aborted + 1 committed txn, {size_label(size)}", result)
    for size, _ in plan.records:
        for isolation in ("read_committed", "read_uncommitted"):
            cell = in_turns(subjects, 1, lambda s: s.run({
                "workload": "read_back", "topic": throughput_topic(size, TRANSACTIONAL), "isolation": isolation,
                "size": size}))
            for s in subjects:
                result = cell[s]
                aborted = s.results["aborted"][size_label(size)]
                expected = committed.get((s.name, size), 0) + aborted.get("committed_records", 0)
                if isolation == "read_uncommitted":
                    expected += aborted.get("aborted_records", 0)
                result["expected"] = expected
                result["count_ok"] = result.get("records") == expected and "error" not in aborted
                s.results["read_back"][f"{size_label(size)} {isolation}"] = result
                progress.step(s.name, f"{isolation} {size_label(size)} (expect {expected:,})", result)


# ---------------------------------------------------------------------------------------------------
# Reporting


def _get(results: dict[str, Any], *path: str) -> Any:
    return lookup(results, path)


def report(plan: TxnPlan, document: dict[str, Any]) -> str:
    by_broker: dict[str, dict[str, Any]] = document["results"]
    names = list(by_broker)
    ratio = "trafka" in names and "kafka" in names
    header = ["", *names, *(["trafka/kafka"] if ratio else [])]
    lines = [
        f"Transactions, {document['started_at']} ({document['duration_s']:.0f} s), `{document['command']}`; "
        f"load average (1 min) {document['machine']['load_average_before'][0]:.2f} before, "
        f"{document['machine']['load_average_after'][0]:.2f} after, on {document['machine']['cpu_cores']} cores",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]

    def row(label: str, path: tuple[str, ...], fmt: str, compare: bool = False) -> None:
        values = [_get(by_broker[n], *path) for n in names]
        cells = [format(v, fmt) if isinstance(v, (int, float)) else "n/a" for v in values]
        if ratio:
            t, k = _get(by_broker["trafka"], *path), _get(by_broker["kafka"], *path)
            cells.append(f"{t / k:.2f}x" if compare and isinstance(t, (int, float)) and isinstance(k, (int, float))
                         and k else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("start to ready (s)", ("start_to_ready_s",), ".2f")
    row("first init_transactions() (s)", ("warmup", "init_transactions_s"), ".2f")
    for n in plan.small_records:
        key = f"{n} x {size_label(plan.small_size)}"
        row(f"**small txns, {key}: txn/s**", ("small", key, "txn_per_s"), ",.0f", True)
        row(f"small txns, {key}: commit p50 (ms)", ("small", key, "commit", "p50_ms"), ".2f")
        row(f"small txns, {key}: commit p99 (ms)", ("small", key, "commit", "p99_ms"), ".2f")
        row(f"small txns, {key}: commit max (ms)", ("small", key, "commit", "max_ms"), ".1f")
        row(f"small txns, {key}: whole txn p50 (ms)", ("small", key, "transaction", "p50_ms"), ".2f")
        cells = []
        for n in names:
            b, c = _get(by_broker[n], "small", key, "broker_cores"), _get(by_broker[n], "small", key, "client_cores")
            cells.append(f"{b:.2f} / {c:.2f}" if b is not None and c is not None else "n/a")
        lines.append(f"| small txns, {key}: cores busy, broker / client | " + " | ".join(cells)
                     + (" | |" if ratio else " |"))
    for size, count in plan.records:
        label = size_label(size)
        for kind in (IDEMPOTENT, TRANSACTIONAL):
            what = kind if kind == IDEMPOTENT else f"transactional, commit every {plan.commit_every:,}"
            row(f"**produce {label}, {what} (rec/s)**", ("produce", f"{label} {kind}", "records_per_s"), ",.0f", True)
            row(f"produce {label}, {what} (MB/s)", ("produce", f"{label} {kind}", "mb_per_s"), ".1f", True)
        for q in ("p50", "p99"):
            row(f"produce {label}, transactional: commit {q} (ms)",
                ("produce", f"{label} {TRANSACTIONAL}", "commit", f"{q}_ms"), ".2f")
        for n in names:
            i = _get(by_broker[n], "produce", f"{label} {IDEMPOTENT}", "records_per_s")
            t = _get(by_broker[n], "produce", f"{label} {TRANSACTIONAL}", "records_per_s")
            by_broker[n].setdefault("derived", {})[f"{label} transactional/idempotent"] = t / i if i and t else None
        row(f"produce {label}: transactional / idempotent", ("derived", f"{label} transactional/idempotent"), ".2f")
    for size, _ in plan.records:
        label = size_label(size)
        for isolation in ("read_committed", "read_uncommitted"):
            row(f"**consume {label}, {isolation} (rec/s)**" if isolation == "read_committed" else
                f"consume {label}, {isolation} (rec/s)", ("read_back", f"{label} {isolation}", "records_per_s"),
                ",.0f", True)
    lines += ["", "Count check (records read back / records expected: committed, or committed + aborted for "
              "read_uncommitted):", "", "| | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for size, _ in plan.records:
        label = size_label(size)
        for isolation in ("read_committed", "read_uncommitted"):
            cells = []
            for n in names:
                r = _get(by_broker[n], "read_back", f"{label} {isolation}") or {}
                if "expected" not in r:
                    cells.append("n/a")
                    continue
                mark = "ok" if r.get("count_ok") else "**MISMATCH**"
                cells.append(f"{r.get('records', 0):,} / {r['expected']:,} {mark}")
            lines.append(f"| {label} {isolation} | " + " | ".join(cells) + " |")
    errors = []
    for n in names:
        for section in ("warmup", "small", "produce", "aborted", "read_back"):
            value = by_broker[n].get(section) or {}
            items = [("", value)] if section == "warmup" else list(value.items())
            for key, r in items:
                if isinstance(r, dict) and "error" in r:
                    errors.append(f"- {n} {section} {key}: {r['error']}")
    if errors:
        lines += ["", "Errors:", "", *errors]
    for note in document.get("notes", []):
        lines += ["", note]
    return "\n".join(lines) + "\n"


def settings(plan: TxnPlan) -> dict[str, str]:
    return {
        "client": "confluent-kafka (librdkafka), every step a fresh process; producers: linger.ms="
                  f"{plan.linger_ms}, batch.size={plan.batch_size}, compression none, no key, random payload, "
                  "queue.buffering.max.messages=1000000; the transactional producer has a transactional.id of "
                  "its own per run (acks=all and idempotence implied), the idempotent one enable.idempotence=true "
                  "(acks=all implied)",
        "small_transactions": f"begin_transaction / produce N x {plan.small_size} B to partition 0 / "
                              f"commit_transaction, for {plan.small_seconds:g} s after {plan.warmup_seconds:g} s of "
                              "the same not counted; commit = duration of the commit_transaction() call",
        "throughput": f"{', '.join(f'{c:,} x {size_label(s)}' for s, c in plan.records)}; transactional commits every "
                      f"{plan.commit_every} records; time from the first produce() to the last commit_transaction() "
                      f"(idempotent: flush()) returning; {plan.repeats} run(s) each, in turns, median",
        "read_back": "assign() partition 0 from the beginning, no group, enable.partition.eof, "
                     "fetch.queue.backoff.ms=10; rate from the first batch to the last; reads to the first EOF",
        "topics": "1 partition each, replication factor 1, created before the clock starts",
        "trafka": "python -m trafka --port 0 --data-dir <tmp> --log-level WARNING (bench.brokers)",
        "kafka": brokers.kafka_settings(),
    }


def main(argv: list[str] | None = None, quick: bool = False, output: Path | None = None,
         brokers_arg: str = ",".join(SUPPORTED)) -> int:
    notes: list[str] = []
    parsed = common.parse_mode("python -m bench --transactions", __doc__, argv, quick, output, brokers_arg,
                               SUPPORTED, notes, client=lambda params: WORKLOADS[params["workload"]](params))
    if parsed is None:
        return 0
    args, names = parsed
    plan = QUICK if args.quick else FULL

    start = common.RunStart()
    per_broker = 1 + len(plan.small_records) + len(plan.records) * (2 * plan.repeats + 1 + 2)
    progress = Progress(per_broker * len(names))
    live: list[brokers.BrokerProcess] = []
    by_broker: dict[str, dict[str, Any]] = {}
    try:
        versions = {n: brokers.SPECS[n].version() for n in names}
        subjects = []
        for name in names:
            broker = brokers.start(brokers.SPECS[name])
            live.append(broker)
            print(f"bench: {name} ready at {broker.bootstrap} in {broker.ready_s:.2f} s", file=sys.stderr, flush=True)
            subjects.append(Subject(broker, progress))
        run(plan, subjects, progress)
        for s in subjects:
            output_tail = common.stop_broker(s.broker, live, s.results, tail=100)
            by_broker[s.name] = {"version": versions[s.name], **s.results, "broker_output_tail": output_tail}
            if not s.serves_transactions:
                notes.append(f"{s.name} did not serve a transactional producer: {s.results['warmup'].get('error')}")
    except KeyboardInterrupt:
        return common.interrupted()
    finally:
        common.stop_all(live)
    document = {
        **start.document(plan, "python -m bench --transactions" + (" --quick" if args.quick else ""), versions),
        "settings": settings(plan),
        "notes": notes,
        "results": by_broker,
    }
    common.publish(document, report(plan, document), args.output, start.started_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
