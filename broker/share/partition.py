"""A share partition: the records of one topic partition as one share group delivers them (KIP-932).

Pure and synchronous (no trio): the share partition manager (:mod:`trafka.broker.share.manager`) owns the
timers, the log reads and the persister; this module is the state machine they drive.

Offsets below the share-partition start offset (SPSO) are done with. From the SPSO to the end offset are the
in-flight records, kept as in-flight batches (the ranges they were first acquired in). A batch is tracked as a
whole while every operation covers all of it; an operation on part of it (an acknowledgement of some offsets, a
record-limited acquisition) splits it into per-offset states for good, and from then on its offsets are
acquired one by one, reported in runs of consecutive offsets with one delivery count, as Kafka does. Past the
end offset lie records not yet delivered.

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
from collections.abc import Collection, Iterable, Sequence
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

TERMINAL = (_S.ACKNOWLEDGED, _S.ARCHIVED)

#: ShareFetch v2's acquire modes.
BATCH_OPTIMIZED = 0
RECORD_LIMIT = 1


def invalid_record_state(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD_STATE, message)


@dataclass(slots=True)
class OffsetState:
    """One offset's (or a whole batch's) state: its delivery count, and while acquired, who holds it until when."""

    state: DeliveryState
    delivery_count: int
    member_id: str | None = None
    deadline: float = 0.0

    def copy(self) -> OffsetState:
        return OffsetState(self.state, self.delivery_count, self.member_id, self.deadline)


@dataclass(slots=True)
class InFlightBatch:
    first_offset: int
    last_offset: int
    #: The state of each offset, first_offset first.
    offsets: list[OffsetState]
    #: Whether the batch is tracked offset by offset (an operation covered part of it).
    split: bool = False

    def state_of(self, offset: int) -> OffsetState:
        return self.offsets[offset - self.first_offset]


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
    """What an operation changed, to undo it when its state cannot be persisted."""

    __slots__ = ("saved",)

    def __init__(self) -> None:
        self.saved: list[tuple[InFlightBatch, int, OffsetState, bool]] = []

    def remember(self, batch: InFlightBatch, index: int) -> None:
        self.saved.append((batch, index, batch.offsets[index].copy(), batch.split))

    def rollback(self) -> None:
        for batch, index, state, split in reversed(self.saved):
            batch.offsets[index] = state
            batch.split = split

    def __bool__(self) -> bool:
        return bool(self.saved)


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
        for batch in sorted(state.batches, key=lambda b: b.first_offset):
            first = max(batch.first_offset, start, self.end_offset)
            if first > batch.last_offset:
                continue
            if first > self.end_offset:  # offsets between are still to be delivered for the first time
                self._append(InFlightBatch(self.end_offset, first - 1,
                                           [OffsetState(_S.AVAILABLE, 0) for _ in range(first - self.end_offset)]))
            state_ = DeliveryState(batch.delivery_state)
            if state_ == _S.ACQUIRED:
                state_ = _S.AVAILABLE
            self._append(InFlightBatch(first, batch.last_offset,
                                       [OffsetState(state_, batch.delivery_count)
                                        for _ in range(batch.last_offset - first + 1)]))
            self.end_offset = batch.last_offset + 1
        self._advance_start()

    def persistent_state(self, start_offset: int | None = None) -> PartitionState:
        """The state to write: the start offset and every in-flight offset not plainly undelivered, in runs of
        equal state (acquired written as available)."""
        start = self.start_offset if start_offset is None else start_offset
        runs: list[StateBatch] = []
        complete = 0
        for batch in self.batches:
            for index, offset_state in enumerate(batch.offsets):
                offset = batch.first_offset + index
                if offset < start:
                    continue
                state = _S.AVAILABLE if offset_state.state == _S.ACQUIRED else offset_state.state
                if state in TERMINAL:
                    complete += 1
                if state == _S.AVAILABLE and offset_state.delivery_count == 0:
                    continue
                last = runs[-1] if runs else None
                if (last is not None and last.last_offset == offset - 1 and last.delivery_state == state
                        and last.delivery_count == offset_state.delivery_count):
                    runs[-1] = StateBatch(last.first_offset, offset, state, offset_state.delivery_count)
                else:
                    runs.append(StateBatch(offset, offset, int(state), offset_state.delivery_count))
        return PartitionState(self.state_epoch, self.leader_epoch, start, tuple(runs),
                              delivery_complete_count=complete)

    # -- looking ------------------------------------------------------------------------------------

    @property
    def in_flight_records(self) -> int:
        return max(self.end_offset - self.start_offset, 0)

    def acquired_records(self) -> int:
        return sum(1 for batch in self.batches for s in batch.offsets if s.state == _S.ACQUIRED)

    def next_fetch_offset(self) -> int:
        """Where the next acquisition reads the log from: the first available in-flight offset, or the end."""
        for batch in self.batches:
            for index, offset_state in enumerate(batch.offsets):
                if offset_state.state == _S.AVAILABLE:
                    return batch.first_offset + index
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether an acquisition could find anything: available in-flight records, or room for new ones."""
        return self.next_fetch_offset() < self.end_offset or self.in_flight_records < self.max_in_flight_records

    def next_deadline(self) -> float | None:
        deadlines = [s.deadline for batch in self.batches for s in batch.offsets if s.state == _S.ACQUIRED]
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
        acknowledgements being written), not acquired this time; a whole batch with one of them is skipped."""
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
                and (mode == BATCH_OPTIMIZED or batch.last_offset - batch.first_offset + 1 <= remaining)
            if exclude and not batch.split and any(batch.first_offset <= o <= batch.last_offset for o in exclude):
                continue  # the batch is in transition
            if whole:
                head = batch.offsets[0]
                if head.state != _S.AVAILABLE:
                    continue
                for offset_state in batch.offsets:
                    self._apply(offset_state, Event.ACQUIRE, member_id, deadline)
                acquired.append(AcquiredRange(batch.first_offset, batch.last_offset, head.delivery_count))
                remaining -= batch.last_offset - batch.first_offset + 1
                continue
            count = self._acquire_offsets(batch, member_id, first, last, deadline, acquired, throttle_from,
                                          remaining if mode == RECORD_LIMIT else None, exclude)
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
            head = batch.offsets[0]
            return head.state == _S.AVAILABLE and head.delivery_count >= throttle_from
        counts = [s.delivery_count for index, s in enumerate(batch.offsets)
                  if first <= batch.first_offset + index <= last]
        return max(counts, default=0) >= throttle_from

    def _acquire_offsets(self, batch: InFlightBatch, member_id: str, first: int, last: int, deadline: float,
                         acquired: list[AcquiredRange], throttle_from: int, most: int | None,
                         exclude: Collection[int] = ()) -> int:
        """Acquire the available offsets of ``batch`` in first..last one by one (``most`` at most, the record-limit
        mode): fewer once their delivery count reaches ``throttle_from`` (half the batch, a quarter, ...), and a
        record on its last delivery alone. The records acquired, merged into runs in ``acquired``."""
        limit_count = self.delivery_count_limit
        count = 0
        throttle = -1
        run: AcquiredRange | None = None  # consecutive offsets of the batch with one delivery count
        for index, offset_state in enumerate(batch.offsets):
            offset = batch.first_offset + index
            if offset < first or offset_state.state != _S.AVAILABLE or offset in exclude:
                continue
            if offset > last:
                break
            delivered = offset_state.delivery_count
            if limit_count > 2 and delivered == limit_count - 1 and count > 0:
                break  # its last delivery: in a fetch of its own
            if delivered >= throttle_from and throttle < 0:
                throttle = max(1, len(batch.offsets) >> (delivered - throttle_from + 1))
            batch.split = True
            self._apply(offset_state, Event.ACQUIRE, member_id, deadline)
            delivered = offset_state.delivery_count
            if run is not None and run.last_offset == offset - 1 and run.delivery_count == delivered:
                run = acquired[-1] = AcquiredRange(run.first_offset, offset, delivered)
            else:
                run = AcquiredRange(offset, offset, delivered)
                acquired.append(run)
            count += 1
            if limit_count > 2 and delivered == limit_count:
                break
            if most is not None and count >= most:
                break
            if throttle > 0 and count >= throttle:
                break
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
                self._append(InFlightBatch(self.end_offset, first - 1,
                                           [OffsetState(_S.ARCHIVED, 0) for _ in range(first - self.end_offset)]))
            else:
                self.start_offset = first
        ranges = []
        for cut_first, cut_last in cuts:
            states = [OffsetState(_S.ACQUIRED, 1, member_id, deadline) if offset <= acquire_last
                      else OffsetState(_S.AVAILABLE, 0) for offset in range(cut_first, cut_last + 1)]
            self._append(InFlightBatch(cut_first, cut_last, states, split=cut_first <= acquire_last < cut_last))
            if cut_first <= acquire_last:
                ranges.append(AcquiredRange(cut_first, min(cut_last, acquire_last), 1))
        self.end_offset = last + 1
        return ranges

    def _archive_aborted(self, acquired: list[AcquiredRange], log_batches: Sequence[LogBatch],
                         aborted: list[tuple[int, int, int]]) -> list[AcquiredRange]:
        """Archive the acquired records of aborted transactions' batches; the rest stay acquired."""
        doomed: set[int] = set()
        for log_batch in log_batches:
            if not log_batch.transactional or log_batch.control:
                continue
            for producer_id, first_offset, last_offset in aborted:
                if producer_id == log_batch.producer_id and first_offset <= log_batch.base_offset <= last_offset:
                    doomed.update(range(log_batch.base_offset, log_batch.last_offset + 1))
                    break
        if not doomed:
            return acquired
        kept: list[AcquiredRange] = []
        for rng in acquired:
            run_first = None
            for offset in range(rng.first_offset, rng.last_offset + 1):
                if offset in doomed:
                    batch = self._batch_of(offset)
                    if batch.first_offset != rng.first_offset or batch.last_offset != rng.last_offset or any(
                            o not in doomed for o in range(rng.first_offset, rng.last_offset + 1)):
                        batch.split = True
                    self._apply(batch.state_of(offset), Event.ARCHIVE)
                    if run_first is not None:
                        kept.append(AcquiredRange(run_first, offset - 1, rng.delivery_count))
                        run_first = None
                elif run_first is None:
                    run_first = offset
            if run_first is not None:
                kept.append(AcquiredRange(run_first, rng.last_offset, rng.delivery_count))
        self._advance_start()
        return kept

    # -- acknowledging and releasing ----------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[tuple[int, int, Sequence[int]]], *,
                    now: float, lock_duration_ms: int | None = None) -> Change:
        """Apply ShareFetch/ShareAcknowledge acknowledgement batches (first offset, last offset, types: one
        for all the offsets or one per offset) of ``member_id``; all or nothing. Returns the change (to
        roll back if its persistence fails); the start offset moves at :meth:`commit`.

        Raises KafkaError INVALID_RECORD_STATE for offsets not acquired, or acquired by another member (or
        acknowledged twice by overlapping batches); INVALID_REQUEST for a malformed batch or offsets past the end.
        Offsets below the start offset are skipped."""
        change = Change()
        deadline = now + (self.lock_duration_ms if lock_duration_ms is None else lock_duration_ms) / 1000
        try:
            for first, last, types in batches:
                if last < first or (len(types) != 1 and len(types) != last - first + 1):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"bad acknowledgement batch {first}-{last}")
                if last >= self.end_offset:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"offsets {first}-{last} go past the last offset "
                                                                f"in flight ({self.end_offset - 1})")
                # offsets below the start offset are done with already: acknowledging them again changes nothing
                for batch in self._overlapping(first, last):
                    whole = (len(set(types)) == 1 and first <= batch.first_offset and batch.last_offset <= last)
                    for index, offset_state in enumerate(batch.offsets):
                        offset = batch.first_offset + index
                        if offset < first or offset > last or offset < self.start_offset:
                            continue
                        kind = types[0] if len(types) == 1 else types[offset - first]
                        try:
                            event = ACKNOWLEDGE_EVENTS[AcknowledgeType(kind)]
                        except ValueError:
                            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type {kind}") from None
                        if offset_state.state != _S.ACQUIRED:
                            raise invalid_record_state(f"offset {offset} is not acquired ({offset_state.state.name})")
                        if offset_state.member_id != member_id:
                            raise invalid_record_state(f"offset {offset} is acquired by another member")
                        change.remember(batch, index)
                        if not whole:
                            batch.split = True
                        self._apply(offset_state, event, member_id, deadline)
        except KafkaError:
            change.rollback()
            raise
        return change

    def release_member(self, member_id: str) -> Change:
        """Release every record ``member_id`` holds (it left the group or ended its share session)."""
        return self._release(lambda s: s.member_id == member_id, Event.MEMBER_LEFT)

    def expire_locks(self, now: float) -> Change:
        """Release the records whose acquisition lock has run out."""
        change = self._release(lambda s: s.deadline <= now, Event.LOCK_EXPIRED)
        self.lock_expiries += len(change.saved)
        return change

    def _release(self, which, event: Event) -> Change:
        change = Change()
        for batch in self.batches:
            for index, offset_state in enumerate(batch.offsets):
                if offset_state.state == _S.ACQUIRED and which(offset_state):
                    change.remember(batch, index)
                    self._apply(offset_state, event)
            if change.saved and not batch.split and len({(s.state, s.delivery_count) for s in batch.offsets}) > 1:
                batch.split = True
        return change

    def archive_before(self, log_start_offset: int) -> Change:
        """Archive the available records below the log start offset (retention removed them). (Records not yet in
        flight are not skipped here: the next acquisition starts at the log batch the log now starts in.)"""
        change = Change()
        for batch in self._overlapping(self.start_offset, log_start_offset - 1):
            for index, offset_state in enumerate(batch.offsets):
                if batch.first_offset + index < log_start_offset and offset_state.state == _S.AVAILABLE:
                    change.remember(batch, index)
                    if batch.last_offset >= log_start_offset:
                        batch.split = True
                    self._apply(offset_state, Event.ARCHIVE)
        return change

    def commit(self) -> None:
        """An operation's state is persisted: the start offset moves over what is done with."""
        self._advance_start()

    def start_offset_after(self) -> int:
        """The start offset once the records at it that are done with are passed over."""
        for batch in self.batches:
            for index, offset_state in enumerate(batch.offsets):
                if offset_state.state not in TERMINAL:
                    return batch.first_offset + index
        return self.end_offset

    # -- internals ----------------------------------------------------------------------------------

    def _apply(self, offset_state: OffsetState, event: Event, member_id: str | None = None,
               deadline: float = 0.0) -> None:
        target = TRANSITIONS.get((offset_state.state, event))
        if target is None:
            raise invalid_record_state(f"a record {offset_state.state.name} cannot take {event.value}")
        if target == RELEASED:
            target = _S.ARCHIVED if offset_state.delivery_count >= self.delivery_count_limit else _S.AVAILABLE
        if event == Event.ACQUIRE:
            offset_state.delivery_count += 1
        if target == _S.ACQUIRED:
            offset_state.member_id = member_id
            offset_state.deadline = deadline
        else:
            offset_state.member_id = None
            offset_state.deadline = 0.0
        if target == _S.ARCHIVED:
            self.archived_records += 1
        offset_state.state = target

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
