"""The share partition state machine: every transition, acquisition, acknowledgement, lock expiry, the delivery
count limit, the start offset's movement, read_committed and the persisted state."""
from __future__ import annotations

import pytest

from trafka.broker.share.partition import (
    BATCH_OPTIMIZED,
    RECORD_LIMIT,
    TRANSITIONS,
    AcquiredRange,
    Event,
    LogBatch,
    SharePartition,
    StateRange,
)
from trafka.broker.share.state import AcknowledgeType, DeliveryState, PartitionState, StateBatch
from trafka.wire.errors import ErrorCode, KafkaError

S = DeliveryState
A = AcknowledgeType


def new_partition(start: int = 0, **kwargs) -> SharePartition:
    sp = SharePartition("g", "t", 0, **kwargs)
    sp.load(PartitionState(state_epoch=0, leader_epoch=0, start_offset=start), reset_offset=start)
    return sp


def batches(*ranges: tuple[int, int]) -> list[LogBatch]:
    return [LogBatch(first, last) for first, last in ranges]


def states(sp: SharePartition) -> dict[int, tuple[DeliveryState, int]]:
    return sp.offset_states()


# -- the transition table ---------------------------------------------------------------------------

@pytest.mark.parametrize("state,event,count,expected", [
    (S.AVAILABLE, Event.ACQUIRE, 0, S.ACQUIRED),
    (S.AVAILABLE, Event.ARCHIVE, 1, S.ARCHIVED),
    (S.ACQUIRED, Event.ACCEPT, 1, S.ACKNOWLEDGED),
    (S.ACQUIRED, Event.RELEASE, 1, S.AVAILABLE),
    (S.ACQUIRED, Event.RELEASE, 5, S.ARCHIVED),
    (S.ACQUIRED, Event.REJECT, 1, S.ARCHIVED),
    (S.ACQUIRED, Event.GAP, 1, S.ARCHIVED),
    (S.ACQUIRED, Event.RENEW, 1, S.ACQUIRED),
    (S.ACQUIRED, Event.LOCK_EXPIRED, 1, S.AVAILABLE),
    (S.ACQUIRED, Event.LOCK_EXPIRED, 5, S.ARCHIVED),
    (S.ACQUIRED, Event.MEMBER_LEFT, 4, S.AVAILABLE),
    (S.ACQUIRED, Event.MEMBER_LEFT, 5, S.ARCHIVED),
    (S.ACQUIRED, Event.ARCHIVE, 1, S.ARCHIVED),
])
def test_transition(state, event, count, expected):
    sp = SharePartition("g", "t", 0, delivery_count_limit=5)
    offset_state = StateRange(0, 0, state, count, "m" if state == S.ACQUIRED else None, 1.0)
    sp._apply(offset_state, event, "m", 2.0)
    assert offset_state.state == expected
    assert offset_state.delivery_count == count + (1 if event == Event.ACQUIRE else 0)
    assert (offset_state.member_id is not None) == (expected == S.ACQUIRED)


def test_every_other_transition_is_refused():
    sp = SharePartition("g", "t", 0)
    for state in S:
        for event in Event:
            if (state, event) in TRANSITIONS:
                continue
            with pytest.raises(KafkaError) as refused:
                sp._apply(StateRange(0, 0, state, 1), event, "m", 0.0)
            assert refused.value.code == ErrorCode.INVALID_RECORD_STATE


# -- acquiring --------------------------------------------------------------------------------------

def test_new_records_are_acquired_as_one_batch_with_delivery_count_one():
    sp = new_partition()
    got = sp.acquire("m1", batches((0, 4), (5, 9)), max_records=500, batch_size=500, now=0)
    assert got == [AcquiredRange(0, 9, 1)]
    assert sp.end_offset == 10 and sp.start_offset == 0
    assert sp.next_fetch_offset() == 10
    assert sp.acquire("m2", batches((0, 4), (5, 9)), max_records=500, batch_size=500, now=0) == []


def test_batch_size_cuts_in_flight_batches_at_log_batch_boundaries():
    sp = new_partition()
    got = sp.acquire("m", batches((0, 2), (3, 5), (6, 8), (9, 9)), max_records=500, batch_size=4, now=0)
    assert got == [AcquiredRange(0, 5, 1), AcquiredRange(6, 9, 1)]


def test_max_records_rounds_up_to_whole_log_batches_in_batch_optimized_mode():
    sp = new_partition()
    got = sp.acquire("m", batches((0, 4), (5, 9), (10, 14)), max_records=7, batch_size=500, now=0,
                     mode=BATCH_OPTIMIZED)
    assert got == [AcquiredRange(0, 9, 1)]


def test_max_records_is_exact_in_record_limit_mode():
    sp = new_partition()
    got = sp.acquire("m", batches((0, 4), (5, 9)), max_records=7, batch_size=500, now=0, mode=RECORD_LIMIT)
    assert got == [AcquiredRange(0, 6, 1)]
    assert sp.next_fetch_offset() == 7
    assert sp.end_offset == 10  # the log batch holding the last record acquired is in flight whole
    assert sp.persistent_state().batches == (StateBatch(0, 6, S.AVAILABLE, 1),)
    got = sp.acquire("m", batches((5, 9), (10, 12)), max_records=500, batch_size=500, now=0)
    assert got == [AcquiredRange(7, 9, 1), AcquiredRange(10, 12, 1)]


def test_in_flight_limit_bounds_new_records():
    sp = new_partition(max_in_flight_records=10)
    got = sp.acquire("m", batches((0, 5), (6, 11), (12, 20)), max_records=500, batch_size=500, now=0)
    assert got == [AcquiredRange(0, 11, 1)]  # up to the end of the log batch holding the 10th record
    assert not sp.can_acquire()
    assert sp.acquire("m", batches((12, 20)), max_records=500, batch_size=500, now=0) == []


def test_start_offset_from_reset():
    sp = SharePartition("g", "t", 0)
    sp.load(PartitionState(state_epoch=1, leader_epoch=0, start_offset=-1), reset_offset=42)
    assert sp.start_offset == 42 and sp.next_fetch_offset() == 42
    got = sp.acquire("m", batches((40, 44)), max_records=500, batch_size=500, now=0)
    assert got == [AcquiredRange(42, 44, 1)]


# -- acknowledging ----------------------------------------------------------------------------------

def test_accept_all_moves_the_start_offset():
    sp = new_partition()
    sp.acquire("m", batches((0, 9)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 9, [A.ACCEPT])], now=0)
    assert sp.start_offset_after() == 10
    assert sp.start_offset == 0  # until persisted
    sp.commit()
    assert sp.start_offset == 10 and sp.batches == []


def test_release_redelivers_with_a_higher_delivery_count():
    sp = new_partition()
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m1", [(0, 4, [A.RELEASE])], now=0)
    sp.commit()
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("m2", batches((0, 4)), max_records=500, batch_size=500, now=0) == [AcquiredRange(0, 4, 2)]


def test_per_offset_acknowledgement_splits_the_batch():
    sp = new_partition()
    sp.acquire("m", batches((0, 4)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 4, [A.ACCEPT, A.RELEASE, A.REJECT, A.ACCEPT, A.RELEASE])], now=0)
    sp.commit()
    assert sp.start_offset == 1
    assert states(sp) == {1: (S.AVAILABLE, 1), 2: (S.ARCHIVED, 1), 3: (S.ACKNOWLEDGED, 1), 4: (S.AVAILABLE, 1)}
    # a split batch is acquired offset by offset
    got = sp.acquire("m", batches((0, 4)), max_records=500, batch_size=500, now=0)
    assert got == [AcquiredRange(1, 1, 2), AcquiredRange(4, 4, 2)]


def test_offsets_below_the_start_offset_are_skipped():
    sp = new_partition()
    sp.acquire("m", batches((0, 4)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 1, [A.ACCEPT])], now=0)
    sp.commit()
    assert sp.start_offset == 2
    sp.acknowledge("m", [(0, 3, [A.ACCEPT])], now=0)  # 0 and 1 are done with already
    sp.commit()
    assert sp.start_offset == 4


def test_split_batches_are_acquired_in_runs():
    sp = new_partition()
    sp.acquire("m", batches((0, 9)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 3, [A.RELEASE]), (4, 4, [A.ACCEPT]), (5, 9, [A.RELEASE])], now=0)
    sp.commit()
    got = sp.acquire("m", batches((0, 9)), max_records=500, batch_size=500, now=0)
    assert got == [AcquiredRange(0, 3, 2), AcquiredRange(5, 9, 2)]


def test_subset_acknowledgement():
    sp = new_partition()
    sp.acquire("m", batches((0, 9)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 3, [A.ACCEPT])], now=0)
    sp.commit()
    assert sp.start_offset == 4
    assert sp.acquired_records() == 6


@pytest.mark.parametrize("ack,code", [
    ((10, 12, [A.ACCEPT]), ErrorCode.INVALID_REQUEST),  # past the end
    ((0, 4, [A.ACCEPT, A.ACCEPT]), ErrorCode.INVALID_REQUEST),  # types neither one nor one per offset
    ((4, 2, [A.ACCEPT]), ErrorCode.INVALID_REQUEST),
    ((0, 4, [9]), ErrorCode.INVALID_REQUEST),
])
def test_bad_acknowledgements(ack, code):
    sp = new_partition()
    sp.acquire("m", batches((0, 4)), max_records=500, batch_size=500, now=0)
    with pytest.raises(KafkaError) as refused:
        sp.acknowledge("m", [ack], now=0)
    assert refused.value.code == code
    assert sp.acquired_records() == 5


def test_acknowledging_another_members_records_or_twice_is_refused_and_changes_nothing():
    sp = new_partition()
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, now=0)
    with pytest.raises(KafkaError) as refused:
        sp.acknowledge("m2", [(0, 4, [A.ACCEPT])], now=0)
    assert refused.value.code == ErrorCode.INVALID_RECORD_STATE
    sp.acknowledge("m1", [(0, 1, [A.ACCEPT])], now=0)
    with pytest.raises(KafkaError):
        sp.acknowledge("m1", [(2, 2, [A.ACCEPT]), (1, 1, [A.ACCEPT])], now=0)
    assert states(sp)[2] == (S.ACQUIRED, 1)  # all or nothing


def test_rollback_undoes_an_acknowledgement():
    sp = new_partition()
    sp.acquire("m", batches((0, 4)), max_records=500, batch_size=500, now=0)
    change = sp.acknowledge("m", [(0, 4, [A.ACCEPT])], now=0)
    change.rollback()
    assert all(s == (S.ACQUIRED, 1) for s in states(sp).values())
    assert not sp.batches[0].split


def test_renew_extends_the_lock():
    sp = new_partition(lock_duration_ms=1000)
    sp.acquire("m", batches((0, 4)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 4, [A.RENEW])], now=0.9)
    assert sp.expire_locks(1.5).records == 0
    assert sp.expire_locks(1.9).records == 5


# -- locks, members, the delivery limit ---------------------------------------------------------------

def test_expired_locks_make_records_available_to_others():
    sp = new_partition(lock_duration_ms=1000)
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, now=0)
    assert sp.next_deadline() == 1.0
    assert not sp.expire_locks(0.5)
    assert sp.expire_locks(1.0).records == 5
    assert sp.lock_expiries == 5
    assert sp.acquire("m2", batches((0, 4)), max_records=500, batch_size=500, now=1) == [AcquiredRange(0, 4, 2)]
    with pytest.raises(KafkaError):
        sp.acknowledge("m1", [(0, 4, [A.ACCEPT])], now=1)


def test_member_leaving_releases_its_records_only():
    sp = new_partition()
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, now=0)
    sp.acquire("m2", batches((5, 9)), max_records=500, batch_size=500, now=0)
    assert sp.release_member("m1").records == 5
    assert sp.next_fetch_offset() == 0
    assert states(sp)[5] == (S.ACQUIRED, 1)


def test_delivery_count_limit_archives():
    sp = new_partition(delivery_count_limit=2)
    sp.acquire("m", batches((0, 0)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 0, [A.RELEASE])], now=0)
    assert sp.acquire("m", batches((0, 0)), max_records=500, batch_size=500, now=0) == [AcquiredRange(0, 0, 2)]
    sp.acknowledge("m", [(0, 0, [A.RELEASE])], now=0)
    sp.commit()
    assert sp.start_offset == 1 and sp.archived_records == 1


def test_reject_archives():
    sp = new_partition()
    sp.acquire("m", batches((0, 2)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 2, [A.REJECT])], now=0)
    sp.commit()
    assert sp.start_offset == 3 and sp.archived_records == 3


def test_start_offset_waits_for_the_first_record():
    sp = new_partition()
    sp.acquire("m", batches((0, 9)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(1, 9, [A.ACCEPT])], now=0)
    sp.commit()
    assert sp.start_offset == 0
    sp.acknowledge("m", [(0, 0, [A.ACCEPT])], now=0)
    sp.commit()
    assert sp.start_offset == 10 and sp.in_flight_records == 0


def test_archive_before_the_log_start_offset():
    sp = new_partition()
    sp.acquire("m", batches((0, 9)), max_records=500, batch_size=500, now=0)
    sp.release_member("m")
    sp.archive_before(5)
    sp.commit()
    assert sp.start_offset == 5


# -- read_committed ---------------------------------------------------------------------------------

def test_aborted_transactions_are_archived_not_acquired():
    sp = new_partition()
    log = [LogBatch(0, 2, producer_id=7, transactional=True), LogBatch(3, 3, producer_id=7, transactional=True,
                                                                     control=True),
           LogBatch(4, 5, producer_id=8, transactional=True), LogBatch(6, 6, producer_id=8, transactional=True,
                                                                     control=True),
           LogBatch(7, 8)]
    got = sp.acquire("m", log, max_records=500, batch_size=500, now=0, aborted=[(7, 0, 3)])
    assert got == [AcquiredRange(3, 8, 1)]
    assert sp.start_offset == 3  # the aborted records at the start are done with
    sp.acknowledge("m", [(3, 8, [A.ACCEPT])], now=0)
    sp.commit()
    assert sp.start_offset == 9


# -- persistence --------------------------------------------------------------------------------------

def test_persisted_state_round_trip():
    sp = new_partition(start=10, delivery_count_limit=3)
    sp.acquire("m", batches((10, 19)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(11, 13, [A.ACCEPT, A.REJECT, A.RELEASE])], now=0)
    state = sp.persistent_state()
    assert state.start_offset == 10
    assert state.batches == (
        StateBatch(10, 10, S.AVAILABLE, 1), StateBatch(11, 11, S.ACKNOWLEDGED, 1), StateBatch(12, 12, S.ARCHIVED, 1),
        StateBatch(13, 19, S.AVAILABLE, 1))
    assert state.delivery_complete_count == 2
    again = SharePartition("g", "t", 0, delivery_count_limit=3)
    again.load(state, reset_offset=0)
    assert again.start_offset == 10 and again.end_offset == 20
    assert again.next_fetch_offset() == 10
    got = again.acquire("m2", batches((10, 19)), max_records=500, batch_size=500, now=0)
    assert AcquiredRange(10, 10, 2) in got and AcquiredRange(13, 19, 2) in got
    assert all(r.first_offset not in (11, 12) for r in got)


def test_persisted_state_after_the_start_offset_moves():
    sp = new_partition()
    sp.acquire("m", batches((0, 4)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 4, [A.ACCEPT])], now=0)
    state = sp.persistent_state(start_offset=sp.start_offset_after())
    assert state.start_offset == 5 and state.batches == ()


def test_load_drops_batches_below_the_start_offset_and_fills_gaps():
    sp = SharePartition("g", "t", 0)
    sp.load(PartitionState(2, 0, 5, (StateBatch(0, 6, S.ACKNOWLEDGED, 1), StateBatch(9, 9, S.AVAILABLE, 3))),
            reset_offset=0)
    assert sp.start_offset == 7
    assert states(sp) == {7: (S.AVAILABLE, 0), 8: (S.AVAILABLE, 0), 9: (S.AVAILABLE, 3)}


# -- records near their delivery limit ------------------------------------------------------------------------

@pytest.mark.parametrize("limit,expected", [
    # From half the limit (at least 2) delivered, a batch comes half at a time, then a quarter...; a record on its
    # last delivery comes alone. Every record is released as soon as it comes.
    (2, [[(0, 9, 1)], [(0, 9, 2)]]),
    (3, [[(0, 9, 1)], [(0, 9, 2)], [(0, 0, 3)], [(1, 1, 3)], [(2, 2, 3)]]),
    (6, [[(0, 9, 1)], [(0, 9, 2)], [(0, 9, 3)], [(0, 4, 4)], [(0, 1, 5)], [(0, 0, 6)], [(1, 1, 6)], [(2, 3, 5)],
         [(2, 2, 6)], [(3, 3, 6)], [(4, 4, 5), (5, 5, 4)], [(4, 4, 6)]]),
])
def test_records_near_their_delivery_limit_come_fewer_at_a_time(limit, expected):
    sp = new_partition(delivery_count_limit=limit)
    got = []
    for _ in expected:
        ranges = sp.acquire("m", batches((0, 9)), max_records=500, batch_size=500, now=0)
        got.append([(r.first_offset, r.last_offset, r.delivery_count) for r in ranges])
        sp.acknowledge("m", [(r.first_offset, r.last_offset, [A.RELEASE]) for r in ranges], now=0)
        sp.commit()
    assert got == expected


def test_a_throttled_batch_waits_for_a_fetch_of_its_own():
    sp = new_partition(delivery_count_limit=4)
    sp.acquire("m", batches((0, 3)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 3, [A.RELEASE])], now=0)
    sp.acquire("m", batches((0, 3)), max_records=500, batch_size=500, now=0)
    sp.acknowledge("m", [(0, 3, [A.RELEASE])], now=0)  # delivered twice: throttled from now on
    got = sp.acquire("m", batches((0, 3), (4, 7)), max_records=500, batch_size=500, now=0)
    assert got == [AcquiredRange(0, 1, 3)]  # half the batch, and none of the new records with it


def test_the_in_flight_budget_counts_redelivered_records():
    sp = new_partition(max_in_flight_records=100)
    log = batches((0, 29), (30, 59), (60, 89), (90, 119), (120, 149))
    assert sp.acquire("x", log, max_records=500, batch_size=500, now=0) == [AcquiredRange(0, 119, 1)]
    assert not sp.can_acquire()
    sp.acknowledge("x", [(0, 29, [A.ACCEPT]), (30, 59, [A.RELEASE])], now=0)
    sp.commit()
    # 90 in flight: a budget of 10, spent by the released batch; no new records with it
    assert sp.acquire("y", log[1:], max_records=500, batch_size=500, now=0) == [AcquiredRange(30, 59, 2)]



def test_at_the_in_flight_limit_only_records_in_flight_are_acquired_again():
    sp = new_partition(max_in_flight_records=100)
    log = batches((0, 29), (30, 59), (60, 89), (90, 119), (120, 149))
    assert sp.acquire("x", log, max_records=500, batch_size=500, now=0) == [AcquiredRange(0, 119, 1)]
    sp.acknowledge("x", [(0, 29, [A.RELEASE]), (60, 89, [A.RELEASE])], now=0)
    sp.commit()
    assert sp.in_flight_records == 120 and sp.can_acquire()
    # a split batch's available records come together, in runs; none of the new records 120-149
    assert sp.acquire("y", log, max_records=500, batch_size=500, now=0, fetch_offset=0) == [
        AcquiredRange(0, 29, 2), AcquiredRange(60, 89, 2)]
    assert not sp.can_acquire()
