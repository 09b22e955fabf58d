"""Consumer groups with real clients: kafka-python, confluent-kafka (librdkafka, classic protocol) and
aiokafka, each running unmodified against a real trafka process.

Each member runs in its own thread (aiokafka in its own asyncio loop), polls, records what it read
and commits synchronously after every batch, so the group as a whole must read every message exactly
once. Session timeouts are 6 s (the broker's group.min.session.timeout.ms) to keep expiry tests short.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from compat_tests.clients import ConfluentClient, Message
from compat_tests.harness import wait_until

ROOT = Path(__file__).resolve().parent.parent
SESSION_TIMEOUT_MS = 6000
CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")
REBALANCE_TIMEOUT = 30.0


class Member:
    """One group member on its own thread: poll, remember, commit synchronously, repeat."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, *, instance_id: str | None = None,
                 strategy: str | None = None) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.instance_id = instance_id
        self.strategy = strategy
        self.consumed: list[tuple[int, int, bytes]] = []
        self.assignment: frozenset[int] = frozenset()
        self.assignments: list[frozenset[int]] = []  # every distinct assignment, in order
        self.revoked: list[frozenset[int]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._leave = True
        self._thread = threading.Thread(target=self._run, name=f"{client}-member", daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def stop(self, *, leave: bool = True) -> None:
        self._leave = leave
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.client} member did not stop"

    def _assigned(self, partitions) -> None:
        assignment = frozenset(partitions)
        if assignment != self.assignment:
            self.assignment = assignment
            self.assignments.append(assignment)

    def _run(self) -> None:
        try:
            {"kafka-python": self._run_kafka_python, "confluent-kafka": self._run_confluent,
             "aiokafka": lambda: asyncio.run(self._run_aiokafka())}[self.client]()
        except BaseException as exc:  # reported by the test through .error
            self.error = exc

    def _run_kafka_python(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                if revoked:
                    member.revoked.append(frozenset(tp.partition for tp in revoked))

            def on_partitions_assigned(self, assigned):
                pass

        config = dict(bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000)
        if self.instance_id:
            config["group_instance_id"] = self.instance_id
        if self.strategy == "cooperative-sticky":
            from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
            config["partition_assignment_strategy"] = [CooperativeStickyAssignor]
        consumer = KafkaConsumer(**config)
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self._stop.is_set():
                batches = consumer.poll(200)
                for records in batches.values():
                    self.consumed.extend((r.partition, r.offset, r.value) for r in records)
                if batches:
                    consumer.commit()
                self._assigned(tp.partition for tp in consumer.assignment())
        finally:
            if self._leave:
                consumer.close()

    def _run_confluent(self) -> None:
        from confluent_kafka import Consumer

        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS,
                  "heartbeat.interval.ms": 1000}
        if self.instance_id:
            config["group.instance.id"] = self.instance_id
        if self.strategy:
            config["partition.assignment.strategy"] = self.strategy
        consumer = Consumer(config)

        def on_revoke(c, partitions):
            if partitions:
                self.revoked.append(frozenset(p.partition for p in partitions))

        consumer.subscribe([self.topic], on_revoke=on_revoke)
        try:
            while not self._stop.is_set():
                messages = consumer.consume(100, 0.2)
                good = [m for m in messages if m.error() is None]
                self.consumed.extend((m.partition(), m.offset(), m.value()) for m in good)
                if good:
                    consumer.commit(asynchronous=False)
                self._assigned(p.partition for p in consumer.assignment())
        finally:
            if self._leave:
                consumer.close()

    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                if revoked:
                    member.revoked.append(frozenset(tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned):
                pass

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000)
        await consumer.start()
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    self.consumed.extend((r.partition, r.offset, r.value) for r in records)
                if batches:
                    await consumer.commit()
                self._assigned(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = 6, tag: str = "") -> set[bytes]:
    messages = [Message(f"{tag}{p}-{i}".encode(), partition=p) for p in range(partitions) for i in range(per_partition)]
    ConfluentClient(bootstrap).produce(topic, messages)
    return {m.value for m in messages}


def owned_once(members: list[Member], partitions: int = 6) -> bool:
    """Every partition owned by exactly one member, and every member owning some."""
    owned = [p for m in members for p in m.assignment]
    return sorted(owned) == list(range(partitions)) and all(m.assignment for m in members)


def check(members: list[Member]) -> None:
    for member in members:
        if member.error is not None:
            raise AssertionError(f"{member.client} member failed: {member.error!r}") from member.error


def wait_for(condition: Callable[[], object], members: list[Member], what: str, timeout: float = REBALANCE_TIMEOUT):
    def probe():
        check(members)
        return condition()

    return wait_until(probe, timeout=timeout, message=lambda: f"{what}; assignments "
                      f"{[sorted(m.assignment) for m in members]}")


@pytest.fixture
def group() -> str:
    return f"group-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("client", CLIENTS)
def test_three_consumers_share_six_partitions_and_read_each_message_once(client, broker, topic, group):
    name = topic(partitions=6)
    produced = produce(broker.bootstrap, name, 50)
    members = [Member(client, broker.bootstrap, group, name).start() for _ in range(3)]
    try:
        wait_for(lambda: owned_once(members) and sum(len(m.consumed) for m in members) >= len(produced),
                 members, "every partition owned once and every message consumed")
        more = produce(broker.bootstrap, name, 10, tag="more-")
        wait_for(lambda: sum(len(m.consumed) for m in members) >= len(produced) + len(more), members,
                 "the second batch")
        # Taken before the members stop: each one leaving rebalances the others while they shut down.
        stable = owned_once(members)
    finally:
        for m in members:
            m.stop()
    check(members)
    values = [value for m in members for _, _, value in m.consumed]
    assert sorted(values) == sorted(produced | more), "messages were skipped or read twice"
    assert stable, "the assignment changed while the second batch was read"


@pytest.mark.parametrize("client", CLIENTS)
def test_rebalance_when_a_member_joins_and_when_it_leaves(client, broker, topic, group):
    name = topic(partitions=6)
    first = Member(client, broker.bootstrap, group, name).start()
    second = None
    try:
        wait_for(lambda: first.assignment == frozenset(range(6)), [first], "the first member to own everything")
        second = Member(client, broker.bootstrap, group, name).start()
        wait_for(lambda: owned_once([first, second]), [first, second], "the partitions to be shared")
        second.stop()  # a clean close sends LeaveGroup
        wait_for(lambda: first.assignment == frozenset(range(6)), [first], "the survivor to own everything again")
    finally:
        first.stop()
        if second is not None and second._thread.is_alive():
            second.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_partitions_handed_over_resume_at_the_committed_offsets(client, broker, topic, group):
    """A member that joins takes over partitions where the group committed, not from the beginning: the
    records read before the rebalance are not read again, and those produced after it are all read."""
    name = topic(partitions=6)
    produced = produce(broker.bootstrap, name, 5)
    first = Member(client, broker.bootstrap, group, name).start()
    second = None
    try:
        wait_for(lambda: len(first.consumed) >= len(produced), [first], "the first member to read everything")
        second = Member(client, broker.bootstrap, group, name).start()
        wait_for(lambda: owned_once([first, second]), [first, second], "the partitions to be shared")
        more = produce(broker.bootstrap, name, 5, tag="after-")
        wait_for(lambda: len(first.consumed) + len(second.consumed) >= len(produced) + len(more),
                 [first, second], "the records produced after the rebalance")
    finally:
        first.stop()
        if second is not None:
            second.stop()
    check([first, second])
    assert not any(value in produced for _, _, value in second.consumed), "handed-over partitions were re-read"
    values = [value for m in (first, second) for _, _, value in m.consumed]
    assert sorted(values) == sorted(produced | more), "messages were skipped or read twice"


_KILLABLE_MEMBER = """
import sys, threading, time
sys.path.insert(0, {root!r})
from compat_tests.test_groups_consumers import Member
member = Member({client!r}, {bootstrap!r}, {group!r}, {topic!r}).start()
while not member.assignment and member.error is None:
    time.sleep(0.05)
print("assigned", sorted(member.assignment), flush=True)
threading.Event().wait()
"""


@pytest.mark.parametrize("client", CLIENTS)
def test_a_killed_member_is_expired_by_its_session_timeout(client, broker, topic, group):
    name = topic(partitions=6)
    survivor = Member(client, broker.bootstrap, group, name).start()
    script = _KILLABLE_MEMBER.format(root=str(ROOT), client=client, bootstrap=broker.bootstrap, group=group, topic=name)
    victim = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert victim.stdout.readline().startswith("assigned"), "the member in the child process got nothing"
        wait_for(lambda: len(survivor.assignment) == 3, [survivor], "the partitions to be shared")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        started = time.monotonic()
        wait_for(lambda: survivor.assignment == frozenset(range(6)), [survivor],
                 "the killed member's session to expire")
        assert time.monotonic() - started < REBALANCE_TIMEOUT
    finally:
        if victim.poll() is None:
            victim.kill()
        survivor.stop()


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_cooperative_sticky_keeps_the_partitions_that_do_not_move(client, broker, topic, group):
    name = topic(partitions=6)
    first = Member(client, broker.bootstrap, group, name, strategy="cooperative-sticky").start()
    second = None
    try:
        wait_for(lambda: first.assignment == frozenset(range(6)), [first], "the first member to own everything")
        second = Member(client, broker.bootstrap, group, name, strategy="cooperative-sticky").start()
        wait_for(lambda: owned_once([first, second]), [first, second], "the partitions to be shared")
        # Only the partitions handed to the newcomer were revoked; the rest stayed put.
        assert first.revoked == [second.assignment]
        assert first.assignment == frozenset(range(6)) - second.assignment
    finally:
        first.stop()
        if second is not None:
            second.stop()


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_static_member_restarts_without_a_rebalance(client, broker, topic, group):
    name = topic(partitions=6)
    steady = Member(client, broker.bootstrap, group, name, instance_id="steady").start()
    restarting = Member(client, broker.bootstrap, group, name, instance_id="restarting").start()
    try:
        wait_for(lambda: owned_once([steady, restarting]), [steady, restarting], "the partitions to be shared")
        before = restarting.assignment
        steady_history, steady_revoked = list(steady.assignments), list(steady.revoked)
        restarting.stop(leave=client == "confluent-kafka")  # librdkafka: static members close without leaving
        again = Member(client, broker.bootstrap, group, name, instance_id="restarting").start()
        wait_for(lambda: again.assignment, [again], "the restarted member's assignment")
        assert again.assignment == before
        time.sleep(2)  # a rebalance, had there been one, would show within the heartbeat interval
        assert (steady.assignments, steady.revoked) == (steady_history, steady_revoked), "the steady member saw a rebalance"
        again.stop()
    finally:
        steady.stop()
