"""Online migration of a consumer group with members between the classic protocol and the consumer
protocol (KIP-848), with real clients against a real trafka process.

Classic consumers (``group.protocol=classic``: confluent-kafka, kafka-python, aiokafka, the Java client)
form a group; a consumer with ``group.protocol=consumer`` (confluent-kafka or the Java client) joins it,
which converts the group into a consumer group whose classic members are told to rejoin and get the
partitions the broker assigns (online upgrade). When that consumer closes, only classic members remain
and the group becomes a classic group again, which rebalances among them (online downgrade). Every
member commits after each batch, so across both conversions every message must be read exactly once.

Java members run in a JVM of the test's own (compat_tests/java, the same driver as test_java_client.py);
the Java consumer-protocol member names itself (member id and epoch) when it fetches its offsets.
"""
from __future__ import annotations

import base64
import itertools
import uuid
from collections.abc import Callable, Iterator

import pytest

from compat_tests import test_groups_consumer_protocol as consumer_protocol
from compat_tests import test_groups_consumers as classic
from compat_tests.clients import JavaDriver
from compat_tests.harness import wait_until
from compat_tests.test_java_client import MEMBER_SETTINGS as JAVA_MEMBER_SETTINGS

TIMEOUT = 30.0
PARTITIONS = 6
_java_names = itertools.count(1)


class JavaMember:
    """A Java consumer (kafka-clients) of the group, running in the test's driver JVM with either group
    protocol; its state is read from the driver, its records once it has stopped."""

    def __init__(self, driver: JavaDriver, bootstrap: str, group: str, topic: str, protocol: str) -> None:
        self.driver, self.bootstrap, self.group, self.topic, self.protocol = driver, bootstrap, group, topic, protocol
        self.name = f"java-{protocol}-{next(_java_names)}"
        self.started = False
        self._final: dict | None = None

    def start(self) -> JavaMember:
        self.driver.call("member_start", bootstrap=self.bootstrap, name=self.name, group_id=self.group,
                         topics=[self.topic], protocol=self.protocol, settings=JAVA_MEMBER_SETTINGS[self.protocol])
        self.started = True
        return self

    @property
    def running(self) -> bool:
        return self.started and self._final is None

    def stop(self) -> None:
        self._final = self.driver.call("member_stop", name=self.name)

    def state(self) -> dict:
        return self._final if self._final is not None else self.driver.call("member_state", name=self.name)

    @property
    def error(self) -> BaseException | None:
        failure = self.state()["error"] if self.started else None
        return None if failure is None else AssertionError(f"Java member {self.name} failed: {failure}")

    @property
    def partitions(self) -> frozenset[int]:
        return frozenset(p for t, p in self.state()["assignment"] if t == self.topic)

    @property
    def consumed_count(self) -> int:
        return self.state()["consumed_count"]

    def values(self) -> list[bytes]:
        assert self._final is not None, "a Java member's records are known once it has stopped"
        return [base64.b64decode(value) for _, _, _, value in self._final["consumed"]]


Member = classic.Member | consumer_protocol.Member | JavaMember


def owned(member: Member) -> frozenset[int]:
    """The partitions a member of either kind holds now."""
    return member.assignment if isinstance(member, classic.Member) else member.partitions


def owned_once(members: list[Member]) -> bool:
    held = [p for m in members for p in owned(m)]
    return sorted(held) == list(range(PARTITIONS)) and all(owned(m) for m in members)


def consumed(members: list[Member]) -> int:
    """How many records the members have read so far."""
    return sum(m.consumed_count if isinstance(m, JavaMember) else len(m.consumed) for m in members)


def values(members: list[Member]) -> list[bytes]:
    return [v for m in members for v in (m.values() if isinstance(m, JavaMember) else [r[-1] for r in m.consumed])]


def running(member: Member) -> bool:
    return member.running if isinstance(member, JavaMember) else member._thread.is_alive()


def check(members: list[Member]) -> None:
    for member in members:
        if (error := member.error) is not None:
            raise AssertionError(f"a member failed: {error!r}") from error


def wait_for(condition, members: list[Member], what: str):
    def probe():
        check(members)
        return condition()

    return wait_until(probe, timeout=TIMEOUT, interval=0.1, message=lambda: f"{what}; assignments "
                      f"{[sorted(owned(m)) for m in members]}")


def described(bootstrap: str, group: str):
    """The group as confluent-kafka's admin client describes it (its type, its members)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(10)


@pytest.fixture
def group() -> str:
    return f"migrating-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def java() -> Iterator[Callable[[], JavaDriver]]:
    """The test's own driver JVM for Java members, started on first use."""
    drivers: list[JavaDriver] = []

    def driver() -> JavaDriver:
        if not drivers:
            drivers.append(JavaDriver())
        return drivers[0]

    yield driver
    for started in drivers:
        started.close()


def classic_member(client: str, java, bootstrap: str, group: str, topic: str, strategy: str | None = None) -> Member:
    if client == "java":
        return JavaMember(java(), bootstrap, group, topic, "classic")
    return classic.Member(client, bootstrap, group, topic, strategy=strategy)


def consumer_protocol_member(client: str, java, bootstrap: str, group: str, topic: str) -> Member:
    if client == "java":
        return JavaMember(java(), bootstrap, group, topic, "consumer")
    return consumer_protocol.Member(bootstrap, group, [topic])


def stop_all(members: list[Member]) -> None:
    for member in members:
        if running(member):
            member.stop()


@pytest.mark.parametrize("client, strategy, newcomer", [
    ("confluent-kafka", None, "confluent-kafka"),
    ("confluent-kafka", "cooperative-sticky", "confluent-kafka"),  # rejoins listing the partitions it still owns
    ("kafka-python", None, "confluent-kafka"),
    ("aiokafka", None, "confluent-kafka"),
    ("java", None, "confluent-kafka"),
    ("java", None, "java"),
    ("confluent-kafka", "cooperative-sticky", "java"),
])
def test_a_consumer_protocol_member_joins_a_classic_group_and_leaves_it(client, strategy, newcomer, broker, topic,
                                                                         group, java):
    from confluent_kafka import ConsumerGroupType

    name = topic(partitions=PARTITIONS)
    produced = classic.produce(broker.bootstrap, name, 30)
    classics = [classic_member(client, java, broker.bootstrap, group, name, strategy) for _ in range(2)]
    everyone: list[Member] = []
    try:
        for member in classics:
            everyone.append(member.start())
        wait_for(lambda: owned_once(classics) and consumed(classics) >= len(produced), classics,
                 "the classic group to share the partitions and read every message")

        # Online upgrade: the consumer-protocol member joins the classic group.
        joining = consumer_protocol_member(newcomer, java, broker.bootstrap, group, name)
        everyone.append(joining.start())
        members = [*classics, joining]
        wait_for(lambda: owned_once(members), members, "the three members to share the partitions")
        description = described(broker.bootstrap, group)
        assert description.type == ConsumerGroupType.CONSUMER
        assert len(description.members) == 3
        more = classic.produce(broker.bootstrap, name, 10, tag="upgraded-")
        wait_for(lambda: consumed(everyone) >= len(produced) + len(more), members,
                 "the messages produced after the upgrade")

        # Online downgrade: the consumer-protocol member leaves; the classic members carry on.
        joining.stop()
        wait_for(lambda: owned_once(classics), classics, "the classic members to take all partitions back")
        assert described(broker.bootstrap, group).type == ConsumerGroupType.CLASSIC
        last = classic.produce(broker.bootstrap, name, 10, tag="downgraded-")
        wait_for(lambda: consumed(everyone) >= len(produced) + len(more) + len(last), classics,
                 "the messages produced after the downgrade")
    finally:
        stop_all(everyone)
    check(everyone)
    assert sorted(values(everyone)) == sorted(produced | more | last), "messages were skipped or read twice"


@pytest.mark.parametrize("first, joiner", [
    ("confluent-kafka", "confluent-kafka"),
    ("confluent-kafka", "java"),
    ("java", "java"),
])
def test_a_classic_consumer_joins_a_consumer_group(first, joiner, broker, topic, group, java):
    """No conversion when the group is a consumer group already: the classic consumer becomes a
    classic member of it; once the consumer-protocol member leaves, the group turns classic."""
    from confluent_kafka import ConsumerGroupType

    name = topic(partitions=PARTITIONS)
    produced = classic.produce(broker.bootstrap, name, 20)
    owner = consumer_protocol_member(first, java, broker.bootstrap, group, name)
    everyone: list[Member] = []
    try:
        everyone.append(owner.start())
        wait_for(lambda: owned(owner) == frozenset(range(PARTITIONS)), everyone, "the first member to own everything")
        joining = classic_member(joiner, java, broker.bootstrap, group, name)
        everyone.append(joining.start())
        wait_for(lambda: owned_once(everyone), everyone, "the classic member to get its share")
        description = described(broker.bootstrap, group)
        assert description.type == ConsumerGroupType.CONSUMER and len(description.members) == 2
        wait_for(lambda: consumed(everyone) >= len(produced), everyone, "every message")
        owner.stop()
        wait_for(lambda: owned(joining) == frozenset(range(PARTITIONS)), [joining],
                 "the classic member to own everything")
        assert described(broker.bootstrap, group).type == ConsumerGroupType.CLASSIC
        more = classic.produce(broker.bootstrap, name, 5, tag="more-")
        wait_for(lambda: consumed(everyone) >= len(produced) + len(more), [joining], "the last messages")
    finally:
        stop_all(everyone)
    check(everyone)
    assert sorted(values(everyone)) == sorted(produced | more), "messages were skipped or read twice"
