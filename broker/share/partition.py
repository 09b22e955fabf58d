"""A share partition: the records of one topic partition as one share group delivers them (KIP-932).

Pure and synchronous (no trio): the share partition manager (:mod:`trafka.broker.share.manager`) owns the
timers, the log reads and the persister; this module is the state machine they drive.

Offsets below the share-partition start offset (SPSO) are done with. From the SPSO to the end offset are the
in-flight records, kept as in-flight batches (the ranges they were first acquired in), each a list of
:class:`StateRange` s: consecutive offsets in one state, with one delivery count and, while acquired, one holder
and lock deadline. A batch is one range while every operation covers all of it; an operation on part of it (an
acknowledgement of some offsets, a record-limited acquisition) splits it for good: its ranges are cut where the
operation begins and ends, and from then on its available records are acquired range by range, reported in runs
of consecutive offsets with one delivery count, as Kafka does. Past the end offset lie records not yet
delivered. Every operation costs work in the number of ranges it touches, never in the number of records.

Each offset is in one :class:`~trafka.broker.share.state.DeliveryState`; the table :data:`TRANSITIONS` says
what each event does to each state, and an event a state does not take is refused with INVALID_RECORD_STATE.
Acquiring counts a delivery; a record released (by its consumer, its lock expiring or its member leaving) after
``delivery_count_limit`` deliveries is archived instead of becoming available again. Once the records at the
SPSO are acknowledged or archived, the SPSO moves over them.

What is persisted (:meth:`SharePartition.persistent_state`) is the SPSO and the state of every in-flight
offset that is not plainly available with no delivery yet; acquired records are written as available, with
their delivery count, so a restart makes them deliverable again.
"""
from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

from trafka.broker.share.state import (
    UNINITIALIZED,
    AcknowledgeType,
    DeliveryState,
    PartitionState,
    StateBatch,
)
from trafka.wire.errors import ErrorCode, KafkaError


class Event(Enum):
    """What happens to a record."""

    ACQUIRE = "acquire"
    ACCEPT = "accept"            # AcknowledgeType.ACCEPT
    RELEASE = "release"          # AcknowledgeType.RELEASE
    REJECT = "reject"            # AcknowledgeType.REJECT
    GAP = "gap"                  # AcknowledgeType.GAP: no record at this offset
    RENEW = "renew"              # AcknowledgeType.RENEW: the lock starts again
    LOCK_EXPIRED = "lock_expired"
    MEMBER_LEFT = "member_left"  # its member left the group or closed its share session
    ARCHIVE = "archive"          # below the log start offset, or in an aborted transaction


#: A release goes to AVAILABLE, or to ARCHIVED once the record has been delivered delivery_count_limit times.
RELEASED = "released"
_S = DeliveryState
#: (state, event) -> the state after it; anything else is refused.
TRANSITIONS: dict[tuple[DeliveryState, Event], DeliveryState | str] = {
    (_S.AVAILABLE, Event.ACQUIRE): _S.ACQUIRED,
    (_S.AVAILABLE, Event.ARCHIVE): _S.ARCHIVED,
    (_S.ACQUIRED, Event.ACCEPT): _S.ACKNOWLEDGED,
    (_S.ACQUIRED, Event.RELEASE): RELEASED,
    (_S.ACQUIRED, Event.REJECT): _S.ARCHIVED,
    (_S.ACQUIRED, Event.GAP): _S.ARCHIVED,
    (_S.ACQUIRED, Event.RENEW): _S.ACQUIRED,
    (_S.ACQUIRED, Event.LOCK_EXPIRED): RELEASED,
    (_S.ACQUIRED, Event.MEMBER_LEFT): RELEASED,
    (_S.ACQUIRED, Event.ARCHIVE): _S.ARCHIVED,
}

ACKNOWLEDGE_EVENTS = {
    AcknowledgeType.GAP: Event.GAP,
    AcknowledgeType.ACCEPT: Event.ACCEPT,
    AcknowledgeType.RELEASE: Event.RELEASE,
    AcknowledgeType.REJECT: Event.REJECT,
    AcknowledgeType.RENEW: Event.RENEW,
}
#: The same, by the number a request carries.
_EVENT_OF_TYPE = {int(kind): event for kind, event in ACKNOWLEDGE_EVENTS.items()}

TERMINAL = (_S.ACKNOWLEDGED, _S.ARCHIVED)

#: ShareFetch v2's acquire modes.
BATCH_OPTIMIZED = 0
RECORD_LIMIT = 1


def invalid_record_state(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD_STATE, message)


class OffsetRanges(Collection[int]):
    """A set of offsets held as sorted, disjoint ranges (first offset, last offset), both included; neighbouring
    ranges are joined."""

    __slots__ = ("ranges", "_firsts")

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        joined: list[tuple[int, int]] = []
        for first, last in sorted(ranges):
            if joined and first <= joined[-1][1] + 1:
                if last > joined[-1][1]:
                    joined[-1] = (joined[-1][0], last)
            else:
                joined.append((first, last))
        self.ranges = joined
        self._firsts = [first for first, _ in joined]

    @classmethod
    def of(cls, offsets: Collection[int]) -> OffsetRanges:
        """``offsets`` as ranges (as they are, if they are ranges already)."""
        if isinstance(offsets, OffsetRanges):
            return offsets
        return cls((offset, offset) for offset in offsets)

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        index = bisect.bisect_right(self._firsts, offset) - 1
        return index >= 0 and offset <= self.ranges[index][1]

    def __iter__(self) -> Iterator[int]:
        for first, last in self.ranges:
            yield from range(first, last + 1)

    def __len__(self) -> int:
        return sum(last - first + 1 for first, last in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __repr__(self) -> str:
        return f"OffsetRanges({self.ranges})"

    def overlaps(self, first: int, last: int) -> bool:
        """Whether any offset of first..last is in the set."""
        index = bisect.bisect_right(self._firsts, last) - 1
        return index >= 0 and self.ranges[index][1] >= first

    def inside(self, first: int, last: int) -> list[tuple[int, int]]:
        """The parts of first..last in the set, in order."""
        index = max(bisect.bisect_right(self._firsts, first) - 1, 0)
        parts = []
        for low, high in self.ranges[index:]:
            if low > last:
                break
            if high >= first:
                parts.append((max(low, first), min(high, last)))
        return parts

    def outside(self, first: int, last: int) -> list[tuple[int, int]]:
        """The parts of first..last not in the set, in order."""
        parts = []
        for low, high in self.inside(first, last):
            if low > first:
                parts.append((first, low - 1))
            first = high + 1
        if first <= last:
            parts.append((first, last))
        return parts


@dataclass(slots=True)
class StateRange:
    """Consecutive offsets first_offset..last_offset (both included) in one state: their delivery count, and while
    acquired, who holds them until when."""

    first_offset: int
    last_offset: int
    state: DeliveryState
    delivery_count: int
    member_id: str | None = None
    deadline: float = 0.0

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1

    def copy(self) -> StateRange:
        return StateRange(self.first_offset, self.last_offset, self.state, self.delivery_count, self.member_id,
                          self.deadline)

    def alike(self, other: StateRange) -> bool:
        """Whether ``other`` holds its offsets in the same state, count, holder and deadline."""
        return (self.state == other.state and self.delivery_count == other.delivery_count
                and self.member_id == other.member_id and self.deadline == other.deadline)

    def cut(self, offset: int) -> StateRange:
        """Split the range before ``offset`` (inside it): this range ends before it, the one returned starts at it."""
        rest = StateRange(offset, self.last_offset, self.state, self.delivery_count, self.member_id, self.deadline)
        self.last_offset = offset - 1
        return rest


def _first_offset(state_range: StateRange) -> int:
    return state_range.first_offset


@dataclass(slots=True)
class InFlightBatch:
    first_offset: int
    last_offset: int
    #: The batch's offsets in ranges of one state, first_offset first, without gaps. One range while the batch is
    #: not split.
    ranges: list[StateRange]
    #: Whether an operation covered part of the batch: its ranges are then acquired one by one.
    split: bool = False

    @classmethod
    def uniform(cls, first_offset: int, last_offset: int, state: DeliveryState, delivery_count: int,
                member_id: str | None = None, deadline: float = 0.0) -> InFlightBatch:
        """A batch whose offsets are all in one state."""
        return cls(first_offset, last_offset,
                   [StateRange(first_offset, last_offset, state, delivery_count, member_id, deadline)])

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1

    def overlapping(self, first: int, last: int) -> list[StateRange]:
        """The ranges holding any of the offsets first..last."""
        ranges = self.ranges
        index = self._index(max(first, self.first_offset))
        found = []
        while index < len(ranges) and ranges[index].first_offset <= last:
            found.append(ranges[index])
            index += 1
        return found

    def covering(self, first: int, last: int) -> list[StateRange]:
        """The ranges holding exactly the offsets first..last (of this batch), cut where needed."""
        ranges = self.ranges
        index = self._index(first)
        if ranges[index].first_offset < first:
            ranges.insert(index + 1, ranges[index].cut(first))
            index += 1
        end = index
        while ranges[end].last_offset < last:
            end += 1
        if ranges[end].last_offset > last:
            ranges.insert(end + 1, ranges[end].cut(last + 1))
        return ranges[index:end + 1]

    def coalesce(self) -> None:
        """Join neighbouring ranges that are alike."""
        if len(self.ranges) < 2:
            return
        joined = [self.ranges[0]]
        for state_range in self.ranges[1:]:
            if joined[-1].alike(state_range):
                joined[-1].last_offset = state_range.last_offset
            else:
                joined.append(state_range)
        self.ranges = joined

    def _index(self, offset: int) -> int:
        if len(self.ranges) == 1:
            return 0
        return max(bisect.bisect_right(self.ranges, offset, key=_first_offset) - 1, 0)


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """A range of records acquired by one fetch, as ShareFetch's AcquiredRecords carry them."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class LogBatch:
    """A record batch of the log, as acquisition needs to know it."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False


class Change:
    """What an operation changed: how many records, the ranges it made available again, and the batches it touched
    as they were before, to undo it when its state cannot be persisted."""

    __slots__ = ("records", "released", "archived", "_saved", "_partition")

    def __init__(self, partition: SharePartition | None = None) -> None:
        self.records = 0
        #: (first offset, last offset) of records made available again.
        self.released: list[tuple[int, int]] = []
        #: Records archived (taken off the partition's count again by a rollback).
        self.archived = 0
        self._saved: dict[int, tuple[InFlightBatch, list[StateRange], bool]] = {}
        self._partition = partition

    def applied(self, state_range: StateRange) -> None:
        """``state_range`` took the operation's event."""
        self.records += state_range.size
        if state_range.state == _S.AVAILABLE:
            self.released.append((state_range.first_offset, state_range.last_offset))
        elif state_range.state == _S.ARCHIVED:
            self.archived += state_range.size

    def remember(self, batch: InFlightBatch) -> None:
        """Keep ``batch`` as it is now, before the operation changes it (once per operation)."""
        if id(batch) not in self._saved:
            self._saved[id(batch)] = (batch, [state_range.copy() for state_range in batch.ranges], batch.split)

    def rollback(self) -> None:
        for batch, ranges, split in self._saved.values():
            batch.ranges = ranges
            batch.split = split
        if self._partition is not None:
            self._partition.archived_records -= self.archived

    def released_offsets(self) -> OffsetRanges:
        return OffsetRanges(self.released)

    def __bool__(self) -> bool:
        return bool(self._saved)


class SharePartition:
    """The delivery state of one topic partition for one share group."""

    def __init__(self, group_id: str, topic: str, partition: int, *, delivery_count_limit: int = 5,
                 max_in_flight_records: int = 2000, lock_duration_ms: int = 30_000) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight_records = max_in_flight_records
        self.lock_duration_ms = lock_duration_ms
        self.state_epoch = 0
        self.leader_epoch = 0
        #: The share-partition start offset (SPSO); -1 until initialized.
        self.start_offset = UNINITIALIZED
        #: The offset after the last in-flight one (SPEO + 1).
        self.end_offset = UNINITIALIZED
        self.batches: list[InFlightBatch] = []
        self._firsts: list[int] = []
        #: Counters (the manager's metrics read them).
        self.lock_expiries = 0
        self.archived_records = 0

    def __repr__(self) -> str:
        return f"SharePartition({self.group_id}, {self.topic}-{self.partition}, spso={self.start_offset})"

    # -- loading and persisting ---------------------------------------------------------------------

    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    def load(self, state: PartitionState, reset_offset: int) -> None:
        """Take up a persisted state; ``reset_offset`` (from share.auto.offset.reset) where it has no start offset."""
        self.state_epoch = state.state_epoch
        self.leader_epoch = max(self.leader_epoch, state.leader_epoch)
        start = state.start_offset if state.start_offset >= 0 else reset_offset
        self.start_offset = start
        self.end_offset = start
        self.batches = []
        self._firsts = []
        for batch in sorted(state.batches, key=lambda b: b.first_offset):
            first = max(batch.first_offset, start, self.end_offset)
            if first > batch.last_offset:
                continue
            if first > self.end_offset:  # offsets between are still to be delivered for the first time
                self._append(InFlightBatch.uniform(self.end_offset, first - 1, _S.AVAILABLE, 0))
            state_ = DeliveryState(batch.delivery_state)
            if state_ == _S.ACQUIRED:
                state_ = _S.AVAILABLE
            self._append(InFlightBatch.uniform(first, batch.last_offset, state_, batch.delivery_count))
            self.end_offset = batch.last_offset + 1
        self._advance_start()

    def persistent_state(self, start_offset: int | None = None) -> PartitionState:
        """The state to write: the start offset and every in-flight offset not plainly undelivered, in runs of
        equal state (acquired written as available)."""
        start = self.start_offset if start_offset is None else start_offset
        runs: list[StateBatch] = []
        complete = 0
        for batch in self.batches:
            if batch.last_offset < start:
                continue
            for state_range in batch.ranges:
                if state_range.last_offset < start:
                    continue
                first, last = max(state_range.first_offset, start), state_range.last_offset
                state = _S.AVAILABLE if state_range.state == _S.ACQUIRED else state_range.state
                if state in TERMINAL:
                    complete += last - first + 1
                count = state_range.delivery_count
                if state == _S.AVAILABLE and count == 0:
                    continue
                previous = runs[-1] if runs else None
                if (previous is not None and previous.last_offset == first - 1 and previous.delivery_state == state
                        and previous.delivery_count == count):
                    runs[-1] = StateBatch(previous.first_offset, last, int(state), count)
                else:
                    runs.append(StateBatch(first, last, int(state), count))
        return PartitionState(self.state_epoch, self.leader_epoch, start, tuple(runs),
                              delivery_complete_count=complete)

    # -- looking ------------------------------------------------------------------------------------

    @property
    def in_flight_records(self) -> int:
        return max(self.end_offset - self.start_offset, 0)

    def acquired_records(self) -> int:
        return sum(r.size for batch in self.batches for r in batch.ranges if r.state == _S.ACQUIRED)

    def offset_states(self) -> dict[int, tuple[DeliveryState, int]]:
        """Each in-flight offset's state and delivery count, offset by offset (for tests and tools, not the
        serving path)."""
        return {offset: (r.state, r.delivery_count) for batch in self.batches for r in batch.ranges
                for offset in range(max(r.first_offset, self.start_offset), r.last_offset + 1)}

    def next_fetch_offset(self) -> int:
        """Where the next acquisition reads the log from: the first available in-flight offset, or the end."""
        for batch in self.batches:
            for state_range in batch.ranges:
                if state_range.state == _S.AVAILABLE:
                    return state_range.first_offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether an acquisition could find anything: available in-flight records, or room for new ones."""
        return self.next_fetch_offset() < self.end_offset or self.in_flight_records < self.max_in_flight_records

    def next_deadline(self) -> float | None:
        deadlines = [r.deadline for batch in self.batches for r in batch.ranges if r.state == _S.ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- acquiring ----------------------------------------------------------------------------------

    def acquire(self, member_id: str, log_batches: Sequence[LogBatch], *, max_records: int, batch_size: int,
                now: float, mode: int = BATCH_OPTIMIZED, lock_duration_ms: int | None = None,
                aborted: Iterable[tuple[int, int, int]] = (), fetch_offset: int | None = None,
                exclude: Collection[int] = ()) -> list[AcquiredRange]:
        """Acquire for ``member_id`` what ``log_batches`` (read from :meth:`next_fetch_offset`) hold: available
        in-flight records and records past the end offset, up to ``max_records`` (whole batches in the
        batch-optimized mode, exactly in the record-limit mode) and the in-flight limit. ``aborted``: the aborted
        transactions (producer id, first offset, last offset) among the batches of a read_committed group, whose
        records are archived rather than acquired. ``exclude``: offsets still in transition (released by
        acknowledgements being written; an :class:`OffsetRanges` or any collection of offsets), not acquired this
        time; a whole batch with one of them is skipped."""
        if not log_batches or max_records <= 0:
            return []
        deadline = now + (self.lock_duration_ms if lock_duration_ms is None else lock_duration_ms) / 1000
        first = max(log_batches[0].base_offset, self.start_offset)
        last = log_batches[-1].last_offset
        # The in-flight limit is a budget for the whole acquisition; when it is spent, records in flight may still
        # be acquired again, no new ones.
        remaining = min(max_records, self.max_in_flight_records - self.in_flight_records)
        if remaining <= 0:
            fetch_offset = first if fetch_offset is None else fetch_offset
            if fetch_offset >= self.end_offset:
                return []
            remaining = min(max_records, self.end_offset - fetch_offset)
            last = min(last, self.end_offset - 1)
        if last < first:
            return []
        excluded = OffsetRanges.of(exclude)
        acquired: list[AcquiredRange] = []
        # In-flight records first.
        throttle_from = self.throttle_delivery_count()
        stopped = False
        for batch in self._overlapping(first, min(last, self.end_offset - 1)):
            if remaining <= 0:
                break
            throttled = self._throttled(batch, first, last, throttle_from)
            if throttled and acquired:  # records near their delivery limit come in a fetch of their own
                stopped = True
                break
            whole = not batch.split and not throttled and first <= batch.first_offset and batch.last_offset <= last \
                and (mode == BATCH_OPTIMIZED or batch.size <= remaining)
            if excluded and not batch.split and excluded.overlaps(batch.first_offset, batch.last_offset):
                continue  # the batch is in transition
            if whole:
                head = batch.ranges[0]
                if head.state != _S.AVAILABLE:
                    continue
                self._apply(head, Event.ACQUIRE, member_id, deadline)
                acquired.append(AcquiredRange(batch.first_offset, batch.last_offset, head.delivery_count))
                remaining -= batch.size
                continue
            count = self._acquire_ranges(batch, member_id, first, last, deadline, acquired, throttle_from,
                                         remaining if mode == RECORD_LIMIT else None, excluded)
            remaining -= count
            if throttled and count:
                stopped = True
                break
        if stopped:
            return acquired
        # Then records never delivered, past the end offset.
        new_first = max(first, self.end_offset)
        limit = remaining
        if new_first <= last and limit > 0:
            new_last = batch_end = min(last, new_first + limit - 1)
            for log_batch in log_batches:  # the log batch holding the last record wanted comes in flight whole
                if log_batch.base_offset <= new_last <= log_batch.last_offset:
                    batch_end = log_batch.last_offset
                    break
            if mode == BATCH_OPTIMIZED:  # and is acquired whole; in the record-limit mode, up to the limit
                new_last = batch_end
            acquired.extend(self._acquire_new(member_id, log_batches, new_first, batch_end, batch_size, deadline,
                                              acquire_last=new_last))
        aborted = list(aborted)
        if aborted:
            acquired = self._archive_aborted(acquired, log_batches, aborted)
        return acquired

    def throttle_delivery_count(self) -> int:
        """The delivery count from which records are delivered in ever smaller numbers (half the limit, at least 2):
        a record that fails its consumer every time then takes fewer others with it to the archive."""
        return max(2, -(-self.delivery_count_limit // 2))

    def _throttled(self, batch: InFlightBatch, first: int, last: int, throttle_from: int) -> bool:
        if not batch.split:
            head = batch.ranges[0]
            return head.state == _S.AVAILABLE and head.delivery_count >= throttle_from
        return max((r.delivery_count for r in batch.overlapping(first, last)), default=0) >= throttle_from

    def _acquire_ranges(self, batch: InFlightBatch, member_id: str, first: int, last: int, deadline: float,
                        acquired: list[AcquiredRange], throttle_from: int, most: int | None,
                        excluded: OffsetRanges) -> int:
        """Acquire the available records of a split ``batch`` in first..last but the ``excluded`` ones, range by
        range, in order (``most`` at most, the record-limit mode): once their delivery count reaches
        ``throttle_from``, no more than half the batch, a quarter, ... (as delivered more often); a record on its
        last delivery alone. The records acquired, merged into runs of one delivery count in ``acquired``."""
        limit_count = self.delivery_count_limit
        count = 0
        throttle = -1
        run: AcquiredRange | None = None  # consecutive offsets of the batch with one delivery count
        wanted = [(max(r.first_offset, first), min(r.last_offset, last), r.delivery_count)
                  for r in batch.overlapping(first, last) if r.state == _S.AVAILABLE]
        for range_first, range_last, delivered in wanted:
            for piece_first, piece_last in excluded.outside(range_first, range_last):
                last_delivery = limit_count > 2 and delivered == limit_count - 1
                if last_delivery and count > 0:
                    return count  # its last delivery: in a fetch of its own
                if delivered >= throttle_from and throttle < 0:
                    throttle = max(1, batch.size >> (delivered - throttle_from + 1))
                take = piece_last - piece_first + 1
                enough = last_delivery
                if last_delivery:
                    take = 1
                if most is not None and take >= most - count:
                    take, enough = most - count, True
                if throttle > 0 and take >= max(throttle - count, 1):
                    take, enough = max(throttle - count, 1), True
                batch.split = True
                taken_last = piece_first + take - 1
                for state_range in batch.covering(piece_first, taken_last):
                    self._apply(state_range, Event.ACQUIRE, member_id, deadline)
                if run is not None and run.last_offset == piece_first - 1 and run.delivery_count == delivered + 1:
                    run = acquired[-1] = AcquiredRange(run.first_offset, taken_last, delivered + 1)
                else:
                    run = AcquiredRange(piece_first, taken_last, delivered + 1)
                    acquired.append(run)
                count += take
                if enough:
                    batch.coalesce()
                    return count
        batch.coalesce()
        return count

    def _acquire_new(self, member_id: str, log_batches: Sequence[LogBatch], first: int, last: int,
                     batch_size: int, deadline: float, acquire_last: int) -> list[AcquiredRange]:
        """New in-flight batches for first..last, cut at log batch boundaries once batch_size records are in one;
        the records up to acquire_last are acquired, those after it stay available."""
        cuts: list[tuple[int, int]] = []
        start = first
        for log_batch in log_batches:
            if log_batch.last_offset < start:
                continue
            end = min(log_batch.last_offset, last)
            if end - start + 1 >= max(batch_size, 1) and end < last:
                cuts.append((start, end))
                start = end + 1
            if end >= last:
                break
        if start <= last:
            cuts.append((start, last))
        if first > self.end_offset:  # offsets skipped over (below the log start offset): nothing to deliver
            if self.batches:
                self._append(InFlightBatch.uniform(self.end_offset, first - 1, _S.ARCHIVED, 0))
            else:
                self.start_offset = first
        ranges = []
        for cut_first, cut_last in cuts:
            if acquire_last < cut_first:
                batch = InFlightBatch.uniform(cut_first, cut_last, _S.AVAILABLE, 0)
            elif cut_last <= acquire_last:
                batch = InFlightBatch.uniform(cut_first, cut_last, _S.ACQUIRED, 1, member_id, deadline)
            else:  # acquired up to acquire_last only
                batch = InFlightBatch(cut_first, cut_last, [
                    StateRange(cut_first, acquire_last, _S.ACQUIRED, 1, member_id, deadline),
                    StateRange(acquire_last + 1, cut_last, _S.AVAILABLE, 0)], split=True)
            self._append(batch)
            if cut_first <= acquire_last:
                ranges.append(AcquiredRange(cut_first, min(cut_last, acquire_last), 1))
        self.end_offset = last + 1
        return ranges

    def _archive_aborted(self, acquired: list[AcquiredRange], log_batches: Sequence[LogBatch],
                         aborted: list[tuple[int, int, int]]) -> list[AcquiredRange]:
        """Archive the acquired records of aborted transactions' batches; the rest stay acquired. (Each acquired
        range lies in one in-flight batch.)"""
        doomed_batches: list[tuple[int, int]] = []
        for log_batch in log_batches:
            if not log_batch.transactional or log_batch.control:
                continue
            for producer_id, first_offset, last_offset in aborted:
                if producer_id == log_batch.producer_id and first_offset <= log_batch.base_offset <= last_offset:
                    doomed_batches.append((log_batch.base_offset, log_batch.last_offset))
                    break
        if not doomed_batches:
            return acquired
        doomed = OffsetRanges(doomed_batches)
        kept: list[AcquiredRange] = []
        for rng in acquired:
            hit = doomed.inside(rng.first_offset, rng.last_offset)
            if hit:
                batch = self._batch_of(rng.first_offset)
                if (batch.first_offset != rng.first_offset or batch.last_offset != rng.last_offset
                        or hit != [(rng.first_offset, rng.last_offset)]):
                    batch.split = True
                for first, last in hit:
                    for state_range in batch.covering(first, last):
                        self._apply(state_range, Event.ARCHIVE)
                batch.coalesce()
            kept.extend(AcquiredRange(first, last, rng.delivery_count)
                        for first, last in doomed.outside(rng.first_offset, rng.last_offset))
        self._advance_start()
        return kept

    # -- acknowledging and releasing ----------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[tuple[int, int, Sequence[int]]], *,
                    now: float, lock_duration_ms: int | None = None) -> Change:
        """Apply ShareFetch/ShareAcknowledge acknowledgement batches (first offset, last offset, types: one
        for all the offsets or one per offset) of ``member_id``; all or nothing. Returns the change (to
        roll back if its persistence fails; its ``released`` ranges are the records made available again); the
        start offset moves at :meth:`commit`.

        Raises KafkaError INVALID_RECORD_STATE for offsets not acquired, or acquired by another member (or
        acknowledged twice by overlapping batches); INVALID_REQUEST for a malformed batch or offsets past the end.
        Offsets below the start offset are skipped."""
        change = Change(self)
        deadline = now + (self.lock_duration_ms if lock_duration_ms is None else lock_duration_ms) / 1000
        try:
            for first, last, types in batches:
                check_acknowledgement_batch(first, last, types, self.end_offset)
                spans = _runs_of_one_type(first, last, types)
                # offsets below the start offset are done with already: acknowledging them again changes nothing
                for batch in self._overlapping(max(first, self.start_offset), last):
                    whole = len(spans) == 1 and first <= batch.first_offset and batch.last_offset <= last
                    for span_first, span_last, kind in spans:
                        low = max(span_first, batch.first_offset, self.start_offset)
                        high = min(span_last, batch.last_offset)
                        if low <= high:
                            self._acknowledge_span(batch, low, high, kind, member_id, deadline, whole, change)
                    batch.coalesce()
        except KafkaError:
            change.rollback()
            raise
        return change

    def _acknowledge_span(self, batch: InFlightBatch, first: int, last: int, kind: int, member_id: str,
                          deadline: float, whole: bool, change: Change) -> None:
        """Acknowledge first..last of ``batch`` with one type, or raise without changing it."""
        event = _EVENT_OF_TYPE.get(kind)
        if event is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type {kind}")
        for state_range in batch.overlapping(first, last):
            offset = max(state_range.first_offset, first)
            if state_range.state != _S.ACQUIRED:
                raise invalid_record_state(f"offset {offset} is not acquired ({state_range.state.name})")
            if state_range.member_id != member_id:
                raise invalid_record_state(f"offset {offset} is acquired by another member")
        change.remember(batch)
        if not whole:
            batch.split = True
        for state_range in batch.covering(first, last):
            self._apply(state_range, event, member_id, deadline)
            change.applied(state_range)

    def release_member(self, member_id: str) -> Change:
        """Release every record ``member_id`` holds (it left the group or ended its share session)."""
        return self._release(lambda r: r.member_id == member_id, Event.MEMBER_LEFT)

    def expire_locks(self, now: float) -> Change:
        """Release the records whose acquisition lock has run out."""
        change = self._release(lambda r: r.deadline <= now, Event.LOCK_EXPIRED)
        self.lock_expiries += change.records
        return change

    def _release(self, which, event: Event) -> Change:
        change = Change(self)
        for batch in self.batches:
            held = [r for r in batch.ranges if r.state == _S.ACQUIRED and which(r)]
            if not held:
                continue
            change.remember(batch)
            for state_range in held:
                self._apply(state_range, event)
                change.applied(state_range)
            batch.coalesce()
        return change

    def archive_before(self, log_start_offset: int) -> Change:
        """Archive the available records below the log start offset (retention removed them). (Records not yet in
        flight are not skipped here: the next acquisition starts at the log batch the log now starts in.)"""
        change = Change(self)
        for batch in self._overlapping(self.start_offset, log_start_offset - 1):
            gone = [(r.first_offset, min(r.last_offset, log_start_offset - 1)) for r in batch.ranges
                    if r.first_offset < log_start_offset and r.state == _S.AVAILABLE]
            if not gone:
                continue
            change.remember(batch)
            if batch.last_offset >= log_start_offset:
                batch.split = True
            for first, last in gone:
                for state_range in batch.covering(first, last):
                    self._apply(state_range, Event.ARCHIVE)
                    change.applied(state_range)
            batch.coalesce()
        return change

    def commit(self) -> None:
        """An operation's state is persisted: the start offset moves over what is done with."""
        self._advance_start()

    def start_offset_after(self) -> int:
        """The start offset once the records at it that are done with are passed over."""
        for batch in self.batches:
            for state_range in batch.ranges:
                if state_range.state not in TERMINAL:
                    return state_range.first_offset
        return self.end_offset

    # -- internals ----------------------------------------------------------------------------------

    def _apply(self, state_range: StateRange, event: Event, member_id: str | None = None,
               deadline: float = 0.0) -> None:
        target = TRANSITIONS.get((state_range.state, event))
        if target is None:
            raise invalid_record_state(f"a record {state_range.state.name} cannot take {event.value}")
        if target == RELEASED:
            target = _S.ARCHIVED if state_range.delivery_count >= self.delivery_count_limit else _S.AVAILABLE
        if event == Event.ACQUIRE:
            state_range.delivery_count += 1
        if target == _S.ACQUIRED:
            state_range.member_id = member_id
            state_range.deadline = deadline
        else:
            state_range.member_id = None
            state_range.deadline = 0.0
        if target == _S.ARCHIVED:
            self.archived_records += state_range.size
        state_range.state = target

    def _append(self, batch: InFlightBatch) -> None:
        self.batches.append(batch)
        self._firsts.append(batch.first_offset)

    def _overlapping(self, first: int, last: int) -> list[InFlightBatch]:
        if last < first or not self.batches:
            return []
        index = max(bisect.bisect_right(self._firsts, first) - 1, 0)
        found = []
        for batch in self.batches[index:]:
            if batch.first_offset > last:
                break
            if batch.last_offset >= first:
                found.append(batch)
        return found

    def _batch_of(self, offset: int) -> InFlightBatch:
        return self._overlapping(offset, offset)[0]

    def _advance_start(self) -> None:
        start = self.start_offset_after()
        drop = 0
        for batch in self.batches:
            if batch.last_offset < start:
                drop += 1
            else:
                break
        if drop:
            del self.batches[:drop]
            del self._firsts[:drop]
        self.start_offset = max(self.start_offset, start)


def check_acknowledgement_batch(first: int, last: int, types: Sequence[int], end_offset: int) -> None:
    """Raise INVALID_REQUEST for an acknowledgement batch that is malformed (no offsets, types neither one nor one
    per offset) or goes past the last offset in flight."""
    if last < first or (len(types) != 1 and len(types) != last - first + 1):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"bad acknowledgement batch {first}-{last}")
    if last >= end_offset:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"offsets {first}-{last} go past the last offset in flight "
                                                    f"({end_offset - 1})")


def _runs_of_one_type(first: int, last: int, types: Sequence[int]) -> list[tuple[int, int, int]]:
    """An acknowledgement batch's offsets as (first, last, type) runs of one acknowledge type."""
    if len(types) == 1:
        return [(first, last, types[0])]
    runs: list[tuple[int, int, int]] = []
    run_first = first
    for index in range(1, len(types) + 1):
        if index == len(types) or types[index] != types[index - 1]:
            runs.append((run_first, first + index - 1, types[index - 1]))
            run_first = first + index
    return runs
