"""Share groups (KIP-932): membership, the simple assignor and the share state of assigned partitions.

A share group's members consume the same partitions together: the coordinator assigns partitions, and a
partition may be given to several members at once (records, not partitions, are what members hold, one
delivery at a time, through ShareFetch). Membership follows the shape of the KIP-848 consumer protocol,
with one request, ShareGroupHeartbeat:

- A member joins with member epoch 0 and its subscribed topic names (the member id is the client's),
  heartbeats with its current member epoch, and leaves with -1. A member that does not heartbeat within
  ``group.share.session.timeout.ms`` (or the group's ``share.session.timeout.ms``) is removed.
- The **group epoch** moves when a member joins, leaves, or changes its subscription, when the subscribed
  topics' metadata changes (partitions added, a topic created or deleted), and when partitions whose share
  state was just initialized are not in the target assignment yet. A new group starts at epoch 1, so its
  first member joins at epoch 2.
- When the group epoch is ahead of the **assignment epoch**, the simple assignor computes a new target
  assignment over the partitions whose share state is initialized, at most once every
  ``group.share.assignment.interval.ms`` (the group's ``share.assignment.interval.ms``): members that join
  meanwhile wait at the current assignment epoch for a heartbeat after it. There is no revocation: a member
  moves to its target at once, its member epoch becoming the assignment epoch.
- **Share state**: the first time a subscribed partition appears, the group records that it initializes it
  (ShareGroupStatePartitionMetadata, InitializingTopics), initializes its state through the share
  persister (the share coordinator of its key) without a start offset (-1: the share partition takes the one
  ``share.auto.offset.reset`` gives when it first reads the state), then records it as initialized; only then
  is it assigned.
  Deleting the group deletes the state of its partitions.

The group's state is ``Empty`` without members and ``Stable`` with some, ``Dead`` once removed; the
transitions are checked against :data:`TRANSITIONS`.

Every change is written to ``__consumer_offsets`` as Kafka's ShareGroup* records and applied by replaying
them (:meth:`ShareGroupProtocol.replay`), the same code that rebuilds groups at start-up or when this broker
becomes the coordinator of their partition.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from trafka.broker.groups.share_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupValue,
    TopicInfo,
    TopicPartitionsInfo,
    encode_share_group_key,
    encode_share_group_value,
)
from trafka.wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from trafka.broker.groups.host import GroupHost

log = logging.getLogger(__name__)

SHARE_PROTOCOL_TYPE = "share"
#: The assignor share groups use (Kafka's SimpleAssignor).
SIMPLE_ASSIGNOR = "simple"
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
#: Longest member id a client may choose (a UUID's string form).
MAX_MEMBER_ID_LENGTH = 36
#: The member state Kafka stores in ShareGroupCurrentMemberAssignment (share members are always stable).
MEMBER_STATE_STABLE = 0

#: A member's partitions: topic id -> partition indexes (never an empty set).
Assignment = Mapping[uuid.UUID, frozenset[int]]


class ShareGroupType(enum.Enum):
    """The type ListGroups and DescribeGroups give share groups (beside GroupType's classic and consumer)."""

    SHARE = "share"

    def __str__(self) -> str:
        return self.value


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


#: The states a share group may move to from each state.
TRANSITIONS: dict[ShareGroupState, frozenset[ShareGroupState]] = {
    ShareGroupState.EMPTY: frozenset({ShareGroupState.STABLE, ShareGroupState.DEAD}),
    ShareGroupState.STABLE: frozenset({ShareGroupState.EMPTY, ShareGroupState.DEAD}),
    ShareGroupState.DEAD: frozenset(),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    previous_member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    assigned_partitions: Assignment = field(default_factory=dict)

    __hash__ = None  # type: ignore[assignment]

    def metadata_differs(self, other: ShareGroupMember) -> bool:
        return (
            self.rack_id != other.rack_id
            or self.client_id != other.client_id
            or self.client_host != other.client_host
            or self.subscribed_topic_names != other.subscribed_topic_names
        )


@dataclass(frozen=True, slots=True)
class TopicState:
    """Partitions of one topic in the share state bookkeeping of a group."""

    name: str
    partitions: frozenset[int]
    create_timestamp: int = -1


class ShareGroup:
    type = ShareGroupType.SHARE
    protocol_type = SHARE_PROTOCOL_TYPE

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        #: Share state: partitions being initialized, initialized, and topics whose state is being deleted.
        self.initializing: dict[uuid.UUID, TopicState] = {}
        self.initialized: dict[uuid.UUID, TopicState] = {}
        self.deleting: dict[uuid.UUID, str] = {}
        #: When (ms) the target assignment was last computed here: the next waits share.assignment.interval.ms.
        self.assigned_at_ms = 0
        self._state = ShareGroupState.EMPTY

    def __repr__(self) -> str:
        return f"ShareGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch})"

    # -- state ----------------------------------------------------------------------------------------

    @property
    def state(self) -> ShareGroupState:
        return self._state

    def transition_to(self, state: ShareGroupState) -> None:
        if state is self._state:
            return
        if state not in TRANSITIONS[self._state]:
            raise IllegalTransition(f"share group {self.group_id}: {self._state} -> {state}")
        self._state = state

    def _settle(self) -> None:
        if self._state is not ShareGroupState.DEAD:
            self.transition_to(ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY)

    @property
    def dead(self) -> bool:
        return self._state is ShareGroupState.DEAD

    @property
    def is_empty(self) -> bool:
        return not self.members

    def is_in(self, *states: object) -> bool:
        return self.state in states

    # -- members --------------------------------------------------------------------------------------

    def update_member(self, member: ShareGroupMember) -> None:
        self.members[member.member_id] = member
        self._settle()

    def remove_member(self, member_id: str) -> ShareGroupMember | None:
        member = self.members.pop(member_id, None)
        self._settle()
        return member

    def subscribed_topics(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    def initialized_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        return {topic_id: t.partitions for topic_id, t in self.initialized.items()}

    def assigned_to(self, topic_id: uuid.UUID, partition: int) -> list[str]:
        """The members the target assigns ``partition`` of ``topic_id`` to."""
        return [m for m, a in self.target_assignment.items() if partition in a.get(topic_id, ())]

    # -- what other group types' handlers ask of every group --------------------------------------------

    def validate_offset_commit(self, *args: Any, **kwargs: Any) -> None:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def validate_delete(self) -> None:
        if self.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")

    def validate_offset_delete(self) -> None:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def offset_expiry_base_ms(self) -> tuple[bool, int | None]:
        return False, None


# ================================================================================ the simple assignor


def simple_assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    assignable: Mapping[uuid.UUID, frozenset[int]],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The target assignment of a share group, by the rules of Kafka's simple assignor.

    With P partitions among M members, each partition goes to ``ceil(M / P)`` members (one when there are
    enough partitions), and the members take as even a number of the resulting assignments as possible (at
    most one apart: with more members than partitions, some take two partitions). Members keep what they had
    where the balance allows, so that a join or a leave moves as little as possible.

    Members that all subscribe to the same topics share the partitions of all of them together, and the
    choices are made in the order Kafka 4.4 makes them (:class:`_HomogeneousShares`: which partitions a member
    keeps and which it gives up, which member takes a partition that is free), so that the same group gets the
    same assignment. With different subscriptions, each topic is shared among its subscribers."""
    subscribed = {tid for topics in subscriptions.values() for tid in topics}
    if len(set(subscriptions.values())) <= 1:
        topic_ids = [tid for tid in assignable if tid in subscribed and assignable[tid]]
        if not subscriptions or not topic_ids:
            return {m: {} for m in subscriptions}
        return _HomogeneousShares(list(subscriptions), topic_ids, assignable, previous).build()
    return _HeterogeneousShares(subscriptions, assignable, previous).build()


class _HeterogeneousShares:
    """Kafka 4.4's simple assignment of members with different subscriptions: each subscribed topic on its
    own, among its subscribers, by the same steps as :class:`_HomogeneousShares` (a member keeps what it had of
    the topic, the overfilled give up partitions, the overshared lose members, the free go round the members
    still short), in the same Java iteration orders."""

    def __init__(self, subscriptions: Mapping[str, frozenset[uuid.UUID]],
                 assignable: Mapping[uuid.UUID, frozenset[int]], previous: Mapping[str, Assignment]) -> None:
        ids = _JavaHashMap(_java_string_hash)
        for member_id in sorted(subscriptions):
            ids.put(member_id)
        self.member_ids: list[str] = ids.keys()
        self.subscriptions = subscriptions
        self.assignable = assignable
        self.old = [{tid: sorted(ps) for tid, ps in previous.get(m, {}).items()} for m in self.member_ids]
        self.new: dict[int, dict[uuid.UUID, set[int]]] = {}

    def _copy(self, index: int) -> dict[uuid.UUID, set[int]]:
        if index not in self.new:
            self.new[index] = {tid: set(ps) for tid, ps in self.old[index].items()}
        return self.new[index]

    def build(self) -> dict[str, Assignment]:
        subscribed = {tid for topics in self.subscriptions.values() for tid in topics}
        for topic_id in sorted(subscribed):
            self._topic(topic_id)
        result: dict[str, Assignment] = {}
        for index, member_id in enumerate(self.member_ids):
            source = self.new.get(index)
            chosen = source if source is not None else {tid: set(ps) for tid, ps in self.old[index].items()}
            result[member_id] = {tid: frozenset(ps) for tid, ps in chosen.items() if ps}
        return result

    def _topic(self, topic_id: uuid.UUID) -> None:
        targets = sorted(self.assignable.get(topic_id, ()))
        members = [i for i, m in enumerate(self.member_ids) if topic_id in self.subscriptions[m]]
        count_p, count_m = len(targets), len(members)
        sharing = (count_m + count_p - 1) // count_p if count_p else 0
        desired = [0] * len(self.member_ids)
        if count_m:
            precise = sharing * count_p / count_m
            for i, index in enumerate(members):
                desired[index] = math.ceil(precise * (i + 1)) - math.ceil(precise * i)
        by_partition = _JavaHashMap(lambda p: p, _new_hash_map_capacity(count_p))
        by_member = _JavaHashMap(lambda i: i, _new_hash_map_capacity(count_m))
        # Every member keeps what it had of the topic.
        for index, assignment in enumerate(self.old):
            if assignment and topic_id in assignment:
                for partition in _in_map_order({topic_id: assignment[topic_id]})[0][1]:
                    by_partition.setdefault(partition, lambda: _JavaHashMap(lambda i: i)).put(index)
                    by_member.setdefault(index, lambda: _JavaHashMap(lambda p: p)).put(partition)
        # Members over their count give up partitions.
        for index in by_member.keys():
            held = by_member.get(index)
            for partition in held.keys():
                if len(held) <= desired[index]:
                    break
                by_partition.get(partition).remove(index)
                held.remove(partition)
                self._copy(index)[topic_id].discard(partition)
        # Partitions shared by too many lose members.
        for partition in by_partition.keys():
            holders = by_partition.get(partition)
            for index in holders.keys():
                if len(holders) <= sharing:
                    break
                partitions = self._copy(index).get(topic_id)
                if partitions is not None and partition in partitions:
                    partitions.discard(partition)
                    holders.remove(index)
                    by_member.get(index).remove(partition)
        for partition in targets:
            by_partition.setdefault(partition, lambda: _JavaHashMap(lambda i: i, _new_hash_map_capacity(count_m)))
        # The free partitions go round the members still short.
        unfilled = [index for index in members
                    if (len(by_member.get(index)) if index in by_member else 0) < desired[index]]
        unfilled_set = _JavaHashMap(lambda i: i, _new_hash_map_capacity(len(self.member_ids)))
        for index in unfilled:
            unfilled_set.put(index)
        order = unfilled_set.keys()
        position = 0
        assigned_this_round = False
        for partition in by_partition.keys():
            holders = by_partition.get(partition)
            wanted = sharing - len(holders)
            while wanted > 0:
                if position >= len(order):
                    if not assigned_this_round:
                        break
                    order = unfilled_set.keys()
                    position = 0
                    assigned_this_round = False
                index = order[position]
                position += 1
                if index in holders:
                    continue
                self._copy(index).setdefault(topic_id, set()).add(partition)
                held = by_member.setdefault(index, lambda: _JavaHashMap(lambda p: p))
                held.put(partition)
                wanted -= 1
                assigned_this_round = True
                if len(held) >= desired[index]:
                    unfilled_set.remove(index)
                    order.pop(position - 1)
                    position -= 1
            if not len(unfilled_set):
                break


# -- Kafka's choices follow the iteration order of Java's hash maps and sets: emulated here ---------------


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _uuid_hash(topic_id: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the two 64-bit halves xored, folded to 32 bits."""
    bits = (topic_id.int >> 64) ^ (topic_id.int & 0xFFFFFFFFFFFFFFFF)
    return _int32((bits >> 32) ^ bits)


def _partition_hash(tp: tuple[uuid.UUID, int]) -> int:
    """The hash of a (topic id, partition) record: 31 * the topic id's hash + the partition."""
    return _int32(31 * _uuid_hash(tp[0]) + tp[1])


class _JavaHashMap:
    """The iteration order of a java.util.HashMap (or HashSet) of the given initial capacity: buckets by the
    spread hash, entries of a bucket in insertion order, split in order when the table doubles."""

    def __init__(self, hash_of: Callable[[Any], int], capacity: int = 16) -> None:
        size = 1
        while size < capacity:
            size <<= 1
        self._hash_of = hash_of
        self._buckets: list[list[Any]] = [[] for _ in range(size)]
        self._values: dict[Any, Any] = {}

    def _index(self, key: Any, size: int) -> int:
        h = self._hash_of(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (size - 1)

    def __contains__(self, key: Any) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: Any, default: Any = None) -> Any:
        return self._values.get(key, default)

    def put(self, key: Any, value: Any = None) -> None:
        if key not in self._values:
            self._buckets[self._index(key, len(self._buckets))].append(key)
            if len(self._values) + 1 > 0.75 * len(self._buckets):
                size = 2 * len(self._buckets)
                buckets: list[list[Any]] = [[] for _ in range(size)]
                for bucket in self._buckets:
                    for k in bucket:
                        buckets[self._index(k, size)].append(k)
                self._buckets = buckets
        self._values[key] = value

    def setdefault(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._values:
            self.put(key, make())
        return self._values[key]

    def remove(self, key: Any) -> None:
        if key in self._values:
            del self._values[key]
            self._buckets[self._index(key, len(self._buckets))].remove(key)

    def keys(self) -> list[Any]:
        return [k for bucket in self._buckets for k in bucket]


def _new_hash_map_capacity(expected: int) -> int:
    return int((expected + 1) / 0.75 + 1)


class _HomogeneousShares:
    """Kafka 4.4's simple assignment of members with the same subscription, choice for choice.

    Members are numbered in the order of a Java hash map of their ids. Each member's desired count is its share
    of ``ceil(M / P) * P`` assignments; each partition's desired sharing ``ceil(M / P)``. First every member
    keeps all it had of the subscribed topics; members over their count give up partitions (in the order of
    their partitions' hash set) until at their count; partitions shared by too many members lose members (in
    member order); then the partitions that want more members are given, in partition hash order, to the
    members still short, taken round and round in member order."""

    def __init__(self, members: list[str], topic_ids: list[uuid.UUID], assignable: Mapping[uuid.UUID, frozenset[int]],
                 previous: Mapping[str, Assignment]) -> None:
        ids = _JavaHashMap(_java_string_hash)
        for member_id in sorted(members):
            ids.put(member_id)
        self.member_ids: list[str] = ids.keys()
        count_m = len(self.member_ids)
        topics = _JavaHashMap(_uuid_hash)
        for topic_id in sorted(topic_ids):
            topics.put(topic_id)
        self.targets = [(tid, p) for tid in topics.keys() for p in sorted(assignable[tid])]
        count_p = len(self.targets)
        self.sharing = (count_m + count_p - 1) // count_p
        precise = self.sharing * count_p / count_m
        self.desired = [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(count_m)]
        subscribed = set(topic_ids)
        self.old = [{tid: sorted(ps) for tid, ps in previous.get(m, {}).items()} for m in self.member_ids]
        self.new: dict[int, dict[uuid.UUID, set[int]]] = {}
        self.by_partition = _JavaHashMap(_partition_hash, _new_hash_map_capacity(count_p))
        self.by_member: dict[int, _JavaHashMap] = {}
        self.unfilled: set[int] = set()
        self.overfilled: set[int] = set()
        self.subscribed = subscribed

    def _copy(self, index: int) -> dict[uuid.UUID, set[int]]:
        if index not in self.new:
            self.new[index] = {tid: set(ps) for tid, ps in self.old[index].items()}
        return self.new[index]

    def build(self) -> dict[str, Assignment]:
        self._keep()
        self._give_up_surplus()
        self._unshare()
        for tp in self.targets:
            self.by_partition.setdefault(tp, lambda: _JavaHashMap(lambda i: i))
        self._fill()
        result: dict[str, Assignment] = {}
        for index, member_id in enumerate(self.member_ids):
            source = self.new.get(index)
            chosen = source if source is not None else {tid: set(ps) for tid, ps in self.old[index].items()}
            result[member_id] = {tid: frozenset(ps) for tid, ps in chosen.items() if ps}
        return result

    def _keep(self) -> None:
        for index, assignment in enumerate(self.old):
            count = 0
            for topic_id, partitions in _in_map_order(assignment):
                if topic_id in self.subscribed:
                    for partition in partitions:
                        tp = (topic_id, partition)
                        count += 1
                        self.by_partition.setdefault(tp, lambda: _JavaHashMap(lambda i: i)).put(index)
                        self.by_member.setdefault(index, _JavaHashMap(_partition_hash)).put(tp)
                        if count >= self.desired[index]:
                            self._copy(index)
                else:
                    self._copy(index).pop(topic_id, None)
            if count < self.desired[index]:
                self.unfilled.add(index)
            elif count > self.desired[index]:
                self.overfilled.add(index)

    def _give_up_surplus(self) -> None:
        for index in sorted(self.overfilled):
            held = self.by_member[index]
            for tp in held.keys():
                if len(held) <= self.desired[index]:
                    break
                self.new[index][tp[0]].discard(tp[1])
                self.by_partition.get(tp).remove(index)
                held.remove(tp)

    def _unshare(self) -> None:
        for tp in self.by_partition.keys():
            holders = self.by_partition.get(tp)
            for index in holders.keys():
                if len(holders) <= self.sharing:
                    break
                partitions = self._copy(index).get(tp[0])
                if partitions is not None and tp[1] in partitions:
                    partitions.discard(tp[1])
                    holders.remove(index)
                    self.by_member[index].remove(tp)
                    self.unfilled.add(index)

    def _fill(self) -> None:
        if not self.unfilled:
            return
        order = sorted(self.unfilled)
        position = 0
        assigned_this_round = False
        for tp in self.by_partition.keys():
            holders = self.by_partition.get(tp)
            wanted = self.sharing - len(holders)
            while wanted > 0:
                if position >= len(order):
                    if not assigned_this_round:
                        break
                    order = sorted(self.unfilled)
                    position = 0
                    assigned_this_round = False
                index = order[position]
                position += 1
                if index in holders:
                    continue
                self._copy(index).setdefault(tp[0], set()).add(tp[1])
                held = self.by_member.setdefault(index, _JavaHashMap(_partition_hash))
                held.put(tp)
                wanted -= 1
                assigned_this_round = True
                if len(held) >= self.desired[index]:
                    self.unfilled.discard(index)
                    order.pop(position - 1)
                    position -= 1
            if not self.unfilled:
                break


def _in_map_order(assignment: Mapping[uuid.UUID, list[int]]) -> list[tuple[uuid.UUID, list[int]]]:
    """A member's partitions as Kafka iterates them: topics in hash map order, partitions in hash set order."""
    topics = _JavaHashMap(_uuid_hash)
    for topic_id in assignment:
        topics.put(topic_id)
    ordered = []
    for topic_id in topics.keys():
        partitions = _JavaHashMap(lambda p: p, max(int(len(assignment[topic_id]) / 0.75) + 1, 16))
        for partition in assignment[topic_id]:
            partitions.put(partition)
        ordered.append((topic_id, partitions.keys()))
    return ordered


# ================================================================================ the protocol


@dataclass(slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class ShareHeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: None when the response does not carry the assignment.
    assignment: Assignment | None = None


Record = tuple[ShareGroupKey, ShareGroupValue | None]
#: Where a partition's share state starts: (group id, topic id, partition) -> start offset (-1: let the
#: share partition decide by share.auto.offset.reset when it first reads it).
StartOffsetResolver = Callable[[str, uuid.UUID, int], int]


#: The share configs of a group, with the broker setting that gives each its default (and that default).
SHARE_GROUP_CONFIGS: dict[str, tuple[str | None, object]] = {
    "share.session.timeout.ms": ("group.share.session.timeout.ms", 45_000),
    "share.heartbeat.interval.ms": ("group.share.heartbeat.interval.ms", 5000),
    "share.record.lock.duration.ms": ("group.share.record.lock.duration.ms", 30_000),
    "share.delivery.count.limit": ("group.share.delivery.count.limit", 5),
    "share.partition.max.record.locks": ("group.share.partition.max.record.locks", 2000),
    "share.auto.offset.reset": (None, "latest"),
    "share.isolation.level": (None, "read_uncommitted"),
    "share.renew.acknowledge.enable": (None, True),
    "share.assignment.interval.ms": ("group.share.assignment.interval.ms", 1000),
    "share.assignor.offload.enable": ("group.share.assignor.offload.enable", True),
}


def _typed(default: object, raw: object) -> object:
    if isinstance(default, bool):
        return raw if isinstance(raw, bool) else str(raw).strip().lower() == "true"
    if isinstance(default, int):
        return int(raw)  # type: ignore[call-overload]
    return str(raw)


def check_share_settings(props: Mapping[str, str]) -> None:
    """The relations between the share group settings Kafka 4.4 checks when it starts; raises ConfigError."""
    from trafka.broker.config import ConfigError

    def value(name: str, default: int) -> int:
        return int(props.get(name, default))

    relations = [  # (name, relation, other name) with their defaults
        (("group.share.max.heartbeat.interval.ms", 15_000), ">=", ("group.share.min.heartbeat.interval.ms", 5000)),
        (("group.share.heartbeat.interval.ms", 5000), ">=", ("group.share.min.heartbeat.interval.ms", 5000)),
        (("group.share.heartbeat.interval.ms", 5000), "<=", ("group.share.max.heartbeat.interval.ms", 15_000)),
        (("group.share.max.session.timeout.ms", 60_000), ">=", ("group.share.min.session.timeout.ms", 45_000)),
        (("group.share.session.timeout.ms", 45_000), ">=", ("group.share.min.session.timeout.ms", 45_000)),
        (("group.share.session.timeout.ms", 45_000), "<=", ("group.share.max.session.timeout.ms", 60_000)),
        (("group.share.heartbeat.interval.ms", 5000), "<", ("group.share.session.timeout.ms", 45_000)),
        (("group.share.max.assignment.interval.ms", 15_000), ">=", ("group.share.min.assignment.interval.ms", 0)),
        (("group.share.assignment.interval.ms", 1000), ">=", ("group.share.min.assignment.interval.ms", 0)),
        (("group.share.assignment.interval.ms", 1000), "<=", ("group.share.max.assignment.interval.ms", 15_000)),
    ]
    words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
    holds = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}
    for (name, default), relation, (other, other_default) in relations:
        if not holds[relation](value(name, default), value(other, other_default)):
            raise ConfigError(f"{name} must be {words[relation]} {other}")


def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("share-session", group_id, member_id)


class ShareGroupProtocol:
    """ShareGroupHeartbeat and the share groups' records, on the group coordinator (``coordinator``)."""

    def __init__(self, coordinator: GroupHost) -> None:
        self.coordinator = coordinator
        self.timers = coordinator.timers
        config = coordinator.config
        props = config.properties
        self.session_timeout_ms = int(props.get("group.share.session.timeout.ms", 45_000))
        self.heartbeat_interval_ms = int(props.get("group.share.heartbeat.interval.ms", 5000))
        self.max_size = int(props.get("group.share.max.size", 200))
        self.assignment_interval_ms = int(props.get("group.share.assignment.interval.ms", 1000))
        check_share_settings(props)
        #: The share persister (the share coordinator of a key, here or on another broker), attached by the first
        #: request that needs it; until then share state waits to be initialized or deleted.
        self.persister: Callable[[], Any] | None = None
        #: The start offset a partition's share state is initialized with (None: -1, as Kafka initializes it:
        #: the share partition decides by share.auto.offset.reset when it first reads the state).
        self.start_offset_resolver: StartOffsetResolver | None = None
        #: Group configs set by IncrementalAlterConfigs/AlterConfigs (share.session.timeout.ms ...), by group id.
        self.group_configs: dict[str, dict[str, str]] = {}
        self._member_left: list[Callable[[str, str], object]] = []
        self._in_flight: set[str] = set()
        #: Partitions of deleted topics whose share state is to be deleted, by (group id, topic id).
        self._deleted_partitions: dict[tuple[str, uuid.UUID], set[int]] = {}
        self._send, self._receive = trio.open_memory_channel[str](math.inf)

    # ================================================================================ listeners

    def add_member_left_listener(self, callback: Callable[[str, str], object]) -> None:
        """``callback(group_id, member_id)`` runs when a member leaves the group or is removed from it when
        its session expires."""
        self._member_left.append(callback)

    def _notify_left(self, group_id: str, member_id: str) -> None:
        for callback in self._member_left:
            try:
                callback(group_id, member_id)
            except Exception:
                log.exception("share group %s: a member-left listener failed for %s", group_id, member_id)

    # ================================================================================ heartbeat

    def heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        try:
            self._validate(request)
            if self.coordinator.stopping:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is stopping.")
            self.coordinator.check_group(request.group_id)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._heartbeat(request)
        except KafkaError as exc:
            if exc.code not in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                log.info("share group %s: heartbeat of member %s failed: %s %s",
                         request.group_id, request.member_id, exc.code.name, exc.message)
            return ShareHeartbeatResult(exc.code, exc.message or None)

    def _validate(self, request: ShareHeartbeatRequest) -> None:
        if not request.member_id or len(request.member_id) > MAX_MEMBER_ID_LENGTH:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "")
        if not request.group_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        self.coordinator.check_group_id(request.group_id)
        if request.rack_id == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        epoch = request.member_epoch
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if not request.subscribed_topic_names:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        elif epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")

    def _share_group(self, group_id: str, *, create: bool) -> ShareGroup:
        group = self.coordinator.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return group
        if group is not None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        return ShareGroup(group_id)

    def _heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
        joining = epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._share_group(group_id, create=joining)
        new_group = group_id not in self.coordinator.groups
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
                )
            max_size = self.max_size
            if len(group.members) >= max_size:
                raise KafkaError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of {max_size} members.",
                )
            stored = None
            member = ShareGroupMember(member_id)
        else:
            stored = member
            if not joining:
                _check_member_epoch(member, epoch)

        updated = dataclasses.replace(
            member,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id,
            client_host=request.client_host,
            subscribed_topic_names=(
                java_set_order(request.subscribed_topic_names)
                if request.subscribed_topic_names is not None else member.subscribed_topic_names
            ),
        )
        if stored is None:
            log.info("share group %s: member %s (client %s) joins, subscribing to %s",
                     group_id, member_id, request.client_id, list(updated.subscribed_topic_names))
        records: list[Record] = []
        members = {**group.members, member_id: updated}
        reconciled = self._update(group, stored, updated, members, records, new_group=new_group)
        self._write(group_id, records, group if new_group else None)
        group = self._existing_group(group_id)
        self._queue_initialization(group)
        self._schedule_session_timeout(group_id, member_id)
        # As Kafka: the assignment goes with a full request (one that names the subscription, as a join
        # does) and with any change of it.
        send_assignment = (
            joining or request.subscribed_topic_names is not None or stored is None
            or reconciled.assigned_partitions != stored.assigned_partitions
        )
        return ShareHeartbeatResult(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval(group_id),
            assignment=reconciled.assigned_partitions if send_assignment else None,
        )

    def _update(
        self,
        group: ShareGroup,
        stored: ShareGroupMember | None,
        updated: ShareGroupMember,
        members: Mapping[str, ShareGroupMember],
        records: list[Record],
        *,
        new_group: bool = False,
    ) -> ShareGroupMember:
        """The epochs, target assignment and share state bookkeeping after ``updated`` heartbeats (``stored``
        is the member as the group holds it, None when it joins): appends their records and returns the
        member at its new epoch."""
        group_id = group.group_id
        bump = False
        if stored is None or updated.metadata_differs(stored):
            records.append(_member_metadata_record(group_id, updated))
            bump = stored is None or updated.subscribed_topic_names != stored.subscribed_topic_names
        group_epoch = 1 if new_group else group.group_epoch
        metadata_hash = self._metadata_hash(members.values())
        if metadata_hash != group.metadata_hash:
            bump = True
        if not bump and group.assignment_epoch >= group_epoch and self._initialized_pending(group, members):
            bump = True
        if bump:
            group_epoch += 1
            records.append((ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(group_epoch, metadata_hash)))

        now = self.coordinator.now_ms()
        if group_epoch > group.assignment_epoch and now - group.assigned_at_ms >= self.assignment_interval(group_id):
            target = self._assign(group, members, group_epoch, records)
            assignment_epoch = group_epoch
            group.assigned_at_ms = now
        else:
            target = dict(group.target_assignment)
            assignment_epoch = group.assignment_epoch
        mine = target.get(updated.member_id, {})
        reconciled = updated
        if updated.member_epoch != assignment_epoch or updated.assigned_partitions != mine:
            reconciled = dataclasses.replace(
                updated, member_epoch=assignment_epoch, previous_member_epoch=updated.member_epoch,
                assigned_partitions=mine,
            )
            records.append(_current_assignment_record(group_id, reconciled))
        self._record_new_partitions(group, members, records)
        return reconciled

    def _assign(
        self, group: ShareGroup, members: Mapping[str, ShareGroupMember], group_epoch: int, records: list[Record]
    ) -> dict[str, Assignment]:
        topics = self.coordinator.topics
        ids = {}
        for m in members.values():
            for name in m.subscribed_topic_names:
                topic = topics.get(name)
                if topic is not None:
                    ids[name] = topic.topic_id
        subscriptions = {
            member_id: frozenset(ids[n] for n in m.subscribed_topic_names if n in ids)
            for member_id, m in members.items()
        }
        subscribed = set(ids.values())
        assignable = {tid: t.partitions for tid, t in group.initialized.items() if tid in subscribed}
        target = simple_assign(subscriptions, assignable, group.target_assignment)
        for member_id, assignment in target.items():
            if group.target_assignment.get(member_id) != assignment or member_id not in group.target_assignment:
                records.append((ShareGroupTargetAssignmentMemberKey(group.group_id, member_id),
                                ShareGroupTargetAssignmentMemberValue(assignment)))
        records.append((ShareGroupTargetAssignmentMetadataKey(group.group_id),
                        ShareGroupTargetAssignmentMetadataValue(group_epoch)))
        return target

    def _metadata_hash(self, members: Iterable[ShareGroupMember]) -> int:
        """A hash of the subscribed topics as they are (names, ids, partition counts)."""
        names = sorted({n for m in members for n in m.subscribed_topic_names})
        digest = hashlib.blake2b(digest_size=8)
        found = False
        for name in names:
            topic = self.coordinator.topics.get(name)
            if topic is None:
                continue
            found = True
            digest.update(f"{name}\0{topic.topic_id}\0{len(topic.partitions)}\n".encode())
        if not found:
            return 0
        return int.from_bytes(digest.digest(), "big", signed=True)

    def _initialized_pending(self, group: ShareGroup, members: Mapping[str, ShareGroupMember]) -> bool:
        """Whether partitions of subscribed topics were initialized since the target was computed."""
        if not members or not group.initialized:
            return False
        subscribed = {n for m in members.values() for n in m.subscribed_topic_names}
        assigned: dict[uuid.UUID, set[int]] = {}
        for assignment in group.target_assignment.values():
            for topic_id, partitions in assignment.items():
                assigned.setdefault(topic_id, set()).update(partitions)
        return any(
            t.name in subscribed and assigned.get(topic_id, set()) != set(t.partitions)
            for topic_id, t in group.initialized.items()
        )

    def _record_new_partitions(
        self, group: ShareGroup, members: Mapping[str, ShareGroupMember], records: list[Record]
    ) -> None:
        """Subscribed partitions whose share state is neither initialized nor being initialized: record that
        the group initializes them. Topics deleted since: record that their share state is being deleted."""
        subscribed = sorted({n for m in members.values() for n in m.subscribed_topic_names})
        initializing = dict(group.initializing)
        initialized = dict(group.initialized)
        deleting = dict(group.deleting)
        changed = False
        now = self.coordinator.now_ms()
        topics = self.coordinator.topics
        for states in (initializing, initialized):
            for topic_id in [tid for tid in states if topics.by_id(tid) is None]:
                gone = states.pop(topic_id)
                deleting[topic_id] = gone.name
                self._deleted_partitions.setdefault((group.group_id, topic_id), set()).update(gone.partitions)
                changed = True
        for name in subscribed:
            topic = self.coordinator.topics.get(name)
            if topic is None:
                continue
            known = set(initialized.get(topic.topic_id, TopicState(name, frozenset())).partitions)
            known |= initializing.get(topic.topic_id, TopicState(name, frozenset())).partitions
            new = frozenset(range(len(topic.partitions))) - known
            if new:
                current = initializing.get(topic.topic_id)
                partitions = (current.partitions if current else frozenset()) | new
                initializing[topic.topic_id] = TopicState(name, partitions, now)
                changed = True
        if changed:
            records.append(_state_metadata_record(group.group_id, initializing, initialized, deleting))

    # ================================================================================ leaving

    def _leave(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group_id, member_id = request.group_id, request.member_id
        group = self.coordinator.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if member_id not in group.members:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        self._remove_member(group, member_id, "it left the group")
        return ShareHeartbeatResult(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def _remove_member(self, group: ShareGroup, member_id: str, reason: str) -> None:
        group_id = group.group_id
        remaining = [m for m in group.members.values() if m.member_id != member_id]
        records: list[Record] = [
            (ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            (ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
            (ShareGroupMemberMetadataKey(group_id, member_id), None),
            (ShareGroupMetadataKey(group_id),
             ShareGroupMetadataValue(group.group_epoch + 1, self._metadata_hash(remaining))),
        ]
        self._write(group_id, records)
        self.timers.cancel(_session_key(group_id, member_id))
        log.info("share group %s: member %s removed (%s); group epoch %d", group_id, member_id, reason,
                 group.group_epoch)
        self._notify_left(group_id, member_id)

    def _fence_if_current(self, group_id: str, member_id: str) -> None:
        group = self.coordinator.groups.get(group_id)
        if not isinstance(group, ShareGroup) or member_id not in group.members:
            return
        if not self.coordinator.is_serving(group_id):
            return
        try:
            self._remove_member(group, member_id, "its session expired")
        except KafkaError as exc:
            log.warning("share group %s: could not remove member %s: %s", group_id, member_id, exc)

    def effective_config(self, group_id: str) -> dict[str, object]:
        """Every share config of ``group_id``: its own value, else the broker setting that gives its default."""
        own = self.group_configs.get(group_id, {})
        props = self.coordinator.config.properties
        effective: dict[str, object] = {}
        for name, (setting, default) in SHARE_GROUP_CONFIGS.items():
            raw = own.get(name)
            if raw is None:
                raw = props.get(setting, default) if setting else default
            effective[name] = _typed(default, raw)
        return effective

    def assignment_interval(self, group_id: str) -> int:
        raw = self.group_configs.get(group_id, {}).get("share.assignment.interval.ms")
        return int(raw) if raw is not None else self.assignment_interval_ms

    def session_timeout(self, group_id: str) -> int:
        raw = self.group_configs.get(group_id, {}).get("share.session.timeout.ms")
        return int(raw) if raw is not None else self.session_timeout_ms

    def heartbeat_interval(self, group_id: str) -> int:
        raw = self.group_configs.get(group_id, {}).get("share.heartbeat.interval.ms")
        return int(raw) if raw is not None else self.heartbeat_interval_ms

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self.timers.schedule(
            _session_key(group_id, member_id), self.session_timeout(group_id),
            lambda: self._fence_if_current(group_id, member_id),
        )

    # ================================================================================ share state

    def _queue_initialization(self, group: ShareGroup) -> None:
        if (group.initializing or group.deleting) and group.group_id not in self._in_flight:
            self._in_flight.add(group.group_id)
            self._send.send_nowait(group.group_id)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Initialize the share state of the partitions groups record as initializing, a group at a time."""
        task_status.started()
        async for group_id in self._receive:
            try:
                await self._delete_deleted_topics(group_id)
                await self._initialize(group_id)
            except Exception:
                log.exception("share group %s: initializing share state failed", group_id)
            finally:
                self._in_flight.discard(group_id)

    async def _initialize(self, group_id: str) -> None:
        """Initialize every partition the group is initializing, then record those done in one record."""
        group = self.coordinator.groups.get(group_id)
        if not isinstance(group, ShareGroup) or not group.initializing:
            return
        if self.persister is None:  # none attached yet (a group loaded at start-up): its next heartbeat brings it
            return
        resolver = self.start_offset_resolver
        done: dict[uuid.UUID, set[int]] = {}
        for topic_id, topic in list(group.initializing.items()):
            for partition in sorted(topic.partitions):
                start_offset = resolver(group_id, topic_id, partition) if resolver is not None else -1
                try:
                    await _call(self.persister().initialize(
                        group_id, topic_id, partition, group.group_epoch, start_offset))
                except KafkaError as exc:
                    log.info("share group %s: the share state of %s-%d is not initialized yet: %s; tried "
                             "again at the next heartbeat", group_id, topic.name, partition, exc)
                    continue
                done.setdefault(topic_id, set()).add(partition)
        group = self.coordinator.groups.get(group_id)
        if not done or not isinstance(group, ShareGroup) or not self.coordinator.is_serving(group_id):
            return
        initializing = dict(group.initializing)
        initialized = dict(group.initialized)
        moved = []
        for topic_id, partitions in done.items():
            topic = initializing.get(topic_id)
            if topic is None:
                continue
            partitions &= set(topic.partitions)
            rest = topic.partitions - partitions
            if rest:
                initializing[topic_id] = dataclasses.replace(topic, partitions=rest)
            else:
                del initializing[topic_id]
            before = initialized.get(topic_id)
            initialized[topic_id] = TopicState(
                topic.name, (before.partitions if before else frozenset()) | partitions,
                before.create_timestamp if before else topic.create_timestamp,
            )
            moved += [f"{topic.name}-{p}" for p in sorted(partitions)]
        if not moved:
            return
        try:
            self._write(group_id, [_state_metadata_record(group_id, initializing, initialized, group.deleting)])
        except KafkaError as exc:
            log.warning("share group %s: could not record initialized share state: %s", group_id, exc)
            return
        log.info("share group %s: share state of %s initialized", group_id, ", ".join(moved))

    async def _delete_deleted_topics(self, group_id: str) -> None:
        """Delete the share state of topics deleted while the group used them, then record them gone."""
        group = self.coordinator.groups.get(group_id)
        if not isinstance(group, ShareGroup) or not group.deleting or self.persister is None:
            return
        done = []
        for topic_id in list(group.deleting):
            partitions = self._deleted_partitions.get((group_id, topic_id), set())
            try:
                persister = self.persister()
                for partition in sorted(partitions):
                    try:
                        await _call(persister.delete(group_id, topic_id, partition))
                    except KafkaError as exc:
                        if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                            raise
            except KafkaError as exc:
                log.info("share group %s: the share state of deleted topic %s is not deleted yet: %s",
                         group_id, group.deleting.get(topic_id), exc)
                continue
            done.append(topic_id)
        group = self.coordinator.groups.get(group_id)
        if not done or not isinstance(group, ShareGroup) or not self.coordinator.is_serving(group_id):
            return
        deleting = {tid: name for tid, name in group.deleting.items() if tid not in done}
        try:
            self._write(group_id, [_state_metadata_record(group_id, group.initializing, group.initialized, deleting)])
        except KafkaError as exc:
            log.warning("share group %s: could not record deleted share state: %s", group_id, exc)
            return
        for topic_id in done:
            self._deleted_partitions.pop((group_id, topic_id), None)
        log.info("share group %s: share state of deleted topics %s deleted", group_id,
                 ", ".join(str(t) for t in done))

    async def delete_state(self, group: ShareGroup) -> None:
        """Delete the share state of every partition of the (empty) group; raises KafkaError."""
        if self.persister is None:
            return
        persister = self.persister()
        for topics in (group.initialized, group.initializing):
            for topic_id, topic in list(topics.items()):
                for partition in sorted(topic.partitions):
                    try:
                        await _call(persister.delete(group.group_id, topic_id, partition))
                    except KafkaError as exc:
                        if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:  # never initialized: nothing to delete
                            raise

    # ================================================================================ persistence

    def _existing_group(self, group_id: str) -> ShareGroup:
        group = self.coordinator.groups.get(group_id)
        assert isinstance(group, ShareGroup), f"share group {group_id} was not written"
        return group

    def _write(self, group_id: str, records: list[Record], created: ShareGroup | None = None) -> None:
        if not records:
            return
        if created is not None and not any(isinstance(k, ShareGroupMetadataKey) for k, _ in records):
            records.append((ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(created.group_epoch, 0)))
        self.coordinator.append(group_id, [
            (encode_share_group_key(k), None if v is None else encode_share_group_value(v)) for k, v in records
        ])
        for key, value in records:
            self.replay(key, value)

    def replay(self, key: ShareGroupKey, value: ShareGroupValue | None) -> None:
        """Apply one share group record (when written, and when a partition is loaded)."""
        groups = self.coordinator.groups
        group_id = key.group
        existing = groups.get(group_id)
        if value is None:
            if isinstance(existing, ShareGroup):
                self._replay_tombstone(existing, key)
            return
        if isinstance(existing, ShareGroup):
            group = existing
        else:
            if existing is not None:
                log.warning("share group %s: share group records replace a %s group", group_id,
                            type(existing).__name__)
                self.coordinator.remove_group(existing)
            group = groups[group_id] = ShareGroup(group_id)
        if isinstance(value, ShareGroupMetadataValue):
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
        elif isinstance(value, ShareGroupMemberMetadataValue):
            member_id = key.member_id  # type: ignore[union-attr]
            current = group.members.get(member_id) or ShareGroupMember(member_id)
            group.update_member(dataclasses.replace(
                current, rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
                subscribed_topic_names=java_set_order(value.subscribed_topic_names),
            ))
        elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
            group.target_assignment[key.member_id] = _frozen(value.topic_partitions)  # type: ignore[union-attr]
        elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
            member_id = key.member_id  # type: ignore[union-attr]
            current = group.members.get(member_id) or ShareGroupMember(member_id)
            group.update_member(dataclasses.replace(
                current, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                assigned_partitions=_frozen(value.assigned_partitions),
            ))
        elif isinstance(value, ShareGroupStatePartitionMetadataValue):
            group.initializing = {
                t.topic_id: TopicState(t.topic_name, frozenset(t.partitions), t.create_timestamp)
                for t in value.initializing_topics if t.partitions
            }
            group.initialized = {
                t.topic_id: TopicState(t.topic_name, frozenset(t.partitions), t.create_timestamp)
                for t in value.initialized_topics if t.partitions
            }
            group.deleting = {t.topic_id: t.topic_name for t in value.deleting_topics}

    def _replay_tombstone(self, group: ShareGroup, key: ShareGroupKey) -> None:
        if isinstance(key, ShareGroupMetadataKey):
            self.coordinator.groups.pop(group.group_id, None)
            self.on_removed(group)
        elif isinstance(key, ShareGroupMemberMetadataKey):
            group.remove_member(key.member_id)
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            group.assignment_epoch = 0
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            group.target_assignment.pop(key.member_id, None)
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
            member = group.members.get(key.member_id)
            if member is not None:
                group.members[key.member_id] = dataclasses.replace(
                    member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned_partitions={})
        elif isinstance(key, ShareGroupStatePartitionMetadataKey):
            group.initializing, group.initialized, group.deleting = {}, {}, {}

    def tombstones(self, group: ShareGroup) -> list[tuple[bytes, None]]:
        """The records that delete the group, encoded, in Kafka's order."""
        group_id = group.group_id
        keys: list[ShareGroupKey] = []
        keys += [ShareGroupCurrentMemberAssignmentKey(group_id, m) for m in group.members]
        keys += [ShareGroupTargetAssignmentMemberKey(group_id, m) for m in group.target_assignment]
        keys.append(ShareGroupTargetAssignmentMetadataKey(group_id))
        keys += [ShareGroupMemberMetadataKey(group_id, m) for m in group.members]
        keys.append(ShareGroupStatePartitionMetadataKey(group_id))
        keys.append(ShareGroupMetadataKey(group_id))
        return [(encode_share_group_key(k), None) for k in keys]

    # ================================================================================ life-cycle

    def on_loaded(self, group: ShareGroup) -> None:
        """A group read back from __consumer_offsets: its members must heartbeat within a session, and
        partitions it was initializing are initialized."""
        for member_id in group.members:
            self._schedule_session_timeout(group.group_id, member_id)
        self._queue_initialization(group)

    def on_removed(self, group: ShareGroup, error: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> None:
        """The group is deleted or no longer coordinated here: its timers go. Its members are not told to have
        left: where the coordinator moved, they carry on with the broker that coordinates the group now."""
        if not group.dead:
            group.transition_to(ShareGroupState.DEAD)
        for member_id in group.members:
            self.timers.cancel(_session_key(group.group_id, member_id))

    # ================================================================================ describe

    def describe(self, group_id: str) -> ShareGroup:
        """The share group to describe; raises GROUP_ID_NOT_FOUND, and the coordinator's errors."""
        self.coordinator.check_group(group_id)
        group = self.coordinator.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return group


async def _call(result: Awaitable[Any] | Any) -> Any:
    if isinstance(result, Awaitable):
        return await result
    return result


def _java_string_hash(text: str) -> int:
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_set_order(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` without repeats, in the order Kafka keeps a member's subscribed topic names (a Java HashSet
    made from the request's list: by hash bucket, then in the order given), which ShareGroupDescribe and the
    member's record show."""
    unique = list(dict.fromkeys(names))
    capacity = 1
    while capacity < max(int(len(unique) / 0.75) + 1, 16):
        capacity <<= 1

    def bucket(name: str) -> int:
        h = _java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    order = {name: i for i, name in enumerate(unique)}
    return tuple(sorted(unique, key=lambda name: (bucket(name), order[name])))


def _check_member_epoch(member: ShareGroupMember, epoch: int) -> None:
    current = member.member_epoch
    if epoch == current:
        return
    if epoch > current:
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a greater member epoch ({epoch}) than the one known by the group "
            f"coordinator ({current}). The member must abandon all its partitions and rejoin.",
        )
    if epoch != member.previous_member_epoch:
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a smaller member epoch ({epoch}) than the one known by the group "
            f"coordinator ({current}), and it does not match the previous member epoch "
            f"({member.previous_member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def _frozen(topic_partitions: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    return {topic_id: frozenset(ps) for topic_id, ps in topic_partitions.items() if ps}


def _member_metadata_record(group_id: str, member: ShareGroupMember) -> Record:
    return (
        ShareGroupMemberMetadataKey(group_id, member.member_id),
        ShareGroupMemberMetadataValue(member.rack_id, member.client_id, member.client_host,
                                      list(member.subscribed_topic_names)),
    )


def _current_assignment_record(group_id: str, member: ShareGroupMember) -> Record:
    return (
        ShareGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ShareGroupCurrentMemberAssignmentValue(member.member_epoch, member.previous_member_epoch,
                                               MEMBER_STATE_STABLE, member.assigned_partitions),
    )


def _state_metadata_record(
    group_id: str, initializing: Mapping[uuid.UUID, TopicState], initialized: Mapping[uuid.UUID, TopicState],
    deleting: Mapping[uuid.UUID, str],
) -> Record:
    def infos(topics: Mapping[uuid.UUID, TopicState]) -> list[TopicPartitionsInfo]:
        return [TopicPartitionsInfo(tid, t.name, t.partitions, t.create_timestamp)
                for tid, t in sorted(topics.items(), key=lambda item: item[1].name)]

    return (
        ShareGroupStatePartitionMetadataKey(group_id),
        ShareGroupStatePartitionMetadataValue(
            infos(initializing), infos(initialized),
            [TopicInfo(tid, name) for tid, name in sorted(deleting.items(), key=lambda item: item[1])],
        ),
    )
