"""Record batches: golden bytes from kafka-python's builder, round trips, corruption, patching."""
from __future__ import annotations

import struct
import types

import kafka.codec
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from kafka.record.default_records import DefaultRecordBatchBuilder

from trafka.wire.compression import Compression
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import (
    RECORD_BATCH_OVERHEAD,
    BatchScan,
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatch,
    SimpleRecord,
    TimestampType,
    batch_records_data,
    build_batch,
    build_control_batch,
    iter_batches,
    parse_control_record_key,
    parse_end_transaction_marker,
    scan_records,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
    valid_prefix_length,
)

SAMPLE = [
    SimpleRecord(b"key-0", b"value-0", [("trace", b"abc"), ("empty", None)], 1_700_000_000_000),
    SimpleRecord(None, b"value-1" * 50, (), 1_700_000_000_005),
    SimpleRecord(b"key-2", None, [("h\u00e9", b"")], 1_699_999_999_990),
]


@pytest.fixture
def snappy_for_kafka_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's xerial framing code needs python-snappy; give it raw snappy from cramjam."""
    import cramjam

    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)


def kafka_python_batch(
    records: list[SimpleRecord],
    codec: Compression = Compression.NONE,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for offset, record in enumerate(records):
        builder.append(offset, record.timestamp, record.key, record.value, list(record.headers))
    return bytes(builder.build())


def decoded(batch: bytes | bytearray) -> list[tuple]:
    return [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in RecordBatch(batch).records()
    ]


def expected(records: list[SimpleRecord], base_offset: int = 0) -> list[tuple]:
    return [
        (base_offset + i, r.timestamp, r.key, r.value, list(r.headers))
        for i, r in enumerate(records)
    ]


# -- golden bytes from kafka-python ---------------------------------------------------------------

def test_builder_output_equals_kafka_python_for_uncompressed_batches() -> None:
    golden = kafka_python_batch(SAMPLE, producer_id=4000, producer_epoch=3, base_sequence=17)
    # kafka-python writes partition leader epoch 0 where the Java client writes -1.
    ours = build_batch(
        SAMPLE, producer_id=4000, producer_epoch=3, base_sequence=17, partition_leader_epoch=0
    )
    assert ours == golden


def test_builder_output_equals_kafka_python_for_transactional_batches() -> None:
    golden = kafka_python_batch(
        SAMPLE, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    ours = build_batch(
        SAMPLE,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        partition_leader_epoch=0,
    )
    assert ours == golden


@pytest.mark.usefixtures("snappy_for_kafka_python")
@pytest.mark.parametrize("codec", list(Compression))
def test_reads_kafka_python_batches_with_every_codec(codec: Compression) -> None:
    records = SAMPLE * 40  # big enough that kafka-python keeps the compressed form
    golden = kafka_python_batch(records, codec, producer_id=12, producer_epoch=1, base_sequence=100)
    batch = RecordBatch(golden)
    batch.validate()
    assert batch.compression == codec
    assert batch.record_count == len(records)
    assert batch.last_offset_delta == len(records) - 1
    assert batch.producer_id == 12 and batch.producer_epoch == 1
    assert batch.base_sequence == 100 and batch.last_sequence == 100 + len(records) - 1
    assert batch.base_timestamp == SAMPLE[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in SAMPLE)
    assert batch.size == len(golden)
    assert decoded(golden) == expected(records)


@pytest.mark.usefixtures("snappy_for_kafka_python")
@pytest.mark.parametrize("codec", list(Compression))
def test_kafka_python_reads_our_batches_with_every_codec(codec: Compression) -> None:
    records = SAMPLE * 10
    ours = build_batch(records, compression=codec, base_offset=500)
    theirs = KafkaPythonBatch(bytearray(ours))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs] == expected(
        records, 500
    )


def test_header_fields_are_read_in_place_at_any_position() -> None:
    first = build_batch([(b"a", b"1")], base_offset=10, base_timestamp=5)
    second = build_batch(
        [(b"b", b"2", (), 7), (b"c", b"3", (), 9)],
        base_offset=11,
        producer_id=77,
        producer_epoch=2,
        base_sequence=2**31 - 1,
        partition_leader_epoch=4,
    )
    buffer = memoryview(b"junk" + first + second)
    batch = RecordBatch(buffer, 4 + len(first))
    header = batch.header()
    assert header.base_offset == batch.base_offset == 11
    assert batch.last_offset == 12 and batch.next_offset == 13
    assert header.partition_leader_epoch == batch.partition_leader_epoch == 4
    assert batch.magic == 2
    assert batch.crc == header.crc == batch.compute_crc()
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert not batch.is_transactional and not batch.is_control
    assert batch.base_timestamp == 7 and batch.max_timestamp == 9
    assert batch.has_producer_id and batch.producer_id == 77 and batch.producer_epoch == 2
    assert batch.last_sequence == 0  # sequences wrap after 2**31 - 1
    assert batch.delete_horizon_ms is None
    assert bytes(batch.raw()) == second
    assert batch.is_valid()


# -- round trips -----------------------------------------------------------------------------------

optional_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), optional_bytes), max_size=4)
timestamps = st.integers(min_value=0, max_value=2**48)
simple_records = st.builds(SimpleRecord, optional_bytes, optional_bytes, headers, timestamps)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(simple_records, min_size=1, max_size=30),
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(min_value=0, max_value=2**62),
    producer_id=st.integers(min_value=-1, max_value=2**62),
)
def test_round_trip(
    records: list[SimpleRecord], codec: Compression, base_offset: int, producer_id: int
) -> None:
    data = build_batch(records, compression=codec, base_offset=base_offset, producer_id=producer_id)
    batch = RecordBatch(data)
    batch.validate(from_client=producer_id == -1)
    assert batch.compression == codec
    assert batch.record_count == len(records)
    assert batch.max_timestamp == max(r.timestamp for r in records)
    assert decoded(data) == expected(records, base_offset)


def test_round_trip_of_decoded_records_keeps_offsets_and_timestamps() -> None:
    records = [Record(103, 50, b"k", b"v", []), Record(107, 40, None, b"w", [("x", None)])]
    data = build_batch(records, base_offset=100, compression=Compression.LZ4)
    batch = RecordBatch(data)
    assert batch.last_offset_delta == 7 and batch.record_count == 2
    assert batch.base_timestamp == 50 and batch.max_timestamp == 50
    assert list(batch.records()) == records
    batch.validate()
    with pytest.raises(KafkaError) as info:
        batch.validate(from_client=True)
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_records_without_timestamp_take_the_base_timestamp() -> None:
    data = build_batch([(b"a", b"1"), (b"b", b"2", (), 1234)], base_timestamp=1000)
    assert [r.timestamp for r in RecordBatch(data).records()] == [1000, 1234]


def test_build_batch_rejects_an_empty_batch() -> None:
    with pytest.raises(ValueError):
        build_batch([])


# -- records located, not decoded ------------------------------------------------------------------

@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_scan_records_finds_keys_values_and_deltas(codec: Compression) -> None:
    records = [SimpleRecord(b"a", b"1", [("h", b"0")], 1000), SimpleRecord(None, b"2", [("h", b"1")], 1001),
               SimpleRecord(b"c", None, [("h", b"2")], 1002)]
    batch = RecordBatch(build_batch(records, compression=codec, base_timestamp=1000))
    data = batch_records_data(batch)
    spans = scan_records(data, batch.record_count)
    assert [s[2] for s in spans] == [0, 1, 2]
    assert [s[3] for s in spans] == [0, 1, 2]
    assert data[spans[0][4]:spans[0][5]] == b"a" and spans[1][4] == -1
    assert [s[6] for s in spans] == [False, False, True]
    assert spans[0][0] == 0 and spans[-1][1] == len(data)


def test_scan_records_refuses_records_data_that_does_not_add_up() -> None:
    batch = RecordBatch(build_batch([SimpleRecord(b"a", b"1", (), 1000)]))
    data = batch_records_data(batch)
    for broken in (data[:-1], data + b"\x00"):
        with pytest.raises(KafkaError) as info:
            scan_records(broken, 1)
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE


# -- control batches -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_control_batch(kind: ControlRecordType) -> None:
    data = build_control_batch(kind, 42, 3, 9, base_offset=1000, timestamp=555)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.is_control and batch.is_transactional
    assert batch.producer_id == 42 and batch.producer_epoch == 3
    assert batch.base_sequence == -1 and batch.base_offset == 1000
    assert batch.max_timestamp == 555
    (record,) = batch.records()
    assert record.key == struct.pack(">hh", 0, kind)
    assert record.value == struct.pack(">hi", 0, 9)
    assert parse_control_record_key(record.key) is kind
    assert parse_end_transaction_marker(record) == EndTransactionMarker(kind, 9)
    assert batch.end_transaction_marker() == EndTransactionMarker(kind, 9)
    # kafka-python agrees on what it is.
    (theirs,) = KafkaPythonBatch(bytearray(data))
    assert theirs.type == kind
    with pytest.raises(KafkaError) as info:
        batch.validate(from_client=True)
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_control_record_key_parsing() -> None:
    assert parse_control_record_key(struct.pack(">hh", 0, 2)) is ControlRecordType.LEADER_CHANGE
    assert parse_control_record_key(struct.pack(">hh", 1, 99)) is ControlRecordType.UNKNOWN
    for bad in (None, b"\x00\x00\x00", struct.pack(">hh", -1, 0)):
        with pytest.raises(KafkaError) as info:
            parse_control_record_key(bad)
        assert info.value.code == ErrorCode.INVALID_RECORD


def test_end_transaction_marker_requires_commit_or_abort_and_a_value() -> None:
    leader_change = Record(0, 0, struct.pack(">hh", 0, 2), b"\x00\x00\x00\x00\x00\x00", [])
    short_value = Record(0, 0, struct.pack(">hh", 0, 1), b"\x00\x00", [])
    for record in (leader_change, short_value):
        with pytest.raises(KafkaError):
            parse_end_transaction_marker(record)


# -- validation and corruption ---------------------------------------------------------------------

def corruption(action, data: bytes | bytearray) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        action(data)
    return info.value


def test_flipped_byte_fails_the_crc() -> None:
    data = bytearray(build_batch(SAMPLE))
    data[RECORD_BATCH_OVERHEAD + 5] ^= 0x01
    batch = RecordBatch(data)
    assert not batch.is_valid()
    error = corruption(lambda d: RecordBatch(d).validate(), data)
    assert error.code == ErrorCode.CORRUPT_MESSAGE
    assert "CRC" in error.message


def test_crc_covers_attributes_but_not_base_offset_or_leader_epoch() -> None:
    data = bytearray(build_batch(SAMPLE))
    set_base_offset(data, 0, 123456)
    set_partition_leader_epoch(data, 0, 77)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.base_offset == 123456 and batch.partition_leader_epoch == 77
    assert decoded(data)[0][0] == 123456
    data[22] ^= 0x10  # transactional bit
    assert not batch.is_valid()


def test_bad_magic() -> None:
    data = bytearray(build_batch(SAMPLE))
    data[16] = 1
    error = corruption(lambda d: RecordBatch(d).validate(), data)
    assert error.code == ErrorCode.CORRUPT_MESSAGE and "magic 1" in error.message
    error = corruption(lambda d: list(iter_batches(d)), data)
    assert error.code == ErrorCode.CORRUPT_MESSAGE and "magic 1" in error.message


def test_batch_length_shorter_than_a_header() -> None:
    data = bytearray(build_batch(SAMPLE))
    struct.pack_into(">i", data, 8, 48)
    for action in (lambda d: RecordBatch(d).validate(), lambda d: list(iter_batches(d))):
        error = corruption(action, data)
        assert error.code == ErrorCode.CORRUPT_MESSAGE and "batch_length 48" in error.message


def test_negative_record_count() -> None:
    data = bytearray(build_batch(SAMPLE))
    struct.pack_into(">i", data, 57, -1)
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    error = corruption(lambda d: RecordBatch(d).validate(), data)
    assert error.code == ErrorCode.CORRUPT_MESSAGE and "record count" in error.message


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec(codec_id: int) -> None:
    data = bytearray(build_batch(SAMPLE))
    data[22] |= codec_id
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    error = corruption(lambda d: RecordBatch(d).validate(), data)
    assert error.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert RecordBatch(data).compression_id == codec_id


def test_truncated_batch() -> None:
    data = build_batch(SAMPLE)
    for cut in (1, 17, RECORD_BATCH_OVERHEAD - 1, RECORD_BATCH_OVERHEAD, len(data) - 1):
        error = corruption(lambda d: list(iter_batches(d)), data[:cut])
        assert error.code == ErrorCode.CORRUPT_MESSAGE and "truncated" in error.message
    error = corruption(lambda d: RecordBatch(d).validate(), data[: len(data) - 1])
    assert "truncated" in error.message
    error = corruption(RecordBatch, data[:30])
    assert error.code == ErrorCode.CORRUPT_MESSAGE


def test_client_rules() -> None:
    ok = build_batch(SAMPLE, producer_id=5, producer_epoch=0, base_sequence=0)
    RecordBatch(ok).validate(from_client=True)
    missing_sequence = build_batch(SAMPLE, producer_id=5, producer_epoch=0)
    error = corruption(lambda d: RecordBatch(d).validate(from_client=True), missing_sequence)
    assert error.code == ErrorCode.INVALID_RECORD and "sequence" in error.message
    RecordBatch(missing_sequence).validate()


def test_records_that_do_not_match_the_record_count() -> None:
    data = bytearray(build_batch(SAMPLE))
    for count, words in ((2, "remain after"), (4, "past the end")):
        struct.pack_into(">i", data, 57, count)
        error = corruption(lambda d: list(RecordBatch(d).records()), data)
        assert error.code == ErrorCode.INVALID_RECORD and words in error.message


def test_record_whose_length_disagrees_with_its_fields() -> None:
    data = bytearray(build_batch([(b"k", b"v", (), 0)]))
    data[RECORD_BATCH_OVERHEAD] += 2  # record length varint (zigzag, small): claims one more byte
    data += b"\x00"
    struct.pack_into(">i", data, 8, len(data) - 12)
    error = corruption(lambda d: list(RecordBatch(d).records()), data)
    assert error.code == ErrorCode.INVALID_RECORD and "declares" in error.message


def test_corrupt_compressed_payload() -> None:
    data = bytearray(build_batch(SAMPLE * 10, compression=Compression.GZIP))
    data[-10:] = bytes(10)
    error = corruption(lambda d: list(RecordBatch(d).records()), data)
    assert error.code == ErrorCode.CORRUPT_MESSAGE


def test_decompression_limit() -> None:
    data = build_batch([(None, bytes(1 << 20))], compression=Compression.ZSTD)
    assert len(data) < 1000
    error = corruption(lambda d: list(RecordBatch(d).records(max_uncompressed_size=1 << 16)), data)
    assert error.code == ErrorCode.CORRUPT_MESSAGE and "limit" in error.message


def test_records_are_decoded_lazily() -> None:
    data = bytearray(build_batch(SAMPLE, compression=Compression.GZIP))
    data[-10:] = bytes(10)
    records = RecordBatch(data).records()  # nothing decoded yet: no error
    with pytest.raises(KafkaError):
        next(records)


# -- splitting and scanning ------------------------------------------------------------------------

def concatenated(count: int) -> bytes:
    return b"".join(
        build_batch([(b"k%d" % i, b"v" * i)], base_offset=i, compression=Compression(i % 5))
        for i in range(count)
    )


def test_iter_batches_splits_a_concatenation() -> None:
    data = concatenated(12)
    batches = list(iter_batches(data))
    assert [b.base_offset for b in batches] == list(range(12))
    assert sum(b.size for b in batches) == len(data)
    for batch in batches:
        batch.validate()
    assert list(iter_batches(data, 0, 0)) == []
    second = batches[1].position
    assert [b.base_offset for b in iter_batches(data, second, batches[3].position)] == [1, 2]
    with pytest.raises(ValueError):
        list(iter_batches(data, 0, len(data) + 1))


def test_scan_stops_at_a_torn_tail() -> None:
    data = concatenated(5)
    whole = len(data)
    torn = data + build_batch(SAMPLE)[:100]
    scan = BatchScan(torn)
    assert len(list(scan)) == 5
    assert scan.valid_end == whole and scan.truncated
    assert scan.error is not None and scan.error.code == ErrorCode.CORRUPT_MESSAGE
    assert valid_prefix_length(torn) == whole
    assert valid_prefix_length(data + b"\x00" * 5) == whole
    clean = BatchScan(data)
    assert len(list(clean)) == 5 and clean.error is None and not clean.truncated


def test_scan_stops_at_corruption() -> None:
    data = bytearray(concatenated(5))
    third = list(iter_batches(data))[2]
    data[third.position + RECORD_BATCH_OVERHEAD] ^= 0xFF
    scan = BatchScan(data)
    assert [b.base_offset for b in scan] == [0, 1]
    assert scan.valid_end == third.position and not scan.truncated
    assert "CRC" in scan.error.message
    zeroed = bytes(concatenated(2)) + bytes(200)  # preallocated file tail
    scan = BatchScan(zeroed)
    assert len(list(scan)) == 2 and not scan.truncated


# -- patching --------------------------------------------------------------------------------------

def test_set_log_append_time_recomputes_the_crc() -> None:
    first = build_batch(SAMPLE)
    buffer = bytearray(first + build_batch(SAMPLE, compression=Compression.SNAPPY))
    position = len(first)
    set_log_append_time(buffer, position, 1_800_000_000_000)
    batch = RecordBatch(buffer, position)
    batch.validate()
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 1_800_000_000_000
    assert batch.compression == Compression.SNAPPY
    assert {r.timestamp for r in batch.records()} == {1_800_000_000_000}
    theirs = KafkaPythonBatch(bytearray(batch.raw()))
    assert theirs.validate_crc() and theirs.timestamp_type == 1
    set_max_timestamp(buffer, position, TimestampType.CREATE_TIME, 5)
    batch.validate()
    assert batch.timestamp_type is TimestampType.CREATE_TIME and batch.max_timestamp == 5
    RecordBatch(buffer).validate()  # the neighbour is untouched


def test_patching_works_through_a_memoryview() -> None:
    buffer = bytearray(build_batch(SAMPLE))
    view = memoryview(buffer)
    set_base_offset(view, 0, 99)
    set_log_append_time(view, 0, 10)
    batch = RecordBatch(buffer)
    batch.validate()
    assert batch.base_offset == 99 and batch.max_timestamp == 10
