"""Kafka record batches (message format v2, "magic 2"): read in place, validate, patch, build.

Record data stays bytes from Produce to disk to Fetch. A :class:`RecordBatch` is a view over one
batch inside a larger buffer: its header fields are read straight from the buffer with precompiled
structs, nothing is decoded until asked, and the records themselves are only parsed (and
decompressed) by :meth:`RecordBatch.records`, for the few features that need them. Where only
keys, deltas and record bounds matter (compaction, key and timestamp checks on append),
:func:`scan_records` locates the records in :func:`batch_records_data` without decoding them.

Layout of a batch (big-endian; the CRC-32C covers ``attributes`` to the end of the batch)::

    offset  size  field
         0     8  base_offset
         8     4  batch_length            bytes after this field: size = 12 + batch_length
        12     4  partition_leader_epoch
        16     1  magic                   2
        17     4  crc                     CRC-32C (Castagnoli), unsigned
        21     2  attributes              bits 0-2 codec, 3 timestamp type, 4 transactional,
                                          5 control, 6 delete horizon in base_timestamp
        23     4  last_offset_delta
        27     8  base_timestamp
        35     8  max_timestamp
        43     8  producer_id
        51     2  producer_epoch
        53     4  base_sequence
        57     4  record_count
        61     -  records, compressed as one stream when the codec is not NONE

Each record: length varint, attributes int8, timestamp_delta varlong, offset_delta varint, key
(varint length, -1 for null, bytes), value (likewise), header count varint, and per header a key
(varint length, UTF-8) and a value (varint length, -1 for null). Varints are zigzag-encoded.

Problems map to Kafka's error codes as the Java broker reports them: broken framing, magic, sizes or
CRC are ``CORRUPT_MESSAGE``; an unknown codec is ``UNSUPPORTED_COMPRESSION_TYPE``; a well-framed
batch whose contents are inconsistent (record structure, or the rules for batches written by
clients) is ``INVALID_RECORD``.
"""
from __future__ import annotations

import functools
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple, Union

from trafka.wire.compression import Compression, compress, decompress
from trafka.wire.errors import ErrorCode, KafkaError

__all__ = [
    "RECORD_BATCH_OVERHEAD",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "Buffer",
    "TimestampType",
    "ControlRecordType",
    "BatchHeader",
    "Record",
    "SimpleRecord",
    "EndTransactionMarker",
    "RecordBatch",
    "BatchScan",
    "iter_batches",
    "valid_prefix_length",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_max_timestamp",
    "set_log_append_time",
    "build_batch",
    "build_control_batch",
    "parse_control_record_key",
    "parse_end_transaction_marker",
    "batch_records_data",
    "RecordSpan",
    "scan_records",
    "crc32c",
]


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``, the checksum record batches carry; hardware-computed where the
    CPU has the instruction.

    The ``crc32c`` package is loaded by the first checksum rather than with this module: its import
    pulls in ``importlib.metadata``, some 15 ms of a broker start that needs no checksum.
    """
    return _crc32c()(data)


@functools.cache
def _crc32c() -> Callable[[bytes | bytearray | memoryview], int]:
    from crc32c import crc32c as compute

    return compute


Buffer = Union[bytes, bytearray, memoryview]

MAGIC = 2
LOG_OVERHEAD = 12  # base_offset + batch_length: the part of a batch not counted by batch_length
RECORD_BATCH_OVERHEAD = 61
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT32_MAX = 2**31 - 1

# Field positions inside a batch.
_BASE_OFFSET = 0
_BATCH_LENGTH = 8
_PARTITION_LEADER_EPOCH = 12
_MAGIC = 16
_CRC = 17
_ATTRIBUTES = 21
_LAST_OFFSET_DELTA = 23
_BASE_TIMESTAMP = 27
_MAX_TIMESTAMP = 35
_PRODUCER_ID = 43
_PRODUCER_EPOCH = 51
_BASE_SEQUENCE = 53
_RECORD_COUNT = 57

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_new_tuple = tuple.__new__
_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_LENGTH_AND_MAGIC = struct.Struct(">i4xb")  # batch_length, (partition_leader_epoch), magic

# Attribute bits.
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_DELETE_HORIZON_MASK = 0x40

# Control records: key = (version int16, type int16); end transaction marker value =
# (version int16, coordinator_epoch int32).
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER_VALUE = struct.Struct(">hi")
_CONTROL_KEY_VERSION = 0
_END_TXN_MARKER_VERSION = 0


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    """The type in a control record's key. ``UNKNOWN`` stands for ids this broker does not know."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class BatchHeader(NamedTuple):
    """All header fields of a batch, decoded at once (see :meth:`RecordBatch.header`)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int


@dataclass(slots=True)
class Record:
    """One decoded record, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to encode; ``timestamp=None`` means the base timestamp or the time now."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """The control record that commits or aborts a producer's transaction on one partition."""

    type: ControlRecordType
    coordinator_epoch: int


def _codec(attributes: int, position: int) -> Compression:
    codec = attributes & _CODEC_MASK
    if codec > Compression.ZSTD:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"record batch at byte {position} uses unknown compression codec id {codec}",
        )
    return Compression(codec)


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


class RecordBatch:
    """A view over the batch at ``buffer[position:]``; fields are read from the buffer on access.

    Constructing a view only requires a whole batch header to be present; :meth:`validate` checks
    that the batch itself is sound. Patching the buffer (``set_base_offset`` ...) is seen by views.
    """

    __slots__ = ("buffer", "position")

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        if position < 0 or len(buffer) - position < RECORD_BATCH_OVERHEAD:
            raise _corrupt(
                f"record batch at byte {position} is truncated: {max(len(buffer) - position, 0)} "
                f"bytes remain, a batch header takes {RECORD_BATCH_OVERHEAD}"
            )
        self.buffer = buffer
        self.position = position

    def __repr__(self) -> str:
        return (
            f"RecordBatch(position={self.position}, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, size={self.size}, magic={self.magic}, "
            f"record_count={self.record_count}, codec={self.attributes & _CODEC_MASK}, "
            f"producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"base_sequence={self.base_sequence}, transactional={self.is_transactional}, "
            f"control={self.is_control})"
        )

    # -- header fields, read in place ------------------------------------------------------------

    def header(self) -> BatchHeader:
        """Every header field with one unpack: cheaper than several property reads."""
        return _new_tuple(BatchHeader, _HEADER.unpack_from(self.buffer, self.position))

    @property
    def base_offset(self) -> int:
        return _INT64.unpack_from(self.buffer, self.position)[0]

    @property
    def batch_length(self) -> int:
        return _INT32.unpack_from(self.buffer, self.position + _BATCH_LENGTH)[0]

    @property
    def size(self) -> int:
        """Bytes the whole batch takes: ``LOG_OVERHEAD + batch_length``."""
        return LOG_OVERHEAD + _INT32.unpack_from(self.buffer, self.position + _BATCH_LENGTH)[0]

    @property
    def partition_leader_epoch(self) -> int:
        return _INT32.unpack_from(self.buffer, self.position + _PARTITION_LEADER_EPOCH)[0]

    @property
    def magic(self) -> int:
        return _INT8.unpack_from(self.buffer, self.position + _MAGIC)[0]

    @property
    def crc(self) -> int:
        return _UINT32.unpack_from(self.buffer, self.position + _CRC)[0]

    @property
    def attributes(self) -> int:
        return _INT16.unpack_from(self.buffer, self.position + _ATTRIBUTES)[0]

    @property
    def compression_id(self) -> int:
        """The codec bits of the attributes, which may name no known codec (see ``compression``)."""
        return self.attributes & _CODEC_MASK

    @property
    def compression(self) -> Compression:
        """The batch's codec; ``KafkaError(UNSUPPORTED_COMPRESSION_TYPE)`` for ids 5 to 7."""
        return _codec(self.attributes, self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & _TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """Set by log compaction: when tombstones and markers in this batch may be removed."""
        if self.attributes & _DELETE_HORIZON_MASK:
            return self.base_timestamp
        return None

    @property
    def last_offset_delta(self) -> int:
        return _INT32.unpack_from(self.buffer, self.position + _LAST_OFFSET_DELTA)[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def base_timestamp(self) -> int:
        return _INT64.unpack_from(self.buffer, self.position + _BASE_TIMESTAMP)[0]

    @property
    def max_timestamp(self) -> int:
        return _INT64.unpack_from(self.buffer, self.position + _MAX_TIMESTAMP)[0]

    @property
    def producer_id(self) -> int:
        return _INT64.unpack_from(self.buffer, self.position + _PRODUCER_ID)[0]

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def producer_epoch(self) -> int:
        return _INT16.unpack_from(self.buffer, self.position + _PRODUCER_EPOCH)[0]

    @property
    def base_sequence(self) -> int:
        return _INT32.unpack_from(self.buffer, self.position + _BASE_SEQUENCE)[0]

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from 2**31 - 1 to 0."""
        base_sequence = self.base_sequence
        if base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)

    @property
    def record_count(self) -> int:
        return _INT32.unpack_from(self.buffer, self.position + _RECORD_COUNT)[0]

    def raw(self) -> memoryview:
        """The batch's bytes, without copying (keep in mind a live view pins a bytearray's size)."""
        return memoryview(self.buffer)[self.position : self.position + self.size]

    # -- integrity -------------------------------------------------------------------------------

    def compute_crc(self) -> int:
        """CRC-32C of ``attributes`` through the end of the batch."""
        start = self.position + _ATTRIBUTES
        return crc32c(memoryview(self.buffer)[start : self.position + self.size])

    def validate(self, *, from_client: bool = False) -> None:
        """Raise ``KafkaError`` unless the batch is sound.

        Always checked (``CORRUPT_MESSAGE``): magic is 2, ``batch_length`` covers at least a
        header, the batch fits in the buffer, the CRC matches, ``record_count`` is not negative;
        then the codec is one Kafka knows (``UNSUPPORTED_COMPRESSION_TYPE``).

        With ``from_client=True``, also the rules Kafka applies to batches producers send
        (``INVALID_RECORD``): at least one record, ``record_count == last_offset_delta + 1``, not a
        control batch, and a base sequence whenever there is a producer id. (Log compaction leaves
        batches that break the first two rules, so they do not apply to replicated or stored data.)
        The records themselves are not decoded.
        """
        buffer, position = self.buffer, self.position
        header = self.header()
        batch_length = header.batch_length
        if header.magic != MAGIC:
            raise _corrupt(_bad_magic_message(position, header.magic))
        where = f"record batch at byte {position}"
        if batch_length < _MIN_BATCH_LENGTH:
            raise _corrupt(
                f"{where} has batch_length {batch_length}, less than the {_MIN_BATCH_LENGTH} "
                "bytes of its own header"
            )
        available = len(buffer) - position
        if LOG_OVERHEAD + batch_length > available:
            raise _corrupt(
                f"{where} is truncated: its size is {LOG_OVERHEAD + batch_length} bytes but only "
                f"{available} remain"
            )
        computed_crc = crc32c(
            memoryview(buffer)[position + _ATTRIBUTES : position + LOG_OVERHEAD + batch_length]
        )
        if header.crc != computed_crc:
            raise _corrupt(
                f"{where} is corrupt: stored CRC-32C 0x{header.crc:08x}, "
                f"computed 0x{computed_crc:08x}"
            )
        if header.record_count < 0:
            raise _corrupt(f"{where} has a negative record count {header.record_count}")
        _codec(header.attributes, position)
        if from_client:
            self._validate_client_rules(header, where)

    @staticmethod
    def _validate_client_rules(header: BatchHeader, where: str) -> None:
        offsets = header.last_offset_delta + 1
        if offsets <= 0:
            raise _invalid(
                f"{where} has an invalid offset range: last_offset_delta {header.last_offset_delta}"
            )
        if header.record_count <= 0:
            raise _invalid(f"{where} has an invalid record count {header.record_count}")
        if header.record_count != offsets:
            raise _invalid(
                f"{where} has {header.record_count} records but spans {offsets} offsets "
                f"(last_offset_delta {header.last_offset_delta})"
            )
        if header.attributes & _CONTROL_MASK:
            raise _invalid(f"{where} is a control batch; clients may not write control records")
        if header.producer_id > NO_PRODUCER_ID and header.base_sequence < 0:
            raise _invalid(
                f"{where} has producer id {header.producer_id} but invalid base sequence "
                f"{header.base_sequence}"
            )

    def is_valid(self) -> bool:
        """Whether :meth:`validate` (without client rules) passes."""
        try:
            self.validate()
        except KafkaError:
            return False
        return True

    # -- records ---------------------------------------------------------------------------------

    def records(self, *, max_uncompressed_size: int | None = None) -> Iterator[Record]:
        """Decode the records, lazily: nothing happens until the first ``next()``.

        A compressed batch is decompressed whole on first use (at most ``max_uncompressed_size``
        bytes). With ``LOG_APPEND_TIME`` every record's timestamp is the batch's ``max_timestamp``.
        Raises ``INVALID_RECORD`` for a malformed record, a record count that does not match the
        data, or bytes left after the last record; ``CORRUPT_MESSAGE`` for data that does not
        decompress.
        """
        header = self.header()
        if header.record_count < 0:
            raise _invalid(f"invalid record count {header.record_count} in record batch")
        if header.record_count == 0:
            return
        start = self.position + RECORD_BATCH_OVERHEAD
        end = self.position + LOG_OVERHEAD + header.batch_length
        if not start <= end <= len(self.buffer):
            raise _corrupt(f"record batch at byte {self.position} has an impossible batch_length")
        payload = memoryview(self.buffer)[start:end]
        codec = _codec(header.attributes, self.position)
        data = decompress(codec, payload, max_size=max_uncompressed_size)
        if header.attributes & _TIMESTAMP_TYPE_MASK:
            log_append_time: int | None = header.max_timestamp
        else:
            log_append_time = None
        yield from _decode_records(
            data, header.record_count, header.base_offset, header.base_timestamp, log_append_time
        )

    def end_transaction_marker(self) -> EndTransactionMarker:
        """The COMMIT or ABORT marker a control batch carries."""
        if not self.is_control:
            raise ValueError("not a control batch")
        for record in self.records():
            return parse_end_transaction_marker(record)
        raise _invalid("control batch has no control record")


# -- varints ---------------------------------------------------------------------------------------

def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """A zigzag varint (up to 64 bits) at ``position``; returns (value, position after it)."""
    byte = data[position]
    position += 1
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), position
    value = byte & 0x7F
    shift = 7
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), position
        shift += 7
        if shift > 63:
            raise _invalid("varint is longer than 10 bytes")


_SMALL_VARINTS = [bytes([(n << 1) if n >= 0 else ((-n << 1) - 1)]) for n in range(-64, 64)]


def encode_varint(value: int) -> bytes:
    """``value`` zigzag-encoded as a varint (varlong for values beyond 32 bits)."""
    if -64 <= value < 64:
        return _SMALL_VARINTS[value + 64]
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


# -- decoding records ------------------------------------------------------------------------------

def _decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> Iterator[Record]:
    position = 0
    size = len(data)
    varint = read_varint  # (a local name: this loop runs once a record)
    for index in range(count):
        try:
            length, position = varint(data, position)
            record_start = position
            record_end = position + length
            if length < 0 or record_end > size:
                raise _invalid(
                    f"record {index} declares {length} bytes but {size - position} remain "
                    "in the batch"
                )
            position += 1  # record attributes: unused
            timestamp_delta, position = varint(data, position)
            offset_delta, position = varint(data, position)
            key_length, position = varint(data, position)
            if key_length < 0:
                key = None
                if key_length != -1:
                    raise _invalid(f"record {index} has invalid key length {key_length}")
            else:
                key = data[position : position + key_length]
                position += key_length
            value_length, position = varint(data, position)
            if value_length < 0:
                value = None
                if value_length != -1:
                    raise _invalid(f"record {index} has invalid value length {value_length}")
            else:
                value = data[position : position + value_length]
                position += value_length
            header_count, position = varint(data, position)
            if header_count < 0 or header_count > record_end - position:
                raise _invalid(f"record {index} has invalid header count {header_count}")
            headers: list[tuple[str, bytes | None]] = []
            for _ in range(header_count):
                header_key_length, position = varint(data, position)
                if header_key_length < 0:
                    raise _invalid(
                        f"record {index} has invalid header key length {header_key_length}"
                    )
                header_key = str(data[position : position + header_key_length], "utf-8")
                position += header_key_length
                header_value_length, position = varint(data, position)
                if header_value_length < 0:
                    header_value = None
                else:
                    header_value = data[position : position + header_value_length]
                    position += header_value_length
                headers.append((header_key, header_value))
        except IndexError:
            raise _invalid(f"record {index} ends past the end of the batch") from None
        except UnicodeDecodeError as exc:
            raise _invalid(f"record {index} has a header key that is not UTF-8: {exc}") from None
        if position != record_end:
            raise _invalid(
                f"record {index} declares {length} bytes but its fields take "
                f"{position - record_start}"
            )
        yield Record(
            base_offset + offset_delta,
            base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
            key,
            value,
            headers,
        )
    if position != size:
        raise _invalid(f"{size - position} bytes remain after the last of {count} records")


# -- records located, not decoded -----------------------------------------------------------------

def batch_records_data(batch: RecordBatch) -> bytes:
    """The records data of ``batch``, decompressed."""
    start = batch.position + RECORD_BATCH_OVERHEAD
    end = batch.position + batch.size
    payload = memoryview(batch.buffer)[start:end]
    codec = batch.compression
    if codec is Compression.NONE:
        return bytes(payload)
    return decompress(codec, payload)


# One record inside a batch's (decompressed) data: where it starts and ends, its offset and timestamp
# deltas, where its key lies (-1, -1 for a null key) and whether its value is null.
RecordSpan = tuple[int, int, int, int, int, int, bool]


def scan_records(data: bytes, count: int) -> list[RecordSpan]:
    """The ``count`` records of a batch's records data, located without decoding headers or copying."""
    spans: list[RecordSpan] = []
    read = read_varint
    position = 0
    size = len(data)
    try:
        for _ in range(count):
            start = position
            length, position = read(data, position)
            end = position + length
            if length < 0 or end > size:
                raise _corrupt(f"a record declares {length} bytes but {size - position} remain")
            position += 1  # record attributes
            timestamp_delta, position = read(data, position)
            offset_delta, position = read(data, position)
            key_length, position = read(data, position)
            if key_length < 0:
                key_start = key_end = -1
            else:
                key_start = position
                key_end = position = position + key_length
            value_length, position = read(data, position)
            if position > end or key_end > end:
                raise _corrupt("a record's fields run past its end")
            spans.append((start, end, offset_delta, timestamp_delta, key_start, key_end, value_length < 0))
            position = end
    except IndexError:
        raise _corrupt("a record ends past the end of its batch") from None
    if position != size:
        raise _corrupt(f"{size - position} bytes remain after the last of {count} records")
    return spans


# -- control records -------------------------------------------------------------------------------

def parse_control_record_key(key: bytes | None) -> ControlRecordType:
    """The type named by a control record's key (``UNKNOWN`` for ids this broker does not know)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise _invalid(
            f"control record key must have at least {_CONTROL_KEY.size} bytes, "
            f"found {0 if key is None else len(key)}"
        )
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise _invalid(f"control record key has invalid version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


def parse_end_transaction_marker(record: Record) -> EndTransactionMarker:
    """The COMMIT or ABORT marker in a control record."""
    control_type = parse_control_record_key(record.key)
    if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise _invalid(
            f"control record of type {control_type.name} is not an end transaction marker"
        )
    value = record.value
    if value is None or len(value) < _END_TXN_MARKER_VALUE.size:
        raise _invalid(
            f"end transaction marker value must have at least {_END_TXN_MARKER_VALUE.size} bytes, "
            f"found {0 if value is None else len(value)}"
        )
    version, coordinator_epoch = _END_TXN_MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise _invalid(f"end transaction marker has invalid version {version}")
    return EndTransactionMarker(control_type, coordinator_epoch)


# -- splitting a buffer into batches ---------------------------------------------------------------

def _bad_magic_message(position: int, magic: int) -> str:
    legacy = " (a legacy message set)" if magic in (0, 1) else ""
    return (
        f"record batch at byte {position} has magic {magic}{legacy}; only magic {MAGIC} record "
        "batches are supported"
    )


def _framing_error(buffer: Buffer, position: int, end: int) -> KafkaError | None:
    """Why the bytes at ``position`` are not a whole magic-2 batch ending by ``end``, or None."""
    remaining = end - position
    if remaining < RECORD_BATCH_OVERHEAD:
        if remaining > _MAGIC:
            (magic,) = _INT8.unpack_from(buffer, position + _MAGIC)
            if magic != MAGIC:
                return _corrupt(_bad_magic_message(position, magic))
        return _corrupt(
            f"record batch at byte {position} is truncated: {remaining} bytes remain, "
            f"a batch header takes {RECORD_BATCH_OVERHEAD}"
        )
    batch_length, magic = _LENGTH_AND_MAGIC.unpack_from(buffer, position + _BATCH_LENGTH)
    if magic != MAGIC:
        return _corrupt(_bad_magic_message(position, magic))
    if batch_length < _MIN_BATCH_LENGTH:
        return _corrupt(
            f"record batch at byte {position} has batch_length {batch_length}, less than the "
            f"{_MIN_BATCH_LENGTH} bytes of its own header"
        )
    if LOG_OVERHEAD + batch_length > remaining:
        return _corrupt(
            f"record batch at byte {position} is truncated: its size is "
            f"{LOG_OVERHEAD + batch_length} bytes but only {remaining} remain"
        )
    return None


def _check_range(buffer: Buffer, position: int, end: int | None) -> int:
    if end is None:
        end = len(buffer)
    if not 0 <= position <= end <= len(buffer):
        raise ValueError(f"invalid range [{position}, {end}) of a {len(buffer)}-byte buffer")
    return end


def iter_batches(
    buffer: Buffer, position: int = 0, end: int | None = None
) -> Iterator[RecordBatch]:
    """Views of the consecutive batches in ``buffer[position:end]``, which must hold whole batches.

    Only the framing is checked here (magic, ``batch_length``, that each batch fits): anything else
    raises ``KafkaError(CORRUPT_MESSAGE)``, including a partial batch at the end. Call
    :meth:`RecordBatch.validate` on each batch for CRC and the rest.
    """
    end = _check_range(buffer, position, end)
    while position < end:
        error = _framing_error(buffer, position, end)
        if error is not None:
            raise error
        batch = RecordBatch(buffer, position)
        yield batch
        position += batch.size


class BatchScan:
    """The whole, valid batches at the front of ``buffer[position:end]``, for log recovery.

    Iterating yields each batch that frames correctly and passes :meth:`RecordBatch.validate`, and
    stops, without raising, at the first bytes that do not. Afterwards ``valid_end`` is the position
    just past the last good batch, ``error`` says why the scan stopped before ``end`` (None if it
    did not), and ``truncated`` tells a torn tail (the bytes left could begin a batch that was not
    completely written) from corruption.
    """

    def __init__(self, buffer: Buffer, position: int = 0, end: int | None = None) -> None:
        self.buffer = buffer
        self.end = _check_range(buffer, position, end)
        self.valid_end = position
        self.error: KafkaError | None = None
        self.truncated = False

    def __iter__(self) -> Iterator[RecordBatch]:
        buffer, end = self.buffer, self.end
        position = self.valid_end
        while position < end:
            error = _framing_error(buffer, position, end)
            if error is not None:
                self.error = error
                self.truncated = _is_torn_tail(buffer, position, end)
                return
            batch = RecordBatch(buffer, position)
            try:
                batch.validate()
            except KafkaError as exc:
                self.error = exc
                return
            position += batch.size
            self.valid_end = position
            yield batch


def _is_torn_tail(buffer: Buffer, position: int, end: int) -> bool:
    """Whether ``buffer[position:end]`` could be the beginning of a batch cut short."""
    remaining = end - position
    if remaining < _MAGIC + 1:
        return True
    batch_length, magic = _LENGTH_AND_MAGIC.unpack_from(buffer, position + _BATCH_LENGTH)
    return (
        magic == MAGIC
        and batch_length >= _MIN_BATCH_LENGTH
        and LOG_OVERHEAD + batch_length > remaining
    )


def valid_prefix_length(buffer: Buffer, position: int = 0, end: int | None = None) -> int:
    """How many bytes from ``position`` are whole, valid batches (see :class:`BatchScan`)."""
    scan = BatchScan(buffer, position, end)
    for _ in scan:
        pass
    return scan.valid_end - position


# -- patching in place -----------------------------------------------------------------------------

def set_base_offset(buffer: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Assign the batch's offsets (the base offset is not covered by the CRC)."""
    _INT64.pack_into(buffer, position + _BASE_OFFSET, base_offset)


def set_partition_leader_epoch(buffer: bytearray | memoryview, position: int, epoch: int) -> None:
    """Stamp the leader epoch the batch was appended under (not covered by the CRC)."""
    _INT32.pack_into(buffer, position + _PARTITION_LEADER_EPOCH, epoch)


def set_max_timestamp(
    buffer: bytearray | memoryview, position: int, timestamp_type: TimestampType, max_timestamp: int
) -> None:
    """Set the timestamp type bit and ``max_timestamp``; recompute the CRC if anything changed."""
    batch = RecordBatch(buffer, position)
    attributes = batch.attributes
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        new_attributes = attributes | _TIMESTAMP_TYPE_MASK
    else:
        new_attributes = attributes & ~_TIMESTAMP_TYPE_MASK
    if new_attributes == attributes and batch.max_timestamp == max_timestamp:
        return
    _INT16.pack_into(buffer, position + _ATTRIBUTES, new_attributes)
    _INT64.pack_into(buffer, position + _MAX_TIMESTAMP, max_timestamp)
    _UINT32.pack_into(buffer, position + _CRC, batch.compute_crc())


def set_log_append_time(buffer: bytearray | memoryview, position: int, timestamp: int) -> None:
    """Mark the batch ``LOG_APPEND_TIME`` at ``timestamp`` (every record's time); fixes the CRC."""
    set_max_timestamp(buffer, position, TimestampType.LOG_APPEND_TIME, timestamp)


# -- building batches ------------------------------------------------------------------------------

# A record to encode: offset delta, timestamp, key, value, headers.
_Entry = tuple[int, int, Buffer | None, Buffer | None, Sequence[tuple[str, Buffer | None]]]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: Sequence[tuple[str, Buffer | None]],
) -> list[Buffer]:
    parts: list[Buffer] = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        parts.append(b"\x01")
    else:
        parts += (encode_varint(len(key)), key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts += (encode_varint(len(value)), value)
    parts.append(encode_varint(len(headers)))
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8")
        parts += (encode_varint(len(encoded_key)), encoded_key)
        if header_value is None:
            parts.append(b"\x01")
        else:
            parts += (encode_varint(len(header_value)), header_value)
    body_size = sum(map(len, parts))
    parts.insert(0, encode_varint(body_size))
    return parts


def build_batch(
    records: Sequence[SimpleRecord | Record | tuple],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    base_timestamp: int | None = None,
) -> bytes:
    """Encode one batch. Uncompressed, its bytes are exactly those the Java client's builder writes
    for the same records and settings.

    ``records`` are :class:`SimpleRecord`, tuples of its fields (``(key, value)``, ``(key, value,
    headers)``, ``(key, value, headers, timestamp)``), or decoded :class:`Record` s, which keep
    their offsets (relative to ``base_offset``) and timestamps. Other records take consecutive
    offsets from ``base_offset``. ``base_timestamp`` defaults to the first record's timestamp;
    ``max_timestamp`` is the largest record timestamp.
    """
    if not records:
        raise ValueError("a record batch holds at least one record")
    default_timestamp = base_timestamp if base_timestamp is not None else _now_ms()
    entries: list[_Entry] = []
    for index, record in enumerate(records):
        if isinstance(record, Record):
            offset_delta = record.offset - base_offset
            timestamp = record.timestamp
        else:
            if isinstance(record, tuple):
                record = SimpleRecord(*record)
            offset_delta = index
            timestamp = default_timestamp if record.timestamp is None else record.timestamp
        entries.append((offset_delta, timestamp, record.key, record.value, record.headers))
    last_offset_delta = max(entry[0] for entry in entries)
    if not 0 <= last_offset_delta <= _INT32_MAX or min(entry[0] for entry in entries) < 0:
        raise ValueError("record offsets must lie in [base_offset, base_offset + 2**31 - 1]")
    if base_timestamp is None:
        base_timestamp = entries[0][1]
    parts: list[Buffer] = []
    for offset_delta, timestamp, key, value, headers in entries:
        parts += _encode_record(offset_delta, timestamp - base_timestamp, key, value, headers)
    payload: Buffer = b"".join(parts)
    codec = Compression(compression)
    if codec is not Compression.NONE:
        payload = compress(codec, payload)
    attributes = codec | (TimestampType(timestamp_type) << 3)
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    if is_control:
        attributes |= _CONTROL_MASK
    max_timestamp = max(entry[1] for entry in entries)
    batch = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(entries),
    )
    batch[RECORD_BATCH_OVERHEAD:] = payload
    _UINT32.pack_into(batch, _CRC, crc32c(memoryview(batch)[_ATTRIBUTES:]))
    return bytes(batch)


def build_control_batch(
    kind: ControlRecordType,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    *,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker batch, as the broker writes it: one control record committing or
    aborting the producer's transaction, in a transactional control batch without sequences."""
    kind = ControlRecordType(kind)
    if kind not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise ValueError(f"an end transaction marker is COMMIT or ABORT, not {kind.name}")
    if timestamp is None:
        timestamp = _now_ms()
    record = SimpleRecord(
        key=_CONTROL_KEY.pack(_CONTROL_KEY_VERSION, kind),
        value=_END_TXN_MARKER_VALUE.pack(_END_TXN_MARKER_VERSION, coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
