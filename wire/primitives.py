"""Runtime support for the generated message classes in ``trafka.wire.messages``.

The generated encoders and decoders are straight-line functions, one per (struct, version) layout.
They inline fixed-width fields as precompiled ``struct.Struct`` packs and call the helpers below for
everything of variable length:

- readers have the signature ``read_x(buf: memoryview, pos: int) -> (value, new_pos)`` and validate
  every length against the bytes that remain, so a bogus length raises ``DecodeError`` instead of
  allocating or looping;
- writers have the signature ``write_x(w: Writer, value) -> None``.

"Compact" variants are the flexible-version encodings (unsigned varint of length + 1, 0 for null);
the plain ones are the classic encodings (int16 string length, int32 bytes/array length, -1 for null).

``Struct`` and ``Message`` are the base classes of every generated class: keyword construction is
generated per class, equality and ``repr`` come from ``__slots__`` here, and ``Message`` adds the
version-dispatched ``decode``/``encode``/``encode_into``.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple, TypeVar, Union

from trafka.wire.chunks import Chunk, FileSlice, join_chunks

T = TypeVar("T")
Reader = Callable[[memoryview, int], tuple[T, int]]

Records = Union[bytes, bytearray, memoryview, FileSlice]
"""What a ``records`` field accepts when encoding; decoding yields a ``memoryview`` into the frame."""

ZERO_UUID = uuid.UUID(int=0)


class DecodeError(ValueError):
    """The bytes are not a valid encoding of the message at that version."""


class EncodeError(ValueError):
    """The message cannot be encoded at that version (a value the version cannot carry)."""


def absent_field_error(field: str, value: Any, field_versions: str) -> EncodeError:
    """A non-ignorable field holds a non-default value that the version being encoded lacks."""
    return EncodeError(
        f"{field}={value!r} is not the default, but the field exists only in versions "
        f"{field_versions} and is not ignorable"
    )


def null_field_error(field: str) -> EncodeError:
    return EncodeError(f"{field} is None, but the field is not nullable at this version")


class _Unset:
    """Marks a list argument left out of a constructor where ``None`` (null) is a meaningful value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


# ---------------------------------------------------------------------------------------------
# Writer


class Writer(bytearray):
    """Accumulates an encoding; file slices (and other out-of-band chunks) are kept as their own chunks.

    Generated encoders append to the writer with ``+=``/``append`` like to any bytearray.
    ``write_chunk`` closes the bytes written so far into a chunk and adds the given one after it,
    so a Fetch response carrying ``FileSlice`` records is sent with ``os.sendfile`` for the slices.
    """

    __slots__ = ("_chunks",)

    def __init__(self) -> None:
        super().__init__()
        self._chunks: list[Chunk] = []

    def write_chunk(self, chunk: Chunk) -> None:
        if self:
            self._chunks.append(bytearray(self))
            del self[:]
        self._chunks.append(chunk)

    def chunks(self) -> list[Chunk]:
        """Everything written so far, in order. In-memory parts are (copied) ``bytearray`` objects."""
        if not self:
            return list(self._chunks)
        return [*self._chunks, bytearray(self)]

    def to_bytes(self) -> bytes:
        """Everything written so far as one bytes object (file slices are read)."""
        if not self._chunks:
            return bytes(self)
        return join_chunks(self.chunks())


# ---------------------------------------------------------------------------------------------
# Fixed-width values (used for array items and tagged fields; struct fields are packed inline)

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")


def _fixed_reader(fmt: struct.Struct) -> Reader[Any]:
    unpack_from = fmt.unpack_from
    size = fmt.size

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        return unpack_from(buf, pos)[0], pos + size

    return read


def _fixed_writer(fmt: struct.Struct) -> Callable[[Writer, Any], None]:
    pack = fmt.pack

    def write(w: Writer, value: Any) -> None:
        w += pack(value)

    return write


read_bool = _fixed_reader(BOOL)
read_int8 = _fixed_reader(INT8)
read_int16 = _fixed_reader(INT16)
read_int32 = _fixed_reader(INT32)
read_int64 = _fixed_reader(INT64)
read_uint16 = _fixed_reader(UINT16)
read_uint32 = _fixed_reader(UINT32)
read_float64 = _fixed_reader(FLOAT64)
write_bool = _fixed_writer(BOOL)
write_int8 = _fixed_writer(INT8)
write_int16 = _fixed_writer(INT16)
write_int32 = _fixed_writer(INT32)
write_int64 = _fixed_writer(INT64)
write_uint16 = _fixed_writer(UINT16)
write_uint32 = _fixed_writer(UINT32)
write_float64 = _fixed_writer(FLOAT64)


def read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise DecodeError(f"uuid at offset {pos} runs past the end of the data ({len(buf)} bytes)")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(w: Writer, value: uuid.UUID) -> None:
    w += value.bytes


# ---------------------------------------------------------------------------------------------
# Unsigned varints (flexible versions: compact lengths, tagged fields)


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    while True:
        pos += 1
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 28:
            raise DecodeError(f"unsigned varint ending at offset {pos} is longer than 5 bytes")


def write_uvarint(w: Writer, value: int) -> None:
    if value < 0x80:
        w.append(value)
        return
    while value >= 0x80:
        w.append((value & 0x7F) | 0x80)
        value >>= 7
    w.append(value)


def _overrun(what: str, pos: int, length: int, buf: memoryview) -> DecodeError:
    return DecodeError(
        f"{what} of {length} bytes at offset {pos} runs past the end of the data ({len(buf)} bytes)"
    )


def _checked_end(buf: memoryview, pos: int, length: int, what: str) -> int:
    end = pos + length
    if end > len(buf):
        raise _overrun(what, pos, length, buf)
    return end


def _null(what: str, pos: int) -> DecodeError:
    return DecodeError(f"non-nullable {what} at offset {pos} is null")


# ---------------------------------------------------------------------------------------------
# Strings (UTF-8)


def read_string(buf: memoryview, pos: int) -> tuple[str, int]:
    (length,) = INT16.unpack_from(buf, pos)
    if length < 0:
        raise _null("string", pos)
    end = _checked_end(buf, pos + 2, length, "string")
    return str(buf[pos + 2 : end], "utf-8"), end


def read_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    (length,) = INT16.unpack_from(buf, pos)
    if length < 0:
        return None, pos + 2
    end = _checked_end(buf, pos + 2, length, "string")
    return str(buf[pos + 2 : end], "utf-8"), end


def read_compact_string(buf: memoryview, pos: int) -> tuple[str, int]:
    length = buf[pos]
    if length == 0:
        raise _null("string", pos)
    if length < 0x80:
        start = pos + 1
    else:
        length, start = read_uvarint(buf, pos)
    end = start + length - 1
    if end > len(buf):
        raise _overrun("string", start, length - 1, buf)
    return str(buf[start:end], "utf-8"), end


def read_compact_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    length = buf[pos]
    if length == 0:
        return None, pos + 1
    if length < 0x80:
        start = pos + 1
    else:
        length, start = read_uvarint(buf, pos)
    end = start + length - 1
    if end > len(buf):
        raise _overrun("string", start, length - 1, buf)
    return str(buf[start:end], "utf-8"), end


def write_string(w: Writer, value: str) -> None:
    data = value.encode()
    w += INT16.pack(len(data))
    w += data


def write_nullable_string(w: Writer, value: str | None) -> None:
    if value is None:
        w += b"\xff\xff"
    else:
        data = value.encode()
        w += INT16.pack(len(data))
        w += data


def write_compact_string(w: Writer, value: str) -> None:
    data = value.encode()
    length = len(data) + 1
    if length < 0x80:
        w.append(length)
    else:
        write_uvarint(w, length)
    w += data


def write_compact_nullable_string(w: Writer, value: str | None) -> None:
    if value is None:
        w.append(0)
        return
    data = value.encode()
    length = len(data) + 1
    if length < 0x80:
        w.append(length)
    else:
        write_uvarint(w, length)
    w += data


# ---------------------------------------------------------------------------------------------
# Bytes (decoded as bytes: small opaque values such as group member metadata)


def read_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    (length,) = INT32.unpack_from(buf, pos)
    if length < 0:
        raise _null("bytes", pos)
    end = _checked_end(buf, pos + 4, length, "bytes")
    return bytes(buf[pos + 4 : end]), end


def read_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    (length,) = INT32.unpack_from(buf, pos)
    if length < 0:
        return None, pos + 4
    end = _checked_end(buf, pos + 4, length, "bytes")
    return bytes(buf[pos + 4 : end]), end


def read_compact_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    length, start = read_uvarint(buf, pos)
    if length == 0:
        raise _null("bytes", pos)
    end = _checked_end(buf, start, length - 1, "bytes")
    return bytes(buf[start:end]), end


def read_compact_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    length, start = read_uvarint(buf, pos)
    if length == 0:
        return None, start
    end = _checked_end(buf, start, length - 1, "bytes")
    return bytes(buf[start:end]), end


def write_bytes(w: Writer, value: bytes | bytearray | memoryview) -> None:
    w += INT32.pack(len(value))
    w += value


def write_nullable_bytes(w: Writer, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        w += b"\xff\xff\xff\xff"
    else:
        w += INT32.pack(len(value))
        w += value


def write_compact_bytes(w: Writer, value: bytes | bytearray | memoryview) -> None:
    write_uvarint(w, len(value) + 1)
    w += value


def write_compact_nullable_bytes(w: Writer, value: bytes | bytearray | memoryview | None) -> None:
    if value is None:
        w.append(0)
    else:
        write_uvarint(w, len(value) + 1)
        w += value


# ---------------------------------------------------------------------------------------------
# Records: decoded as a memoryview into the input (no copy); a FileSlice is written as its own chunk


def read_records(buf: memoryview, pos: int) -> tuple[memoryview, int]:
    (length,) = INT32.unpack_from(buf, pos)
    if length < 0:
        raise _null("records", pos)
    end = _checked_end(buf, pos + 4, length, "records")
    return buf[pos + 4 : end], end


def read_nullable_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    (length,) = INT32.unpack_from(buf, pos)
    if length < 0:
        return None, pos + 4
    end = _checked_end(buf, pos + 4, length, "records")
    return buf[pos + 4 : end], end


def read_compact_records(buf: memoryview, pos: int) -> tuple[memoryview, int]:
    length, start = read_uvarint(buf, pos)
    if length == 0:
        raise _null("records", pos)
    end = _checked_end(buf, start, length - 1, "records")
    return buf[start:end], end


def read_compact_nullable_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    length, start = read_uvarint(buf, pos)
    if length == 0:
        return None, start
    end = _checked_end(buf, start, length - 1, "records")
    return buf[start:end], end


def _write_records_data(w: Writer, value: Records) -> None:
    if type(value) is FileSlice:
        w.write_chunk(value)
    else:
        w += value


def _records_size(value: Records) -> int:
    return value.size if type(value) is FileSlice else len(value)  # type: ignore[union-attr,arg-type]


def write_records(w: Writer, value: Records) -> None:
    w += INT32.pack(_records_size(value))
    _write_records_data(w, value)


def write_nullable_records(w: Writer, value: Records | None) -> None:
    if value is None:
        w += b"\xff\xff\xff\xff"
    else:
        w += INT32.pack(_records_size(value))
        _write_records_data(w, value)


def write_compact_records(w: Writer, value: Records) -> None:
    write_uvarint(w, _records_size(value) + 1)
    _write_records_data(w, value)


def write_compact_nullable_records(w: Writer, value: Records | None) -> None:
    if value is None:
        w.append(0)
    else:
        write_uvarint(w, _records_size(value) + 1)
        _write_records_data(w, value)


# ---------------------------------------------------------------------------------------------
# Arrays: an element count, then the elements. Counts are checked against the remaining bytes.


def _too_many(count: int, pos: int, buf: memoryview) -> DecodeError:
    return DecodeError(
        f"array of {count} elements at offset {pos} cannot fit in the {len(buf) - pos} bytes left"
    )


def _read_items(buf: memoryview, pos: int, count: int, read_item: Reader[T]) -> tuple[list[T], int]:
    if count > len(buf) - pos:
        raise _too_many(count, pos, buf)
    items = []
    append = items.append
    for _ in range(count):
        item, pos = read_item(buf, pos)
        append(item)
    return items, pos


def read_array(buf: memoryview, pos: int, read_item: Reader[T]) -> tuple[list[T], int]:
    (count,) = INT32.unpack_from(buf, pos)
    if count < 0:
        raise _null("array", pos)
    return _read_items(buf, pos + 4, count, read_item)


def read_nullable_array(buf: memoryview, pos: int, read_item: Reader[T]) -> tuple[list[T] | None, int]:
    (count,) = INT32.unpack_from(buf, pos)
    if count < 0:
        return None, pos + 4
    return _read_items(buf, pos + 4, count, read_item)


def read_compact_array(buf: memoryview, pos: int, read_item: Reader[T]) -> tuple[list[T], int]:
    count = buf[pos]
    if count == 0:
        raise _null("array", pos)
    if count < 0x80:
        pos += 1
    else:
        count, pos = read_uvarint(buf, pos)
    count -= 1
    if count > len(buf) - pos:
        raise _too_many(count, pos, buf)
    items = []
    append = items.append
    for _ in range(count):
        item, pos = read_item(buf, pos)
        append(item)
    return items, pos


def read_compact_nullable_array(
    buf: memoryview, pos: int, read_item: Reader[T]
) -> tuple[list[T] | None, int]:
    count, start = read_uvarint(buf, pos)
    if count == 0:
        return None, start
    return _read_items(buf, start, count - 1, read_item)


def write_array(w: Writer, items: Sequence[T], write_item: Callable[[Writer, T], None]) -> None:
    w += INT32.pack(len(items))
    for item in items:
        write_item(w, item)


def write_nullable_array(
    w: Writer, items: Sequence[T] | None, write_item: Callable[[Writer, T], None]
) -> None:
    if items is None:
        w += b"\xff\xff\xff\xff"
        return
    w += INT32.pack(len(items))
    for item in items:
        write_item(w, item)


def write_compact_array(w: Writer, items: Sequence[T], write_item: Callable[[Writer, T], None]) -> None:
    count = len(items) + 1
    if count < 0x80:
        w.append(count)
    else:
        write_uvarint(w, count)
    for item in items:
        write_item(w, item)


def write_compact_nullable_array(
    w: Writer, items: Sequence[T] | None, write_item: Callable[[Writer, T], None]
) -> None:
    if items is None:
        w.append(0)
        return
    write_uvarint(w, len(items) + 1)
    for item in items:
        write_item(w, item)


# ---------------------------------------------------------------------------------------------
# Nullable struct fields: an int8 marker (-1 null, 1 present), then the struct


def read_nullable_struct(buf: memoryview, pos: int, read_item: Reader[T]) -> tuple[T | None, int]:
    (marker,) = INT8.unpack_from(buf, pos)
    if marker < 0:
        return None, pos + 1
    return read_item(buf, pos + 1)


def write_nullable_struct(w: Writer, value: T | None, write_item: Callable[[Writer, T], None]) -> None:
    if value is None:
        w.append(0xFF)
    else:
        w.append(1)
        write_item(w, value)


# ---------------------------------------------------------------------------------------------
# Tagged fields (flexible versions): a count, then (tag, size, value) for each field, tags ascending


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skips a tagged-field section whose tags are all unknown at this version."""
    if buf[pos] == 0:
        return pos + 1
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos = _checked_end(buf, pos, size, "tagged field")
    return pos


def read_tagged_field_header(buf: memoryview, pos: int) -> tuple[int, int, int]:
    """Reads a tagged field's tag and size: returns ``(tag, value_start, value_end)``."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    return tag, pos, _checked_end(buf, pos, size, f"tagged field {tag}")


def check_tagged_field_end(pos: int, end: int, tag: int) -> None:
    if pos != end:
        raise DecodeError(f"tagged field {tag} holds {end - pos:+d} bytes beyond its value")


def tagged_value(write: Callable[..., None], value: Any, *args: Any) -> bytes:
    """The encoding of one tagged field's value, ``write(w, value, *args)`` (its size goes first)."""
    w = Writer()
    write(w, value, *args)
    return bytes(w)


def write_tagged_fields(w: Writer, fields: list[tuple[int, bytes]]) -> None:
    """Writes the tagged-field section from ``(tag, encoded value)`` pairs in ascending tag order."""
    if not fields:
        w.append(0)
        return
    write_uvarint(w, len(fields))
    for tag, data in fields:
        write_uvarint(w, tag)
        write_uvarint(w, len(data))
        w += data


# ---------------------------------------------------------------------------------------------
# Base classes of the generated messages


class Field(NamedTuple):
    """One field of a generated struct, as the spec declares it (versions clipped to the message's)."""

    name: str
    type: str  # "int32", "string", "[]int32", "[]PartitionData", "EpochEndOffset", "records", ...
    versions: range
    nullable_versions: range = range(0)
    tagged_versions: range = range(0)
    tag: int | None = None
    ignorable: bool = False


allocate = object.__new__
"""``allocate(cls)``: an instance without running ``__init__``; decoders then set every field."""


class Struct:
    """A generated struct: keyword construction, equality by fields, a repr that shows the fields."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    _field_values: ClassVar[Callable[[Any], Any]]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        names = cls.__dict__.get("__slots__", ())
        cls._field_values = attrgetter(*names) if names else (lambda obj: ())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._field_values(self) == self._field_values(other)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__qualname__}({fields})"


class Message(Struct):
    """A generated top-level message: one class for all versions; the version picks the encoding."""

    __slots__ = ()
    API_KEY: ClassVar[int | None]  # None for the "data" schemas (consumer protocol)
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FIRST_FLEXIBLE_VERSION: ClassVar[int | None]  # None when no version is flexible
    _decoders: ClassVar[dict[int, Callable[[memoryview, int], tuple[Any, int]]]]
    _encoders: ClassVar[dict[int, Callable[[Writer, Any], None]]]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FIRST_FLEXIBLE_VERSION is not None and version >= cls.FIRST_FLEXIBLE_VERSION

    @classmethod
    def decode(
        cls: type[T], buf: bytes | bytearray | memoryview, version: int, *, exact: bool = True
    ) -> T:
        """Decodes ``buf`` (the body, after any header) at ``version``.

        With ``exact`` bytes left over after the message are an error. Request bodies are decoded
        with ``exact=False``: Apache Kafka ignores trailing bytes in a request, and some clients
        (librdkafka's Metadata v13) send them.
        """
        try:
            decode = cls._decoders[version]  # type: ignore[attr-defined]
        except KeyError:
            raise DecodeError(cls._version_error(version)) from None  # type: ignore[attr-defined]
        view = buf if type(buf) is memoryview else memoryview(buf)
        try:
            message, pos = decode(view, 0)
        except DecodeError as exc:
            raise DecodeError(f"{cls.__name__} v{version}: {exc}") from None
        except (struct.error, IndexError, ValueError) as exc:  # truncated data, bad UTF-8
            raise DecodeError(f"{cls.__name__} v{version}: {exc}") from exc
        if exact and pos != len(view):
            raise DecodeError(
                f"{cls.__name__} v{version}: {len(view) - pos} unexpected bytes after the message "
                f"(decoded {pos} of {len(view)})"
            )
        return message

    def encode(self, version: int) -> bytes:
        """The encoding at ``version`` as bytes (file slices in records fields are read)."""
        w = Writer()
        self.encode_into(w, version)
        return w.to_bytes()

    def encode_into(self, writer: Writer, version: int) -> None:
        """Appends the encoding at ``version`` to ``writer``; file slices stay separate chunks."""
        try:
            encode = self._encoders[version]
        except KeyError:
            raise EncodeError(self._version_error(version)) from None
        try:
            encode(writer, self)
        except EncodeError as exc:
            raise EncodeError(f"cannot encode {type(self).__name__} v{version}: {exc}") from None
        except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
            raise EncodeError(f"cannot encode {type(self).__name__} v{version}: {exc}") from exc

    @classmethod
    def _version_error(cls, version: int) -> str:
        return f"{cls.__name__} has no version {version} (versions {cls.MIN_VERSION}-{cls.MAX_VERSION})"
