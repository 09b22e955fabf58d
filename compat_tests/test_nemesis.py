"""The cluster under the faults that are not crashes (Jepsen's nemeses), on a test network of its own
(compat_tests.netns): ZooKeeper and three brokers each on a host of their own, the clients on this process's host.

While idempotent acks=all producers (``min.insync.replicas=2``, unclean election off) write to every partition, a
transactional producer commits (and now and then aborts) transactions over two partitions of another topic, and a
read_committed consumer group reads them and commits its offsets, one fault after another, each healed before the
next:

1. a leader cut off from its followers, not from ZooKeeper nor its clients: it keeps the leadership in ZooKeeper,
   shrinks its ISR to itself and refuses writes it cannot replicate (NOT_ENOUGH_REPLICAS) until healed;
2. a leader cut off from everything: its ZooKeeper session expires, another replica of the ISR leads, and the
   deposed leader, healed, truncates whatever it took alone and follows;
3. a follower cut off from everything: out of the ISR, back once healed;
4. the cluster split into a majority (ZooKeeper, two brokers, the clients) and a minority (one broker);
5. a leader paused (SIGSTOP) past its ZooKeeper session, then resumed: it finds itself deposed.

Then every partition returns to a full ISR, every acknowledged record is read back exactly once in its partition's
order, with no gap, and the replicas are byte-identical; every committed transaction is read whole, no aborted one
is seen, one whose outcome the producer could not learn is whole or absent, and the group's committed offsets never
went backwards. ``TRAFKA_NEMESIS_SEED`` replays a run's choices."""
from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer

from compat_tests import netns
from compat_tests.clients import ConfluentClient
from compat_tests.cluster import Writer, check_sequence, replicas_identical, start_cluster, wait
from compat_tests.zookeeper import ZooKeeperServer

why_not = netns.available()
if why_not is not None:
    pytest.skip(f"no test network here: {why_not}", allow_module_level=True)

TOPIC = "nemesis"
PARTITIONS = 3
TXN_TOPIC = "nemesis-txn"
TXN_PARTITIONS = 2
#: Records per transaction, spread over the transactional topic's partitions.
TXN_RECORDS = 4
BROKERS = (1, 2, 3)
#: How long each fault lasts: longer than the ZooKeeper session (6 s) where a leader must be deposed.
FAULT_S = 8.0
RECOVERY_S = 60.0


@pytest.fixture
def network() -> Iterator[netns.TestNetwork]:
    with netns.TestNetwork(["zk", *(f"b{n}" for n in BROKERS)]) as net:
        yield net


def _leaders(cluster) -> dict[int, int]:
    return {partition: leader for partition, (leader, _, _) in cluster.metadata(TOPIC).items()}


def _full_isrs(cluster) -> bool:
    return all(isr == list(BROKERS) and leader in BROKERS for leader, _, isr in cluster.metadata(TOPIC).values())


class TransactionalWriter:
    """Transactions of TXN_RECORDS records ``txn:i``, one after another from a thread, about one in five aborted on
    purpose; each transaction's outcome kept: committed, aborted, or unknown (the producer could not learn it; it is
    then replaced by a new one with the same transactional id, which fences it)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.outcomes: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _producer(self) -> Producer:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "nemesis-txn",
                             "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000, "linger.ms": 5})
        while not self._stop.is_set():
            try:
                producer.init_transactions(30)
                return producer
            except KafkaException:
                time.sleep(0.5)
        return producer

    def _run(self) -> None:
        producer, txn = self._producer(), 0
        while not self._stop.is_set():
            txn += 1
            try:
                producer.begin_transaction()
                for i in range(TXN_RECORDS):
                    producer.produce(TXN_TOPIC, value=f"{txn}:{i}".encode(), partition=i % TXN_PARTITIONS)
                if txn % 5 == 0:
                    producer.abort_transaction(30)
                    self.outcomes[txn] = "aborted"
                else:
                    producer.commit_transaction(30)
                    self.outcomes[txn] = "committed"
            except KafkaException as exc:
                self.outcomes[txn] = "unknown"
                error = exc.args[0]
                try:
                    if error.txn_requires_abort():
                        producer.abort_transaction(30)
                        self.outcomes[txn] = "aborted"
                        continue
                except KafkaException:
                    pass
                producer = self._producer()  # a new producer with the same id: the old one fenced, its work ended
            time.sleep(0.05)

    def start(self) -> TransactionalWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)


class CommittedReader:
    """A read_committed member of a consumer group, committing after every batch; keeps what it read and every
    offset its group committed, in order."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-readers",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 30_000})
        self.consumer.subscribe([TXN_TOPIC])
        self.values: list[bytes] = []
        self.commits: dict[int, list[int]] = defaultdict(list)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            messages = [m for m in self.consumer.consume(100, 0.3) if m.error() is None]
            if not messages:
                continue
            self.values += [m.value() for m in messages]
            try:
                for committed in self.consumer.commit(asynchronous=False) or ():
                    if committed.error is None and committed.offset >= 0:
                        self.commits[committed.partition].append(committed.offset)
            except KafkaException:
                pass  # not committed (the coordinator moving): the next batch commits further

    def start(self) -> CommittedReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.consumer.close()


def check_transactions(outcomes: dict[int, str], values: list[bytes], what: str) -> None:
    """What a read_committed reader read of TransactionalWriter's transactions: none aborted, none in part, each
    once; with ``what`` = "everything", every committed one."""
    parts: dict[int, list[int]] = defaultdict(list)
    for value in values:
        txn, index = map(int, value.split(b":"))
        parts[txn].append(index)
    seen_aborted = [txn for txn in parts if outcomes.get(txn) == "aborted"]
    assert not seen_aborted, f"{what}: aborted transactions read: {seen_aborted[:10]}"
    partial = {txn: sorted(indexes) for txn, indexes in parts.items() if sorted(indexes) != list(range(TXN_RECORDS))}
    assert not partial, f"{what}: transactions read in part or twice: {dict(list(partial.items())[:5])}"
    if what == "everything":
        missing = [txn for txn, outcome in outcomes.items() if outcome == "committed" and txn not in parts]
        assert not missing, f"committed transactions missing: {missing[:10]}"


def test_acknowledged_records_survive_partitions_and_pauses(network: netns.TestNetwork, tmp_path: Path):
    seed = int(os.environ.get("TRAFKA_NEMESIS_SEED", time.time_ns() % 1_000_000))
    chance = random.Random(seed)
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper", host=network.address("zk"),
                                wrap=lambda command: network.command("zk", command)).start()
    cluster = transactions = reader = None
    writers: list[Writer] = []
    history: list[str] = [f"seed {seed}"]
    try:
        cluster = start_cluster(zookeeper, tmp_path / "cluster", {"unclean.leader.election.enable": "false"},
                                network=network)
        admin = ConfluentClient(cluster.bootstrap)
        admin.create_topic(TOPIC, PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"})
        admin.create_topic(TXN_TOPIC, TXN_PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"})
        wait(lambda: _full_isrs(cluster), "full ISRs at first")
        writers = [Writer(cluster.bootstrap, TOPIC, partition, **{"message.timeout.ms": 300_000}).start()
                   for partition in range(PARTITIONS)]
        transactions = TransactionalWriter(cluster.bootstrap).start()
        reader = CommittedReader(cluster.bootstrap).start()
        for writer in writers:
            writer.wait_for(20, "the first acknowledged records")
        wait(lambda: "committed" in transactions.outcomes.values(), "a committed transaction")
        brokers = {n: cluster.broker(n) for n in BROKERS}

        def host(node_id: int) -> str:
            return f"b{node_id}"

        def others(node_id: int) -> list[str]:
            return [host(n) for n in BROKERS if n != node_id]

        def recovered(what: str) -> None:
            wait(lambda: _full_isrs(cluster), f"full ISRs after {what} ({'; '.join(history)})", timeout=RECOVERY_S)
            for writer in writers:
                writer.wait_for(10, f"records acknowledged after {what}")

        def run(what: str, make_fault) -> None:
            history.append(what)
            with network.fault(seconds=FAULT_S * 3):  # (healed then at the latest, whatever happens)
                make_fault()
                time.sleep(FAULT_S)
            recovered(what)

        leader = _leaders(cluster)[chance.randrange(PARTITIONS)]
        run(f"leader {leader} cut off from its followers", lambda: network.isolate(host(leader), others(leader)))

        leader = _leaders(cluster)[chance.randrange(PARTITIONS)]
        run(f"leader {leader} cut off from everything", lambda: network.isolate(host(leader)))

        leaders = set(_leaders(cluster).values())
        follower = chance.choice([n for n in BROKERS if n not in leaders] or list(BROKERS))
        run(f"broker {follower} cut off from everything", lambda: network.isolate(host(follower)))

        minority = chance.choice(BROKERS)
        run(f"broker {minority} split from the majority",
            lambda: network.split([host(minority)], ["zk", netns.CLIENT, *others(minority)]))

        leader = _leaders(cluster)[chance.randrange(PARTITIONS)]
        history.append(f"leader {leader} paused")
        netns.pause(brokers[leader].pid)
        try:
            time.sleep(FAULT_S)
        finally:
            netns.resume(brokers[leader].pid)
        recovered(f"leader {leader} paused")
        wait(lambda: list(transactions.outcomes.values()).count("committed") > 5, "transactions after the faults")
    finally:
        for writer in writers:
            writer.stop()
        for worker in (transactions, reader):
            if worker is not None:
                worker.stop()
        try:
            if cluster is not None and writers:
                print("; ".join(history), "| acknowledged:", [len(w.acknowledged) for w in writers],
                      "| transactions:", dict(sorted(Counter(transactions.outcomes.values()).items())),
                      "| read by the group:", len(reader.values))
                for partition, writer in enumerate(writers):
                    assert not writer.failed, f"partition {partition}: {writer.failed[:3]} ({'; '.join(history)})"
                    records = ConfluentClient(cluster.bootstrap).consume(TOPIC, len(writer.acknowledged),
                                                                         partitions=[partition], timeout=60)
                    check_sequence([int(r.value) for r in records], writer.acknowledged)
                assert wait(lambda: replicas_identical(cluster, TOPIC, PARTITIONS), "byte-identical replicas")
                check_transactions(transactions.outcomes, reader.values, "what the group read")
                for partition, offsets in reader.commits.items():
                    assert offsets == sorted(offsets), f"the group's offsets of {partition} went back: {offsets}"
                check_transactions(transactions.outcomes, _read_committed(cluster.bootstrap), "everything")
                assert wait(lambda: replicas_identical(cluster, TXN_TOPIC, TXN_PARTITIONS), "identical replicas")
        finally:
            if cluster is not None:
                cluster.close()
            zookeeper.close()


def _read_committed(bootstrap: str) -> list[bytes]:
    """Every record of the transactional topic a read_committed reader gets, from the start to the end."""
    from confluent_kafka import TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-check", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(TXN_TOPIC, p, 0) for p in range(TXN_PARTITIONS)])
        values, ended = [], set()
        deadline = time.monotonic() + 60
        while len(ended) < TXN_PARTITIONS:
            assert time.monotonic() < deadline, "the transactional topic read to its end"
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    values.append(message.value())
                elif message.error().code() == -191:  # _PARTITION_EOF: at the last stable offset
                    ended.add(message.partition())
        return values
    finally:
        consumer.close()
