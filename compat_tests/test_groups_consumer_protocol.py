"""The consumer group protocol (KIP-848) with a real client: confluent-kafka (librdkafka) with
``group.protocol=consumer``, against a real trafka process.

The broker assigns the partitions (server-side ``uniform`` assignor) and moves them between members by
incremental revocation. Each member runs in its own thread, polls, records what it read and commits
synchronously after every batch, so the group as a whole must read every message exactly once.
Session timeouts are a broker setting in this protocol (``group.consumer.session.timeout.ms``); the
test that kills a member uses a private broker with a short one.
"""
from __future__ import annotations

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
REBALANCE_TIMEOUT = 30.0
SHORT_SESSION_TIMEOUT_MS = 6000


class Member:
    """One confluent-kafka consumer of the group on its own thread: poll, remember, commit, repeat."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], *, instance_id: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topics = topics
        self.instance_id = instance_id
        self.consumed: list[tuple[str, int, int, bytes]] = []
        self.assignment: frozenset[tuple[str, int]] = frozenset()
        self.assignments: list[frozenset[tuple[str, int]]] = []  # every distinct assignment, in order
        self.revoked: list[frozenset[tuple[str, int]]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="consumer-protocol-member", daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the member did not stop"

    @property
    def partitions(self) -> frozenset[int]:
        return frozenset(p for _, p in self.assignment)

    def _run(self) -> None:
        try:
            self._consume()
        except BaseException as exc:  # reported by the test through .error
            self.error = exc

    def _consume(self) -> None:
        from confluent_kafka import Consumer, KafkaError, KafkaException

        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "topic.metadata.refresh.interval.ms": 1000}
        if self.instance_id:
            config["group.instance.id"] = self.instance_id
        consumer = Consumer(config)

        def on_revoke(c, partitions):
            if partitions:
                self.revoked.append(frozenset((p.topic, p.partition) for p in partitions))

        consumer.subscribe(self.topics, on_revoke=on_revoke)
        try:
            while not self._stop.is_set():
                messages = consumer.consume(100, 0.2)
                good = [m for m in messages if m.error() is None]
                self.consumed.extend((m.topic(), m.partition(), m.offset(), m.value()) for m in good)
                if good:
                    try:
                        consumer.commit(asynchronous=False)
                    except KafkaException as exc:
                        # librdkafka's local "nothing to commit": it holds no stored offset for its
                        # partitions at that moment. The tests check what was read and committed.
                        if exc.args[0].code() != KafkaError._NO_OFFSET:
                            raise
                assignment = frozenset((p.topic, p.partition) for p in consumer.assignment())
                if assignment != self.assignment:
                    self.assignment = assignment
                    self.assignments.append(assignment)
        finally:
            consumer.close()


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = 6, tag: str = "") -> set[bytes]:
    messages = [Message(f"{tag}{topic}-{p}-{i}".encode(), partition=p)
                for p in range(partitions) for i in range(per_partition)]
    ConfluentClient(bootstrap).produce(topic, messages)
    return {m.value for m in messages}


def owned_once(members: list[Member], partitions: int = 6) -> bool:
    """Every partition owned by exactly one member, and every member owning some."""
    owned = [p for m in members for p in m.partitions]
    return sorted(owned) == list(range(partitions)) and all(m.assignment for m in members)


def consumed_values(members: list[Member]) -> list[bytes]:
    return [value for m in members for *_, value in m.consumed]


def committed(bootstrap: str, group: str, topic: str, partitions: int = 6) -> dict[int, int]:
    """The group's committed offset of each partition of ``topic`` (-1 where it has none)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    [future] = admin.list_consumer_group_offsets([request], request_timeout=10).values()
    return {tp.partition: tp.offset for tp in future.result().topic_partitions}


def check(members: list[Member]) -> None:
    for member in members:
        if member.error is not None:
            raise AssertionError(f"a member failed: {member.error!r}") from member.error


def wait_for(condition: Callable[[], object], members: list[Member], what: str, timeout: float = REBALANCE_TIMEOUT):
    def probe():
        check(members)
        return condition()

    return wait_until(probe, timeout=timeout, message=lambda: f"{what}; assignments "
                      f"{[sorted(m.partitions) for m in members]}")


@pytest.fixture
def group() -> str:
    return f"group-{uuid.uuid4().hex[:8]}"


def test_three_consumers_share_six_partitions_and_read_each_message_once(broker, topic, group):
    name = topic(partitions=6)
    produced = produce(broker.bootstrap, name, 50)
    members = [Member(broker.bootstrap, group, [name]).start() for _ in range(3)]
    try:
        wait_for(lambda: owned_once(members) and len(consumed_values(members)) >= len(produced),
                 members, "every partition owned once and every message consumed")
        assert all(len(m.partitions) == 2 for m in members), "the uniform assignor balances the group"
        more = produce(broker.bootstrap, name, 10, tag="more-")
        wait_for(lambda: len(consumed_values(members)) >= len(produced) + len(more), members, "the second batch")
        assert owned_once(members)
    finally:
        for m in members:
            m.stop()
    check(members)
    assert sorted(consumed_values(members)) == sorted(produced | more), "messages were skipped or read twice"


def test_members_joining_and_leaving_move_only_the_partitions_they_must(broker, topic, group):
    name = topic(partitions=6)
    produced = produce(broker.bootstrap, name, 20)
    first = Member(broker.bootstrap, group, [name]).start()
    members = [first]
    try:
        wait_for(lambda: first.partitions == frozenset(range(6)), members, "the first member to own everything")
        second = Member(broker.bootstrap, group, [name]).start()
        members.append(second)
        wait_for(lambda: owned_once(members), members, "the partitions to be shared")
        # Incremental: the first member gave up exactly what the second one got, and nothing else.
        assert first.revoked == [frozenset((name, p) for p in second.partitions)]
        assert len(second.partitions) == 3
        third = Member(broker.bootstrap, group, [name]).start()
        members.append(third)
        wait_for(lambda: owned_once(members), members, "the partitions to be shared by three")
        more = produce(broker.bootstrap, name, 5, tag="more-")
        wait_for(lambda: len(consumed_values(members)) >= len(produced) + len(more), members, "every message")
        second.stop()  # a clean close leaves the group (member epoch -1)
        members.remove(second)
        wait_for(lambda: owned_once(members), members, "the survivors to take the leaver's partitions")
        last = produce(broker.bootstrap, name, 5, tag="last-")
        wait_for(lambda: len(consumed_values([*members, second])) >= len(produced) + len(more) + len(last),
                 members, "the messages produced after the member left")
        members.append(second)
    finally:
        for m in members:
            if m._thread.is_alive():
                m.stop()
    check(members)
    assert sorted(consumed_values(members)) == sorted(produced | more | last), "messages were skipped or read twice"


_KILLABLE_MEMBER = """
import sys, threading, time
sys.path.insert(0, {root!r})
from compat_tests.test_groups_consumer_protocol import Member
member = Member({bootstrap!r}, {group!r}, [{topic!r}]).start()
while not member.assignment and member.error is None:
    time.sleep(0.05)
print("assigned", sorted(member.partitions), flush=True)
threading.Event().wait()
"""


def test_a_killed_member_is_fenced_when_its_session_expires(broker_factory, topic, group):
    broker = broker_factory(**{"group.consumer.session.timeout.ms": SHORT_SESSION_TIMEOUT_MS})
    name = topic(partitions=6, on=broker)
    survivor = Member(broker.bootstrap, group, [name]).start()
    script = _KILLABLE_MEMBER.format(root=str(ROOT), bootstrap=broker.bootstrap, group=group, topic=name)
    victim = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert victim.stdout.readline().startswith("assigned"), "the member in the child process got nothing"
        wait_for(lambda: len(survivor.partitions) == 3, [survivor], "the partitions to be shared")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        wait_for(lambda: survivor.partitions == frozenset(range(6)), [survivor],
                 "the killed member's session to expire")
    finally:
        if victim.poll() is None:
            victim.kill()
        survivor.stop()
    check([survivor])


def test_members_carry_on_across_a_broker_restart_from_their_committed_offsets(broker_factory, topic, group):
    broker = broker_factory()
    name = topic(partitions=6, on=broker)
    produced = produce(broker.bootstrap, name, 30)
    members = [Member(broker.bootstrap, group, [name]).start() for _ in range(2)]
    try:
        wait_for(lambda: owned_once(members) and len(consumed_values(members)) >= len(produced), members,
                 "every message before the restart")
        # A member commits after it has read: the restart waits for the commits, or the members would read
        # again, from the offsets committed before, what the restart cut off from being committed.
        wait_for(lambda: set(committed(broker.bootstrap, group, name).values()) == {30}, members,
                 "the members' commits of every message")
        before = [(m.assignment, list(m.revoked)) for m in members]
        broker.restart()
        more = produce(broker.bootstrap, name, 10, tag="after-restart-")
        wait_for(lambda: len(consumed_values(members)) >= len(produced) + len(more), members,
                 "the messages produced after the restart")
        # The group was stored in __consumer_offsets: the members kept their epochs and partitions.
        assert [(m.assignment, m.revoked) for m in members] == before
    finally:
        for m in members:
            m.stop()
    check(members)
    assert sorted(consumed_values(members)) == sorted(produced | more), "messages were skipped or read twice"

    # A new member of the group starts from the committed offsets: it reads only what is new.
    broker.restart()
    latest = produce(broker.bootstrap, name, 3, tag="latest-")
    newcomer = Member(broker.bootstrap, group, [name]).start()
    try:
        wait_for(lambda: len(newcomer.consumed) >= len(latest), [newcomer], "the messages after the commits")
        time.sleep(1)
    finally:
        newcomer.stop()
    check([newcomer])
    assert sorted(consumed_values([newcomer])) == sorted(latest)


def test_regex_subscription_is_resolved_by_the_broker(broker, topic, group):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    admin = ConfluentClient(broker.bootstrap)
    matching = [f"{prefix}-a", f"{prefix}-b"]
    for name in [*matching, f"other-{prefix}"]:
        admin.create_topic(name, 2)
    produced = set()
    for name in [*matching, f"other-{prefix}"]:
        produced |= produce(broker.bootstrap, name, 5, partitions=2)
    member = Member(broker.bootstrap, group, [f"^{prefix}-.*"]).start()
    try:
        expected = {v for v in produced if not v.startswith(b"other-")}
        wait_for(lambda: len(member.consumed) >= len(expected), [member], "the matching topics' messages")
        # A topic created later that matches joins the subscription.
        late = f"{prefix}-c"
        admin.create_topic(late, 1)
        expected |= produce(broker.bootstrap, late, 5, partitions=1)
        wait_for(lambda: len(member.consumed) >= len(expected), [member], "the new matching topic's messages")
        time.sleep(0.5)
    finally:
        member.stop()
    check([member])
    assert sorted(consumed_values([member])) == sorted(expected)


def test_a_regex_that_backtracks_forever_elsewhere_does_not_stall_the_broker(broker, topic, group):
    # Matched by a backtracking engine, "(a|aa)*b" against a long name of a's takes longer than the
    # universe has; the broker's RE2 answers at once and the member reads the topic that matches.
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    admin = ConfluentClient(broker.bootstrap)
    admin.create_topic("a" * 100 + prefix.replace("rx", "a"), 1)
    admin.create_topic(f"{prefix}-ok", 1)
    expected = produce(broker.bootstrap, f"{prefix}-ok", 5, partitions=1)
    member = Member(broker.bootstrap, group, [f"^((a|aa)*b|{prefix}-ok)"]).start()
    try:
        wait_for(lambda: len(member.consumed) >= len(expected), [member], "the matching topic's messages")
    finally:
        member.stop()
    check([member])
    assert sorted(consumed_values([member])) == sorted(expected)
    assert admin.partitions(f"{prefix}-ok") == [0]


def test_admin_client_lists_and_describes_consumer_groups(broker, topic, group):
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    name = topic(partitions=4)
    members = [Member(broker.bootstrap, group, [name]).start() for _ in range(2)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        wait_for(lambda: owned_once(members, 4), members, "the partitions to be shared")

        def described():
            description = admin.describe_consumer_groups([group])[group].result(10)
            return description if str(description.state).endswith("STABLE") else None

        description = wait_for(described, members, "the group to be described as stable")
        assert description.type == ConsumerGroupType.CONSUMER
        assert description.partition_assignor == "uniform"
        assigned = sorted(tp.partition for m in description.members for tp in m.assignment.topic_partitions)
        assert assigned == [0, 1, 2, 3]
        listed = admin.list_consumer_groups().result(10).valid
        ours = [g for g in listed if g.group_id == group]
        assert len(ours) == 1 and ours[0].type == ConsumerGroupType.CONSUMER
    finally:
        for m in members:
            m.stop()
    # Once everyone has left, the group (and its offsets) can be deleted.
    wait_until(lambda: str(admin.describe_consumer_groups([group])[group].result(10).state).endswith("EMPTY"),
               message="the group to be empty")
    admin.delete_consumer_groups([group])[group].result(10)


def test_static_member_restarts_without_moving_partitions(broker, topic, group):
    name = topic(partitions=6)
    steady = Member(broker.bootstrap, group, [name], instance_id="steady").start()
    restarting = Member(broker.bootstrap, group, [name], instance_id="restarting").start()
    members = [steady, restarting]
    try:
        wait_for(lambda: owned_once(members), members, "the partitions to be shared")
        before = restarting.partitions
        steady_history = list(steady.assignments)
        restarting.stop()  # a static member's close keeps its place (member epoch -2)
        again = Member(broker.bootstrap, group, [name], instance_id="restarting").start()
        members = [steady, again]
        wait_for(lambda: again.partitions, members, "the restarted member's assignment")
        assert again.partitions == before
        time.sleep(1)
        assert steady.assignments == steady_history, "the steady member's partitions moved"
        again.stop()
    finally:
        steady.stop()
    check([steady, restarting])
