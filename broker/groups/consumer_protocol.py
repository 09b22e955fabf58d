"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe.

A member joins with member epoch 0 and its subscription (topic names, and from v1 a regex), then
heartbeats with its current member epoch and, when asked to, the partitions it owns. Each heartbeat
follows Apache Kafka's group coordinator:

1. The member is created or updated. A change of subscription (or of the subscribed topics'
   partitions) bumps the group epoch.
2. If the group epoch is ahead of the assignment epoch, the server-side assignor (``uniform`` or
   ``range``, :mod:`trafka.broker.groups.assignors`) computes a new target assignment for every member.
3. The member is reconciled one step towards its target (:func:`trafka.broker.groups.consumer.reconcile`):
   partitions that moved away are revoked first; new ones are handed over once their previous owner
   has released them. The response carries the member's epoch and, when it changed or the request was
   a full one, its assignment: a joining member gets what is free at once.

A member leaves with epoch -1; a static member (``group.instance.id``) that will be back sends -2 and
keeps its place (and its partitions) for its session, and rejoins under a new member id. A member that
stops heartbeating for ``group.consumer.session.timeout.ms`` (45 s), or that takes longer than its
rebalance timeout to revoke partitions, is fenced: removed, and the group epoch bumped.

Every change is written to ``__consumer_offsets`` as Kafka's ConsumerGroup* records before it is
applied; the in-memory state is changed only by replaying those records (:meth:`replay`), the same
code that rebuilds the groups at start-up. A restart therefore keeps every member's epoch and
partitions, and members carry on where they were.

Heartbeat interval: members are told ``group.consumer.heartbeat.interval.ms`` (Kafka's 5 s) once the
group is stable. While it is not — some member is still reconciling, or the group epoch moved within
the last interval — they are told to come back after :data:`SETTLING_HEARTBEAT_INTERVAL_MS`, so that
partitions move between consumers in a few round trips instead of several heartbeat intervals.

Groups and the classic protocol, as in Kafka's group coordinator:

- A heartbeat with epoch 0 turns an *empty* classic group (or one that only holds committed offsets)
  into a consumer group, keeping its offsets, and a JoinGroup turns an empty consumer group back into
  a classic group.
- **Online upgrade.** A heartbeat with epoch 0 to a classic group *with members* converts it when
  ``group.consumer.migration.policy`` allows it (``bidirectional``, the default, or ``upgrade``), its
  protocol type is ``consumer`` and it has no more members than ``group.consumer.max.size``: its members
  become members that use the classic protocol, each keeping its subscription and its partitions (read
  from the embedded ConsumerProtocol metadata and assignment), at member epoch = the generation; then
  the new member joins as any other, which bumps the group epoch and computes a new target assignment
  (:mod:`trafka.broker.groups.migration`). Otherwise the heartbeat gets GROUP_ID_NOT_FOUND.
- **Classic members** of a consumer group keep speaking JoinGroup, SyncGroup, Heartbeat, LeaveGroup
  and OffsetCommit (:meth:`ConsumerGroupProtocol.classic_join` and the methods after it). Their
  generation is their member epoch. Heartbeat answers REBALANCE_IN_PROGRESS when the group epoch moved
  past it, when they must revoke partitions, or when partitions they wait for were released; JoinGroup
  is answered at once, after the member's subscription and owned partitions (from its subscription
  metadata) went through the same three steps as a heartbeat; SyncGroup returns the partitions the
  coordinator assigned, as a ConsumerProtocol assignment. An eager client rejoins owning nothing and
  moves to its new assignment at once; a cooperative one lists what it owns, is first asked to revoke,
  and rejoins again. A classic member that does not rejoin or sync within its rebalance timeout, or
  whose session (its own session timeout) expires, is fenced. A classic consumer may also join a
  consumer group that never was a classic group, whatever the migration policy.
- **Online downgrade.** When the last member using the consumer protocol leaves or is fenced (or, a
  static one, is replaced by a classic member with its instance id), the remaining members all use the
  classic protocol and the policy allows it (``bidirectional`` or ``downgrade``), the group becomes a
  Stable classic group at generation = the group epoch, each member holding its target assignment, and
  starts a rebalance: the members rejoin and their leader assigns the partitions.
- Conversions are written as one batch: the old type's tombstones (GroupMetadata, or every
  ConsumerGroup* record) followed by the new type's records, so a restart replays the group with the
  type and members it had.
"""
from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from trafka.broker.config import ConfigError
from trafka.broker.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, MemberSpec
from trafka.broker.groups.classic import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from trafka.broker.groups.classic_protocol import MEMBER_ID_REQUIRED_MIN_VERSION
from trafka.broker.groups.consumer import (
    EMPTY_ASSIGNMENT,
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicMetadata,
    TopicRegex,
    compile_topic_regex,
    describe_assignment,
    reconcile,
)
from trafka.broker.groups.migration import (
    MalformedConsumerProtocol,
    MigrationPolicy,
    classic_group_from_consumer,
    consumer_group_from_classic,
    decode_subscription,
    member_assignment_bytes,
    owned_partitions,
)
from trafka.broker.groups.records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    GroupMetadataKey,
    SubscribedTopicMetadata,
    encode_consumer_group_key,
    encode_consumer_group_value,
    encode_key,
)
from trafka.broker.topics import INTERNAL_TOPICS
from trafka.wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from trafka.broker.groups.host import GroupHost

log = logging.getLogger(__name__)

#: The heartbeat interval while a group settles (see the module docstring).
SETTLING_HEARTBEAT_INTERVAL_MS = 100
#: How many compiled subscription regexes are kept.
REGEX_CACHE_SIZE = 1024
#: From this version the member id is generated by the client.
CLIENT_MEMBER_ID_MIN_VERSION = 1

#: A record to write: a consumer group record, or the tombstone of a classic group's metadata (the first
#: record of an upgrade).
Record = tuple[ConsumerGroupKey, ConsumerGroupValue | None] | tuple[GroupMetadataKey, None]
OwnedPartitions = dict[uuid.UUID, frozenset[int]]


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: OwnedPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = CLIENT_MEMBER_ID_MIN_VERSION


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: None when the response does not carry the assignment.
    assignment: Assignment | None = None


def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", group_id, member_id)


def _rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


def _join_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    """A classic member told to rejoin must do so within its rebalance timeout."""
    return ("consumer-classic-join", group_id, member_id)


def _sync_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    """A classic member that joined must send SyncGroup within its rebalance timeout."""
    return ("consumer-classic-sync", group_id, member_id)


def _assignor_name(configured: str) -> str:
    """``uniform`` from ``uniform`` or from Kafka's class name of the uniform assignor."""
    name = configured.strip().rsplit(".", 1)[-1]
    return name[: -len("Assignor")].lower() if name.endswith("Assignor") else name.lower()


class ConsumerGroupProtocol:
    def __init__(self, coordinator: GroupHost) -> None:
        self.coordinator = coordinator
        self.timers = coordinator.timers
        config = coordinator.config
        self.session_timeout_ms = config.group_consumer_session_timeout_ms
        self.heartbeat_interval_ms = config.group_consumer_heartbeat_interval_ms
        self.max_size = config.group_consumer_max_size
        configured = config.properties.get("group.consumer.assignors", "")
        names = [_assignor_name(n) for n in configured.split(",") if n.strip()] or [DEFAULT_ASSIGNOR, "range"]
        unknown = [n for n in names if n not in ASSIGNORS]
        if unknown:
            raise ConfigError(f"group.consumer.assignors: unknown assignors {unknown}; known: {sorted(ASSIGNORS)}")
        self.assignors = {name: ASSIGNORS[name] for name in names}
        self.default_assignor = names[0]
        self.migration_policy = MigrationPolicy(coordinator.config.group_consumer_migration_policy)
        self._regexes: dict[str, TopicRegex] = {}

    # ================================================================================ heartbeat

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        try:
            if self.coordinator.stopping:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is stopping.")
            self._validate(request)
            self.coordinator.check_group(request.group_id)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except KafkaError as exc:
            if exc.code not in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                log.info("group %s: heartbeat of member %s failed: %s %s",
                         request.group_id, request.member_id, exc.code.name, exc.message)
            return HeartbeatResult(exc.code, exc.message or None)

    def _validate(self, request: HeartbeatRequest) -> None:
        def invalid(message: str) -> KafkaError:
            return KafkaError(ErrorCode.INVALID_REQUEST, message)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        self.coordinator.check_group_id(request.group_id)
        if request.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            raise invalid("RackId can't be empty.")
        if request.api_version >= CLIENT_MEMBER_ID_MIN_VERSION and not request.member_id:
            raise invalid("MemberId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == JOIN_GROUP_MEMBER_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned_partitions is None or request.owned_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid(f"MemberEpoch {epoch} is invalid.")
        if request.subscribed_topic_regex:
            self._regex(request.subscribed_topic_regex)
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.assignors)}.",
            )

    def _heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        records: list[Record] = []
        group = self._consumer_group(request.group_id, create=joining, records=records)
        upgraded = bool(records)  # a classic group with members is being converted
        member_id = request.member_id or str(uuid.uuid4())  # v0: the coordinator names the member
        self._check_group_size(group, member_id, request.instance_id)
        stored = group.members.get(member_id)  # None for a member that joins (or replaces a static one)
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, request, joining)
        else:
            member = self._static_member(group, member_id, request.instance_id, joining, records, request)

        # 1. The member's subscription and metadata (a consumer-protocol member has no classic metadata).
        updated = dataclasses.replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
            ),
            server_assignor=request.server_assignor if request.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(
                tuple(request.subscribed_topic_names)
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (request.subscribed_topic_regex or None)
                if request.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=request.client_id,
            client_host=request.client_host,
            classic_member_metadata=None,
        )
        if stored is None and self._replaced_id(group, updated) is None:
            log.info(
                "group %s: member %s (client %s%s) joins using the consumer protocol, subscribing to %s%s",
                group.group_id, member_id, request.client_id,
                f", instance {updated.instance_id}" if updated.instance_id is not None else "",
                list(updated.subscribed_topic_names),
                f" and regex {updated.subscribed_topic_regex!r}" if updated.subscribed_topic_regex else "",
            )
        # 2-3. The group epoch, the target assignment and one step of reconciliation.
        reconciled, moved = self._update_and_reconcile(
            group, member, stored, updated, request.owned_partitions, records
        )

        self._write(group.group_id, records)
        converted = group
        group = self._existing_group(group.group_id)
        if upgraded:
            # The classic members keep their sessions, now kept by the consumer group.
            for each in converted.members.values():
                if each.member_id != reconciled.member_id and each.member_id in group.members:
                    self._schedule_session_timeout(group.group_id, each.member_id, each)
        if moved:
            self._log_reconciliation(group, reconciled)
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group.group_id, reconciled)
            else:
                self.timers.cancel(_rebalance_key(group.group_id, reconciled.member_id))
        self._schedule_session_timeout(group.group_id, reconciled.member_id)

        full_request = joining or (
            request.rebalance_timeout_ms != -1
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
            and request.owned_partitions is not None
        )
        send_assignment = full_request or reconciled.assigned_partitions != member.assigned_partitions
        return HeartbeatResult(
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._heartbeat_interval(group, reconciled),
            assignment=reconciled.assigned_partitions if send_assignment else None,
        )

    def _check_group_size(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> None:
        # A static member taking its own place back does not make the group any bigger.
        replaces_itself = group.static_member(instance_id) is not None
        if len(group.members) >= self.max_size and member_id not in group.members and not replaces_itself:
            raise KafkaError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.max_size} members.",
            )

    def _update_and_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        stored: ConsumerGroupMember | None,
        updated: ConsumerGroupMember,
        owned: OwnedPartitions | None,
        records: list[Record],
    ) -> tuple[ConsumerGroupMember, bool]:
        """Kafka's three steps for a member that heartbeats or (classic) joins: record its new metadata,
        bumping the group epoch if the subscriptions changed; compute a new target assignment if the
        group epoch moved past the assignment epoch; move the member one step towards its target.
        ``stored`` is the member as the group holds it (None when it joins). Returns the reconciled
        member and whether its current assignment changed."""
        bump = False
        if stored is None or updated.metadata_differs(stored):
            records.append(_member_metadata_record(group.group_id, updated))
            bump = not updated.has_same_subscription(member)
        replaced = (member.member_id, self._replaced_id(group, updated))
        others = [m for m in group.members.values() if m.member_id not in replaced]
        metadata = self._subscription_metadata([*others, updated])
        if metadata != group.subscription_metadata:
            records.append(_partition_metadata_record(group.group_id, metadata))
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append((ConsumerGroupMetadataKey(group.group_id), ConsumerGroupMetadataValue(group_epoch)))

        if group_epoch > group.assignment_epoch:
            target = self._assign(group, group_epoch, member, updated, metadata, records)
            assignment_epoch = group_epoch
        else:
            target = group.target_assignment_of(updated.member_id, updated.instance_id)
            assignment_epoch = group.assignment_epoch

        reconciled = reconcile(updated, assignment_epoch, target, group.partition_epoch, owned)
        moved = stored is None or reconciled.assignment_differs(stored)
        if moved:
            records.append(_current_assignment_record(group.group_id, reconciled))
        return reconciled, moved

    def _consumer_group(self, group_id: str, *, create: bool, records: list[Record] | None = None) -> ConsumerGroup:
        """The consumer group ``group_id``; when joining, a new one (not registered until its records
        are written), converting an empty classic group, or a classic group with members when the
        migration policy allows (its conversion records are added to ``records``).
        Raises GROUP_ID_NOT_FOUND."""
        group = self.coordinator.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if group is None:
            if create:
                return ConsumerGroup(group_id)
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if create and isinstance(group, ClassicGroup) and group.is_empty:
            log.info("group %s: the empty classic group becomes a consumer group", group_id)
            self.coordinator.drop_group_metadata(group)
            return ConsumerGroup(group_id)
        if create and isinstance(group, ClassicGroup) and records is not None and self._may_upgrade(group):
            return self._upgrade(group, records)
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _existing_group(self, group_id: str) -> ConsumerGroup:
        group = self.coordinator.groups.get(group_id)
        assert isinstance(group, ConsumerGroup), f"group {group_id} was not written"
        return group

    def _dynamic_member(
        self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest, joining: bool
    ) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
                )
            return ConsumerGroupMember(member_id)
        return self._check_member_epoch(group, member, request)

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str,
        joining: bool,
        records: list[Record],
        request: HeartbeatRequest | None = None,
    ) -> ConsumerGroupMember:
        """The static member ``instance_id`` as ``member_id`` sees it. A joining member takes over an
        instance whose member left for now (epoch -2); a classic member (``request`` is None) joining
        without a member id takes over the instance whatever its state, as in Kafka."""
        existing = group.static_member(instance_id)
        if joining and (existing is None or existing.member_id != member_id):
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id)
            both_consumer_protocol = request is not None and not existing.uses_classic_protocol
            if both_consumer_protocol and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise KafkaError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                    f"instance id is owned by member {existing.member_id}.",
                )
            # The instance is back under a new member id: it takes over the old member's place.
            replacement = dataclasses.replace(
                existing, member_id=member_id, member_epoch=JOIN_GROUP_MEMBER_EPOCH,
                previous_member_epoch=JOIN_GROUP_MEMBER_EPOCH,
            )
            # Its subscription and current assignment follow from the heartbeat, as for a joining member.
            records += _member_tombstones(group.group_id, existing.member_id)
            records.append(_target_record(group.group_id, member_id, group.target_assignment_of(existing.member_id)))
            self._cancel_member_timers(group.group_id, existing.member_id)
            log.info(
                "group %s: static member %s rejoins as %s using the %s protocol, replacing %s",
                group.group_id, instance_id, member_id, "consumer" if request is not None else "classic",
                existing.member_id,
            )
            return replacement
        if existing is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise KafkaError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member {existing.member_id}.",
            )
        if request is None:
            return existing
        return self._check_member_epoch(group, existing, request)

    @staticmethod
    def _replaced_id(group: ConsumerGroup, member: ConsumerGroupMember) -> str | None:
        """The member id a static member replaces (None when it replaces nobody)."""
        previous = group.static_members.get(member.instance_id) if member.instance_id is not None else None
        return previous if previous != member.member_id else None

    @staticmethod
    def _check_member_epoch(
        group: ConsumerGroup, member: ConsumerGroupMember, request: HeartbeatRequest
    ) -> ConsumerGroupMember:
        """Kafka's member epoch check. A member may come back with its previous epoch when it lost the
        response that moved it on, provided it owns no more than it was assigned. A known member that
        heartbeats with epoch 0 has given up all its partitions (it was fenced, or restarted with the
        same member id): it starts over from an empty assignment."""
        epoch = request.member_epoch
        if epoch == member.member_epoch:
            return member
        if epoch < member.member_epoch:
            owned = request.owned_partitions
            if epoch == member.previous_member_epoch and owned is not None and all(
                set(partitions) <= member.assigned_partitions.get(topic_id, frozenset())
                for topic_id, partitions in owned.items()
            ):
                return member
            if epoch == JOIN_GROUP_MEMBER_EPOCH:
                log.info("group %s: member %s rejoins from epoch 0", group.group_id, member.member_id)
                return dataclasses.replace(
                    member, member_epoch=JOIN_GROUP_MEMBER_EPOCH, previous_member_epoch=-1,
                    state=MemberState.STABLE, assigned_partitions={}, partitions_pending_revocation={},
                )
        relation = "greater" if epoch > member.member_epoch else "smaller"
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a {relation} member epoch ({epoch}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )

    # ================================================================================ assignment

    def _regex(self, pattern: str) -> TopicRegex:
        compiled = self._regexes.get(pattern)
        if compiled is None:
            if len(self._regexes) >= REGEX_CACHE_SIZE:
                self._regexes.clear()
            compiled = self._regexes[pattern] = compile_topic_regex(pattern)
        return compiled

    def _subscription_metadata(self, members: Iterable[ConsumerGroupMember]) -> dict[str, TopicMetadata]:
        """The existing topics the members subscribe to, by name or regex (internal topics only by name)."""
        names: set[str] = set()
        patterns: set[str] = set()
        for member in members:
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                patterns.add(member.subscribed_topic_regex)
        topics = self.coordinator.topics
        metadata = {}
        for name in names:
            topic = topics.get(name)
            if topic is not None:
                metadata[name] = TopicMetadata(topic.topic_id, name, len(topic.partitions))
        if patterns:
            regexes = [self._regex(p) for p in patterns]
            for topic in topics:
                if topic.name not in INTERNAL_TOPICS and topic.name not in metadata and any(
                    r.fullmatch(topic.name) for r in regexes
                ):
                    metadata[topic.name] = TopicMetadata(topic.topic_id, topic.name, len(topic.partitions))
        return metadata

    def _subscribed_topic_ids(
        self, member: ConsumerGroupMember, metadata: Mapping[str, TopicMetadata]
    ) -> frozenset[uuid.UUID]:
        ids = {metadata[name].topic_id for name in member.subscribed_topic_names if name in metadata}
        if member.subscribed_topic_regex:
            regex = self._regex(member.subscribed_topic_regex)
            ids.update(
                t.topic_id for name, t in metadata.items() if name not in INTERNAL_TOPICS and regex.fullmatch(name)
            )
        return frozenset(ids)

    def _assign(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        metadata: Mapping[str, TopicMetadata],
        records: list[Record],
    ) -> Assignment:
        """Compute the target assignment of epoch ``group_epoch`` with ``updated`` in place of ``member``;
        append its records and return ``updated``'s target."""
        members = dict(group.members)
        inherited: dict[str, Assignment] = {}
        replaced = self._replaced_id(group, updated)
        if replaced is not None:
            members.pop(replaced, None)
            inherited[updated.member_id] = group.target_assignment.get(replaced, EMPTY_ASSIGNMENT)
        members[updated.member_id] = updated
        specs = {
            member_id: MemberSpec(
                member_id, m.instance_id, m.rack_id, self._subscribed_topic_ids(m, metadata),
                inherited.get(member_id, group.target_assignment.get(member_id, EMPTY_ASSIGNMENT)),
            )
            for member_id, m in members.items()
        }
        assignor_name = group.preferred_assignor(self.default_assignor, (member, updated))
        if assignor_name not in self.assignors:
            assignor_name = self.default_assignor
        topics = {t.topic_id: t for t in metadata.values()}
        try:
            assignment = self.assignors[assignor_name].assign(specs, topics)
        except Exception as exc:
            log.exception("group %s: assignor %s failed", group.group_id, assignor_name)
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}",
            ) from exc
        for member_id in specs:
            new = assignment.get(member_id, EMPTY_ASSIGNMENT)
            if member_id not in group.target_assignment or new != group.target_assignment[member_id]:
                records.append(_target_record(group.group_id, member_id, new))
        records.append(
            (
                ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
                ConsumerGroupTargetAssignmentMetadataValue(group_epoch),
            )
        )
        log.info(
            "group %s: target assignment of epoch %d with the %s assignor: %s",
            group.group_id, group_epoch, assignor_name,
            "; ".join(f"{m}: {describe_assignment(a, self._topic_name)}" for m, a in sorted(assignment.items())),
        )
        return assignment.get(updated.member_id, EMPTY_ASSIGNMENT)

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.coordinator.topics.by_id(topic_id)
        return topic.name if topic is not None else None

    def _heartbeat_interval(self, group: ConsumerGroup, member: ConsumerGroupMember) -> int:
        settling = (
            not member.is_reconciled_to(group.assignment_epoch)
            or group.group_epoch != group.assignment_epoch
            or trio.current_time() - group.epoch_changed_at < self.heartbeat_interval_ms / 1000
            or any(not m.is_reconciled_to(group.assignment_epoch) for m in group.members.values())
        )
        if settling:
            return min(SETTLING_HEARTBEAT_INTERVAL_MS, self.heartbeat_interval_ms)
        return self.heartbeat_interval_ms

    def _log_reconciliation(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        log.info(
            "group %s: member %s at epoch %d (%s): assigned %s%s",
            group.group_id, member.member_id, member.member_epoch, member.state.name,
            describe_assignment(member.assigned_partitions, self._topic_name),
            f", revoking {describe_assignment(member.partitions_pending_revocation, self._topic_name)}"
            if member.partitions_pending_revocation else "",
        )

    # ================================================================================ classic members

    def classic_join(self, group: ConsumerGroup, request: JoinRequest) -> JoinResult:
        """JoinGroup from a consumer of the classic protocol to a consumer group with members. It is
        answered at once: the member is created or updated like a heartbeating member (its
        subscription read from its protocol metadata, what it still owns from the subscription's
        owned partitions) and reconciled; the generation it is given is its member epoch."""
        try:
            self.coordinator.check_group(group.group_id)
            return self._classic_join(group, request)
        except KafkaError as exc:
            log.info("group %s: JoinGroup of classic member %s failed: %s %s",
                     group.group_id, request.member_id or "(new)", exc.code.name, exc.message)
            return JoinResult(exc.code, UNKNOWN_MEMBER_ID)

    def _classic_join(self, group: ConsumerGroup, request: JoinRequest) -> JoinResult:
        group_id, member_id, instance_id = group.group_id, request.member_id, request.group_instance_id
        protocol_type, protocols, api_version = request.protocol_type, request.protocols, request.api_version
        session_timeout_ms, rebalance_timeout_ms = request.session_timeout_ms, request.rebalance_timeout_ms
        client_id, client_host = request.client_id, request.client_host
        unknown_member = member_id == UNKNOWN_MEMBER_ID
        if unknown_member:
            member_id = str(uuid.uuid4())
        self._check_group_size(group, member_id, instance_id if unknown_member else None)
        if not group.supports_classic_protocols(protocol_type, [name for name, _ in protocols]):
            raise KafkaError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported."
            )
        if unknown_member and instance_id is None and api_version >= MEMBER_ID_REQUIRED_MIN_VERSION:
            log.info("group %s: a classic member without a member id joins; asking it to rejoin as %s",
                     group_id, member_id)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(protocols[0][1])
        except MalformedConsumerProtocol as exc:
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Malformed embedded consumer protocol in subscription: {exc}."
            ) from exc

        records: list[Record] = []
        stored = group.members.get(member_id)
        if instance_id is None:
            member = stored or ConsumerGroupMember(member_id)
        else:
            member = self._static_member(group, member_id, instance_id, unknown_member, records)
        if stored is None and self._replaced_id(group, member) is None:
            log.info(
                "group %s: member %s (client %s%s) joins using the classic protocol, subscribing to %s",
                group_id, member_id, client_id, f", instance {instance_id}" if instance_id is not None else "",
                list(subscription.topics),
            )
        updated = dataclasses.replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(subscription.topics),
            client_id=client_id,
            client_host=client_host,
            classic_member_metadata=ClassicMemberMetadata(session_timeout_ms, tuple(protocols)),
        )
        owned = owned_partitions(subscription, self.coordinator.topics)
        reconciled, moved = self._update_and_reconcile(group, member, stored, updated, owned, records)

        # The last consumer-protocol member, a static one, replaced by this classic member: downgrade.
        replaced_id = group.static_members.get(instance_id) if instance_id is not None else None
        if replaced_id is not None and self._may_downgrade_replacing(group, replaced_id):
            self._downgrade(group, replaced_id, reconciled, records)
        else:
            self._write(group_id, records)
            if moved:
                self._log_reconciliation(self._existing_group(group_id), reconciled)
            self.timers.cancel(_join_key(group_id, reconciled.member_id))
            self._schedule_session_timeout(group_id, reconciled.member_id, reconciled)
            self._schedule_sync_timeout(group_id, reconciled.member_id, rebalance_timeout_ms)
        return JoinResult(
            ErrorCode.NONE,
            reconciled.member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=reconciled.classic_protocol_name,
        )

    def classic_sync(
        self,
        group: ConsumerGroup,
        *,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        """SyncGroup from a classic member of a consumer group: its current assignment, computed by the
        coordinator, encoded as a ConsumerProtocol assignment."""
        try:
            self.coordinator.check_group(group.group_id)
            if group.is_empty:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {group.group_id} is empty.")
            member = self._classic_member(group, member_id, instance_id)
            self._check_generation(member, generation_id)
            assert member.classic_member_metadata is not None
            if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise KafkaError(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"The protocol type {protocol_type} from member {member.member_id} request is not equal to "
                    f"the group protocol type {CONSUMER_PROTOCOL_TYPE}.",
                )
            if protocol_name is not None and protocol_name != member.classic_protocol_name:
                raise KafkaError(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"The protocol name {protocol_name} from member {member.member_id} request is not equal to "
                    f"the protocol name {member.classic_protocol_name} returned in the join response.",
                )
            if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._schedule_join_timeout(group.group_id, member)
                raise KafkaError(
                    ErrorCode.REBALANCE_IN_PROGRESS,
                    f"A new rebalance is triggered in group {group.group_id} and member {member.member_id} should "
                    "rejoin to catch up.",
                )
            try:
                assignment = member_assignment_bytes(
                    member.assigned_partitions,
                    member.classic_member_metadata.supported_protocols[0][1],
                    self.coordinator.topics,
                )
            except MalformedConsumerProtocol as exc:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"Malformed embedded consumer protocol in version: {exc}."
                ) from exc
        except KafkaError as exc:
            log.info("group %s: SyncGroup of classic member %s failed: %s %s",
                     group.group_id, member_id, exc.code.name, exc.message)
            return SyncResult(exc.code)
        self.timers.cancel(_sync_key(group.group_id, member.member_id))
        self._schedule_session_timeout(group.group_id, member.member_id, member)
        return SyncResult(ErrorCode.NONE, protocol_type, protocol_name, assignment)

    def classic_heartbeat(
        self, group: ConsumerGroup, *, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Heartbeat from a classic member of a consumer group. REBALANCE_IN_PROGRESS asks it to rejoin:
        when the group epoch moved past its member epoch, when it must revoke partitions, or when the
        partitions it waits for have been released."""
        try:
            self.coordinator.check_group(group.group_id)
            member = self._classic_member(group, member_id, instance_id)
            self._check_generation(member, generation_id)
        except KafkaError as exc:
            return exc.code
        self._schedule_session_timeout(group.group_id, member.member_id, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member))
        ):
            self._schedule_join_timeout(group.group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(
        self, group: ConsumerGroup, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """LeaveGroup for classic members of a consumer group: each is removed and the group epoch
        bumped, so the others are reassigned its partitions."""
        try:
            self.coordinator.check_group(group.group_id)
        except KafkaError as exc:
            return exc.code, []
        group_id = group.group_id
        outcomes: list[tuple[str, str | None, ErrorCode]] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for member_id, instance_id, reason in members:
            try:
                if instance_id is None:
                    member = group.member(member_id)
                else:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    # An admin client removes static members by instance id alone.
                    if member_id != UNKNOWN_MEMBER_ID and member.member_id != member_id:
                        raise KafkaError(
                            ErrorCode.FENCED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {instance_id} was fenced by member "
                            f"{member.member_id}.",
                        )
                self._require_classic(member)
            except KafkaError as exc:
                outcomes.append((member_id, instance_id, exc.code))
                continue
            log.info("group %s: classic member %s leaves (reason: %s)", group_id, member.member_id,
                     reason or "not provided")
            leaving[member.member_id] = member
            outcomes.append((member.member_id, instance_id, ErrorCode.NONE))
        if not leaving:
            return ErrorCode.NONE, outcomes
        records: list[Record] = []
        for member_id in leaving:
            records += _member_tombstones(group_id, member_id)
        metadata = self._subscription_metadata(m for m in group.members.values() if m.member_id not in leaving)
        if metadata != group.subscription_metadata:
            records.append(_partition_metadata_record(group_id, metadata))
        records.append((ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(group.group_epoch + 1)))
        try:
            self._write(group_id, records)
        except KafkaError as exc:
            return exc.code, []
        for member_id in leaving:
            self._cancel_member_timers(group_id, member_id)
        return ErrorCode.NONE, outcomes

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """The member a classic request names; raises UNKNOWN_MEMBER_ID (also for a member that uses the
        consumer protocol) or FENCED_INSTANCE_ID."""
        if instance_id is None:
            member = group.member(member_id)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
                )
            if member.member_id != member_id:
                raise KafkaError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member "
                    f"{member.member_id}.",
                )
        self._require_classic(member)
        return member

    @staticmethod
    def _require_classic(member: ConsumerGroupMember) -> None:
        if not member.uses_classic_protocol:
            raise KafkaError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
            )

    @staticmethod
    def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
        if generation_id != member.member_epoch:
            raise KafkaError(
                ErrorCode.ILLEGAL_GENERATION,
                f"The request generation id {generation_id} is not equal to the member epoch "
                f"{member.member_epoch} of member {member.member_id}.",
            )

    # ================================================================================ migration

    def _may_upgrade(self, classic: ClassicGroup) -> bool:
        group_id = classic.group_id
        if not self.migration_policy.upgrade_enabled:
            log.info("group %s: cannot upgrade the classic group to a consumer group: "
                     "group.consumer.migration.policy is %s", group_id, self.migration_policy.value)
            return False
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            log.info("group %s: cannot upgrade the classic group to a consumer group: its protocol type is %r, "
                     "not the consumer protocol", group_id, classic.protocol_type)
            return False
        if len(classic.members) > self.max_size:
            log.info("group %s: cannot upgrade the classic group to a consumer group: its %d members exceed "
                     "group.consumer.max.size", group_id, len(classic.members))
            return False
        return True

    def _upgrade(self, classic: ClassicGroup, records: list[Record]) -> ConsumerGroup:
        """Convert a classic group with members: the records that delete its metadata and create the
        consumer group go into ``records``; the group returned is what they will build."""
        group_id = classic.group_id
        # Members waiting in JoinGroup or SyncGroup are told to rejoin (the new member's arrival starts a
        # rebalance anyway), as members of the consumer group if the conversion succeeds.
        for member in classic.members.values():
            classic.complete_join(member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            classic.complete_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        try:
            group = consumer_group_from_classic(classic, self.coordinator.topics)
        except MalformedConsumerProtocol as exc:
            log.warning("group %s: cannot upgrade the classic group to a consumer group: %s", group_id, exc)
            raise KafkaError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {group_id} to consumer group because the embedded consumer "
                "protocol is malformed.",
            ) from exc
        records.append((GroupMetadataKey(group_id), None))
        records += [_member_metadata_record(group_id, m) for m in group.members.values()]
        records.append((ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(group.group_epoch)))
        records += [_target_record(group_id, m, a) for m, a in group.target_assignment.items()]
        records.append(
            (
                ConsumerGroupTargetAssignmentMetadataKey(group_id),
                ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch),
            )
        )
        records += [_current_assignment_record(group_id, m) for m in group.members.values()]
        log.info(
            "group %s: upgrading the classic group (generation %d, %d members) to a consumer group",
            group_id, classic.generation_id, len(classic.members),
        )
        return group

    def _may_downgrade_without(self, group: ConsumerGroup, member_id: str) -> bool:
        """Whether removing ``member_id`` leaves only classic members and the group may be downgraded."""
        if not group.all_members_use_classic_protocol_except(member_id):
            return False
        if len(group.members) <= 1:
            return False
        if not self.migration_policy.downgrade_enabled:
            log.info("group %s: cannot downgrade the consumer group to a classic group: "
                     "group.consumer.migration.policy is %s", group.group_id, self.migration_policy.value)
            return False
        if len(group.members) - 1 > self.coordinator.group_max_size:
            log.info("group %s: cannot downgrade the consumer group to a classic group: it has more members "
                     "than group.max.size", group.group_id)
            return False
        return True

    def _may_downgrade_replacing(self, group: ConsumerGroup, replaced_id: str) -> bool:
        """Whether a classic static member replacing ``replaced_id`` leaves only classic members and the
        group may be downgraded."""
        if not group.all_members_use_classic_protocol_except(replaced_id):
            return False
        if not self.migration_policy.downgrade_enabled:
            log.info("group %s: cannot downgrade the consumer group to a classic group: "
                     "group.consumer.migration.policy is %s", group.group_id, self.migration_policy.value)
            return False
        if len(group.members) > self.coordinator.group_max_size:
            log.info("group %s: cannot downgrade the consumer group to a classic group: it has more members "
                     "than group.max.size", group.group_id)
            return False
        return True

    def _downgrade(
        self,
        group: ConsumerGroup,
        leaving_member_id: str,
        joining: ConsumerGroupMember | None = None,
        records: list[Record] | None = None,
    ) -> ClassicGroup:
        """Turn ``group`` into a classic group without ``leaving_member_id`` (and with ``joining``, a
        classic static member that replaces it). ``records`` (of the request that triggers this) are
        written first, then the consumer group's tombstones and the classic group's metadata, in one
        batch. A downgrade caused by a member leaving starts a rebalance of the classic group."""
        group_id = group.group_id
        coordinator = self.coordinator
        try:
            classic = classic_group_from_consumer(
                group, leaving_member_id, joining, coordinator.topics, coordinator.now_ms()
            )
        except MalformedConsumerProtocol as exc:
            log.warning("group %s: cannot downgrade the consumer group to a classic group: %s", group_id, exc)
            raise KafkaError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot downgrade the consumer group {group_id}: {exc}."
            ) from exc
        replaced = (leaving_member_id, joining.member_id) if joining is not None else None
        all_records = [*(records or []), *self._group_tombstone_records(group, replaced)]
        coordinator.append(group_id, [*self._encode(all_records), coordinator.group_metadata_record(classic)])
        coordinator.groups.pop(group_id, None)
        self.on_removed(group)
        self._cancel_member_timers(group_id, leaving_member_id)
        coordinator.groups[group_id] = classic
        coordinator.classic.on_loaded(classic)
        log.info(
            "group %s: downgraded to a classic group (generation %d, members %s) as %s",
            group_id, classic.generation_id, sorted(classic.members),
            f"static member {joining.member_id} replaced {leaving_member_id}" if joining is not None
            else f"its last consumer-protocol member {leaving_member_id} left",
        )
        if joining is None:
            coordinator.classic.rebalance(classic, f"group {group_id} was downgraded from consumer to classic")
        return classic

    # ================================================================================ leaving

    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        group = self._consumer_group(request.group_id, create=False)
        if request.instance_id is None:
            self.fence(group, group.member(request.member_id), "it left the group")
        else:
            member = group.static_member(request.instance_id)
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
            if member.member_id != request.member_id:
                raise KafkaError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {request.member_id} with instance id {request.instance_id} was fenced by member "
                    f"{member.member_id}.",
                )
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info(
                    "group %s: static member %s (instance %s) leaves for now",
                    group.group_id, member.member_id, request.instance_id,
                )
                departed = dataclasses.replace(
                    member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={}
                )
                self._write(group.group_id, [_current_assignment_record(group.group_id, departed)])
                self.timers.cancel(_rebalance_key(group.group_id, member.member_id))
                return HeartbeatResult(member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
            self.fence(group, member, f"it left the group (instance {request.instance_id})")
        return HeartbeatResult(member_id=request.member_id, member_epoch=request.member_epoch)

    def fence(self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str) -> None:
        """Remove ``member`` and bump the group epoch (the others are reassigned on their next heartbeat).
        When it was the last member using the consumer protocol, the group becomes a classic group
        instead, if the migration policy allows."""
        if self._may_downgrade_without(group, member.member_id):
            log.info("group %s: member %s removed because %s", group.group_id, member.member_id, reason)
            self._downgrade(group, member.member_id)
            return
        records = _member_tombstones(group.group_id, member.member_id)
        metadata = self._subscription_metadata(m for m in group.members.values() if m.member_id != member.member_id)
        if metadata != group.subscription_metadata:
            records.append(_partition_metadata_record(group.group_id, metadata))
        records.append((ConsumerGroupMetadataKey(group.group_id), ConsumerGroupMetadataValue(group.group_epoch + 1)))
        self._write(group.group_id, records)
        self._cancel_member_timers(group.group_id, member.member_id)
        log.info(
            "group %s: member %s removed because %s; group epoch %d", group.group_id, member.member_id, reason,
            group.group_epoch,
        )

    def _fence_if_current(self, group_id: str, member_id: str, member_epoch: int | None, reason: str) -> None:
        group = self.coordinator.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or not self.coordinator.is_serving(group_id):
            return
        member = group.members.get(member_id)
        if member is None or (member_epoch is not None and member.member_epoch != member_epoch):
            return
        try:
            self.fence(group, member, reason)
        except KafkaError as exc:
            log.warning("group %s: could not remove member %s (%s): %s", group_id, member_id, reason, exc)
            self._schedule_session_timeout(group_id, member_id)

    # ================================================================================ timers

    def _schedule_session_timeout(
        self, group_id: str, member_id: str, member: ConsumerGroupMember | None = None
    ) -> None:
        """(Re)start a member's session: group.consumer.session.timeout.ms, or the session timeout a
        classic ``member`` joined with."""
        timeout_ms = self.session_timeout_ms
        if member is not None and member.classic_member_metadata is not None:
            timeout_ms = member.classic_member_metadata.session_timeout_ms
        self.timers.schedule(
            _session_key(group_id, member_id),
            timeout_ms,
            lambda: self._fence_if_current(group_id, member_id, None, "its session expired"),
        )

    def _schedule_join_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A classic member asked to rejoin gets its rebalance timeout to do so (from the first ask)."""
        key = _join_key(group_id, member.member_id)
        if self.timers.is_scheduled(key):
            return
        member_id = member.member_id
        self.timers.schedule(
            key,
            member.rebalance_timeout_ms,
            lambda: self._fence_if_current(
                group_id, member_id, None, "the classic member did not rejoin within its rebalance timeout"
            ),
        )

    def _schedule_sync_timeout(self, group_id: str, member_id: str, rebalance_timeout_ms: int) -> None:
        self.timers.schedule(
            _sync_key(group_id, member_id),
            rebalance_timeout_ms,
            lambda: self._fence_if_current(
                group_id, member_id, None, "the classic member did not send SyncGroup within its rebalance timeout"
            ),
        )

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        member_id, epoch = member.member_id, member.member_epoch
        timeout_ms = member.rebalance_timeout_ms if member.rebalance_timeout_ms >= 0 else self.session_timeout_ms
        self.timers.schedule(
            _rebalance_key(group_id, member_id),
            timeout_ms,
            lambda: self._fence_if_current(
                group_id, member_id, epoch, f"it did not revoke its partitions of epoch {epoch} within {timeout_ms} ms"
            ),
        )

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(_session_key(group_id, member_id))
        self.timers.cancel(_rebalance_key(group_id, member_id))
        self.timers.cancel(_join_key(group_id, member_id))
        self.timers.cancel(_sync_key(group_id, member_id))

    # ================================================================================ persistence

    def _write(self, group_id: str, records: list[Record]) -> None:
        """Append ``records`` to the group's partition of __consumer_offsets, then apply them."""
        if not records:
            return
        self.coordinator.append(group_id, self._encode(records))
        for key, value in records:
            if isinstance(key, GroupMetadataKey):
                # An upgrade: the classic group's metadata is deleted (its members live on in the
                # consumer group that the following records create).
                existing = self.coordinator.groups.get(group_id)
                if isinstance(existing, ClassicGroup):
                    self.coordinator.remove_group(existing)
            else:
                self.replay(key, value)  # type: ignore[arg-type]

    @staticmethod
    def _encode(records: list[Record]) -> list[tuple[bytes, bytes | None]]:
        encoded: list[tuple[bytes, bytes | None]] = []
        for key, value in records:
            if isinstance(key, GroupMetadataKey):
                assert value is None, "only the tombstone of a classic group is written here"
                encoded.append((encode_key(key), None))
            else:
                encoded.append(
                    (encode_consumer_group_key(key), None if value is None else encode_consumer_group_value(value))
                )
        return encoded

    def replay(self, key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> None:
        """Apply one consumer group record to the in-memory groups (when written, and at start-up)."""
        groups = self.coordinator.groups
        group_id = key.group
        existing = groups.get(group_id)
        if value is None:
            if isinstance(existing, ConsumerGroup):
                self._replay_tombstone(existing, key)
            return
        if isinstance(existing, ConsumerGroup):
            group = existing
        else:
            if existing is not None:
                if not existing.is_empty:
                    log.warning("group %s: consumer group records replace a classic group with members", group_id)
                self.coordinator.groups.pop(group_id, None)
                self.coordinator.classic.on_removed(existing)
            group = groups[group_id] = ConsumerGroup(group_id)
        if isinstance(value, ConsumerGroupMetadataValue):
            if value.epoch != group.group_epoch:
                group.group_epoch = value.epoch
                group.epoch_changed_at = trio.current_time()
        elif isinstance(value, ConsumerGroupPartitionMetadataValue):
            group.subscription_metadata = {
                t.topic_name: TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in value.topics
            }
        elif isinstance(value, ConsumerGroupMemberMetadataValue):
            member_id = key.member_id  # type: ignore[union-attr]
            subscription = ConsumerGroupMember(
                member_id,
                instance_id=value.instance_id,
                rack_id=value.rack_id,
                client_id=value.client_id,
                client_host=value.client_host,
                subscribed_topic_names=tuple(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor=value.server_assignor,
                classic_member_metadata=value.classic_member_metadata,
            )
            current = group.members.get(member_id)
            group.update_member(current.with_metadata_of(subscription) if current is not None else subscription)
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
            group.target_assignment[key.member_id] = _frozen(value.topic_partitions)  # type: ignore[union-attr]
        elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
            member_id = key.member_id  # type: ignore[union-attr]
            current = group.members.get(member_id) or ConsumerGroupMember(member_id)
            group.update_member(
                dataclasses.replace(
                    current,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=MemberState.from_code(value.state),
                    assigned_partitions=_frozen(value.assigned_partitions),
                    partitions_pending_revocation=_frozen(value.partitions_pending_revocation),
                )
            )

    def _replay_tombstone(self, group: ConsumerGroup, key: ConsumerGroupKey) -> None:
        if isinstance(key, ConsumerGroupMetadataKey):
            if group.members:
                log.warning("group %s: deleted while it still has members %s", group.group_id, sorted(group.members))
            self.coordinator.groups.pop(group.group_id, None)
            self.on_removed(group)
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            group.subscription_metadata = {}
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            group.remove_member(key.member_id)
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            group.assignment_epoch = 0
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            group.target_assignment.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            member = group.members.get(key.member_id)
            if member is not None:
                group.update_member(
                    dataclasses.replace(
                        member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=-1,
                        state=MemberState.STABLE, assigned_partitions={}, partitions_pending_revocation={},
                    )
                )

    def tombstones(self, group: ConsumerGroup) -> list[tuple[bytes, None]]:
        """The records that delete the group (not its offsets), encoded."""
        return [(encode_consumer_group_key(key), None) for key, _ in self._group_tombstone_records(group)]

    @staticmethod
    def _group_tombstone_records(
        group: ConsumerGroup, replaced: tuple[str, str] | None = None
    ) -> list[tuple[ConsumerGroupKey, None]]:
        """The tombstones of every record of the group, in Kafka's order; ``replaced`` is an (old, new)
        member id pair: the new member's records are deleted in place of the old one's."""
        group_id = group.group_id
        member_ids = list(group.members)
        if replaced is not None:
            member_ids = [replaced[1] if m == replaced[0] else m for m in member_ids]
        records: list[tuple[ConsumerGroupKey, None]] = []
        records += [(ConsumerGroupCurrentMemberAssignmentKey(group_id, m), None) for m in member_ids]
        records += [(ConsumerGroupTargetAssignmentMemberKey(group_id, m), None) for m in member_ids]
        records.append((ConsumerGroupTargetAssignmentMetadataKey(group_id), None))
        records += [(ConsumerGroupMemberMetadataKey(group_id, m), None) for m in member_ids]
        records.append((ConsumerGroupPartitionMetadataKey(group_id), None))
        records.append((ConsumerGroupMetadataKey(group_id), None))
        return records

    def release_empty_group(self, group_id: str) -> None:
        """A JoinGroup is about to create a classic group: an empty consumer group of that id gives way
        (its offsets stay). Where that cannot be written, the consumer group stays and the join fails."""
        group = self.coordinator.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.is_empty and self.coordinator.is_serving(group_id):
            try:
                self.coordinator.drop_group_metadata(group)
                log.info("group %s: the empty consumer group becomes a classic group", group_id)
            except KafkaError as exc:
                log.warning("group %s: could not delete the empty consumer group: %s", group_id, exc)

    # ================================================================================ life-cycle

    def on_loaded(self, group: ConsumerGroup) -> None:
        """A group read back from __consumer_offsets: its members must heartbeat within a session."""
        for member in group.members.values():
            self._schedule_session_timeout(group.group_id, member.member_id, member)
            if member.state is MemberState.UNREVOKED_PARTITIONS and not member.uses_classic_protocol:
                self._schedule_rebalance_timeout(group.group_id, member)

    def on_removed(self, group: ConsumerGroup, error: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> None:
        """The group is deleted, or no longer coordinated here: forget its timers (no request parks on
        a consumer group, so ``error`` answers nothing)."""
        group.dead = True
        for member_id in group.members:
            self._cancel_member_timers(group.group_id, member_id)

    # ================================================================================ describe

    def describe(self, group_id: str) -> ConsumerGroup:
        """The consumer group to describe; raises GROUP_ID_NOT_FOUND (also for a classic group), and
        NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE."""
        self.coordinator.check_group(group_id)
        group = self.coordinator.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return group

    def assignor_of(self, group: ConsumerGroup) -> str:
        return group.preferred_assignor(self.default_assignor)


def _frozen(topic_partitions: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    return {topic_id: frozenset(ps) for topic_id, ps in topic_partitions.items() if ps}


def _member_metadata_record(group_id: str, member: ConsumerGroupMember) -> Record:
    return (
        ConsumerGroupMemberMetadataKey(group_id, member.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=list(member.subscribed_topic_names),
            subscribed_topic_regex=member.subscribed_topic_regex,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            server_assignor=member.server_assignor,
            classic_member_metadata=member.classic_member_metadata,
        ),
    )


def _partition_metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata]) -> Record:
    return (
        ConsumerGroupPartitionMetadataKey(group_id),
        ConsumerGroupPartitionMetadataValue(
            [SubscribedTopicMetadata(t.topic_id, t.name, t.num_partitions) for _, t in sorted(metadata.items())]
        ),
    )


def _target_record(group_id: str, member_id: str, assignment: Assignment) -> Record:
    return (
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(assignment),
    )


def _current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
    return (
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned_partitions=member.assigned_partitions,
            partitions_pending_revocation=member.partitions_pending_revocation,
        ),
    )


def _member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Removing a member, in Kafka's order: its current assignment, its target, then its subscription."""
    return [
        (ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        (ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        (ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]
