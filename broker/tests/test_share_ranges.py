"""A share partition keeps its in-flight records as ranges; a plain model here keeps every offset on its own. Random
sequences of acquisitions, acknowledgements (whole, partial, one type per offset, refused), lock expiries, members
leaving, records deleted from the log, commits, rollbacks and reloads must leave both with the same state of every
offset, the same answers and the same state to persist."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafka.broker.share.partition import (
    BATCH_OPTIMIZED,
    RECORD_LIMIT,
    TERMINAL,
    LogBatch,
    OffsetRanges,
    SharePartition,
    check_acknowledgement_batch,
)
from trafka.broker.share.state import AcknowledgeType, DeliveryState, PartitionState, StateBatch
from trafka.wire.errors import ErrorCode, KafkaError

S = DeliveryState
A = AcknowledgeType
MEMBERS = ("m1", "m2", "m3")
LOCK_S = 1.0
#: The log: batches of these sizes, one after another from offset 0.
LOG_SIZES = (1, 3, 5, 2, 8, 1, 13, 4, 4, 1, 7, 2, 9, 3, 6, 1, 5, 10, 2, 3)


def log_batches() -> list[LogBatch]:
    batches, offset = [], 0
    for size in LOG_SIZES:
        batches.append(LogBatch(offset, offset + size - 1))
        offset += size
    return batches


LOG = log_batches()


@dataclass
class Record:
    state: DeliveryState
    delivery_count: int
    member_id: str | None = None
    deadline: float = 0.0


class Model:
    """Each in-flight offset's state on its own, changed by the rules of KIP-932 one offset at a time."""

    def __init__(self, start: int, limit: int) -> None:
        self.start = start
        self.end = start
        self.limit = limit
        self.records: dict[int, Record] = {}

    def copy(self) -> Model:
        model = Model(self.start, self.limit)
        model.end = self.end
        model.records = {o: Record(r.state, r.delivery_count, r.member_id, r.deadline) for o, r in self.records.items()}
        return model

    def release(self, record: Record) -> None:
        record.state = S.ARCHIVED if record.delivery_count >= self.limit else S.AVAILABLE
        record.member_id, record.deadline = None, 0.0

    def acknowledge(self, member_id: str, batches, deadline: float) -> set[int]:
        """The offsets made available again; raises as the share partition must (the model is then undone by the
        caller)."""
        released = set()
        for first, last, types in batches:
            check_acknowledgement_batch(first, last, types, self.end)
            for offset in range(max(first, self.start), last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                if kind not in set(A):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type {kind}")
                record = self.records[offset]
                if record.state != S.ACQUIRED:
                    raise KafkaError(ErrorCode.INVALID_RECORD_STATE,
                                     f"offset {offset} is not acquired ({record.state.name})")
                if record.member_id != member_id:
                    raise KafkaError(ErrorCode.INVALID_RECORD_STATE, f"offset {offset} is acquired by another member")
                if kind == A.ACCEPT:
                    record.state, record.member_id, record.deadline = S.ACKNOWLEDGED, None, 0.0
                elif kind in (A.REJECT, A.GAP):
                    record.state, record.member_id, record.deadline = S.ARCHIVED, None, 0.0
                elif kind == A.RELEASE:
                    self.release(record)
                    released.discard(offset)
                    if record.state == S.AVAILABLE:
                        released.add(offset)
                else:
                    record.deadline = deadline
        return released

    def start_after(self) -> int:
        for offset in range(self.start, self.end):
            if self.records[offset].state not in TERMINAL:
                return offset
        return self.end

    def commit(self) -> None:
        self.start = max(self.start, self.start_after())
        self.records = {o: r for o, r in self.records.items() if o >= self.start}

    def persistent(self, start: int) -> tuple[tuple[StateBatch, ...], int]:
        runs: list[StateBatch] = []
        complete = 0
        for offset in range(start, self.end):
            record = self.records[offset]
            state = S.AVAILABLE if record.state == S.ACQUIRED else record.state
            complete += state in TERMINAL
            if state == S.AVAILABLE and record.delivery_count == 0:
                continue
            if (runs and runs[-1].last_offset == offset - 1 and runs[-1].delivery_state == state
                    and runs[-1].delivery_count == record.delivery_count):
                runs[-1] = StateBatch(runs[-1].first_offset, offset, state, record.delivery_count)
            else:
                runs.append(StateBatch(offset, offset, state, record.delivery_count))
        return tuple(runs), complete


def records_of(sp: SharePartition) -> dict[int, Record]:
    """The share partition's offsets one by one, from its ranges, checking how the ranges lie."""
    found = {}
    for batch in sp.batches:
        assert batch.ranges[0].first_offset == batch.first_offset
        assert batch.ranges[-1].last_offset == batch.last_offset
        assert all(a.last_offset + 1 == b.first_offset for a, b in zip(batch.ranges, batch.ranges[1:]))
        assert batch.split or len(batch.ranges) == 1
        assert not any(a.alike(b) for a, b in zip(batch.ranges, batch.ranges[1:]))
        for r in batch.ranges:
            for offset in range(max(r.first_offset, sp.start_offset), r.last_offset + 1):
                found[offset] = Record(r.state, r.delivery_count, r.member_id, r.deadline)
    return found


def check_same(sp: SharePartition, model: Model) -> None:
    assert (sp.start_offset, sp.end_offset) == (model.start, model.end)
    assert records_of(sp) == model.records
    available = [o for o in range(model.start, model.end) if model.records[o].state == S.AVAILABLE]
    assert sp.next_fetch_offset() == (available[0] if available else model.end)
    acquired = [r for r in model.records.values() if r.state == S.ACQUIRED]
    assert sp.acquired_records() == len(acquired)
    assert sp.next_deadline() == min((r.deadline for r in acquired), default=None)
    assert sp.start_offset_after() == model.start_after()
    for start in (sp.start_offset, sp.start_offset_after()):
        state = sp.persistent_state(start_offset=start)
        assert (state.batches, state.delivery_complete_count) == model.persistent(start)


def acquire(data, sp: SharePartition, model: Model, now: float) -> None:
    member = data.draw(st.sampled_from(MEMBERS))
    fetch_offset = sp.next_fetch_offset()
    first = next((i for i, b in enumerate(LOG) if b.last_offset >= fetch_offset), None)
    if first is None:
        return
    batches = LOG[first:first + data.draw(st.integers(1, 5))]
    excluded = set(data.draw(st.lists(st.integers(fetch_offset, batches[-1].last_offset), max_size=4)))
    mode = data.draw(st.sampled_from((BATCH_OPTIMIZED, RECORD_LIMIT)))
    got = sp.acquire(member, batches, max_records=data.draw(st.sampled_from((1, 4, 10, 500))),
                     batch_size=data.draw(st.sampled_from((1, 5, 500))), now=now, mode=mode,
                     lock_duration_ms=int(LOCK_S * 1000), fetch_offset=fetch_offset,
                     exclude=data.draw(st.sampled_from((excluded, OffsetRanges.of(excluded)))))
    offsets = [o for r in got for o in range(r.first_offset, r.last_offset + 1)]
    assert offsets == sorted(set(offsets))
    assert batches[0].base_offset <= min(offsets, default=batches[0].base_offset)
    assert max(offsets, default=0) <= batches[-1].last_offset
    in_flight = model.end
    for offset in range(model.end, sp.end_offset):  # into flight for the first time
        model.records[offset] = Record(S.AVAILABLE, 0)
    model.end = sp.end_offset
    for r in got:
        for offset in range(r.first_offset, r.last_offset + 1):
            record = model.records[offset]
            assert record.state == S.AVAILABLE
            assert offset not in excluded or offset >= in_flight  # (only records in flight are in transition)
            assert r.delivery_count == record.delivery_count + 1
            record.state, record.delivery_count = S.ACQUIRED, record.delivery_count + 1
            record.member_id, record.deadline = member, now + LOCK_S


ack_types = st.sampled_from((A.ACCEPT, A.ACCEPT, A.RELEASE, A.REJECT, A.RENEW, A.GAP))


def acknowledge(data, sp: SharePartition, model: Model, now: float) -> None:
    member = data.draw(st.sampled_from(MEMBERS))
    held = [o for o, r in sorted(model.records.items()) if r.state == S.ACQUIRED and r.member_id == member]
    batches = []
    for _ in range(data.draw(st.integers(1, 3))):
        if held and data.draw(st.booleans()):
            first = data.draw(st.sampled_from(held))
            last = data.draw(st.sampled_from([o for o in held if o >= first]))
        else:
            first = data.draw(st.integers(max(model.start - 2, 0), model.end + 1))
            last = first + data.draw(st.integers(-1, 6))
        if data.draw(st.integers(0, 3)) == 0 and first <= last:
            types = [int(t) for t in data.draw(st.lists(ack_types, min_size=last - first + 1,
                                                        max_size=last - first + 1))]
        else:
            types = [int(data.draw(ack_types))]
        batches.append((first, last, types))
    before = model.copy()
    try:
        expected = model.acknowledge(member, batches, now + LOCK_S)
    except KafkaError as refused:
        with pytest.raises(KafkaError) as raised:
            sp.acknowledge(member, batches, now=now, lock_duration_ms=int(LOCK_S * 1000))
        assert (raised.value.code, raised.value.message) == (refused.code, refused.message)
        model.__dict__.update(before.__dict__)
        return
    change = sp.acknowledge(member, batches, now=now, lock_duration_ms=int(LOCK_S * 1000))
    assert set(change.released_offsets()) == expected
    if data.draw(st.integers(0, 4)) == 0:  # its state could not be written
        change.rollback()
        model.__dict__.update(before.__dict__)


def release(sp: SharePartition, model: Model, which, change) -> None:
    held = [r for r in model.records.values() if r.state == S.ACQUIRED and which(r)]
    for record in held:
        model.release(record)
    assert change.records == len(held)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_ranges_behave_as_offsets_one_by_one(data):
    limit = data.draw(st.integers(2, 6))
    start = data.draw(st.sampled_from((0, 0, 4)))
    sp = SharePartition("g", "t", 0, delivery_count_limit=limit,
                        max_in_flight_records=data.draw(st.sampled_from((10, 40, 2000))))
    sp.load(PartitionState(0, 0, start), reset_offset=start)
    model = Model(start, limit)
    now = 0.0
    for _ in range(data.draw(st.integers(1, 40))):
        now += data.draw(st.sampled_from((0.0, 0.25, 0.6)))
        operation = data.draw(st.sampled_from(("acquire", "acquire", "acknowledge", "acknowledge", "expire",
                                               "leave", "delete", "commit", "reload")))
        if operation == "acquire":
            acquire(data, sp, model, now)
        elif operation == "acknowledge":
            acknowledge(data, sp, model, now)
        elif operation == "expire":
            release(sp, model, lambda r: r.deadline <= now, sp.expire_locks(now))
        elif operation == "leave":
            member = data.draw(st.sampled_from(MEMBERS))
            release(sp, model, lambda r: r.member_id == member, sp.release_member(member))
        elif operation == "delete":
            log_start = data.draw(st.integers(model.start, model.end + 2))
            sp.archive_before(log_start)
            for offset in range(model.start, min(log_start, model.end)):
                if model.records[offset].state == S.AVAILABLE:
                    model.records[offset].state = S.ARCHIVED
        elif operation == "commit":
            sp.commit()
            model.commit()
        else:  # the broker restarts: what was persisted is loaded again
            state = sp.persistent_state(start_offset=sp.start_offset_after())
            sp = SharePartition("g", "t", 0, delivery_count_limit=limit,
                                max_in_flight_records=sp.max_in_flight_records)
            sp.load(state, reset_offset=0)
            model.commit()
            for record in model.records.values():
                if record.state == S.ACQUIRED:
                    record.state, record.member_id, record.deadline = S.AVAILABLE, None, 0.0
            while model.end > model.start and model.records[model.end - 1] == Record(S.AVAILABLE, 0):
                del model.records[model.end - 1]  # never delivered: not in flight once loaded
                model.end -= 1
        check_same(sp, model)


def test_whole_batches_stay_one_range_each():
    """The common case: batches acquired whole and acknowledged whole are never cut."""
    sp = SharePartition("g", "t", 0)
    sp.load(PartitionState(0, 0, 0), reset_offset=0)
    log = [LogBatch(first, first + 966) for first in range(0, 967 * 4, 967)]
    for member, batch in zip(MEMBERS, log):
        assert [(r.first_offset, r.last_offset) for r in sp.acquire(
            member, log, max_records=500, batch_size=500, now=0)] == [(batch.base_offset, batch.last_offset)]
    sp.acknowledge("m2", [(967, 1933, [A.ACCEPT])], now=0)
    sp.acknowledge("m3", [(1934, 2900, [A.RELEASE])], now=0)
    assert [len(batch.ranges) for batch in sp.batches] == [1, 1, 1]
    assert not any(batch.split for batch in sp.batches)
    assert sp.persistent_state().batches == (
        StateBatch(0, 966, S.AVAILABLE, 1), StateBatch(967, 1933, S.ACKNOWLEDGED, 1),
        StateBatch(1934, 2900, S.AVAILABLE, 1))


def test_offset_ranges():
    ranges = OffsetRanges([(5, 7), (1, 2), (8, 8), (12, 20)])
    assert ranges.ranges == [(1, 2), (5, 8), (12, 20)]
    assert 6 in ranges and 3 not in ranges and 21 not in ranges
    assert len(ranges) == 2 + 4 + 9 and list(OffsetRanges.of({3, 4, 9})) == [3, 4, 9]
    assert ranges.overlaps(3, 5) and not ranges.overlaps(9, 11)
    assert ranges.inside(0, 13) == [(1, 2), (5, 8), (12, 13)]
    assert ranges.outside(0, 13) == [(0, 0), (3, 4), (9, 11)]
    assert not OffsetRanges() and OffsetRanges.of(ranges) is ranges
