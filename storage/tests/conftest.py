"""Fixtures for storage tests: record batches built as a producer would send them."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from trafka.wire.compression import Compression
from trafka.wire.records import SimpleRecord, build_batch

MakeBatch = Callable[..., bytearray]


@pytest.fixture
def make_batch() -> MakeBatch:
    """``make_batch(count=1, value_size=10, *, timestamp=1000, ...)``: one producer batch, base offset 0.

    Records get timestamps ``timestamp, timestamp + 1, ...`` unless ``timestamps`` lists them.
    Other keyword arguments (producer_id, producer_epoch, base_sequence, compression,
    is_transactional) go to ``build_batch``.
    """

    def make(
        count: int = 1,
        value_size: int = 10,
        *,
        timestamp: int = 1000,
        timestamps: list[int] | None = None,
        compression: Compression = Compression.NONE,
        **kwargs: object,
    ) -> bytearray:
        stamps = timestamps if timestamps is not None else [timestamp + i for i in range(count)]
        records = [
            SimpleRecord(key=b"key-%d" % i, value=bytes([65 + i % 26]) * value_size, timestamp=stamps[i])
            for i in range(count)
        ]
        return bytearray(build_batch(records, compression=compression, base_timestamp=stamps[0], **kwargs))

    return make
