"""ProducerStateManager: sequence and epoch rules, staging, transactions, snapshots, load and truncation.

Batches are real v2 record batch bytes built with ``trafka.wire.records``; ``PartitionLog`` below stands in
for the partition's log the way ``trafka.storage.log.Log`` drives the manager: it assigns offsets, stages
each batch, keeps the bytes of accepted batches and replays them to ``load``.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trafka.storage.files import producer_snapshot_file
from trafka.storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    CompletedTxn,
    CorruptSnapshotError,
    ProducerStateEntry,
    ProducerStateManager,
    read_snapshot,
)
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import ControlRecordType, RecordBatch, build_batch, build_control_batch

PID = 7


@dataclass(frozen=True)
class Data:
    """A data batch to send: producer, epoch, first sequence and record count."""

    producer_id: int = PID
    epoch: int = 0
    sequence: int = 0
    count: int = 1
    transactional: bool = False
    timestamp: int = 1_000


@dataclass(frozen=True)
class Marker:
    """A COMMIT or ABORT marker written by the transaction coordinator."""

    producer_id: int = PID
    epoch: int = 0
    commit: bool = True
    coordinator_epoch: int = 0
    timestamp: int = 1_000


Spec = Data | Marker


def make_batch(spec: Spec, base_offset: int = 0) -> RecordBatch:
    if isinstance(spec, Marker):
        kind = ControlRecordType.COMMIT if spec.commit else ControlRecordType.ABORT
        data = build_control_batch(
            kind, spec.producer_id, spec.epoch, spec.coordinator_epoch, base_offset=base_offset, timestamp=spec.timestamp
        )
    else:
        data = build_batch(
            [(None, b"value %d" % i) for i in range(spec.count)],
            base_offset=base_offset,
            producer_id=spec.producer_id,
            producer_epoch=spec.epoch,
            base_sequence=spec.sequence,
            is_transactional=spec.transactional,
            base_timestamp=spec.timestamp,
        )
    return RecordBatch(data)


class PartitionLog:
    """The bytes of accepted batches at their offsets, driving a ProducerStateManager as a log does."""

    def __init__(self, log_dir: Path, **config: int) -> None:
        self.log_dir = log_dir
        self.state = ProducerStateManager(log_dir, **config)
        self.batches: list[RecordBatch] = []
        self.log_end_offset = 0
        self.completed: list[CompletedTxn] = []

    def append(self, *specs: Spec) -> tuple[int, int] | None:
        """Append one request; the original offsets for a duplicate, else None. Raises KafkaError."""
        state = self.state
        state.begin_append()
        accepted = []
        next_offset = self.log_end_offset
        try:
            for spec in specs:
                batch = make_batch(spec, next_offset)
                duplicate = state.check(batch)
                if duplicate is not None:
                    state.abort_append()
                    return duplicate
                state.record(batch, batch.base_offset, batch.last_offset)
                accepted.append(batch)
                next_offset = batch.last_offset + 1
        except KafkaError:
            state.abort_append()
            raise
        self.completed += state.commit_append()
        self.batches += accepted
        self.log_end_offset = next_offset
        return None

    def read_batches(self, offset: int) -> Iterator[RecordBatch]:
        """Batches from the one holding ``offset`` on, as a segment read returns them."""
        return (batch for batch in self.batches if batch.last_offset >= offset)

    def truncate_to(self, offset: int) -> None:
        self.batches = [batch for batch in self.batches if batch.last_offset < offset]
        self.log_end_offset = offset

    def reopened(self, **config: int) -> ProducerStateManager:
        state = ProducerStateManager(self.log_dir, **config)
        state.load(0, self.log_end_offset, self.read_batches, now_ms=0)
        return state


def state_of(state: ProducerStateManager) -> dict[int, tuple]:
    """Everything a manager knows about its producers, comparable with ==."""
    return {
        pid: (e.producer_epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset, tuple(e.batches))
        for pid, e in state.active_producers.items()
    }


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    return PartitionLog(tmp_path)


# -- sequences and epochs -------------------------------------------------------------------------

# Producer PID has written six batches of ten records in epoch 0 (sequences 0-59, offsets 0-59), so
# the batches with sequences 10-19 ... 50-59 are the five it retains.
SIX_BATCHES = [Data(sequence=10 * i, count=10) for i in range(6)]
OUT_OF_ORDER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize(
    ("incoming", "expected"),
    [
        pytest.param(Data(sequence=60), None, id="next sequence"),
        pytest.param(Data(sequence=60, count=100), None, id="next sequence, large batch"),
        *(
            pytest.param(Data(sequence=s, count=10), (s, s + 9), id=f"duplicate of {s}-{s + 9}")
            for s in (10, 20, 30, 40, 50)
        ),
        pytest.param(Data(sequence=0, count=10), OUT_OF_ORDER, id="retry older than the last five"),
        pytest.param(Data(sequence=50, count=5), OUT_OF_ORDER, id="same first sequence, other last"),
        pytest.param(Data(sequence=55, count=5), OUT_OF_ORDER, id="same last sequence, other first"),
        pytest.param(Data(sequence=61), OUT_OF_ORDER, id="gap"),
        pytest.param(Data(sequence=59), OUT_OF_ORDER, id="overlap"),
        pytest.param(Data(epoch=1, sequence=0), None, id="new epoch at sequence 0"),
        pytest.param(Data(epoch=5, sequence=0), None, id="epoch jump at sequence 0"),
        pytest.param(Data(epoch=1, sequence=60), OUT_OF_ORDER, id="new epoch continuing the sequence"),
        pytest.param(Data(epoch=1, sequence=50, count=10), OUT_OF_ORDER, id="old batch under a new epoch"),
        pytest.param(Data(producer_id=8, sequence=0), None, id="unknown producer at 0"),
        pytest.param(Data(producer_id=8, sequence=4242), None, id="unknown producer at any sequence"),
        pytest.param(Data(sequence=60, transactional=True), None, id="begins a transaction"),
    ],
)
def test_sequence_rules(log: PartitionLog, incoming: Data, expected: object) -> None:
    for spec in SIX_BATCHES:
        assert log.append(spec) is None
    if isinstance(expected, ErrorCode):
        with pytest.raises(KafkaError) as error:
            log.append(incoming)
        assert error.value.code == expected
    else:
        assert log.append(incoming) == expected


def test_older_epoch_is_fenced(log: PartitionLog) -> None:
    log.append(Data(epoch=3, sequence=0))
    for sequence in (0, 1):
        with pytest.raises(KafkaError) as error:
            log.append(Data(epoch=2, sequence=sequence))
        assert error.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_duplicate_of_previous_epoch_is_not_a_duplicate(log: PartitionLog) -> None:
    log.append(Data(epoch=0, sequence=0, count=3))
    log.append(Data(epoch=1, sequence=0, count=2))
    with pytest.raises(KafkaError) as error:
        log.append(Data(epoch=0, sequence=0, count=3))
    assert error.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.append(Data(epoch=1, sequence=0, count=2)) == (3, 4)


def test_sequence_wraps_after_int32_max(log: PartitionLog) -> None:
    log.append(Data(sequence=INT32_MAX - 4, count=5))  # ends exactly at INT32_MAX
    with pytest.raises(KafkaError) as error:
        log.append(Data(sequence=INT32_MAX))
    assert error.value.code == OUT_OF_ORDER
    assert log.append(Data(sequence=0, count=3)) is None
    assert log.state.last_entry(PID).last_sequence == 2


def test_batch_spanning_the_wrap(log: PartitionLog) -> None:
    log.append(Data(sequence=INT32_MAX - 9, count=8))
    assert log.append(Data(sequence=INT32_MAX - 1, count=4)) is None  # INT32_MAX-1, INT32_MAX, 0, 1
    entry = log.state.last_entry(PID)
    assert entry.batches[-1] == BatchMetadata(INT32_MAX - 1, 1, 8, 11, 1_000)
    assert log.append(Data(sequence=INT32_MAX - 1, count=4)) == (8, 11)
    assert log.append(Data(sequence=2)) is None


def test_batches_without_producer_id_are_not_tracked(log: PartitionLog) -> None:
    assert log.append(Data(producer_id=-1, epoch=-1, sequence=-1, count=4)) is None
    assert log.state.active_producers == {}
    assert log.state.end_offset == 0


# -- staging within one append --------------------------------------------------------------------


def test_later_batches_of_an_append_see_the_earlier_ones(log: PartitionLog) -> None:
    log.append(Data(sequence=0, count=5))
    assert log.append(Data(sequence=5, count=5), Data(sequence=10, count=5), Data(sequence=15)) is None
    assert log.state.last_entry(PID).last_sequence == 15
    assert log.state.last_entry(PID).last_data_offset == 15


def test_epoch_bump_inside_one_append(log: PartitionLog) -> None:
    log.append(Data(sequence=0, count=5))
    assert log.append(Data(epoch=1, sequence=0, count=2), Data(epoch=1, sequence=2)) is None
    entry = log.state.last_entry(PID)
    assert entry.producer_epoch == 1
    assert [(b.first_sequence, b.last_sequence) for b in entry.batches] == [(0, 1), (2, 2)]


def test_gap_between_staged_batches_is_out_of_order(log: PartitionLog) -> None:
    log.append(Data(sequence=0, count=5))
    with pytest.raises(KafkaError) as error:
        log.append(Data(sequence=5, count=5), Data(sequence=11))
    assert error.value.code == OUT_OF_ORDER


def test_unknown_producer_is_accepted_at_any_sequence_within_its_first_append(log: PartitionLog) -> None:
    # As in Kafka: until something is known of the producer, its sequences are not checked.
    assert log.append(Data(sequence=5), Data(sequence=9)) is None
    with pytest.raises(KafkaError):
        log.append(Data(sequence=20))
    assert log.append(Data(sequence=10)) is None


def test_rejected_append_leaves_the_state_unchanged(log: PartitionLog) -> None:
    log.append(Data(sequence=0, count=5))
    log.append(Data(producer_id=9, sequence=0, transactional=True))
    before = state_of(log.state), log.state.first_unstable_offset(), log.state.end_offset
    with pytest.raises(KafkaError):
        log.append(
            Data(sequence=5, count=5),
            Data(producer_id=10, sequence=0, transactional=True),
            Marker(producer_id=9, commit=True),
            Data(sequence=99),
        )
    assert (state_of(log.state), log.state.first_unstable_offset(), log.state.end_offset) == before
    # The staged batch was never written: sending it again is new, not a duplicate.
    assert log.append(Data(sequence=5, count=5)) is None


def test_check_alone_changes_nothing(log: PartitionLog) -> None:
    log.append(Data(sequence=0))
    before = state_of(log.state)
    log.state.begin_append()
    assert log.state.check(make_batch(Data(sequence=1), 1)) is None
    log.state.commit_append()
    assert state_of(log.state) == before


def test_coordinator_batches_skip_sequence_checks(log: PartitionLog) -> None:
    log.append(Data(epoch=2, sequence=0, transactional=True))
    state = log.state
    state.begin_append()
    assert state.check(make_batch(Data(epoch=2, sequence=-1, transactional=True), 1), from_client=False) is None
    with pytest.raises(KafkaError) as error:
        state.check(make_batch(Data(epoch=1, sequence=-1, transactional=True), 1), from_client=False)
    assert error.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    state.abort_append()


# -- transactions ---------------------------------------------------------------------------------


def test_transaction_lifecycle_and_first_unstable_offset(log: PartitionLog) -> None:
    log.append(Data(producer_id=1, sequence=0, count=3, transactional=True))  # 0-2
    log.append(Data(producer_id=2, sequence=0, count=2))  # 3-4, not transactional
    log.append(Data(producer_id=3, sequence=0, count=2, transactional=True))  # 5-6
    log.append(Data(producer_id=1, sequence=3, count=2, transactional=True))  # 7-8, same transaction
    state = log.state
    assert state.first_unstable_offset() == 0
    assert state.last_entry(1).current_txn_first_offset == 0

    log.append(Marker(producer_id=1, commit=True, coordinator_epoch=4))  # 9
    assert log.completed == [CompletedTxn(1, 0, 9, is_aborted=False, last_stable_offset=5)]
    assert state.last_entry(1).current_txn_first_offset is None
    assert state.last_entry(1).coordinator_epoch == 4
    assert state.first_unstable_offset() == 0  # its marker is not below the high watermark yet
    state.on_high_watermark_updated(9)
    assert state.first_unstable_offset() == 0
    state.on_high_watermark_updated(10)
    assert state.first_unstable_offset() == 5

    log.append(Marker(producer_id=3, commit=False))  # 10
    assert log.completed[-1] == CompletedTxn(3, 5, 10, is_aborted=True, last_stable_offset=11)
    state.on_high_watermark_updated(11)
    assert state.first_unstable_offset() is None


def test_marker_without_open_transaction_completes_nothing(log: PartitionLog) -> None:
    log.append(Data(sequence=0, count=2))
    log.append(Marker(epoch=1, commit=False, coordinator_epoch=2, timestamp=5_000))
    assert log.completed == []
    entry = log.state.last_entry(PID)
    assert (entry.producer_epoch, entry.coordinator_epoch, entry.last_timestamp) == (1, 2, 5_000)
    assert entry.batches == type(entry.batches)()  # a new epoch forgets the old batches
    with pytest.raises(KafkaError) as error:
        log.append(Data(epoch=1, sequence=2))
    assert error.value.code == OUT_OF_ORDER
    assert log.append(Data(epoch=1, sequence=0)) is None


def test_non_transactional_write_inside_a_transaction(log: PartitionLog) -> None:
    log.append(Data(sequence=0, transactional=True))
    with pytest.raises(KafkaError) as error:
        log.append(Data(sequence=1))
    assert error.value.code == ErrorCode.INVALID_TXN_STATE


def test_marker_from_an_older_coordinator_is_fenced(log: PartitionLog) -> None:
    log.append(Data(sequence=0, transactional=True))
    log.append(Marker(coordinator_epoch=3))
    with pytest.raises(KafkaError) as error:
        log.append(Marker(coordinator_epoch=2))
    assert error.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.append(Marker(coordinator_epoch=3)) is None


def test_marker_from_an_older_producer_epoch_is_fenced(log: PartitionLog) -> None:
    log.append(Data(epoch=4, sequence=0, transactional=True))
    with pytest.raises(KafkaError) as error:
        log.append(Marker(epoch=3))
    assert error.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_transaction_opened_and_closed_in_one_append(log: PartitionLog) -> None:
    log.append(Data(producer_id=1, sequence=0, transactional=True))  # 0
    log.append(
        Data(producer_id=2, sequence=0, count=2, transactional=True),  # 1-2
        Marker(producer_id=2, commit=True),  # 3
        Marker(producer_id=1, commit=False),  # 4
        Data(producer_id=2, sequence=2, transactional=True),  # 5, a new transaction
    )
    assert log.completed == [
        CompletedTxn(2, 1, 3, is_aborted=False, last_stable_offset=0),
        CompletedTxn(1, 0, 4, is_aborted=True, last_stable_offset=5),
    ]
    log.state.on_high_watermark_updated(6)
    assert log.state.first_unstable_offset() == 5


# -- expiration -----------------------------------------------------------------------------------


def test_remove_expired(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, max_producer_id_expiration_ms=100)
    log.append(Data(producer_id=1, sequence=0, timestamp=1_000))
    log.append(Data(producer_id=2, sequence=0, timestamp=1_050))
    log.append(Data(producer_id=3, sequence=0, timestamp=1_000, transactional=True))
    log.state.remove_expired(1_099)
    assert set(log.state.active_producers) == {1, 2, 3}
    log.state.remove_expired(1_100)
    assert set(log.state.active_producers) == {2, 3}  # an open transaction keeps its producer
    log.state.remove_expired(10_000)
    assert set(log.state.active_producers) == {3}


# -- snapshots ------------------------------------------------------------------------------------


def test_snapshot_file_is_kafka_producer_snapshot_v1(log: PartitionLog) -> None:
    log.append(Data(producer_id=5, epoch=3, sequence=10, count=4, timestamp=77))  # offsets 0-3
    log.append(Data(producer_id=2, epoch=1, sequence=0, transactional=True, timestamp=88))  # 4
    log.state.take_snapshot(5)
    data = producer_snapshot_file(log.log_dir, 5).read_bytes()
    assert producer_snapshot_file(log.log_dir, 5).name == "00000000000000000005.snapshot"

    entries = struct.pack(">i", 2)  # sorted by producer id
    entries += struct.pack(">qhiqiqiq", 2, 1, 0, 4, 0, 88, -1, 4)
    entries += struct.pack(">qhiqiqiq", 5, 3, 13, 3, 3, 77, -1, -1)
    assert data == struct.pack(">hI", 1, crc32c.crc32c(entries)) + entries


def test_snapshot_round_trip(log: PartitionLog) -> None:
    log.append(Data(producer_id=5, epoch=3, sequence=10, count=4, timestamp=77))
    log.append(Data(producer_id=2, epoch=1, sequence=0, transactional=True, timestamp=88))
    log.append(Data(producer_id=2, epoch=1, sequence=1, count=2, transactional=True, timestamp=99))
    log.append(Data(producer_id=6, sequence=0, transactional=True), Marker(producer_id=6, coordinator_epoch=9))
    log.state.take_snapshot(log.log_end_offset)
    entries = {e.producer_id: e for e in read_snapshot(producer_snapshot_file(log.log_dir, log.log_end_offset))}
    assert entries[5] == ProducerStateEntry(5, 3, -1, 77, None, entries[5].batches)
    assert list(entries[5].batches) == [BatchMetadata(10, 13, 0, 3, 77)]
    assert entries[2].current_txn_first_offset == 4
    assert list(entries[2].batches) == [BatchMetadata(1, 2, 5, 6, 99)]
    assert (entries[6].coordinator_epoch, entries[6].current_txn_first_offset, entries[6].last_sequence) == (9, None, 0)


def test_empty_snapshot(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.take_snapshot(0)
    assert read_snapshot(producer_snapshot_file(tmp_path, 0)) == []
    assert state.snapshot_offsets() == [0]


@pytest.mark.parametrize("damage", ["flip", "truncate", "version", "extend"])
def test_corrupt_snapshot_is_detected(log: PartitionLog, damage: str) -> None:
    log.append(Data(sequence=0, count=3))
    log.state.take_snapshot(3)
    path = producer_snapshot_file(log.log_dir, 3)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[20] ^= 1
    elif damage == "truncate":
        del data[-1]
    elif damage == "version":
        data[1] = 2
    else:
        data += b"\0" * 46
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)


# -- loading --------------------------------------------------------------------------------------


def test_load_without_snapshot_replays_the_whole_log(log: PartitionLog) -> None:
    for spec in SIX_BATCHES:
        log.append(spec)
    log.append(Data(producer_id=3, sequence=0, transactional=True), Data(producer_id=4, sequence=0))
    reopened = log.reopened()
    assert state_of(reopened) == state_of(log.state)
    assert reopened.first_unstable_offset() == 60
    assert reopened.end_offset == log.log_end_offset


def test_load_from_snapshot_then_replay(log: PartitionLog) -> None:
    log.append(Data(producer_id=1, sequence=0, count=2))  # 0-1
    log.append(Data(producer_id=1, sequence=2, count=2))  # 2-3
    log.append(Data(producer_id=2, sequence=0, transactional=True))  # 4
    log.state.take_snapshot(5)
    for spec in SIX_BATCHES:  # 5-64
        log.append(spec)
    log.append(Data(producer_id=1, sequence=4))  # 65

    # Prove the snapshot is used: replay must not start below it.
    reads: list[int] = []

    def read_batches(offset: int) -> Iterator[RecordBatch]:
        reads.append(offset)
        return log.read_batches(offset)

    reopened = ProducerStateManager(log.log_dir)
    reopened.load(0, log.log_end_offset, read_batches, now_ms=0)
    assert reads == [5]
    assert state_of(reopened)[PID] == state_of(log.state)[PID]
    assert reopened.last_entry(2).current_txn_first_offset == 4
    assert reopened.first_unstable_offset() == 4
    # Producer 1's batches before the snapshot survive only as its last one.
    assert list(reopened.last_entry(1).batches) == [BatchMetadata(2, 3, 2, 3, 1_000), BatchMetadata(4, 4, 65, 65, 1_000)]
    for sequence in (10, 20, 30, 40, 50):
        reopened.begin_append()
        assert reopened.check(make_batch(Data(sequence=sequence, count=10))) == (sequence + 5, sequence + 14)


def test_load_uses_the_newest_snapshot_within_the_log(log: PartitionLog) -> None:
    log.append(Data(sequence=0))
    log.state.take_snapshot(1)
    log.append(Data(sequence=1))
    log.state.take_snapshot(2)
    log.append(Data(sequence=2))
    log.state.take_snapshot(3)
    log.truncate_to(2)
    reopened = ProducerStateManager(log.log_dir)
    reopened.load(0, 2, log.read_batches, now_ms=0)
    assert reopened.snapshot_offsets() == [1, 2]  # the one beyond the log end is deleted
    assert reopened.last_entry(PID).last_sequence == 1


def test_load_falls_back_past_a_corrupt_snapshot(log: PartitionLog) -> None:
    log.append(Data(sequence=0))
    log.state.take_snapshot(1)
    log.append(Data(sequence=1))
    log.state.take_snapshot(2)
    producer_snapshot_file(log.log_dir, 2).write_bytes(b"\0\1garbage")
    reopened = log.reopened()
    assert reopened.snapshot_offsets() == [1]
    assert state_of(reopened) == state_of(log.state)


def test_load_deletes_snapshots_below_the_log_start(log: PartitionLog) -> None:
    log.append(Data(sequence=0))
    log.state.take_snapshot(1)
    log.append(Data(sequence=1))
    log.state.take_snapshot(2)
    reopened = ProducerStateManager(log.log_dir)
    reopened.load(2, 2, log.read_batches, now_ms=0)
    assert reopened.snapshot_offsets() == [2]
    assert reopened.last_entry(PID).last_sequence == 1


def test_load_drops_producers_expired_in_the_snapshot(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path)
    log.append(Data(producer_id=1, sequence=0, timestamp=1_000))
    log.append(Data(producer_id=2, sequence=0, timestamp=1_000, transactional=True))
    log.state.take_snapshot(2)
    reopened = ProducerStateManager(tmp_path, max_producer_id_expiration_ms=100)
    reopened.load(0, 2, log.read_batches, now_ms=5_000)
    assert set(reopened.active_producers) == {2}


# -- truncation -----------------------------------------------------------------------------------


def test_truncate_from_the_end_rebuilds_from_snapshot_and_log(log: PartitionLog) -> None:
    log.append(Data(sequence=0, count=2))  # 0-1
    log.state.take_snapshot(2)
    log.append(Data(sequence=2, count=2))  # 2-3
    log.append(Data(producer_id=2, sequence=0, transactional=True))  # 4
    log.state.take_snapshot(5)
    log.append(Data(sequence=4, count=2))  # 5-6
    log.truncate_to(4)
    log.state.truncate(0, 4, log.read_batches)
    assert log.state.snapshot_offsets() == [2]
    assert set(log.state.active_producers) == {PID}
    assert log.state.last_entry(PID).last_sequence == 3
    assert log.state.first_unstable_offset() is None
    assert log.append(Data(sequence=4)) is None


def test_truncate_above_everything_recorded_keeps_the_state(log: PartitionLog) -> None:
    log.append(Data(sequence=0, count=2))
    log.append(Data(producer_id=-1, epoch=-1, sequence=-1, count=5))  # 2-6, not tracked
    before = state_of(log.state)
    log.truncate_to(3)
    log.state.truncate(0, 3)  # nothing to replay: no read_batches needed
    assert state_of(log.state) == before


def test_truncate_below_the_state_needs_the_log(log: PartitionLog) -> None:
    log.append(Data(sequence=0, count=2))
    with pytest.raises(ValueError):
        log.state.truncate(0, 1)


def test_truncate_from_the_start(log: PartitionLog) -> None:
    log.append(Data(producer_id=1, sequence=0, transactional=True))  # 0
    log.append(Marker(producer_id=1))  # 1
    log.state.take_snapshot(2)
    log.append(Data(producer_id=2, sequence=0, count=3))  # 2-4
    log.state.take_snapshot(5)
    assert log.state.first_unstable_offset() == 0
    log.state.truncate(2, 5)
    assert log.state.snapshot_offsets() == [2, 5]
    assert log.state.first_unstable_offset() is None  # the completed transaction lies below the log
    log.state.truncate(3, 5)
    assert log.state.snapshot_offsets() == [5]
    assert set(log.state.active_producers) == {1, 2}


# -- properties -----------------------------------------------------------------------------------


def specs_strategy() -> st.SearchStrategy[list[list[Spec]]]:
    """Appends (lists of batch specs) from three producers, mostly valid, some not."""
    data = st.builds(
        Data,
        producer_id=st.integers(1, 3),
        epoch=st.integers(0, 2),
        sequence=st.integers(0, 12),
        count=st.integers(1, 3),
        transactional=st.booleans(),
        timestamp=st.integers(0, 10_000),
    )
    marker = st.builds(
        Marker,
        producer_id=st.integers(1, 3),
        epoch=st.integers(0, 2),
        commit=st.booleans(),
        coordinator_epoch=st.integers(0, 2),
        timestamp=st.integers(0, 10_000),
    )
    return st.lists(st.lists(st.one_of(data, data, marker), min_size=1, max_size=3), max_size=25)


def append_all(log: PartitionLog, appends: list[list[Spec]], snapshot_after: set[int] = frozenset()) -> None:
    for index, specs in enumerate(appends):
        try:
            log.append(*specs)
        except KafkaError:
            pass
        if index in snapshot_after:
            log.state.take_snapshot(log.log_end_offset)


@settings(max_examples=150, deadline=None)
@given(appends=specs_strategy())
def test_replaying_the_log_rebuilds_the_live_state(tmp_path_factory: pytest.TempPathFactory, appends) -> None:
    log = PartitionLog(tmp_path_factory.mktemp("replay"))
    append_all(log, appends)
    reopened = log.reopened()
    assert state_of(reopened) == state_of(log.state)
    assert reopened.first_unstable_offset() == log.state.first_unstable_offset()


@settings(max_examples=150, deadline=None)
@given(appends=specs_strategy(), data=st.data())
def test_snapshot_and_replay_keep_epochs_sequences_and_transactions(
    tmp_path_factory: pytest.TempPathFactory, appends, data
) -> None:
    log = PartitionLog(tmp_path_factory.mktemp("snapshots"))
    snapshot_after = data.draw(st.sets(st.integers(0, max(len(appends) - 1, 0))))
    append_all(log, appends, snapshot_after)
    reopened = log.reopened()
    live = log.state.active_producers
    assert set(reopened.active_producers) == set(live)
    for pid, entry in reopened.active_producers.items():
        original = live[pid]
        assert (entry.producer_epoch, entry.coordinator_epoch, entry.current_txn_first_offset) == (
            original.producer_epoch,
            original.coordinator_epoch,
            original.current_txn_first_offset,
        )
        assert entry.last_sequence == original.last_sequence
        assert entry.last_data_offset == original.last_data_offset
        # The reloaded window is the newest part of the live one (a snapshot keeps one timestamp per
        # producer, so timestamps of batches restored from it may differ).
        reloaded = [(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset) for b in entry.batches]
        kept = list(original.batches)[len(original.batches) - len(entry.batches) :]
        assert reloaded == [(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset) for b in kept]
    # Open transactions survive; completed ones awaiting the high watermark are below it after a restart.
    reopened.on_high_watermark_updated(log.log_end_offset)
    log.state.on_high_watermark_updated(log.log_end_offset)
    assert reopened.first_unstable_offset() == log.state.first_unstable_offset()


def kafka_state_of(state: ProducerStateManager) -> dict[int, tuple]:
    """What a producer snapshot keeps of each producer, plus where its last batch ended."""
    return {
        pid: (e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset, e.last_sequence, e.last_data_offset)
        for pid, e in state.active_producers.items()
    }


@settings(max_examples=100, deadline=None)
@given(appends=specs_strategy(), snapshot_after=st.sets(st.integers(0, 24)), truncate_at=st.integers(0, 225))
@example(
    # Append 0 is rejected as a whole (its marker is older than the epoch staged before it); append 1
    # opens and aborts a transaction at 0-1 and is followed by a snapshot at 3. Truncating to 3 reloads
    # that snapshot, which does not hold the completed transaction that still awaits the high watermark,
    # while replaying the log from 0 does.
    appends=[
        [Data(producer_id=1, epoch=1, sequence=0), Marker(producer_id=1, epoch=0, commit=False)],
        [
            Data(producer_id=1, epoch=0, sequence=0, transactional=True),
            Marker(producer_id=1, epoch=0, commit=False),
            Marker(producer_id=1, epoch=0, commit=False),
        ],
        [Marker(producer_id=1, epoch=0, commit=False)],
    ],
    snapshot_after={0, 1},
    truncate_at=3,
)
def test_truncation_equals_replaying_the_shorter_log(
    tmp_path_factory: pytest.TempPathFactory, appends, snapshot_after: set[int], truncate_at: int
) -> None:
    log = PartitionLog(tmp_path_factory.mktemp("truncate"))
    append_all(log, appends, snapshot_after)
    offset = truncate_at % (log.log_end_offset + 1)  # any offset up to the log end offset
    log.truncate_to(offset)
    log.state.truncate(0, offset, log.read_batches, now_ms=0)
    assert all(o <= offset for o in log.state.snapshot_offsets())

    fresh = PartitionLog(tmp_path_factory.mktemp("fresh"))
    fresh.batches, fresh.log_end_offset = log.batches, log.log_end_offset
    rebuilt = fresh.reopened()
    assert kafka_state_of(log.state) == kafka_state_of(rebuilt)
    # As in Kafka, a truncated log has its high watermark at most at its new end, and the transactions
    # completed below it count as replicated: a reload from a snapshot does not even know those that
    # completed before the snapshot. Open transactions are the same either way.
    log.state.on_high_watermark_updated(offset)
    rebuilt.on_high_watermark_updated(offset)
    assert log.state.first_unstable_offset() == rebuilt.first_unstable_offset()
