"""A consumer group of the KIP-848 protocol: epochs, members, the target assignment and reconciliation.

In this protocol the coordinator computes the assignment (with a server-side assignor) and moves each
member towards it one heartbeat at a time:

- The **group epoch** is bumped whenever the group's membership or subscriptions change (or the
  subscribed topics' partitions do). A new **target assignment** is then computed for every member,
  and the **assignment epoch** records the group epoch it was computed for.
- Each member has a **member epoch**: the epoch of the target assignment it has reconciled to. A member
  whose epoch is behind the assignment epoch is reconciled on its next heartbeat
  (:func:`reconcile`): partitions it keeps stay, partitions that moved elsewhere must first be revoked
  (state ``UNREVOKED_PARTITIONS``: the member keeps its epoch until its heartbeat no longer lists
  them), and partitions new to it are only handed over once their previous owner has released them
  (state ``UNRELEASED_PARTITIONS`` while it waits). A partition therefore never has two owners.
- The coordinator tracks, per partition, the epoch of the member that currently holds it (assigned or
  pending revocation); -1 means free.

Members that use the classic protocol: a consumer group can hold members that still speak JoinGroup,
SyncGroup and Heartbeat (after an online upgrade of a classic group, or when a classic consumer joins
a consumer group). They carry :class:`ClassicMemberMetadata` (their session timeout and the protocols
they joined with) and are reconciled like the others, only at their JoinGroup instead of at every
heartbeat; see :mod:`trafka.broker.groups.consumer_protocol`.

The group's state is derived, as in Kafka: ``Empty`` without members, ``Assigning`` while the target
assignment lags the group epoch, ``Reconciling`` while some member is not at the target yet, and
``Stable`` otherwise. ``Dead`` marks a group being removed.

Members and assignments are immutable values: a change makes a new member, so the coordinator can
compare before and after and write only what changed to ``__consumer_offsets``.
"""
from __future__ import annotations

import dataclasses
import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from trafka.broker.groups.classic import CONSUMER_PROTOCOL_TYPE, GroupType
from trafka.broker.groups.records import ClassicMemberMetadata
from trafka.wire.errors import ErrorCode, KafkaError

#: A member's partitions: topic id -> partition indexes (never an empty set).
Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY_ASSIGNMENT: Assignment = {}

#: The epoch of a partition nobody holds.
NO_EPOCH = -1
#: Member epochs sent by a member that leaves the group (-1), or by a static member that leaves for now
#: and will be back with the same instance id within its session (-2).
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
#: The member epoch a member joins (or rejoins from scratch) with.
JOIN_GROUP_MEMBER_EPOCH = 0


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class MemberState(enum.IntEnum):
    """A member's reconciliation state, with the codes Kafka stores in __consumer_offsets."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_code(cls, code: int) -> MemberState:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


def assignment_of(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    """An assignment from (topic id, partitions) pairs, merging repeats and dropping empty topics."""
    merged: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in pairs:
        merged.setdefault(topic_id, set()).update(partitions)
    return {topic_id: frozenset(partitions) for topic_id, partitions in merged.items() if partitions}


def partition_count(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


def describe_assignment(assignment: Assignment, names: Callable[[uuid.UUID], str | None] | None = None) -> str:
    """``topic-0,1,2 other-3`` for logs (topic ids where the name is unknown)."""
    parts = []
    for topic_id, partitions in assignment.items():
        name = (names(topic_id) if names else None) or str(topic_id)
        parts.append(f"{name}-{','.join(map(str, sorted(partitions)))}")
    return " ".join(sorted(parts)) or "(none)"


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """One member: its subscription (what it asked for) and its current assignment (where it is)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    #: Set for a member that uses the classic protocol (JoinGroup/SyncGroup/Heartbeat).
    classic_member_metadata: ClassicMemberMetadata | None = None
    # -- current assignment --
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    previous_member_epoch: int = NO_EPOCH
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    __hash__ = None  # type: ignore[assignment]  # values compare by content; assignments are dicts

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    @property
    def classic_protocol_name(self) -> str:
        """The protocol a classic member is told it uses: the first it joined with."""
        assert self.classic_member_metadata is not None
        return self.classic_member_metadata.supported_protocols[0][0]

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def has_same_subscription(self, other: ConsumerGroupMember) -> bool:
        return (
            self.subscribed_topic_names == other.subscribed_topic_names
            and self.subscribed_topic_regex == other.subscribed_topic_regex
        )

    def with_metadata_of(self, other: ConsumerGroupMember) -> ConsumerGroupMember:
        """This member's current assignment with ``other``'s subscription and client metadata."""
        return dataclasses.replace(
            other,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=self.state,
            assigned_partitions=self.assigned_partitions,
            partitions_pending_revocation=self.partitions_pending_revocation,
        )

    def metadata_differs(self, other: ConsumerGroupMember) -> bool:
        """Whether the stored member metadata (everything but the current assignment) differs."""
        return (
            self.instance_id != other.instance_id
            or self.rack_id != other.rack_id
            or self.client_id != other.client_id
            or self.client_host != other.client_host
            or not self.has_same_subscription(other)
            or self.rebalance_timeout_ms != other.rebalance_timeout_ms
            or self.server_assignor != other.server_assignor
            or self.classic_member_metadata != other.classic_member_metadata
        )

    def assignment_differs(self, other: ConsumerGroupMember) -> bool:
        return (
            self.member_epoch != other.member_epoch
            or self.previous_member_epoch != other.previous_member_epoch
            or self.state is not other.state
            or self.assigned_partitions != other.assigned_partitions
            or self.partitions_pending_revocation != other.partitions_pending_revocation
        )

    def with_epoch(self, member_epoch: int, **changes) -> ConsumerGroupMember:
        """The member moved to ``member_epoch`` (its current epoch becomes the previous one)."""
        return dataclasses.replace(
            self, previous_member_epoch=self.member_epoch, member_epoch=member_epoch, **changes
        )


# ================================================================================ reconciliation


def _owns_any(owned: Mapping[uuid.UUID, Iterable[int]] | None, partitions: Assignment) -> bool:
    """Whether the member still reports owning any of ``partitions`` (unknown counts as yes)."""
    if owned is None:
        return True
    return any(partition in partitions.get(topic_id, ()) for topic_id, ps in owned.items() for partition in ps)


def reconcile(
    member: ConsumerGroupMember,
    assignment_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Mapping[uuid.UUID, Iterable[int]] | None,
) -> ConsumerGroupMember:
    """Move ``member`` one step towards ``target`` (the assignment of epoch ``assignment_epoch``).

    ``partition_epoch(topic_id, partition)`` is the epoch of whoever holds a partition now (-1: free);
    ``owned`` is what the member reported owning in this heartbeat (None when it did not say).
    """
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == assignment_epoch:
            return member
        return _next_assignment(member, member.member_epoch, assignment_epoch, target, partition_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member  # still revoking: nothing moves until it is done
        # Revocation done: the member moves past the epoch in which it was asked to revoke.
        return _next_assignment(member, member.member_epoch + 1, assignment_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, assignment_epoch, target, partition_epoch, owned)
    # A state this coordinator does not know (written by a newer one): start the member over, provided
    # it has let go of everything.
    if owned is None or any(owned.values()):
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The member is in an unknown state. It must abandon all its partitions and rejoin.",
        )
    return _next_assignment(member, assignment_epoch, assignment_epoch, target, partition_epoch, owned)


def _next_assignment(
    member: ConsumerGroupMember,
    member_epoch: int,
    assignment_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Mapping[uuid.UUID, Iterable[int]] | None,
) -> ConsumerGroupMember:
    kept: dict[uuid.UUID, frozenset[int]] = {}
    to_revoke: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    current = member.assigned_partitions
    for topic_id in current.keys() | target.keys():
        target_partitions = target.get(topic_id, frozenset())
        current_partitions = current.get(topic_id, frozenset())
        keep = current_partitions & target_partitions
        revoke = current_partitions - keep
        new = target_partitions - keep
        free = frozenset(p for p in new if partition_epoch(topic_id, p) == NO_EPOCH)
        unreleased = unreleased or len(free) < len(new)
        if keep:
            kept[topic_id] = keep
        if revoke:
            to_revoke[topic_id] = revoke
        if free:
            to_assign[topic_id] = free

    if to_revoke and _owns_any(owned, to_revoke):
        # Revoke first; the member stays in its epoch until it confirms.
        return dataclasses.replace(
            member.with_epoch(member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=kept,
            partitions_pending_revocation=to_revoke,
        )
    assigned = dict(kept)
    for topic_id, partitions in to_assign.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    return dataclasses.replace(
        member.with_epoch(assignment_epoch),
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned_partitions=assigned,
        partitions_pending_revocation={},
    )


# ================================================================================ subscriptions


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic as the assignment saw it."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


class TopicRegex(Protocol):
    """A compiled subscription regex."""

    def fullmatch(self, text: str) -> object | None: ...


def compile_topic_regex(pattern: str) -> TopicRegex:
    """A subscription regex, matched against whole topic names as Kafka does. It is compiled by RE2,
    Kafka's own engine for these regexes, whose matching takes time linear in the name whatever the
    pattern: a client's regex cannot stall the broker. Raises INVALID_REGULAR_EXPRESSION."""
    import re2  # only brokers whose members subscribe by regex load it

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise KafkaError(
            ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {pattern!r} is invalid: {reason}."
        ) from exc


# ================================================================================ the group


class ConsumerGroup:
    type = GroupType.CONSUMER
    protocol_type = CONSUMER_PROTOCOL_TYPE

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        #: The subscribed topics (by name) with the ids and partition counts the target assignment used.
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        #: Epoch of the member holding each (topic id, partition), assigned or pending revocation.
        self._partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.dead = False
        #: When (Trio clock) the group epoch last moved: members heartbeat faster while it settles.
        self.epoch_changed_at = float("-inf")

    def __repr__(self) -> str:
        return f"ConsumerGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch})"

    # -- state ---------------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_in(self, *states: object) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    # -- members ---------------------------------------------------------------------------------------

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def member(self, member_id: str) -> ConsumerGroupMember:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}."
            )
        return member

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, keeping the partition epochs and the static member index in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        self._hold(member)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        return member

    def _hold(self, member: ConsumerGroupMember) -> None:
        epochs = self._partition_epochs
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    epochs[(topic_id, partition)] = member.member_epoch

    def _release(self, member: ConsumerGroupMember) -> None:
        epochs = self._partition_epochs
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    if epochs.get((topic_id, partition)) == member.member_epoch:
                        del epochs[(topic_id, partition)]

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._partition_epochs.get((topic_id, partition), NO_EPOCH)

    def target_assignment_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """A member's target; a static member rejoining under a new member id inherits its old one."""
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            if previous is not None:
                return self.target_assignment.get(previous, EMPTY_ASSIGNMENT)
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def preferred_assignor(
        self,
        default: str,
        replacing: tuple[ConsumerGroupMember | None, ConsumerGroupMember | None] = (None, None),
    ) -> str:
        """The server assignor most members asked for (``default`` when none did); ``replacing`` is an
        (old, new) member pair to count instead of the group's current version of that member."""
        old, new = replacing
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if old is not None and old.member_id in self.members and old.server_assignor:
            counts[old.server_assignor] -= 1
        if new is not None and new.server_assignor:
            counts[new.server_assignor] += 1
        counts = +counts
        if not counts:
            return default
        return max(sorted(counts), key=lambda name: counts[name])

    # -- members that use the classic protocol ----------------------------------------------------------

    def classic_member_count(self) -> int:
        return sum(1 for m in self.members.values() if m.uses_classic_protocol)

    def supports_classic_protocols(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        """Whether a classic member joining with these protocols fits the group: its protocol type is
        ``consumer`` and, unless the group is empty, one of its protocols is supported by every
        member that uses the classic protocol."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        names = list(protocol_names)
        if not self.members:
            return bool(names)
        classic = [m for m in self.members.values() if m.uses_classic_protocol]
        supported = [
            {name for name, _ in m.classic_member_metadata.supported_protocols}  # type: ignore[union-attr]
            for m in classic
        ]
        return any(all(name in each for each in supported) for name in names)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        member = self.members.get(member_id)
        return (
            member is not None
            and not member.uses_classic_protocol
            and self.classic_member_count() == len(self.members) - 1
        )

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether ``member`` still waits for a partition of its target that another member holds."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_assignment.get(member.member_id, EMPTY_ASSIGNMENT).items():
            assigned = member.assigned_partitions.get(topic_id, frozenset())
            for partition in partitions:
                if partition not in assigned and self.partition_epoch(topic_id, partition) != NO_EPOCH:
                    return True
        return False

    # -- subscriptions ---------------------------------------------------------------------------------

    def subscribed_topics(self) -> set[str]:
        """Every topic some member subscribes to, by name or through its regex (as last resolved)."""
        topics = {name for m in self.members.values() for name in m.subscribed_topic_names}
        topics.update(self.subscription_metadata)
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    # -- offsets and admin -----------------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, member_epoch: int, *, api_version: int,
        transactional: bool = False,
    ) -> None:
        """Members commit with their current member epoch (a classic member's generation is its member
        epoch); anyone may commit (epoch -1) to an empty group. Raises UNKNOWN_MEMBER_ID,
        STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic member), or UNSUPPORTED_VERSION before v9
        for a consumer-protocol member. A transactional commit (TxnOffsetCommit) may use any version,
        and gets ILLEGAL_GENERATION where an OffsetCommit gets STALE_MEMBER_EPOCH, as in Kafka."""
        if member_epoch < 0 and not self.members:
            return
        member = self.member(member_id)
        if not transactional and api_version < 9 and not member.uses_classic_protocol:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                "OffsetCommit version 9 or above must be used by members using the consumer group protocol",
            )
        try:
            _check_member_epoch(member, member_epoch)
        except KafkaError as exc:
            if transactional and exc.code == ErrorCode.STALE_MEMBER_EPOCH:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION, exc.message) from exc
            raise

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Who may read the committed offsets: anyone who names no member (member id null and epoch
        -1: admin clients, classic consumers, OffsetFetch before v9), otherwise a member of the group at
        its current member epoch. Raises UNKNOWN_MEMBER_ID, or STALE_MEMBER_EPOCH (ILLEGAL_GENERATION
        for a member that uses the classic protocol)."""
        if member_id is None and member_epoch < 0:
            return
        member = self.members.get(member_id) if member_id is not None else None
        if member is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}."
            )
        _check_member_epoch(member, member_epoch)

    def validate_delete(self) -> None:
        if self.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")

    def validate_offset_delete(self) -> None:
        """Offsets of a consumer group can be deleted in any state (except for subscribed topics)."""

    def offset_expiry_base_ms(self) -> tuple[bool, int | None]:
        """Offsets of topics the group does not subscribe to expire retention after their commit,
        whatever the group's state."""
        return True, None


def _check_member_epoch(member: ConsumerGroupMember, member_epoch: int) -> None:
    """A member names its current epoch; a member using the classic protocol calls it its generation."""
    if member_epoch == member.member_epoch:
        return
    if member.uses_classic_protocol:
        raise KafkaError(
            ErrorCode.ILLEGAL_GENERATION,
            f"The received generation id {member_epoch} does not match the expected member epoch "
            f"{member.member_epoch}.",
        )
    raise KafkaError(
        ErrorCode.STALE_MEMBER_EPOCH,
        f"The received member epoch {member_epoch} does not match the expected member epoch "
        f"{member.member_epoch}.",
    )
