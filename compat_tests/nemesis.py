"""Faults, crashes among them, against a replicated cluster on a test network (trafka.broker.testing.network), and what
clients saw through them: the nemeses, the workload and the checker that test_nemesis.py runs briefly and
``python -m bench --nemesis`` for as long as asked, on trafka and on Apache Kafka 3.9 in ZooKeeper mode alike.

**The cluster**: ZooKeeper on host ``zk``, brokers 1-3 on hosts ``b1``-``b3``, the clients on this process's host
(``client``), with short timeouts (a ZooKeeper session of 6 s, ``replica.lag.time.max.ms`` 4 s), the internal
topics replicated three times with ``min.insync.replicas`` 2 and unclean leader election off (or on, to see what it
loses).

**The workload**: an idempotent acks=all producer per partition of ``nemesis`` (3 partitions, RF 3, min ISR 2)
writing 0, 1, 2, ...; a transactional producer committing (and one time in five aborting) transactions of four
records over the two partitions of ``nemesis-txn``; a read_committed consumer group member reading those and
committing its offsets after every batch.

**The nemeses** (each a fault made and, at its end, healed):

- ``leader-cut-from-followers``: a leader's links to the other brokers cut, not to ZooKeeper nor to clients;
- ``leader-isolated``: a leader cut off from everything; ``follower-isolated``: a broker that leads nothing;
- ``zookeeper-isolated``: a broker cut off from ZooKeeper only; ``controller-isolated``: the controller cut off;
- ``minority``: one broker split from ZooKeeper, the clients and the other brokers;
- ``one-way``: a leader's packets to its followers dropped, theirs to it not;
- ``lossy``: 30% of the packets between the brokers lost at random;
- ``slow-links``: the links between brokers slowed by 80-120 ms each way (a relay per broker: no ``tc netem``);
- ``leader-paused``: a leader stopped (SIGSTOP) past its ZooKeeper session, then resumed;
- ``broker-killed``: a broker killed (SIGKILL), a leader of some partitions and a follower of others; healed, it is
  started again on its port, as often as it is refused while its old ZooKeeper session lasts (both brokers refuse
  a restart then);
- ``follower-then-the-isr``: a follower cut off until it falls out of a partition's ISR, then, with it back, the
  partition's leader and its other follower cut off: the partition has no ISR member left to lead, and with unclean
  election on the follower that fell behind leads (losing what was acknowledged without it, as Kafka documents).

**The checker** (:func:`verdict`), once healed: every acknowledged record read back once, in its partition's
order (lost, duplicated, out of order, gaps counted); the replicas byte-identical; every committed transaction read
whole, no aborted one, one whose outcome the producer never learned whole or absent; the group's committed offsets
never backwards.
"""
from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from trafka.broker.testing import network as netns
from compat_tests.clients import ConfluentClient
from compat_tests.cluster import Cluster, Writer, replicas_identical, start_cluster, wait
from compat_tests.zookeeper import ZooKeeperServer

TOPIC = "nemesis"
PARTITIONS = 3
TXN_TOPIC = "nemesis-txn"
TXN_PARTITIONS = 2
#: Records per transaction, spread over the transactional topic's partitions.
TXN_RECORDS = 4
BROKERS = (1, 2, 3)
HOSTS = ("zk", *(f"b{n}" for n in BROKERS))
#: Kafka 3.9's settings where trafka's cluster tests set theirs (compat_tests.cluster.CLUSTER_SETTINGS).
KAFKA_SETTINGS: dict[str, object] = {
    "zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 4000, "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 3, "default.replication.factor": 3,
}


# ==================================================================================================== the cluster


@dataclass
class NemesisCluster:
    """ZooKeeper and three brokers of ``product`` (trafka or kafka) on ``network``."""

    product: str
    network: netns.TestNetwork
    zookeeper: ZooKeeperServer
    cluster: Cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def broker(self, node_id: int):
        return self.cluster.broker(node_id)

    def leaders(self) -> dict[int, int]:
        return {partition: leader for partition, (leader, _, _) in self.cluster.metadata(TOPIC).items()}

    def full_isrs(self) -> bool:
        return all(sorted(isr) == list(BROKERS) and leader in BROKERS
                   for topic in (TOPIC, TXN_TOPIC) for leader, _, isr in self.cluster.metadata(topic).values())

    def close(self) -> None:
        try:
            self.cluster.close()
        finally:
            self.zookeeper.close()


def start(product: str, network: netns.TestNetwork, directory: Path, *, unclean: bool = False) -> NemesisCluster:
    """ZooKeeper and the brokers on their hosts, the topics created, every ISR full."""
    zookeeper = ZooKeeperServer(directory / "zookeeper", host=network.address("zk"),
                                wrap=lambda command: network.command("zk", command)).start()
    try:
        unclean_setting = {"unclean.leader.election.enable": str(unclean).lower()}
        if product == "trafka":
            cluster = start_cluster(zookeeper, directory / "cluster", unclean_setting, network=network)
        elif product == "kafka":
            cluster = _start_kafka(zookeeper, directory / "cluster", network, unclean_setting)
        else:
            raise ValueError(f"product {product!r}: trafka or kafka")
    except BaseException:
        zookeeper.close()
        raise
    nemesis_cluster = NemesisCluster(product, network, zookeeper, cluster)
    try:
        admin = ConfluentClient(cluster.bootstrap)
        admin.create_topic(TOPIC, PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"})
        admin.create_topic(TXN_TOPIC, TXN_PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"})
        wait(nemesis_cluster.full_isrs, "full ISRs at first")
    except BaseException:
        nemesis_cluster.close()
        raise
    return nemesis_cluster


def _start_kafka(zookeeper: ZooKeeperServer, directory: Path, network: netns.TestNetwork,
                 settings: dict[str, str]) -> Cluster:
    from compat_tests.reference import ZooKeeperModeKafka

    chroot = f"{zookeeper.connect_string}/kafka-nemesis"
    directory.mkdir(parents=True, exist_ok=True)
    brokers = []
    cluster = Cluster(brokers, chroot)
    try:
        for node_id in BROKERS:
            host = f"b{node_id}"
            broker = ZooKeeperModeKafka(directory / f"broker{node_id}", chroot, broker_id=node_id,
                                        name=f"kafka{node_id}", host=network.address(host),
                                        overrides={**KAFKA_SETTINGS, **settings},
                                        wrap=lambda command, host=host: network.command(host, command))
            broker.node_id = node_id
            brokers.append(broker)
            broker.start()
        wait(lambda: cluster.live_broker_ids() == set(BROKERS), "every Kafka broker registered")
    except BaseException:
        cluster.close()
        raise
    return cluster


# ==================================================================================================== the workload


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
                try:
                    if exc.args[0].txn_requires_abort():
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


@dataclass
class Workload:
    writers: list[Writer]
    transactions: TransactionalWriter
    reader: CommittedReader
    stopped: bool = field(default=False)

    @classmethod
    def start(cls, bootstrap: str) -> Workload:
        writers = [Writer(bootstrap, TOPIC, partition, **{"message.timeout.ms": 300_000}).start()
                   for partition in range(PARTITIONS)]
        workload = cls(writers, TransactionalWriter(bootstrap).start(), CommittedReader(bootstrap).start())
        for writer in writers:
            writer.wait_for(20, "the first acknowledged records")
        wait(lambda: "committed" in workload.transactions.outcomes.values(), "a committed transaction")
        return workload

    def progressed(self, what: str, timeout: float = 60.0) -> None:
        """Until every producer has had more records acknowledged, and a transaction more committed."""
        committed = list(self.transactions.outcomes.values()).count("committed")
        for writer in self.writers:
            writer.wait_for(10, f"records acknowledged after {what}", timeout=timeout)
        wait(lambda: list(self.transactions.outcomes.values()).count("committed") > committed,
             f"a transaction committed after {what}", timeout=timeout)

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            for writer in self.writers:
                writer.stop()
            self.transactions.stop()
            self.reader.stop()


# ==================================================================================================== the nemeses


def _host(node_id: int) -> str:
    return f"b{node_id}"


def _other_brokers(node_id: int) -> list[str]:
    return [_host(n) for n in BROKERS if n != node_id]


def _a_leader(target: NemesisCluster, chance: random.Random) -> int:
    return target.leaders()[chance.randrange(PARTITIONS)]


#: Each nemesis: (what it does, given the cluster and the chance) -> (a description, how to end it or None).
def leader_cut_from_followers(target, chance):
    leader = _a_leader(target, chance)
    target.network.isolate(_host(leader), _other_brokers(leader))
    return f"leader {leader} cut off from its followers", None


def leader_isolated(target, chance):
    leader = _a_leader(target, chance)
    target.network.isolate(_host(leader))
    return f"leader {leader} cut off from everything", None


def follower_isolated(target, chance):
    leaders = set(target.leaders().values())
    follower = chance.choice([n for n in BROKERS if n not in leaders] or list(BROKERS))
    target.network.isolate(_host(follower))
    return f"broker {follower} cut off from everything", None


def zookeeper_isolated(target, chance):
    broker = chance.choice(BROKERS)
    target.network.cut(_host(broker), "zk")
    return f"broker {broker} cut off from ZooKeeper", None


def controller_isolated(target, chance):
    controller = target.cluster.controller_id()
    target.network.isolate(_host(controller))
    return f"controller {controller} cut off from everything", None


def minority(target, chance):
    broker = chance.choice(BROKERS)
    target.network.split([_host(broker)], ["zk", netns.CLIENT, *_other_brokers(broker)])
    return f"broker {broker} split from the majority", None


def one_way(target, chance):
    leader = _a_leader(target, chance)
    for other in _other_brokers(leader):
        target.network.cut(_host(leader), other, one_way=True)
    return f"leader {leader}'s packets to its followers dropped", None


def lossy(target, chance):
    for a in BROKERS:
        for b in BROKERS:
            if a < b:
                target.network.lose(_host(a), _host(b), 30)
    return "30% of the packets between brokers lost", None


def slow_links(target, chance):
    for node_id in BROKERS:
        target.network.slow(_host(node_id), target.broker(node_id).port, 80, jitter_ms=40,
                            from_=[_host(n) for n in BROKERS if n != node_id])
    return "the links between brokers slowed by 80-120 ms each way", None


def follower_then_the_isr(target, chance):
    partition = chance.randrange(PARTITIONS)
    leader, replicas, _ = target.cluster.metadata(TOPIC)[partition]
    behind, other = [n for n in replicas if n != leader][:2]
    target.network.isolate(_host(behind))
    time.sleep(5)  # past replica.lag.time.max.ms (4 s): out of the ISR, while writes go on at the two others
    target.network.heal()
    target.network.isolate(_host(leader))
    target.network.isolate(_host(other))
    return (f"broker {behind} fell out of the ISR of {TOPIC}-{partition}, then its leader {leader} and broker "
            f"{other} cut off from everything"), None


def leader_paused(target, chance):
    leader = _a_leader(target, chance)
    pid = target.broker(leader).pid
    netns.pause(pid)
    return f"leader {leader} paused", lambda: netns.resume(pid)


def broker_killed(target, chance):
    node_id = chance.choice(BROKERS)
    broker = target.broker(node_id)
    broker.kill()
    return f"broker {node_id} killed", lambda: _start_again(broker)


#: How long a killed broker's start is tried again: past the ZooKeeper session (6 s) of its registration.
RESTART_WITHIN_S = 30.0


def _start_again(broker) -> None:
    """Start a killed broker (trafka's ``BrokerProcess`` on its port, or Kafka's), again while it is refused."""
    from compat_tests.harness import BrokerProcess, BrokerStartError

    deadline = time.monotonic() + RESTART_WITHIN_S
    while True:
        try:
            broker.start(broker.port) if isinstance(broker, BrokerProcess) else broker.start()
            return
        except (BrokerStartError, RuntimeError):  # trafka's refusal, and Kafka's (its JVM exits)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


NEMESES: dict[str, Callable] = {
    "leader-cut-from-followers": leader_cut_from_followers,
    "leader-isolated": leader_isolated,
    "follower-isolated": follower_isolated,
    "zookeeper-isolated": zookeeper_isolated,
    "controller-isolated": controller_isolated,
    "minority": minority,
    "one-way": one_way,
    "lossy": lossy,
    "slow-links": slow_links,
    "leader-paused": leader_paused,
    "broker-killed": broker_killed,
    "follower-then-the-isr": follower_then_the_isr,
}


def apply(target: NemesisCluster, name: str, chance: random.Random, seconds: float,
          history: list[dict[str, object]], recovery_s: float = 60.0, workload: Workload | None = None) -> None:
    """Make nemesis ``name`` for ``seconds``, heal it, then wait until every ISR is full again (and the workload
    went on); each step noted in ``history``."""
    started = time.monotonic()
    with target.network.fault(seconds=seconds * 3):  # (healed then at the latest, whatever happens)
        what, undo = NEMESES[name](target, chance)
        history.append({"at": time.time(), "event": "fault", "nemesis": name, "what": what})
        try:
            time.sleep(seconds)
        finally:
            if undo is not None:
                undo()
    history.append({"at": time.time(), "event": "healed", "nemesis": name})
    healed = time.monotonic()
    wait(target.full_isrs, f"full ISRs after: {what}", timeout=recovery_s)
    history.append({"at": time.time(), "event": "full-isr", "nemesis": name,
                    "seconds_after_heal": round(time.monotonic() - healed, 2),
                    "fault_seconds": round(healed - started, 2)})
    if workload is not None:
        workload.progressed(what, timeout=recovery_s)


# ==================================================================================================== the checker


def verdict(target: NemesisCluster, workload: Workload) -> dict[str, object]:
    """What the clients saw, once healed (the workload stopped)."""
    workload.stop()
    result: dict[str, object] = {"product": target.product, "partitions": []}
    for partition, writer in enumerate(workload.writers):
        values = [int(value) for value in read_to_end(target.bootstrap, TOPIC, [partition])]
        acknowledged = set(writer.acknowledged)
        result["partitions"].append({
            "partition": partition, "acknowledged": len(acknowledged), "read": len(values),
            "lost": len(acknowledged - set(values)), "lost_sample": sorted(acknowledged - set(values))[:10],
            "duplicated": len(values) - len(set(values)), "out_of_order": values != sorted(values),
            "gaps": (max(values) + 1 - len(set(values))) if values else 0, "send_failures": len(writer.failed),
        })
    result["replicas_identical"] = bool(_eventually(lambda: replicas_identical(target.cluster, TOPIC, PARTITIONS)
                                                    and replicas_identical(target.cluster, TXN_TOPIC, TXN_PARTITIONS)))
    outcomes = workload.transactions.outcomes
    result["transactions"] = dict(sorted(Counter(outcomes.values()).items()))
    result["group_read"] = _transaction_problems(outcomes, workload.reader.values, everything=False)
    result["read_committed"] = _transaction_problems(
        outcomes, read_to_end(target.bootstrap, TXN_TOPIC, range(TXN_PARTITIONS), read_committed=True),
        everything=True)
    result["group_offsets_back"] = sum(1 for offsets in workload.reader.commits.values() if offsets != sorted(offsets))
    return result


def clean(result: dict[str, object]) -> bool:
    """Whether a verdict found nothing wrong."""
    return (all(p["lost"] == 0 and p["duplicated"] == 0 and not p["out_of_order"] and p["gaps"] == 0
                for p in result["partitions"])
            and result["replicas_identical"] and result["group_offsets_back"] == 0
            and not any(result["group_read"].values()) and not any(result["read_committed"].values()))


def _eventually(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _transaction_problems(outcomes: dict[int, str], values: list[bytes], *, everything: bool) -> dict[str, list]:
    """Of TransactionalWriter's transactions as a read_committed reader read them: those aborted yet read, read in
    part or twice, and (``everything``: a read from the start to the end) committed yet missing."""
    parts: dict[int, list[int]] = defaultdict(list)
    for value in values:
        txn, index = map(int, value.split(b":"))
        parts[txn].append(index)
    problems = {
        "aborted_read": [txn for txn in parts if outcomes.get(txn) == "aborted"][:10],
        "partial": [txn for txn, indexes in parts.items() if sorted(indexes) != list(range(TXN_RECORDS))][:10],
    }
    if everything:
        problems["committed_missing"] = [txn for txn, outcome in outcomes.items()
                                         if outcome == "committed" and txn not in parts][:10]
    return problems


def read_to_end(bootstrap: str, topic: str, partitions, *, read_committed: bool = False) -> list[bytes]:
    """Every record of ``partitions`` of ``topic`` from the start to the end (the last stable offset, with
    ``read_committed``), in each partition's order (partitions one after another)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-check", "enable.auto.commit": False,
                         "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                         "enable.partition.eof": True})
    try:
        wanted = list(partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in wanted])
        values: dict[int, list[bytes]] = {p: [] for p in wanted}
        ended: set[int] = set()
        deadline = time.monotonic() + 120
        while len(ended) < len(wanted):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} was not read to its end in 120 s")
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    values[message.partition()].append(message.value())
                elif message.error().code() == -191:  # _PARTITION_EOF: at the end
                    ended.add(message.partition())
        return [value for p in wanted for value in values[p]]
    finally:
        consumer.close()


# ==================================================================================================== in the suite

#: How long each fault of the suite's short runs lasts: longer than the ZooKeeper session (6 s), so that a leader cut
#: off is deposed.
SUITE_FAULT_S = 7.0


def run_briefly(network: netns.TestNetwork, directory: Path, nemeses: list[str]) -> None:
    """The suite's short run: trafka's cluster under ``nemeses`` one after another, each healed and followed by
    full ISRs and the workload going on, then a clean verdict (``TRAFKA_NEMESIS_SEED`` replays the choices)."""
    seed = int(os.environ.get("TRAFKA_NEMESIS_SEED", time.time_ns() % 1_000_000))
    chance = random.Random(seed)
    target = start("trafka", network, directory)
    workload = None
    history: list[dict[str, object]] = []
    try:
        workload = Workload.start(target.bootstrap)
        for name in nemeses:
            apply(target, name, chance, SUITE_FAULT_S, history, workload=workload)
        result = verdict(target, workload)
        print(f"seed {seed}:", [event.get("what") for event in history if event["event"] == "fault"], result)
        assert clean(result), (f"seed {seed}", result, history)
    finally:
        if workload is not None:
            workload.stop()
        target.close()
