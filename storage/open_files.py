"""Open descriptors of segments' ``.log`` files, held as Kafka holds them: few and bounded.

A segment that is written to (a partition's active segment) keeps one read-write descriptor for
as long as it is active. Segments that are no longer written to open theirs for reading on
demand, through one process-wide cache, ``READERS``, which keeps at most ``READER_CACHE_SIZE``
open and closes the least recently used. So a broker needs about one descriptor per partition,
whatever the number of segments its partitions hold.

A ``LogFile`` is closed when the last reference to it goes away, never before: a ``FileSlice``
handed out by a read holds its ``LogFile``, so the descriptor stays valid until the slice has been
sent, even when the cache has let it go (or the segment has been rolled, deleted or closed) in
the meantime.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Hashable

#: The most descriptors open at once for reading inactive segments.
READER_CACHE_SIZE = 256


class LogFile:
    """An open descriptor of a ``.log`` file: read-write and appending for the segment being
    written, read-only otherwise. Closed when no longer referenced."""

    __slots__ = ("fd", "path", "writable")

    def __init__(self, path: Path, *, writable: bool) -> None:
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT if writable else os.O_RDONLY
        self.fd = os.open(path, flags | os.O_CLOEXEC, 0o644)
        self.path = path
        self.writable = writable

    def fileno(self) -> int:
        return self.fd

    def __repr__(self) -> str:
        return f"LogFile({self.path}, fd={self.fd}, {'read-write' if self.writable else 'read-only'})"

    def __del__(self, _close=os.close) -> None:  # os may be gone when the interpreter exits
        fd = getattr(self, "fd", -1)  # none when the open failed
        self.fd = -1
        if fd >= 0:
            try:
                _close(fd)
            except OSError:
                pass


class ReaderCache:
    """Read-only ``LogFile``s of inactive segments, at most ``capacity`` of them, least recently
    used first out. Safe to use from several threads; the owners (segments) hash by identity."""

    def __init__(self, capacity: int = READER_CACHE_SIZE) -> None:
        if capacity < 1:
            raise ValueError(f"a reader cache needs room for at least one file, not {capacity}")
        self.capacity = capacity
        self._files: OrderedDict[Hashable, LogFile] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, owner: Hashable) -> bool:
        return owner in self._files

    def get(self, owner: Hashable, path: Path) -> LogFile:
        """The reader of ``owner`` (a segment), opened on ``path`` unless it is open already.
        Raises OSError when the file cannot be opened."""
        files = self._files
        # A hit takes no lock: each of these calls is atomic (the keys hash by identity, in C),
        # and a file evicted meanwhile stays valid for as long as it is referenced.
        file = files.get(owner)
        if file is not None:
            try:
                files.move_to_end(owner)
            except KeyError:
                pass
            return file
        file = LogFile(path, writable=False)
        evicted: list[LogFile] = []
        with self._lock:
            existing = self._files.get(owner)
            if existing is not None:  # opened by another thread meanwhile
                self._files.move_to_end(owner)
                evicted.append(file)
                return existing
            self._files[owner] = file
            while len(self._files) > self.capacity:
                evicted.append(self._files.popitem(last=False)[1])
        # ``evicted`` goes here, outside the lock: descriptors no slice holds close now.
        return file

    def discard(self, owner: Hashable) -> None:
        """Forget ``owner``'s reader (its descriptor closes once no slice holds it)."""
        with self._lock:
            file = self._files.pop(owner, None)
        del file

    def clear(self) -> None:
        with self._lock:
            files = list(self._files.values())
            self._files.clear()
        del files


#: The readers of every inactive segment in the process.
READERS = ReaderCache()
