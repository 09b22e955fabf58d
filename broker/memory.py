"""Receive buffers that idle connections let go, handed back to the operating system in bulk.

A connection that receives nothing for a while drops its 64 KiB receive buffer (broker.connection). The
allocator keeps freed memory for the process, and buffers freed among live objects are never at the top
of the heap, so they would stay resident: after a burst of connections that then idle, the broker would
keep their buffers' worth of memory. Once enough buffers have gone, the broker's housekeeping asks glibc's
``malloc_trim`` (in a worker thread) to return the free pages, at most every ``TRIM_INTERVAL_S``.
Elsewhere than glibc nothing is trimmed.
"""
from __future__ import annotations

import ctypes
import logging

import trio

log = logging.getLogger(__name__)

#: Trim once at least this many bytes of buffers have been let go since the last trim.
TRIM_AFTER_BYTES = 8 * 1024 * 1024
#: And not more often than this.
TRIM_INTERVAL_S = 10.0


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return None


class ReleasedBuffers:
    """How much idle connections let go since the allocator was last asked to return free pages."""

    def __init__(self) -> None:
        self.released_bytes = 0
        self._next_trim = 0.0
        self._trim = _malloc_trim()

    def released(self, size: int) -> None:
        self.released_bytes += size

    async def give_back(self) -> bool:
        """Return the allocator's free pages if enough was let go and the last time is long enough ago."""
        if self._trim is None or self.released_bytes < TRIM_AFTER_BYTES or trio.current_time() < self._next_trim:
            return False
        self.released_bytes = 0
        self._next_trim = trio.current_time() + TRIM_INTERVAL_S
        await trio.to_thread.run_sync(self._trim, 0)
        return True


#: The process's record (the allocator is the process's too).
RELEASED_BUFFERS = ReleasedBuffers()
