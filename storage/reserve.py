"""Disk blocks reserved ahead of appends, past the end of a segment file.

A write that extends a file makes the file system allocate blocks for it; on ext4 that costs several
times the copy into the page cache. Linux's ``fallocate`` with ``FALLOC_FL_KEEP_SIZE`` reserves blocks
beyond the end of file without changing its size, so the file reads exactly as before (recovery,
Fetch and Kafka's own tools see only what was appended) while appends into the reserved range run
at page-cache speed. ``ftruncate`` to the file's own size gives the unused reservation back.

Where the call is missing (other systems) or refused (file systems without it, a full disk), nothing
is reserved and appends allocate as they go.
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable

FALLOC_FL_KEEP_SIZE = 0x01
# Refusals that mean "not here", not "something is wrong": appends then allocate as they go.
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.ENOSPC, errno.EDQUOT})


def _load_fallocate() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The process's own symbols, libc's among them (dlopen(NULL)): no library search at start-up.
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _load_fallocate()


def reserve(fd: int, offset: int, length: int) -> bool:
    """Reserve ``[offset, offset + length)`` of ``fd`` without changing its size.

    False when this system or file system cannot (the caller stops asking); other errors raise.
    """
    if _fallocate is None or length <= 0:
        return False
    if _fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, f"reserving {length} bytes at {offset}: {os.strerror(err)}")


def has_reservation(stat: os.stat_result, block_size: int = 4096) -> bool:
    """Whether more blocks are allocated than the file's size needs (a reservation left behind)."""
    needed = -(-stat.st_size // block_size) * block_size
    return stat.st_blocks * 512 > needed + block_size


def release(fd: int, size: int) -> None:
    """Give back the blocks reserved past ``size``, the file's size."""
    os.ftruncate(fd, size)
