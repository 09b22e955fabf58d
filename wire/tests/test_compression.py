"""Compression codecs: round trips, other clients' framings, corrupt data and size limits."""
from __future__ import annotations

import gzip
import os
import struct
import types

import cramjam
import kafka.codec
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from trafka.wire.compression import XERIAL_SNAPPY_HEADER, Compression, compress, decompress
from trafka.wire.errors import ErrorCode, KafkaError

CODECS = list(Compression)
COMPRESSED_CODECS = [c for c in Compression if c is not Compression.NONE]
# Compressible, several xerial blocks and lz4 blocks long, not trivially repetitive.
TEXT = b"".join(b"record %d: %s\n" % (i, os.urandom(8).hex().encode()) for i in range(8000))


def corrupt_message(codec: int, data: bytes, **kwargs: int) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        decompress(codec, data, **kwargs)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    return info.value


@settings(max_examples=60)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_of_large_data_and_buffer_types(codec: Compression) -> None:
    compressed = compress(codec, memoryview(TEXT))
    if codec is not Compression.NONE:
        assert len(compressed) < len(TEXT)
    for form in (compressed, bytearray(compressed), memoryview(compressed)):
        assert decompress(codec, form) == TEXT
    assert decompress(codec, compressed, max_size=len(TEXT)) == TEXT


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids(codec_id: int) -> None:
    for action in (compress, decompress):
        with pytest.raises(KafkaError) as info:
            action(codec_id, b"data")
        assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_garbage_is_a_corrupt_message(codec: Compression) -> None:
    corrupt_message(codec, b"this is not compressed data at all")


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_truncated_data_is_a_corrupt_message(codec: Compression) -> None:
    compressed = compress(codec, TEXT)
    corrupt_message(codec, compressed[: len(compressed) - 7])
    corrupt_message(codec, compressed[: len(compressed) // 2])


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_output_limit(codec: Compression) -> None:
    error = corrupt_message(codec, compress(codec, TEXT), max_size=len(TEXT) - 1)
    assert "limit" in error.message


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_decompression_bomb_is_refused(codec: Compression) -> None:
    bomb = compress(codec, bytes(64 << 20))
    assert len(bomb) < (4 << 20)
    corrupt_message(codec, bomb, max_size=1 << 20)


# -- snappy: raw and xerial-framed -----------------------------------------------------------------

def test_snappy_writes_xerial_framing_in_32k_blocks() -> None:
    compressed = compress(Compression.SNAPPY, TEXT)
    assert compressed.startswith(XERIAL_SNAPPY_HEADER)
    assert XERIAL_SNAPPY_HEADER == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    position, blocks = len(XERIAL_SNAPPY_HEADER), []
    while position < len(compressed):
        (length,) = struct.unpack_from(">i", compressed, position)
        block = compressed[position + 4 : position + 4 + length]
        blocks.append(bytes(cramjam.snappy.decompress_raw(block)))
        position += 4 + length
    assert all(len(block) == 32 * 1024 for block in blocks[:-1])
    assert b"".join(blocks) == TEXT


def test_snappy_reads_raw_snappy() -> None:
    raw = bytes(cramjam.snappy.compress_raw(TEXT))
    assert decompress(Compression.SNAPPY, raw) == TEXT
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(b""))) == b""


def test_snappy_reads_kafka_python_xerial_framing(monkeypatch: pytest.MonkeyPatch) -> None:
    shim = types.SimpleNamespace(compress=lambda data: bytes(cramjam.snappy.compress_raw(data)))
    monkeypatch.setattr(kafka.codec, "snappy", shim)
    framed = kafka.codec.snappy_encode(TEXT, xerial_compatible=True, xerial_blocksize=8 * 1024)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(Compression.SNAPPY, framed) == TEXT


def test_snappy_ignores_xerial_version_fields_and_reads_concatenated_streams() -> None:
    single = compress(Compression.SNAPPY, TEXT[:50000])
    blocks = single[len(XERIAL_SNAPPY_HEADER) :]
    little_endian = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + blocks
    assert decompress(Compression.SNAPPY, little_endian) == TEXT[:50000]
    assert decompress(Compression.SNAPPY, single + single) == TEXT[:50000] * 2
    assert decompress(Compression.SNAPPY, XERIAL_SNAPPY_HEADER) == b""


def test_snappy_xerial_block_overrunning_the_stream() -> None:
    framed = XERIAL_SNAPPY_HEADER + struct.pack(">i", 1000) + b"\x00" * 10
    assert "overruns" in corrupt_message(Compression.SNAPPY, framed).message
    negative = XERIAL_SNAPPY_HEADER + struct.pack(">i", -5)
    corrupt_message(Compression.SNAPPY, negative)


# -- lz4 -------------------------------------------------------------------------------------------

def test_lz4_writes_independent_64k_blocks() -> None:
    compressed = compress(Compression.LZ4, TEXT)
    assert compressed[:4] == b"\x04\x22\x4d\x18"  # frame magic
    flags, block_descriptor = compressed[4], compressed[5]
    assert flags & 0x20, "the Java client only reads frames with independent blocks"
    assert flags >> 6 == 1  # frame version
    assert (block_descriptor >> 4) & 0x7 == 4  # 64 KiB maximum block size


@pytest.mark.parametrize(
    "options",
    [
        {},  # linked blocks, the lz4 package's default
        {"content_checksum": True, "store_size": True, "block_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "block_linked": False},
    ],
)
def test_lz4_reads_frames_from_other_writers(options: dict) -> None:
    assert decompress(Compression.LZ4, lz4.frame.compress(TEXT, **options)) == TEXT


# -- zstd ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("write_content_size", [True, False])
def test_zstd_frames_with_and_without_content_size(write_content_size: bool) -> None:
    frame = zstandard.ZstdCompressor(write_content_size=write_content_size).compress(TEXT)
    assert decompress(Compression.ZSTD, frame) == TEXT
    assert decompress(Compression.ZSTD, frame, max_size=len(TEXT)) == TEXT
    corrupt_message(Compression.ZSTD, frame, max_size=len(TEXT) - 1)
    corrupt_message(Compression.ZSTD, frame[:-3], max_size=len(TEXT))
    unsized_bomb = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(256 << 20))
    corrupt_message(Compression.ZSTD, unsized_bomb, max_size=1 << 20)


def test_zstd_streamed_frame_and_concatenated_frames() -> None:
    compressor = zstandard.ZstdCompressor()
    chunker = compressor.chunker(chunk_size=4096)
    streamed = b"".join([*chunker.compress(TEXT), *chunker.finish()])
    assert decompress(Compression.ZSTD, streamed) == TEXT
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(b"tail")
    both = streamed + unsized
    assert decompress(Compression.ZSTD, both) == TEXT + b"tail"
    assert decompress(Compression.ZSTD, both, max_size=len(TEXT) + 4) == TEXT + b"tail"
    corrupt_message(Compression.ZSTD, both, max_size=len(TEXT) + 3)


# -- gzip ------------------------------------------------------------------------------------------

def test_gzip_reads_concatenated_members_and_ignores_trailing_bytes() -> None:
    members = gzip.compress(TEXT[:1000]) + gzip.compress(TEXT[1000:2000])
    assert decompress(Compression.GZIP, members) == TEXT[:2000]
    assert decompress(Compression.GZIP, members + b"\x00\x00junk") == TEXT[:2000]
    assert decompress(Compression.GZIP, members, max_size=2000) == TEXT[:2000]
    corrupt_message(Compression.GZIP, members, max_size=1999)


def test_gzip_output_is_a_gzip_stream() -> None:
    assert gzip.decompress(compress(Compression.GZIP, TEXT)) == TEXT
