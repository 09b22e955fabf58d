"""Online migration of a consumer group with members between the classic protocol and the consumer
protocol (KIP-848), with real clients against a real trafka process.

Classic consumers (``group.protocol=classic``: confluent-kafka, kafka-python, aiokafka) form a group;
a confluent-kafka consumer with ``group.protocol=consumer`` joins it, which converts the group into a
consumer group whose classic members are told to rejoin and get the partitions the broker assigns
(online upgrade). When that consumer closes, only classic members remain and the group becomes a
classic group again, which rebalances among them (online downgrade). Every member commits after each
batch, so across both conversions every message must be read exactly once.
"""
from __future__ import annotations

import uuid

import pytest

from compat_tests import test_groups_consumer_protocol as consumer_protocol
from compat_tests import test_groups_consumers as classic
from compat_tests.harness import wait_until

TIMEOUT = 30.0
PARTITIONS = 6


def owned(member) -> frozenset[int]:
    """The partitions a member of either kind holds now."""
    return member.partitions if isinstance(member, consumer_protocol.Member) else member.assignment


def owned_once(members) -> bool:
    held = [p for m in members for p in owned(m)]
    return sorted(held) == list(range(PARTITIONS)) and all(owned(m) for m in members)


def values(members) -> list[bytes]:
    return [record[-1] for m in members for record in m.consumed]


def check(members) -> None:
    for member in members:
        if member.error is not None:
            raise AssertionError(f"a member failed: {member.error!r}") from member.error


def wait_for(condition, members, what: str):
    def probe():
        check(members)
        return condition()

    return wait_until(probe, timeout=TIMEOUT, message=lambda: f"{what}; assignments "
                      f"{[sorted(owned(m)) for m in members]}")


def described(bootstrap: str, group: str):
    """The group as confluent-kafka's admin client describes it (its type, its members)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(10)


@pytest.fixture
def group() -> str:
    return f"migrating-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("client, strategy", [
    ("confluent-kafka", None),
    ("confluent-kafka", "cooperative-sticky"),  # rejoins listing the partitions it still owns
    ("kafka-python", None),
    ("aiokafka", None),
])
def test_a_consumer_protocol_member_joins_a_classic_group_and_leaves_it(client, strategy, broker, topic, group):
    from confluent_kafka import ConsumerGroupType

    name = topic(partitions=PARTITIONS)
    produced = classic.produce(broker.bootstrap, name, 30)
    classics = [classic.Member(client, broker.bootstrap, group, name, strategy=strategy).start() for _ in range(2)]
    newcomer = None
    everyone = list(classics)
    try:
        wait_for(lambda: owned_once(classics) and len(values(classics)) >= len(produced), classics,
                 "the classic group to share the partitions and read every message")

        # Online upgrade: the consumer-protocol member joins the classic group.
        newcomer = consumer_protocol.Member(broker.bootstrap, group, [name]).start()
        everyone.append(newcomer)
        members = [*classics, newcomer]
        wait_for(lambda: owned_once(members), members, "the three members to share the partitions")
        description = described(broker.bootstrap, group)
        assert description.type == ConsumerGroupType.CONSUMER
        assert len(description.members) == 3
        more = classic.produce(broker.bootstrap, name, 10, tag="upgraded-")
        wait_for(lambda: len(values(everyone)) >= len(produced) + len(more), members,
                 "the messages produced after the upgrade")

        # Online downgrade: the consumer-protocol member leaves; the classic members carry on.
        newcomer.stop()
        wait_for(lambda: owned_once(classics), classics, "the classic members to take all partitions back")
        assert described(broker.bootstrap, group).type == ConsumerGroupType.CLASSIC
        last = classic.produce(broker.bootstrap, name, 10, tag="downgraded-")
        wait_for(lambda: len(values(everyone)) >= len(produced) + len(more) + len(last), classics,
                 "the messages produced after the downgrade")
    finally:
        for member in everyone:
            if member._thread.is_alive():
                member.stop()
    check(everyone)
    assert sorted(values(everyone)) == sorted(produced | more | last), "messages were skipped or read twice"


def test_a_classic_consumer_joins_a_consumer_group(broker, topic, group):
    """No conversion when the group is a consumer group already: the classic consumer becomes a
    classic member of it; once the consumer-protocol member leaves, the group turns classic."""
    from confluent_kafka import ConsumerGroupType

    name = topic(partitions=PARTITIONS)
    produced = classic.produce(broker.bootstrap, name, 20)
    first = consumer_protocol.Member(broker.bootstrap, group, [name]).start()
    everyone = [first]
    try:
        wait_for(lambda: owned(first) == frozenset(range(PARTITIONS)), everyone, "the first member to own everything")
        joiner = classic.Member("confluent-kafka", broker.bootstrap, group, name).start()
        everyone.append(joiner)
        wait_for(lambda: owned_once(everyone), everyone, "the classic member to get its share")
        description = described(broker.bootstrap, group)
        assert description.type == ConsumerGroupType.CONSUMER and len(description.members) == 2
        wait_for(lambda: len(values(everyone)) >= len(produced), everyone, "every message")
        first.stop()
        wait_for(lambda: owned(joiner) == frozenset(range(PARTITIONS)), [joiner],
                 "the classic member to own everything")
        assert described(broker.bootstrap, group).type == ConsumerGroupType.CLASSIC
        more = classic.produce(broker.bootstrap, name, 5, tag="more-")
        wait_for(lambda: len(values(everyone)) >= len(produced) + len(more), [joiner], "the last messages")
    finally:
        for member in everyone:
            if member._thread.is_alive():
                member.stop()
    check(everyone)
    assert sorted(values(everyone)) == sorted(produced | more), "messages were skipped or read twice"
