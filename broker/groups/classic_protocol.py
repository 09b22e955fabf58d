"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and their timeouts.

This follows Apache Kafka's group coordinator:

- A member joining without a member id gets one generated; from JoinGroup v4 it is first told
  MEMBER_ID_REQUIRED with that id (it becomes a *pending* member) and joins again with it.
- A join or a leave in a Stable or CompletingRebalance group starts a rebalance (PreparingRebalance).
  The join phase completes as soon as every known member — pending ones included — has rejoined, or
  when the rebalance timeout (the longest of the members') expires; members that did not rejoin are
  dropped. Then the generation is bumped, the protocol chosen, and every parked JoinGroup answered; the
  leader's response carries all members' metadata.
- A new (Empty) group's first rebalance waits until no new member has arrived for
  ``group.initial.rebalance.delay.ms`` (within the rebalance timeout), and beyond that for members
  already told MEMBER_ID_REQUIRED: consumers started together form one generation instead of a lone
  first generation whose leader only hears of the others at its next heartbeat (seconds later).
  Kafka waits 3 s; trafka's default is 100 ms, set it to 0 to complete the first join at once.
- SyncGroup from followers parks until the leader's SyncGroup brings the assignment; the group is then
  Stable and the assignment is written to ``__consumer_offsets``. Members that never sync within the
  rebalance timeout are removed and the group rebalances.
- Every member has a session timer, reset by heartbeats (and by OffsetCommit); its expiry removes the
  member and rebalances the group.
- Static members (``group.instance.id``) keep their place across restarts: a rejoin with a new member
  id replaces the old one, fencing it with FENCED_INSTANCE_ID, without a rebalance when the group is
  Stable and the protocol choice does not change.

Everything here is synchronous: request handlers call in, get a :class:`Reply` (completed at once or
later), and timers call back in from the coordinator's timer task.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from trafka.broker.groups.classic import (
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    ClassicGroupMember,
    GroupType,
    JoinRequest,
    JoinResult,
    Protocols,
    Reply,
    SyncResult,
)
from trafka.broker.groups.consumer import ConsumerGroup
from trafka.broker.groups.state import ClassicGroupState as State
from trafka.wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from trafka.broker.groups.host import GroupHost

log = logging.getLogger(__name__)

# Kafka's group.classic.new.member.join.timeout: a new member parked in JoinGroup is dropped after it
# (clients that gave up on their request would otherwise linger in the rebalance).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# JoinGroup v9 lets a static leader that rejoins a stable group skip computing an assignment.
SKIP_ASSIGNMENT_MIN_VERSION = 9
MEMBER_ID_REQUIRED_MIN_VERSION = 4


def _heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def _join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def _initial_delay_key(group_id: str) -> tuple[str, str]:
    return ("initial-delay", group_id)


class ClassicGroupProtocol:
    def __init__(self, coordinator: GroupHost) -> None:
        self.coordinator = coordinator
        self.timers = coordinator.timers

    # ================================================================================ JoinGroup

    def join(self, request: JoinRequest) -> Reply[JoinResult]:
        coordinator = self.coordinator
        config = coordinator.config
        group_id, member_id, group_instance_id = request.group_id, request.member_id, request.group_instance_id
        protocol_type, protocols = request.protocol_type, request.protocols
        session_timeout_ms = request.session_timeout_ms
        client_id, api_version = request.client_id, request.api_version
        if not group_id:
            return Reply.of(JoinResult(_unless_stopping(coordinator, ErrorCode.INVALID_GROUP_ID), member_id))
        error = coordinator.group_error(group_id)
        if error is not ErrorCode.NONE:
            return Reply.of(JoinResult(error, member_id))
        try:
            coordinator.check_group_id(group_id)
        except KafkaError as exc:
            return Reply.of(JoinResult(exc.code, member_id))
        if not config.group_min_session_timeout_ms <= session_timeout_ms <= config.group_max_session_timeout_ms:
            return Reply.of(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))

        existing = coordinator.groups.get(group_id)
        if isinstance(existing, ConsumerGroup) and not existing.is_empty:
            # A classic consumer joins a consumer group (KIP-848) as a member that uses the classic protocol.
            return Reply.of(coordinator.consumer.classic_join(existing, request))
        if existing is not None and existing.type is not GroupType.CLASSIC:
            return Reply.of(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        if existing is None:
            if not is_unknown_member:
                return Reply.of(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            group = coordinator.create_classic_group(group_id)
        else:
            group = existing

        reply: Reply[JoinResult] = Reply()
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            reply.complete(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
        elif group.is_in(State.DEAD):
            reply.complete(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            reply.complete(
                JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID if is_unknown_member else member_id)
            )
        elif is_unknown_member:
            new_member_id = group.generate_member_id(client_id, group_instance_id)
            if group_instance_id is not None:
                old_member_id = group.static_member_id(group_instance_id)
                if old_member_id is not None:
                    log.info(
                        "group %s: static member %s rejoins as %s, replacing %s",
                        group_id, group_instance_id, new_member_id, old_member_id,
                    )
                    self._replace_static_member(group, old_member_id, new_member_id, request, reply)
                else:
                    self._add_member(group, new_member_id, group_instance_id, request, reply)
            elif api_version >= MEMBER_ID_REQUIRED_MIN_VERSION:
                group.add_pending_member(new_member_id)
                self.timers.schedule(
                    _heartbeat_key(group_id, new_member_id),
                    session_timeout_ms,
                    lambda: self._expire_heartbeat(group_id, new_member_id),
                )
                reply.complete(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
            else:
                self._add_member(group, new_member_id, None, request, reply)
        else:
            self._join_existing_member(group, request, reply)
        return reply

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.coordinator.group_max_size
        if group.is_in(State.EMPTY, State.DEAD):
            return True
        if group.is_in(State.PREPARING_REBALANCE):
            # Counting the members that have rejoined lets the group shrink to the limit by leaving
            # out the last to rejoin.
            return (
                group.has_member(member_id) and group.member(member_id).is_awaiting_join
            ) or group.awaiting_join_count < max_size
        return group.has_member(member_id) or len(group.members) < max_size

    def _join_existing_member(self, group: ClassicGroup, request: JoinRequest, reply: Reply[JoinResult]) -> None:
        member_id, group_instance_id, protocols = request.member_id, request.group_instance_id, request.protocols
        session_timeout_ms, rebalance_timeout_ms = request.session_timeout_ms, request.rebalance_timeout_ms
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                reply.complete(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            self._add_member(group, member_id, None, request, reply)
            return
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as exc:
            reply.complete(JoinResult(exc.code, member_id))
            return
        member = group.member(member_id)
        if group.is_in(State.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, protocols, session_timeout_ms, rebalance_timeout_ms, reply)
        elif group.is_in(State.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member lost the JoinGroup response: send the current generation again.
                reply.complete(group.join_result(member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(
                    group, member, protocols, session_timeout_ms, rebalance_timeout_ms, reply
                )
        elif group.is_in(State.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoins to have the assignment recomputed (e.g. after a metadata change).
                self._update_member_and_rebalance(
                    group, member, protocols, session_timeout_ms, rebalance_timeout_ms, reply
                )
            else:
                reply.complete(group.join_result(member_id, with_members=False))
        else:
            reply.complete(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _add_member(self, group: ClassicGroup, member_id: str, group_instance_id: str | None, request: JoinRequest,
                    reply: Reply[JoinResult]) -> None:
        """A new member, ``member_id`` (and ``group_instance_id``), joins as ``request`` says."""
        client_id, reason = request.client_id, request.reason
        member = ClassicGroupMember(
            member_id, group_instance_id, client_id, request.client_host, request.rebalance_timeout_ms,
            request.session_timeout_ms, request.protocol_type, request.protocols,
        )
        member.is_new = True
        group.add(member, reply)
        if self.timers.is_scheduled(_initial_delay_key(group.group_id)):
            self._schedule_initial_delay(group)  # another arrival: the quiet window starts over
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        log.info(
            "group %s: member %s (instance %s, client %s) joins%s",
            group.group_id, member_id, group_instance_id, client_id, f"; client reason: {reason}" if reason else "",
        )
        self._rebalance_or_complete_join(group, f"new member {member_id} joined")

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: ClassicGroupMember,
        protocols: Protocols,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        reply: Reply[JoinResult],
    ) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, reply)
        self._rebalance_or_complete_join(group, f"member {member.member_id} rejoined")

    def _replace_static_member(self, group: ClassicGroup, old_member_id: str, new_member_id: str,
                               request: JoinRequest, reply: Reply[JoinResult]) -> None:
        group_instance_id = request.group_instance_id
        protocols, api_version = request.protocols, request.api_version
        session_timeout_ms, rebalance_timeout_ms = request.session_timeout_ms, request.rebalance_timeout_ms
        self.timers.cancel(_heartbeat_key(group.group_id, old_member_id))
        group.pending_sync_members.discard(old_member_id)
        leader_before = group.leader_id
        old_protocols = group.member(old_member_id).protocols
        old_session_timeout_ms = group.member(old_member_id).session_timeout_ms
        old_rebalance_timeout_ms = group.member(old_member_id).rebalance_timeout_ms
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, reply)

        if group.is_in(State.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol choice: the restarted instance takes its old place and assignment.
                try:
                    self.coordinator.store_group(group)
                except KafkaError as exc:
                    group.update_member(member, old_protocols, old_rebalance_timeout_ms, old_session_timeout_ms, None)
                    self.timers.cancel(_heartbeat_key(group.group_id, new_member_id))
                    restored = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                    self._schedule_heartbeat(group, restored)
                    reply.complete(JoinResult(exc.code, UNKNOWN_MEMBER_ID))
                    return
                is_leader = group.is_leader(new_member_id)
                if api_version >= SKIP_ASSIGNMENT_MIN_VERSION:
                    result = group.join_result(new_member_id, with_members=is_leader, skip_assignment=is_leader)
                else:
                    # Older clients cannot skip the assignment: name the leader as it was, so a
                    # restarted static leader acts as a follower and just syncs its old assignment.
                    result = group.join_result(new_member_id, with_members=False)
                    result.leader = leader_before or ""
                group.complete_join(member, result)
                log.info(
                    "group %s: static member %s replaced without a rebalance", group.group_id, group_instance_id
                )
            else:
                self._rebalance_or_complete_join(
                    group, f"static member {group_instance_id} rejoined with a change of protocol"
                )
        elif group.is_in(State.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"static member {group_instance_id} rejoined during CompletingRebalance")
        else:
            self._maybe_complete_join(group)

    # ---------------------------------------------------------------------------- rebalances

    def rebalance(self, group: ClassicGroup, reason: str) -> None:
        """Start a rebalance of a Stable group (one just downgraded from a consumer group): its members
        learn it from their heartbeats and rejoin."""
        self._prepare_rebalance(group, reason)

    def _rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(State.COMPLETING_REBALANCE):
            # Members waiting in SyncGroup must rejoin.
            for member in group.members.values():
                member.assignment = b""
            self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self.timers.cancel(_sync_key(group.group_id))

        initial = group.is_in(State.EMPTY)
        group.transition_to(State.PREPARING_REBALANCE, self.coordinator.now_ms())
        log.info(
            "group %s: preparing to rebalance (old generation %d): %s", group.group_id, group.generation_id, reason
        )
        group_id = group.group_id
        if initial and self.coordinator.initial_rebalance_delay_ms > 0:
            self._schedule_initial_delay(group)
        elif group.has_all_members_joined():
            self._complete_join(group)
        else:
            self.timers.schedule(
                _join_key(group_id), group.rebalance_timeout_ms(), lambda: self._join_timed_out(group_id)
            )

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if not group.is_in(State.PREPARING_REBALANCE) or not group.has_all_members_joined():
            return
        if self.timers.is_scheduled(_initial_delay_key(group.group_id)):
            return  # a new group still waiting for members that start together
        self._complete_join(group)

    def _schedule_initial_delay(self, group: ClassicGroup) -> None:
        """(Re)start a new group's quiet window: ``group.initial.rebalance.delay.ms`` from now."""
        group_id = group.group_id
        self.timers.schedule(
            _initial_delay_key(group_id),
            min(self.coordinator.initial_rebalance_delay_ms, self._join_time_left_ms(group)),
            lambda: self._initial_delay_elapsed(group_id),
        )

    def _join_time_left_ms(self, group: ClassicGroup) -> int:
        """What is left of the rebalance timeout since the group began preparing to rebalance."""
        assert group.state_timestamp_ms is not None
        deadline_ms = group.state_timestamp_ms + group.rebalance_timeout_ms()
        return max(deadline_ms - self.coordinator.now_ms(), 0)

    def _initial_delay_elapsed(self, group_id: str) -> None:
        group = self._classic_group(group_id)
        if group is None or not group.is_in(State.PREPARING_REBALANCE):
            return
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            # Members told MEMBER_ID_REQUIRED are expected back within a round trip: give them what is
            # left of the rebalance timeout (a pending member that never returns expires with its session).
            self.timers.schedule(
                _join_key(group_id), self._join_time_left_ms(group), lambda: self._join_timed_out(group_id)
            )

    def _join_timed_out(self, group_id: str) -> None:
        group = self._classic_group(group_id)
        if group is not None and group.is_in(State.PREPARING_REBALANCE):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        coordinator = self.coordinator
        group_id = group.group_id
        self.timers.cancel(_join_key(group_id))
        self.timers.cancel(_initial_delay_key(group_id))
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for member in gone:
            group.remove(member.member_id)
            self.timers.cancel(_heartbeat_key(group_id, member.member_id))
        if gone:
            log.info("group %s: removed members that did not rejoin: %s", group_id, [m.member_id for m in gone])
        group.pending_join_members.clear()

        if group.is_in(State.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members remain and none rejoined: wait another rebalance timeout.
            log.warning("group %s: no member rejoined; waiting another rebalance timeout", group_id)
            self.timers.schedule(
                _join_key(group_id), group.rebalance_timeout_ms(), lambda: self._join_timed_out(group_id)
            )
            return
        group.init_next_generation(coordinator.now_ms())
        if group.is_empty:
            log.info("group %s: generation %d is empty", group_id, group.generation_id)
            try:
                coordinator.store_group(group)
            except KafkaError as exc:
                log.warning("group %s: could not store the empty generation: %s", group_id, exc)
            return
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group_id, group.generation_id, len(group.members), group.protocol_name, group.leader_id,
        )
        for member in list(group.members.values()):
            group.complete_join(member, group.join_result(member.member_id, with_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.timers.schedule(
            _sync_key(group_id), group.rebalance_timeout_ms(), lambda: self._sync_timed_out(group_id, generation)
        )

    # ================================================================================ SyncGroup

    def sync(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> Reply[SyncResult]:
        coordinator = self.coordinator
        if not group_id:
            return Reply.of(SyncResult(_unless_stopping(coordinator, ErrorCode.INVALID_GROUP_ID)))
        error = coordinator.group_error(group_id)
        if error is not ErrorCode.NONE:
            return Reply.of(SyncResult(error))
        group = coordinator.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return Reply.of(
                coordinator.consumer.classic_sync(
                    group, member_id=member_id, instance_id=group_instance_id, generation_id=generation_id,
                    protocol_type=protocol_type, protocol_name=protocol_name,
                )
            )
        if group is None or group.type is not GroupType.CLASSIC or group.is_empty:
            return Reply.of(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        assert isinstance(group, ClassicGroup)
        if group.is_in(State.DEAD):
            return Reply.of(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as exc:
            return Reply.of(SyncResult(exc.code))
        if generation_id != group.generation_id:
            return Reply.of(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol_name):
            return Reply.of(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if group.is_in(State.PREPARING_REBALANCE):
            return Reply.of(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))

        member = group.member(member_id)
        if group.is_in(State.STABLE):
            self._received_sync(group, member_id)
            return Reply.of(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))

        # CompletingRebalance: park until the leader's assignment arrives.
        reply: Reply[SyncResult] = Reply()
        member.sync_reply = reply
        self._received_sync(group, member_id)
        if group.is_leader(member_id):
            log.info(
                "group %s: assignment for generation %d received from leader %s",
                group_id, group.generation_id, member_id,
            )
            for each in group.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            try:
                coordinator.store_group(group)
            except KafkaError as exc:
                for each in group.members.values():
                    each.assignment = b""
                self._propagate_assignment(group, exc.code)
                self._rebalance_or_complete_join(group, f"the assignment could not be stored: {exc.code.name}")
                return reply
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition_to(State.STABLE, coordinator.now_ms())
        return reply

    def _received_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.timers.cancel(_sync_key(group.group_id))

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.NONE
        for member in group.members.values():
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.complete_sync(member, result):
                # Whatever expired while the member waited is forgiven: its session starts now.
                self._schedule_heartbeat(group, member)

    def _sync_timed_out(self, group_id: str, generation_id: int) -> None:
        group = self._classic_group(group_id)
        if group is None or group.generation_id != generation_id:
            return
        if group.is_in(State.COMPLETING_REBALANCE, State.STABLE) and group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self.timers.cancel(_heartbeat_key(group_id, member_id))
            self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    # ================================================================================ Heartbeat

    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        coordinator = self.coordinator
        if not group_id:
            return _unless_stopping(coordinator, ErrorCode.INVALID_GROUP_ID)
        error = coordinator.group_error(group_id)
        if error is not ErrorCode.NONE:
            return error
        group = coordinator.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return coordinator.consumer.classic_heartbeat(
                group, member_id=member_id, instance_id=group_instance_id, generation_id=generation_id
            )
        if group is None or group.type is not GroupType.CLASSIC:
            return ErrorCode.UNKNOWN_MEMBER_ID
        assert isinstance(group, ClassicGroup)
        if group.is_in(State.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as exc:
            return exc.code
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_empty:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.member(member_id))
        if group.is_in(State.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def keep_alive(self, group: ClassicGroup, member_id: str) -> None:
        """An offset commit from a member of a Stable or rebalancing group counts as a heartbeat."""
        if group.is_in(State.STABLE, State.PREPARING_REBALANCE) and group.has_member(member_id):
            self._schedule_heartbeat(group, group.member(member_id))

    def _schedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timers.schedule(
            _heartbeat_key(group_id, member_id),
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._expire_heartbeat(group_id, member_id),
        )

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self._classic_group(group_id)
        if group is None or group.is_in(State.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("group %s: pending member %s expired before rejoining", group_id, member_id)
            group.remove(member_id)
            self._maybe_complete_join(group)
            return
        if not group.has_member(member_id):
            return
        member = group.member(member_id)
        if member.has_satisfied_heartbeat():
            return
        log.info("group %s: session of member %s expired; removing it", group_id, member_id)
        self._remove_member_and_rebalance(group, member)

    def _remove_member_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        # A member parked in JoinGroup learns it is gone, and retries as a new member if still alive.
        group.complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(State.STABLE, State.COMPLETING_REBALANCE):
            self._rebalance_or_complete_join(group, f"member {member.member_id} is gone")
        elif group.is_in(State.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    # ================================================================================ LeaveGroup

    def leave(
        self, *, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Remove ``(member_id, group_instance_id, reason)`` members; returns the top-level error and each
        member's outcome. A member id of "" with an instance id removes that static member (admin)."""
        coordinator = self.coordinator
        if not group_id:
            return _unless_stopping(coordinator, ErrorCode.INVALID_GROUP_ID), []
        error = coordinator.group_error(group_id)
        if error is not ErrorCode.NONE:
            return error, []
        group = coordinator.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return coordinator.consumer.classic_leave(group, members)
        if group is not None and str(group.type) == "share":  # as Kafka: none of them is a member
            return ErrorCode.NONE, [(member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID)
                                    for member_id, instance_id, _ in members]
        if group is None or group.type is not GroupType.CLASSIC:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        assert isinstance(group, ClassicGroup)
        if group.is_in(State.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        outcomes: list[tuple[str, str | None, ErrorCode]] = []
        left = False
        for member_id, instance_id, reason in members:
            if member_id == UNKNOWN_MEMBER_ID:
                static_id = group.static_member_id(instance_id) if instance_id is not None else None
                if static_id is None:
                    outcomes.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_leaving_member(group, static_id, reason)
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timers.cancel(_heartbeat_key(group_id, member_id))
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except KafkaError as exc:
                    outcomes.append((member_id, instance_id, exc.code))
                    continue
                self._remove_leaving_member(group, member_id, reason)
            outcomes.append((member_id, instance_id, ErrorCode.NONE))
            left = True
        if left:
            if group.is_in(State.STABLE, State.COMPLETING_REBALANCE):
                self._rebalance_or_complete_join(group, "members left")
            elif group.is_in(State.PREPARING_REBALANCE):
                self._maybe_complete_join(group)
        return ErrorCode.NONE, outcomes

    def _remove_leaving_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.member(member_id)
        self.timers.cancel(_heartbeat_key(group.group_id, member_id))
        log.info("group %s: member %s leaves (reason: %s)", group.group_id, member_id, reason or "not provided")
        group.complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        group.remove(member_id)

    # ================================================================================ life-cycle

    def on_loaded(self, group: ClassicGroup) -> None:
        """A group read back from ``__consumer_offsets``: its members must heartbeat within a session."""
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    def on_removed(self, group: ClassicGroup, error: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> None:
        """The group is deleted, or no longer coordinated here: answer whatever its members are waiting
        for with ``error`` and forget its timers."""
        group_id = group.group_id
        self.timers.cancel(_join_key(group_id))
        self.timers.cancel(_initial_delay_key(group_id))
        self.timers.cancel(_sync_key(group_id))
        for member_id in list(group.pending_join_members):
            self.timers.cancel(_heartbeat_key(group_id, member_id))
        for member in group.members.values():
            self.timers.cancel(_heartbeat_key(group_id, member.member_id))
            group.complete_join(member, JoinResult(error, member.member_id))
            group.complete_sync(member, SyncResult(error))

    def _classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.coordinator.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None


def _unless_stopping(coordinator: GroupHost, error: ErrorCode) -> ErrorCode:
    """A request's own error, or COORDINATOR_NOT_AVAILABLE while the broker stops (checked first)."""
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if coordinator.stopping else error


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and requested != current
