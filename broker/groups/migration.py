"""Online migration of non-empty groups between the classic protocol and the consumer protocol (KIP-848).

``group.consumer.migration.policy`` says which way a group with members may change protocol:
``bidirectional`` (the default, as in Kafka 4), ``upgrade``, ``downgrade`` or ``disabled``. An empty
group always changes protocol when a member of the other protocol arrives (it has nothing to carry
over but its committed offsets).

- **Upgrade** (:func:`consumer_group_from_classic`): a classic group of protocol type ``consumer``
  becomes a consumer group whose members are the classic members, each with the subscription and
  the assignment it had (read from the embedded ConsumerProtocol subscription and assignment of the
  group's protocol), at member epoch = the classic generation, and whose group and assignment epochs
  are that generation. Its target assignment is what every member holds, so nothing moves until the
  new member's heartbeat bumps the group epoch.
- **Downgrade** (:func:`classic_group_from_consumer`): a consumer group whose remaining members all
  use the classic protocol becomes a Stable classic group at generation = the group epoch, each member
  holding its target assignment (encoded as a ConsumerProtocol assignment of the version its
  subscription uses); the coordinator then starts a rebalance, so the members rejoin and their leader
  assigns the partitions again.

Both directions fail (and the group keeps its type) if a member's embedded protocol cannot be read.
"""
from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from trafka.broker.groups.classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicGroupMember
from trafka.broker.groups.consumer import Assignment, ConsumerGroup, ConsumerGroupMember, MemberState
from trafka.broker.groups.records import ClassicMemberMetadata
from trafka.broker.groups.state import ClassicGroupState
from trafka.wire.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from trafka.wire.primitives import INT16, DecodeError, EncodeError

if TYPE_CHECKING:
    from trafka.broker.topics import TopicManager

#: The newest ConsumerProtocol version; newer versions are read with its layout, as Kafka does.
CONSUMER_PROTOCOL_MAX_VERSION = 3


class MigrationPolicy(enum.Enum):
    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class MalformedConsumerProtocol(ValueError):
    """Embedded ConsumerProtocol bytes (a subscription or an assignment) that cannot be read."""


# ================================================================================ the embedded protocol


def protocol_version(data: bytes) -> int:
    """The version in front of a ConsumerProtocol subscription or assignment."""
    if len(data) < 2:
        raise MalformedConsumerProtocol("no version: fewer than two bytes")
    (version,) = INT16.unpack_from(data, 0)
    if version < 0:
        raise MalformedConsumerProtocol(f"version {version} is invalid")
    return version


def decode_subscription(metadata: bytes) -> ConsumerProtocolSubscription:
    version = min(protocol_version(metadata), CONSUMER_PROTOCOL_MAX_VERSION)
    try:
        return ConsumerProtocolSubscription.decode(memoryview(metadata)[2:], version, exact=False)
    except DecodeError as exc:
        raise MalformedConsumerProtocol(f"subscription: {exc}") from exc


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """The partitions of a ConsumerProtocol assignment, by topic name."""
    version = min(protocol_version(data), CONSUMER_PROTOCOL_MAX_VERSION)
    try:
        decoded = ConsumerProtocolAssignment.decode(memoryview(data)[2:], version, exact=False)
    except DecodeError as exc:
        raise MalformedConsumerProtocol(f"assignment: {exc}") from exc
    partitions: dict[str, set[int]] = {}
    for topic in decoded.assigned_partitions:
        partitions.setdefault(topic.topic, set()).update(topic.partitions)
    return partitions


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """A ConsumerProtocol assignment (no user data) of ``version`` (at most the newest one)."""
    version = min(version, CONSUMER_PROTOCOL_MAX_VERSION)
    assignment = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=name, partitions=sorted(ps))
            for name, ps in sorted(partitions.items())
        ]
    )
    try:
        return INT16.pack(version) + assignment.encode(version)
    except EncodeError as exc:  # pragma: no cover - names and partitions come from the registry
        raise MalformedConsumerProtocol(str(exc)) from exc


def by_topic_id(partitions: Mapping[str, Iterable[int]], topics: TopicManager) -> Assignment:
    """Partitions by topic name -> by topic id; topics that do not exist are left out."""
    result: dict[uuid.UUID, frozenset[int]] = {}
    for name, ps in partitions.items():
        topic = topics.get(name)
        partition_set = frozenset(ps)
        if topic is not None and partition_set:
            result[topic.topic_id] = result.get(topic.topic_id, frozenset()) | partition_set
    return result


def by_topic_name(assignment: Assignment, topics: TopicManager) -> dict[str, frozenset[int]]:
    """Partitions by topic id -> by topic name; topics that no longer exist are left out."""
    result = {}
    for topic_id, partitions in assignment.items():
        topic = topics.by_id(topic_id)
        if topic is not None:
            result[topic.name] = partitions
    return result


def owned_partitions(subscription: ConsumerProtocolSubscription, topics: TopicManager) -> Assignment:
    """What a classic member says it owns in its subscription (empty before version 1)."""
    owned: dict[str, set[int]] = {}
    for topic in subscription.owned_partitions or ():
        owned.setdefault(topic.topic, set()).update(topic.partitions)
    return by_topic_id(owned, topics)


def member_assignment_bytes(assignment: Assignment, metadata: bytes, topics: TopicManager) -> bytes:
    """``assignment`` encoded for a classic member whose subscription (of the protocol in use) is
    ``metadata``: the assignment takes the subscription's version."""
    return encode_assignment(by_topic_name(assignment, topics), protocol_version(metadata))


# ================================================================================ upgrade


def consumer_group_from_classic(classic: ClassicGroup, topics: TopicManager) -> ConsumerGroup:
    """The consumer group an upgraded classic group becomes (not registered anywhere: the coordinator
    writes its records and replays them). Raises MalformedConsumerProtocol."""
    generation = classic.generation_id
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = generation
    group.assignment_epoch = generation
    if classic.protocol_name is None:
        raise MalformedConsumerProtocol("the group has not chosen a protocol yet")
    for member in classic.members.values():
        assigned = by_topic_id(decode_assignment(member.assignment), topics)
        subscription = decode_subscription(member.metadata(classic.protocol_name))
        converted = ConsumerGroupMember(
            member.member_id,
            instance_id=member.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(subscription.topics),
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            classic_member_metadata=ClassicMemberMetadata(member.session_timeout_ms, tuple(member.protocols)),
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            assigned_partitions=assigned,
        )
        group.target_assignment[member.member_id] = assigned
        group.update_member(converted)
    return group


# ================================================================================ downgrade


def classic_group_from_consumer(
    group: ConsumerGroup,
    leaving_member_id: str,
    joining_member: ConsumerGroupMember | None,
    topics: TopicManager,
    now_ms: int,
) -> ClassicGroup:
    """The Stable classic group a consumer group becomes once ``leaving_member_id`` (its last
    consumer-protocol member) is gone; ``joining_member`` is a classic static member that takes the
    leaving member's place (and its target assignment). Raises MalformedConsumerProtocol."""
    classic = ClassicGroup(group.group_id, now_ms, ClassicGroupState.STABLE)
    classic.generation_id = group.group_epoch
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    members = [m for m in group.members.values() if m.member_id != leaving_member_id]
    if joining_member is not None:
        members.append(joining_member)
    for member in members:
        metadata = member.classic_member_metadata
        assert metadata is not None, f"member {member.member_id} does not use the classic protocol"
        classic.add(
            ClassicGroupMember(
                member.member_id, member.instance_id, member.client_id, member.client_host,
                member.rebalance_timeout_ms, metadata.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                list(metadata.supported_protocols),
            )
        )
    try:
        classic.protocol_name = classic.select_protocol()
    except ValueError as exc:
        raise MalformedConsumerProtocol(f"the members share no protocol: {exc}") from exc
    for member in classic.members.values():
        source = member.member_id
        if joining_member is not None and source == joining_member.member_id:
            source = leaving_member_id
        target = group.target_assignment.get(source, {})
        member.assignment = member_assignment_bytes(target, member.metadata(classic.protocol_name), topics)
    return classic
