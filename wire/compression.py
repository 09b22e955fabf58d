"""Compression codecs of Kafka record batches: gzip, snappy, lz4 and zstd.

A record batch names its codec in the low three bits of its attributes; everything after the
61-byte batch header is then one compressed stream holding the records. The formats are the ones
every Kafka client reads and writes:

- gzip: an RFC 1952 gzip stream (several concatenated members are read as one stream).
- snappy: either raw snappy, or the xerial "snappy-java" block framing the Java client writes:
  ``b"\\x82SNAPPY\\x00"``, int32 version, int32 compatible-version, then ``[int32 length][raw snappy
  block]...``. Reading detects the framing; writing always uses it, with 32 KiB blocks, because the
  Java client's reader and every other client read it, while some older readers cannot read raw
  snappy.
- lz4: an LZ4 frame with independent 64 KiB blocks (the Java client cannot read linked blocks).
- zstd: zstd frames, with or without a content size in the frame header.

``decompress`` takes an optional ``max_size``: output beyond it is refused before it is produced
wherever the format allows (every codec here; zstd frames without a declared content size are fed to
the decoder in budget-sized pieces), so a small malicious batch cannot claim unbounded memory.

Errors map to Kafka error codes: an unknown codec id is ``UNSUPPORTED_COMPRESSION_TYPE``; data that
does not decompress (truncated, garbled, over the limit) is ``CORRUPT_MESSAGE``.

The snappy, lz4 and zstd libraries are imported with the first batch that needs them: many brokers
never see a compressed batch, and importing the three would add 6-9 ms to every start.
"""
from __future__ import annotations

import functools
import struct
import zlib
from enum import IntEnum
from typing import TYPE_CHECKING

from trafka.wire.errors import ErrorCode, KafkaError

__all__ = [
    "Compression",
    "compress",
    "decompress",
    "XERIAL_SNAPPY_HEADER",
]


class Compression(IntEnum):
    """Codec ids, as stored in the low three bits of a record batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Default levels of the Java client: zlib's default for gzip, lz4's fast mode, zstd level 3.
_GZIP_LEVEL = zlib.Z_DEFAULT_COMPRESSION
_ZSTD_LEVEL = 3

# gzip wrapper (RFC 1952) for zlib: window bits 16 + 15.
_GZIP_WBITS = 31
_GZIP_MAGIC = b"\x1f\x8b"

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_VERSION = 1
_XERIAL_COMPATIBLE_VERSION = 1
XERIAL_SNAPPY_HEADER = _XERIAL_MAGIC + struct.pack(
    ">ii", _XERIAL_VERSION, _XERIAL_COMPATIBLE_VERSION
)
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

# The largest expansion one zstd input byte can cause: a 4-byte RLE block yields a 128 KiB block.
_ZSTD_MAX_EXPANSION = 128 * 1024 // 4
_ZSTD_MIN_PIECE = 256

if TYPE_CHECKING:
    import zstandard


@functools.cache
def _zstd() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    import zstandard

    return zstandard.ZstdCompressor(level=_ZSTD_LEVEL), zstandard.ZstdDecompressor()


def _codec(codec: int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec id {codec}"
        ) from None


def compress(codec: Compression | int, data: bytes | bytearray | memoryview) -> bytes:
    """``data`` compressed with ``codec`` in the form Kafka clients write (see the module docs)."""
    codec = _codec(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        compressor = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec is Compression.SNAPPY:
        return _xerial_snappy_compress(data)
    if codec is Compression.LZ4:
        import lz4.frame

        return lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    compressor, _ = _zstd()
    return compressor.compress(data)


def decompress(
    codec: Compression | int, data: bytes | bytearray | memoryview, *, max_size: int | None = None
) -> bytes:
    """The bytes ``data`` decompresses to; ``KafkaError(CORRUPT_MESSAGE)`` if it does not, or if the
    output would exceed ``max_size`` bytes."""
    codec = _codec(codec)
    if codec is Compression.NONE:
        return bytes(data)
    try:
        if codec is Compression.GZIP:
            return _gzip_decompress(data, max_size)
        if codec is Compression.SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec is Compression.LZ4:
            return _lz4_decompress(data, max_size)
        return _zstd_decompress(data, max_size)
    except KafkaError:
        raise
    except Exception as exc:  # each library raises its own error types for bad input
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"{codec.name.lower()} data does not decompress: {exc}"
        ) from exc


def _check_size(codec: Compression, size: int, max_size: int | None) -> None:
    if max_size is not None and size > max_size:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE,
            f"{codec.name.lower()} data decompresses to more than the limit of {max_size} bytes",
        )


def _corrupt(codec: Compression, why: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{codec.name.lower()} data is corrupt: {why}")


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int | None) -> bytes:
    output = bytearray()
    remaining = data
    while True:
        decompressor = zlib.decompressobj(_GZIP_WBITS)
        if max_size is None:
            output += decompressor.decompress(remaining)
        else:
            output += decompressor.decompress(remaining, max_size + 1 - len(output))
            _check_size(Compression.GZIP, len(output), max_size)
        if not decompressor.eof:
            raise _corrupt(Compression.GZIP, "the stream ends before its end marker")
        remaining = decompressor.unused_data
        # Like Java's GZIPInputStream: read further members, ignore trailing bytes that are not one.
        if remaining[:2] != _GZIP_MAGIC:
            return bytes(output)


def _xerial_snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    from cramjam import snappy

    view = memoryview(data)
    parts = [XERIAL_SNAPPY_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _raw_snappy_decompress(block: memoryview, preceding: int, max_size: int | None) -> bytes:
    """One raw snappy block, refused up front (its length is in its preamble) if ``preceding`` bytes
    of output plus the block's would exceed ``max_size``."""
    from cramjam import snappy

    if max_size is not None:
        size = preceding + snappy.decompress_raw_len(block)
        _check_size(Compression.SNAPPY, size, max_size)
    return bytes(snappy.decompress_raw(block))


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int | None) -> bytes:
    view = memoryview(data)
    if view[: len(_XERIAL_MAGIC)] != _XERIAL_MAGIC or len(view) < len(XERIAL_SNAPPY_HEADER):
        return _raw_snappy_decompress(view, 0, max_size)
    # The version fields are not checked: some writers store them little-endian, and version 1 is
    # the only framing there is.
    blocks = []
    total = 0
    position = len(XERIAL_SNAPPY_HEADER)
    end = len(view)
    while position < end:
        if view[position : position + len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
            # Concatenated xerial streams: a header where a block length would be.
            position += len(XERIAL_SNAPPY_HEADER)
            continue
        if end - position < 4:
            raise _corrupt(Compression.SNAPPY, f"truncated block length at byte {position}")
        (block_length,) = _INT32.unpack_from(view, position)
        position += 4
        if block_length < 0 or position + block_length > end:
            raise _corrupt(
                Compression.SNAPPY,
                f"block of {block_length} bytes at byte {position} overruns the {end}-byte stream",
            )
        block = _raw_snappy_decompress(view[position : position + block_length], total, max_size)
        blocks.append(block)
        total += len(block)
        position += block_length
    return b"".join(blocks)


def _lz4_decompress(data: bytes | bytearray | memoryview, max_size: int | None) -> bytes:
    import lz4.frame

    decompressor = lz4.frame.LZ4FrameDecompressor()
    if max_size is None:
        output = decompressor.decompress(data)
    else:
        output = decompressor.decompress(data, max_length=max_size + 1)
        _check_size(Compression.LZ4, len(output), max_size)
    if not decompressor.eof:
        raise _corrupt(Compression.LZ4, "the frame ends before its end mark")
    return output


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int | None) -> bytes:
    """All zstd frames in ``data``; the decoder's ``eof`` flags a truncated frame."""
    import zstandard

    _, zstd_decompressor = _zstd()
    output = bytearray()
    remaining: bytes | memoryview = memoryview(data)
    while remaining:
        decompressor = zstd_decompressor.decompressobj()
        content_size = zstandard.frame_content_size(remaining)
        if max_size is not None and content_size < 0:
            remaining = _zstd_decompress_bounded(decompressor, remaining, output, max_size)
        else:
            if max_size is not None:
                _check_size(Compression.ZSTD, len(output) + content_size, max_size)
            output += decompressor.decompress(remaining)
            remaining = decompressor.unused_data
        if not decompressor.eof:
            raise _corrupt(Compression.ZSTD, "the frame ends before its last block")
    return bytes(output)


def _zstd_decompress_bounded(
    decompressor: zstandard.ZstdDecompressionObj,
    frames: memoryview,
    output: bytearray,
    max_size: int,
) -> bytes | memoryview:
    """Decompress the first frame of ``frames`` into ``output``, feeding the decoder pieces small
    enough that none can expand past the remaining budget; returns the bytes after that frame."""
    position = 0
    while position < len(frames):
        piece = max(_ZSTD_MIN_PIECE, (max_size - len(output)) // _ZSTD_MAX_EXPANSION)
        output += decompressor.decompress(frames[position : position + piece])
        _check_size(Compression.ZSTD, len(output), max_size)
        position += piece
        if decompressor.eof:
            return decompressor.unused_data + frames[position:]
    return b""
