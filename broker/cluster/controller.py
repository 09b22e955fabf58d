"""The controller's decisions, as pure functions of the cluster's state: where a new partition's replicas
go, and which replica leads a partition.

Replica placement is Kafka's (ZooKeeper mode): brokers in id order (alternating between racks when every
broker names one), the first replica of partition p on the broker ``(p + start) % n`` so that leaders
spread evenly, the others at a shift that grows by one every ``n`` partitions so that followers spread
too; on racks, a replica never shares a rack with another while some rack has none. ``start`` is
random unless given, so that topics created one by one do not pile their leaders on the first broker.

Leader election takes the first replica, in assignment order, that is alive and in the ISR; with unclean
election allowed, and none such, the first live replica (which may not hold every acknowledged record).

The partition state the controller writes follows from the live brokers (``next_partition_state``), as
Kafka's controller in ZooKeeper mode decides it: a partition whose leader is gone gets the first live ISR
member as leader and the live ISR; one whose leader lives loses its dead followers from the ISR; one with
no live ISR member goes offline (leader -1) keeping its last leader as the ISR's only member, who leads
again when it returns; with unclean election allowed, a live replica outside the ISR leads instead, alone
in the ISR and marked RECOVERING. Every such change bumps the leader epoch and carries the controller's
epoch.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence, Set

from trafka.broker.cluster import NO_LEADER, RECOVERING, PartitionState, TopicAssignment
from trafka.wire.errors import ErrorCode, KafkaError


def assign_replicas(
    brokers: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    start: int | None = None,
    first_partition: int = 0,
) -> dict[int, list[int]]:
    """Replicas of partitions ``first_partition .. first_partition + partitions - 1`` over ``brokers``
    (broker id -> rack, or None), the preferred leader first."""
    if partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )
    racks = {rack for rack in brokers.values() if rack is not None}
    rack_aware = bool(racks)
    if rack_aware and None in brokers.values():
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    order = _rack_alternated(brokers) if rack_aware else sorted(brokers)
    count = len(order)
    first = random.randrange(count) if start is None else start
    shift = random.randrange(count) if start is None else start
    assignment: dict[int, list[int]] = {}
    for partition in range(max(0, first_partition), max(0, first_partition) + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        leader_index = (partition + first) % count
        replicas = [order[leader_index]]
        if rack_aware:
            _add_rack_aware(replicas, order, brokers, leader_index, shift * len(racks), replication_factor, len(racks))
        else:
            replicas += [order[_follower_index(leader_index, shift, j, count)] for j in range(replication_factor - 1)]
        assignment[partition] = replicas
    return assignment


def _follower_index(leader_index: int, shift: int, follower: int, count: int) -> int:
    """Where the ``follower``-th follower goes: past the leader by 1 + (shift + follower) mod (n - 1)."""
    return (leader_index + 1 + (shift + follower) % (count - 1)) % count


def _rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    """Brokers taken from each rack in turn (racks by name, brokers of a rack by id)."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(str(brokers[broker_id]), []).append(broker_id)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    order: list[int] = []
    turn = 0
    while len(order) < len(brokers):
        queue = queues[turn % len(queues)]
        if queue:
            order.append(queue.pop(0))
        turn += 1
    return order


def _add_rack_aware(replicas: list[int], order: Sequence[int], brokers: Mapping[int, str | None], leader_index: int,
                    shift: int, replication_factor: int, rack_count: int) -> None:
    """Add the followers of a partition led by ``replicas[0]``: walking the shifted positions, skip a
    broker whose rack has a replica while another rack has none, or a broker that has one while
    another broker has none."""
    used_racks = {brokers[replicas[0]]}
    used = {replicas[0]}
    step = 0
    while len(replicas) < replication_factor:
        candidate = order[_follower_index(leader_index, shift, step, len(order))]
        step += 1
        rack = brokers[candidate]
        if (rack not in used_racks or len(used_racks) == rack_count) and (
            candidate not in used or len(used) == len(order)
        ):
            replicas.append(candidate)
            used_racks.add(rack)
            used.add(candidate)


def elect_leader(replicas: Sequence[int], isr: Sequence[int], live: set[int] | frozenset[int], *,
                 unclean: bool = False) -> int | None:
    """The new leader of a partition: the first live replica of the ISR in assignment order; with
    ``unclean`` and none such, the first live replica; None when no replica may lead."""
    in_sync = set(isr)
    for replica in replicas:
        if replica in live and replica in in_sync:
            return replica
    if unclean:
        for replica in replicas:
            if replica in live:
                return replica
    return None


def initial_partition_state(replicas: Sequence[int], live: Set[int], controller_epoch: int) -> PartitionState:
    """A new partition's state: the first live replica leads, the live replicas (in assignment order) are
    the ISR; no leader and an empty ISR while none is live."""
    isr = tuple(replica for replica in replicas if replica in live)
    return PartitionState(isr[0] if isr else NO_LEADER, 0, isr, controller_epoch)


def next_partition_state(state: PartitionState, replicas: Sequence[int], live: Set[int], controller_epoch: int,
                         *, unclean: bool = False) -> PartitionState | None:
    """The state the controller writes for a partition now that ``live`` are the live brokers, or None
    when the state stands. The result carries ``state.version``, the condition of its write."""
    if state.leader != NO_LEADER and state.leader in live:
        isr = tuple(replica for replica in state.isr if replica in live) or (state.leader,)
        return None if isr == state.isr else _bumped(state, state.leader, isr, controller_epoch)
    if not state.isr:  # never had a leader: any live replica may lead, as for a new partition
        new = initial_partition_state(replicas, live, controller_epoch)
        if not new.isr:
            return None
        return _bumped(state, new.leader, new.isr, controller_epoch)
    leader = elect_leader(replicas, state.isr, live, unclean=unclean)
    if leader is not None and leader in state.isr:
        isr = tuple(replica for replica in state.isr if replica in live)
        return _bumped(state, leader, isr, controller_epoch)
    if leader is not None:
        return _bumped(state, leader, (leader,), controller_epoch, RECOVERING)
    if state.leader == NO_LEADER:
        return None
    last = (state.leader,) if state.leader in state.isr else state.isr
    return _bumped(state, NO_LEADER, last, controller_epoch)


def requested_election(state: PartitionState, replicas: Sequence[int], live: Set[int], controller_epoch: int,
                       *, unclean: bool) -> tuple[PartitionState | None, ErrorCode, str | None]:
    """An election asked for (ElectLeaders, or the controller's own leader rebalance): the state to
    write, or None, with the outcome to report. Preferred: the first replica of the assignment leads,
    when it is alive and in the ISR. Unclean: a partition without a live leader gets one, from outside
    the ISR if need be (then alone in it, and recovering)."""
    if not unclean:
        preferred = replicas[0]
        if state.leader == preferred:
            return None, ErrorCode.ELECTION_NOT_NEEDED, None
        if preferred not in live or preferred not in state.isr:
            return None, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, (
                f"The preferred replica {preferred} is not alive and in the ISR {list(state.isr)}.")
        return _bumped(state, preferred, state.isr, controller_epoch), ErrorCode.NONE, None
    if state.leader != NO_LEADER and state.leader in live:
        return None, ErrorCode.ELECTION_NOT_NEEDED, None
    leader = elect_leader(replicas, state.isr, live, unclean=True)
    if leader is None:
        return None, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "No replica of the partition is alive."
    if leader in state.isr:
        isr = tuple(replica for replica in state.isr if replica in live)
        return _bumped(state, leader, isr, controller_epoch), ErrorCode.NONE, None
    return _bumped(state, leader, (leader,), controller_epoch, RECOVERING), ErrorCode.NONE, None


def imbalanced_partitions(states: Mapping[tuple[str, int], PartitionState],
                          replicas: Mapping[tuple[str, int], Sequence[int]], live: Set[int],
                          max_imbalance_percentage: int) -> list[tuple[str, int]]:
    """Kafka's automatic leader rebalance: for each live broker whose share of partitions it prefers
    but does not lead is above ``max_imbalance_percentage``, the partitions it could lead again (it is
    alive and in their ISR)."""
    preferred_by: dict[int, list[tuple[str, int]]] = {}
    for key, assignment in replicas.items():
        if assignment and key in states:
            preferred_by.setdefault(assignment[0], []).append(key)
    chosen: list[tuple[str, int]] = []
    for broker, keys in preferred_by.items():
        if broker not in live:
            continue
        not_led = [key for key in keys if states[key].leader != broker]
        if keys and len(not_led) * 100 > max_imbalance_percentage * len(keys):
            chosen += [key for key in not_led if broker in states[key].isr]
    return sorted(chosen)


def start_reassignment(assignment: TopicAssignment, partition: int, target: Sequence[int]) -> TopicAssignment:
    """The assignment once ``partition`` is on its way to ``target`` (KIP-455): its replicas are the
    target's then the original ones not in it, the target's new brokers adding and the others removing.
    A target equal to the original replicas ends (cancels) a reassignment in progress."""
    original = assignment.original(partition)
    target = tuple(target)
    adding, removing = dict(assignment.adding), dict(assignment.removing)
    adding.pop(partition, None)
    removing.pop(partition, None)
    if target == original:
        replicas = original
    else:
        replicas = target + tuple(r for r in original if r not in target)
        if joining := tuple(r for r in target if r not in original):
            adding[partition] = joining
        if leaving := tuple(r for r in original if r not in target):
            removing[partition] = leaving
    return dataclasses.replace(assignment, replicas=_with(assignment.replicas, partition, replicas),
                               adding=adding, removing=removing)


def settle_replicas(assignment: TopicAssignment, partition: int, state: PartitionState, live: Set[int],
                    controller_epoch: int) -> tuple[TopicAssignment, PartitionState | None] | None:
    """A partition whose replicas are moving: once every target replica is in the ISR, the assignment
    without the removed replicas and the state to write with it (leadership moved into the target
    when its leader is not there, the ISR kept to the target, the leader epoch bumped so that the
    removed replicas stop), or None while the move goes on (or the partition is not moving). A
    partition whose leader is outside its replicas (a cancelled move) is settled the same way."""
    target = assignment.target(partition)
    moving = partition in assignment.adding or partition in assignment.removing
    if not moving and (state.leader in target or state.leader == NO_LEADER):
        return None
    if not all(replica in state.isr for replica in target) and moving:
        return None
    leader = state.leader if state.leader in target and state.leader in live else next(
        (replica for replica in target if replica in state.isr and replica in live), None)
    if leader is None:
        return None
    isr = tuple(replica for replica in state.isr if replica in target)
    adding, removing = dict(assignment.adding), dict(assignment.removing)
    adding.pop(partition, None)
    removing.pop(partition, None)
    settled = dataclasses.replace(assignment, replicas=_with(assignment.replicas, partition, target),
                                  adding=adding, removing=removing)
    changed = (leader, isr) != (state.leader, state.isr) or moving
    return settled, (_bumped(state, leader, isr, controller_epoch) if changed else None)


def _with(replicas: tuple[tuple[int, ...], ...], partition: int, new: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    return replicas[:partition] + (new,) + replicas[partition + 1:]


def _bumped(state: PartitionState, leader: int, isr: tuple[int, ...], controller_epoch: int,
            leader_recovery_state: int | None = None) -> PartitionState:
    recovery = state.leader_recovery_state if leader_recovery_state is None else leader_recovery_state
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch, state.version, recovery)
