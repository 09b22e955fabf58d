"""Checkpoint files, written atomically, in Kafka's text format.

An offsets checkpoint (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, the log cleaner's ``cleaner-offset-checkpoint``) is::

    0                 <- format version
    2                 <- number of entries
    orders 0 1234     <- topic, partition, offset
    orders 1 987

Every write goes to a temporary file that is fsynced and renamed over the old one, and the directory
is fsynced, so a crash leaves either the old file or the new one, never a torn one.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
#: The log cleaner's: per compacted partition, the first offset not yet cleaned (its "first dirty offset").
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content whole.

    With ``sync=False`` nothing is fsynced: the caller flushes the file and its directory later,
    off the request path, and a crash before that may leave the file empty or torn.
    """
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_path(path.parent)


class OrderedWrites:
    """The writes of one file that may run in several threads. The owner numbers each state it
    captures (``take``, on its own thread); ``write`` runs in any thread: writers take turns, and a
    state taken before the last one written is dropped, so the file never goes back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = 0
        self._written = 0

    def take(self) -> int:
        self._taken += 1
        return self._taken

    def write(self, generation: int, write: Callable[[], None]) -> None:
        with self._lock:
            if generation <= self._written:
                return
            write()
            self._written = generation


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_offsets_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def write_offsets_checkpoints(checkpoints: Mapping[Path, Mapping[tuple[str, int], int]]) -> None:
    """Write several checkpoint files, each atomically; one writer at a time per file (see
    ``LogManager.write_checkpoints``)."""
    for path, offsets in checkpoints.items():
        write_offsets_checkpoint(path, offsets)


def read_offsets_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The checkpoint's entries; an absent file is empty. A malformed file raises ValueError."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError(f"{path}: truncated checkpoint header")
    if int(lines[0]) != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: unsupported checkpoint version {lines[0]!r}")
    count = int(lines[1])
    entries = lines[2:]
    if len(entries) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(entries)}")
    offsets: dict[tuple[str, int], int] = {}
    for line in entries:
        topic, partition, offset = line.split(" ")
        offsets[(topic, int(partition))] = int(offset)
    return offsets
