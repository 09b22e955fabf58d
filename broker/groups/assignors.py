"""Server-side assignors of the consumer group protocol: ``uniform`` (the default) and ``range``.

An assignor maps every member of a group to the partitions it should own, from each member's
subscribed topics and its current target assignment. It never sees the members' current (reconciling)
ownership: moving there safely is the coordinator's business (see :func:`trafka.broker.groups.consumer.reconcile`).

- ``uniform`` spreads the partitions of all subscribed topics as evenly as the subscriptions allow
  (members subscribed to the same topics end up at most one partition apart) while moving as few
  partitions as possible: a member keeps every partition it had unless that partition is needed to
  even out the group, or the member no longer subscribes to its topic.
- ``range`` gives each member a contiguous range of every topic it subscribes to, so members get the
  same partition numbers across co-partitioned topics (for joins). Members are ordered by instance id
  (static members first), then member id, so the ranges are deterministic; the assignment is not sticky.
"""
from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from trafka.broker.groups.consumer import Assignment, TopicMetadata

DEFAULT_ASSIGNOR = "uniform"


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Assignment

    __hash__ = None  # type: ignore[assignment]


class Assignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicMetadata]
    ) -> dict[str, Assignment]:
        """The target assignment of every member (members with nothing get an empty assignment).
        ``topics`` holds every subscribed topic that exists."""
        ...


def _as_assignment(partitions: Mapping[uuid.UUID, set[int]]) -> Assignment:
    return {topic_id: frozenset(ps) for topic_id, ps in partitions.items() if ps}


class UniformAssignor:
    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicMetadata]
    ) -> dict[str, Assignment]:
        if not members:
            return {}
        member_ids = sorted(members)
        owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in member_ids}
        counts = dict.fromkeys(member_ids, 0)
        taken: set[tuple[uuid.UUID, int]] = set()

        # 1. Everyone keeps what it had, where the topic still exists and is still subscribed.
        for member_id in member_ids:
            spec = members[member_id]
            for topic_id, partitions in spec.assignment.items():
                topic = topics.get(topic_id)
                if topic is None or topic_id not in spec.subscribed_topic_ids:
                    continue
                for partition in sorted(partitions):
                    if partition < topic.num_partitions and (topic_id, partition) not in taken:
                        taken.add((topic_id, partition))
                        owned[member_id].setdefault(topic_id, set()).add(partition)
                        counts[member_id] += 1

        subscribers: dict[uuid.UUID, list[str]] = {topic_id: [] for topic_id in topics}
        for member_id in member_ids:
            for topic_id in members[member_id].subscribed_topic_ids:
                if topic_id in subscribers:
                    subscribers[topic_id].append(member_id)

        # 2. Members with more than their fair share give up the surplus, so that step 3 spreads it.
        #    The fair share is computed per group of members with the same subscription.
        by_subscription: dict[frozenset[uuid.UUID], list[str]] = {}
        for member_id in member_ids:
            subscription = frozenset(t for t in members[member_id].subscribed_topic_ids if t in topics)
            by_subscription.setdefault(subscription, []).append(member_id)
        if len(by_subscription) == 1:
            (subscription, group_members), = by_subscription.items()
            total = sum(topics[t].num_partitions for t in subscription)
            quota, extra = divmod(total, len(group_members))
            # The members already holding the most keep the extra partitions.
            for rank, member_id in enumerate(sorted(group_members, key=lambda m: (-counts[m], m))):
                limit = quota + (1 if rank < extra else 0)
                self._shed(owned[member_id], counts, member_id, limit, taken)

        # 3. Hand out every partition nobody holds to the least loaded subscriber (topics with the
        #    fewest subscribers first: they have the fewest options).
        for topic_id in sorted(topics, key=lambda t: (len(subscribers[t]), topics[t].name)):
            candidates = subscribers[topic_id]
            if not candidates:
                continue
            heap = [(counts[m], m) for m in candidates]
            heapq.heapify(heap)
            for partition in range(topics[topic_id].num_partitions):
                if (topic_id, partition) in taken:
                    continue
                count, member_id = heapq.heappop(heap)
                owned[member_id].setdefault(topic_id, set()).add(partition)
                taken.add((topic_id, partition))
                counts[member_id] = count + 1
                heapq.heappush(heap, (count + 1, member_id))

        # 4. Even out what subscriptions allow: move a partition from a member holding at least two more
        #    than another that subscribes to its topic, until no such move exists. Each move lowers the
        #    sum of squared counts, so this ends.
        if len(by_subscription) > 1:
            self._balance(members, owned, counts)
        return {member_id: _as_assignment(owned[member_id]) for member_id in member_ids}

    @staticmethod
    def _shed(
        owned: dict[uuid.UUID, set[int]], counts: dict[str, int], member_id: str, limit: int, taken: set
    ) -> None:
        surplus = counts[member_id] - limit
        if surplus <= 0:
            return
        for topic_id in sorted(owned, key=str, reverse=True):
            partitions = owned[topic_id]
            for partition in sorted(partitions, reverse=True):
                if surplus == 0:
                    break
                partitions.discard(partition)
                taken.discard((topic_id, partition))
                surplus -= 1
            if not partitions:
                del owned[topic_id]
            if surplus == 0:
                break
        counts[member_id] = limit

    @staticmethod
    def _balance(
        members: Mapping[str, MemberSpec], owned: dict[str, dict[uuid.UUID, set[int]]], counts: dict[str, int]
    ) -> None:
        while True:
            moved = False
            for donor in sorted(counts, key=lambda m: (-counts[m], m)):
                for receiver in sorted(counts, key=lambda m: (counts[m], m)):
                    if counts[donor] < counts[receiver] + 2:
                        break
                    subscribed = members[receiver].subscribed_topic_ids
                    movable = [t for t in sorted(owned[donor], key=str) if t in subscribed and owned[donor][t]]
                    if not movable:
                        continue
                    topic_id = movable[-1]
                    partition = max(owned[donor][topic_id])
                    owned[donor][topic_id].discard(partition)
                    if not owned[donor][topic_id]:
                        del owned[donor][topic_id]
                    owned[receiver].setdefault(topic_id, set()).add(partition)
                    counts[donor] -= 1
                    counts[receiver] += 1
                    moved = True
                    break
                if moved:
                    break
            if not moved:
                return


class RangeAssignor:
    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicMetadata]
    ) -> dict[str, Assignment]:
        ordered = sorted(
            members.values(),
            key=lambda m: (0, m.instance_id, "") if m.instance_id is not None else (1, "", m.member_id),
        )
        assignment: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in ordered}
        for topic_id, topic in topics.items():
            subscribers = [m.member_id for m in ordered if topic_id in m.subscribed_topic_ids]
            if not subscribers:
                continue
            quota, extra = divmod(topic.num_partitions, len(subscribers))
            start = 0
            for index, member_id in enumerate(subscribers):
                end = start + quota + (1 if index < extra else 0)
                if end > start:
                    assignment[member_id][topic_id] = set(range(start, end))
                start = end
        return {member_id: _as_assignment(partitions) for member_id, partitions in assignment.items()}


ASSIGNORS: dict[str, Assignor] = {assignor.name: assignor for assignor in (UniformAssignor(), RangeAssignor())}
