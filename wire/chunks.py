"""Outgoing data as a sequence of chunks: in-memory bytes, or slices of open files.

Responses that carry record data read from the log (Fetch) are encoded without copying those bytes
into Python: the encoder emits a ``FileSlice`` where the records go, and the transport sends it with
``os.sendfile``. Everything else is ``bytes``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, Union


class OpenFile(Protocol):
    """Anything with an open descriptor: a file object, or storage's ``LogFile``."""

    def fileno(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``size`` bytes of ``file`` starting at ``position``; the file stays open while referenced."""

    file: OpenFile
    position: int
    size: int

    def read(self) -> bytes:
        """The slice's bytes (for transports that cannot ``sendfile``, and for tests)."""
        data = os.pread(self.file.fileno(), self.size, self.position)
        if len(data) != self.size:
            raise EOFError(f"file slice [{self.position}, +{self.size}) extends past end of file")
        return data


Chunk = Union[bytes, bytearray, memoryview, FileSlice]


def chunks_size(chunks: list[Chunk]) -> int:
    return sum(c.size if isinstance(c, FileSlice) else len(c) for c in chunks)


def join_chunks(chunks: list[Chunk]) -> bytes:
    """All chunks as one bytes object (reads file slices); for tests and non-zero-copy transports."""
    return b"".join(c.read() if isinstance(c, FileSlice) else bytes(c) for c in chunks)
