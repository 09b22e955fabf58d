"""The transaction state table and the __transaction_state record schemas."""
from __future__ import annotations

import pytest

from trafka.broker.coordinator_runtime import partition_for
from trafka.broker.txn.records import decode_key, decode_value, encode_key, encode_value
from trafka.broker.txn.state import VALID_PREVIOUS, IllegalTransition, TransactionMetadata, TransactionState

S = TransactionState

# Kafka's state ids (written to the log) and names (shown by tools).
KAFKA_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def test_states_carry_kafkas_ids_and_names():
    assert {state.id: state.display_name for state in S} == KAFKA_STATES
    assert S.from_id(3) is S.PREPARE_ABORT and S.from_name("Ongoing") is S.ONGOING
    assert S.from_name("ongoing") is None
    with pytest.raises(ValueError):
        S.from_id(8)


LEGAL = [(S.EMPTY, S.ONGOING), (S.ONGOING, S.ONGOING), (S.ONGOING, S.PREPARE_COMMIT), (S.ONGOING, S.PREPARE_ABORT),
         (S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT), (S.COMPLETE_COMMIT, S.EMPTY),
         (S.COMPLETE_ABORT, S.ONGOING), (S.ONGOING, S.PREPARE_EPOCH_FENCE), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
         (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD)]
ILLEGAL = [(S.EMPTY, S.PREPARE_COMMIT), (S.EMPTY, S.COMPLETE_ABORT), (S.PREPARE_COMMIT, S.COMPLETE_ABORT),
           (S.PREPARE_ABORT, S.COMPLETE_COMMIT), (S.PREPARE_COMMIT, S.ONGOING), (S.ONGOING, S.DEAD),
           (S.DEAD, S.EMPTY), (S.ONGOING, S.COMPLETE_COMMIT), (S.COMPLETE_ABORT, S.PREPARE_ABORT)]


@pytest.mark.parametrize(("source", "target"), LEGAL + ILLEGAL)
def test_the_transition_table(source, target):
    metadata = TransactionMetadata("t", 7, 1, 60_000, source, {("a", 0)})
    if (source, target) in LEGAL:
        moved = metadata.transition(target, producer_epoch=2)
        assert (moved.state, moved.producer_epoch, metadata.state) == (target, 2, source)
    else:
        with pytest.raises(IllegalTransition):
            metadata.transition(target)
    assert (source in VALID_PREVIOUS[target]) == ((source, target) in LEGAL)


def test_a_transition_copies_the_partitions():
    metadata = TransactionMetadata("t", 7, 1, 60_000, S.ONGOING, {("a", 0)})
    moved = metadata.transition(S.ONGOING, partitions=metadata.partitions | {("b", 1)})
    moved.partitions.add(("c", 2))
    assert metadata.partitions == {("a", 0)}


# A TransactionLogValue laid out field by field per Kafka's schema (version 0): producer id 1000, epoch
# 3, timeout 60000, Ongoing, topic "in" partitions 0 and 2, last update 1700000000500, start 1700000000000.
KAFKA_VALUE = bytes.fromhex(
    "0000" "00000000000003e8" "0003" "0000ea60" "01"
    "00000001" "0002" "696e" "00000002" "00000000" "00000002"
    "0000018bcfe569f4" "0000018bcfe56800")


def test_values_encode_as_kafka_writes_them():
    metadata = TransactionMetadata("tx", 1000, 3, 60_000, S.ONGOING, {("in", 2), ("in", 0)},
                                   start_ms=1_700_000_000_000, last_update_ms=1_700_000_000_500)
    assert encode_value(metadata) == KAFKA_VALUE
    value = decode_value(KAFKA_VALUE)
    assert (value.producer_id, value.producer_epoch, value.timeout_ms, value.state, value.partitions,
            value.start_ms, value.last_update_ms) == (1000, 3, 60_000, S.ONGOING, {("in", 0), ("in", 2)},
                                                       1_700_000_000_000, 1_700_000_000_500)
    assert encode_key("tx") == bytes.fromhex("0000" "0002" "7478") and decode_key(encode_key("tx")) == "tx"


def test_the_flexible_version_is_read_with_its_tagged_fields():
    # Version 1: compact arrays and strings, tagged PreviousProducerId (0) and NextProducerId (1).
    value = bytes.fromhex(
        "0001" "00000000000003e8" "0003" "0000ea60" "04"
        "02" "03" "696e" "02" "00000001" "00"
        "0000018bcfe569f4" "0000018bcfe56800"
        "02" "00" "08" "00000000000003e7" "01" "08" "00000000000003e9")
    decoded = decode_value(value)
    assert (decoded.state, decoded.partitions, decoded.previous_producer_id, decoded.next_producer_id) == (
        S.COMPLETE_COMMIT, {("in", 1)}, 999, 1001)


def test_ids_map_to_partitions_as_in_kafka():
    # Utils.abs("my-txn".hashCode()) % 50 and friends, as Kafka computes them.
    assert [partition_for(t, 50) for t in ("my-txn", "", "transactional-id-1", "ü")] == [
        abs(_java_hash("my-txn")) % 50, 0, abs(_java_hash("transactional-id-1")) % 50, 252 % 50]


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# Values Apache Kafka 4.4 wrote to __transaction_state (version 1), captured from its log: an id just
# initialised (null partitions) and the same id's transaction once two partitions were added. Both carry
# the tagged PreviousProducerId.
KAFKA_44_EMPTY = bytes.fromhex(
    "0001000000000000000000000000ea600000000001a215392897ffffffffffffffff0100080000000000000000")
KAFKA_44_ONGOING = bytes.fromhex(
    "0001000000000000000000000000ea6001020974786e2d6461746103000000000000000100000001a2153928b8"
    "000001a2153928b80100080000000000000000")


def test_values_kafka_4_4_wrote_are_read():
    empty, ongoing = decode_value(KAFKA_44_EMPTY), decode_value(KAFKA_44_ONGOING)
    assert (empty.state, empty.partitions, empty.timeout_ms, empty.start_ms, empty.previous_producer_id) == (
        S.EMPTY, set(), 60_000, -1, 0)
    assert (ongoing.state, ongoing.partitions, ongoing.producer_epoch, ongoing.start_ms) == (
        S.ONGOING, {("txn-data", 0), ("txn-data", 1)}, 0, 0x1A2153928B8)
