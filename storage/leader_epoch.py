"""The leader epoch cache: which leader epoch began at which offset, persisted as Kafka does.

Every record batch carries the epoch of the leader that appended it. The cache remembers, for each
epoch, the offset of its first batch; OffsetForLeaderEpoch answers from it, so that a follower (or a
consumer validating its position after a leader change) learns where an epoch ended and truncates any
divergent suffix.

The cache lives in the partition directory as ``leader-epoch-checkpoint``, in Kafka's text format::

    0          <- format version
    2          <- number of entries
    0 0        <- leader_epoch start_offset
    3 1200

Entries are strictly increasing in both epoch and start offset. Every change rewrites the file
atomically (write temporary, fsync, rename).
"""
from __future__ import annotations

import bisect
from pathlib import Path
from typing import NamedTuple

from trafka.storage.checkpoints import atomic_write

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
LEADER_EPOCH_CHECKPOINT_VERSION = 0

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """The (leader_epoch -> start_offset) entries of one partition, backed by its checkpoint file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        for entry in _read_checkpoint(path):
            self._assign(entry)

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, oldest first."""
        return list(self._entries)

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int, *, sync: bool = True) -> bool:
        """Record that ``epoch`` began at ``start_offset``; called for every appended batch.

        Re-assigning the latest epoch at the same or a later offset changes nothing (the common case,
        cheap). A new entry first removes every entry it would make non-monotonic: those with an epoch
        >= ``epoch`` or a start offset >= ``start_offset``.

        With ``sync=False`` the checkpoint is written without fsync; the caller syncs it later.
        Returns whether the entries changed (and the checkpoint was written).
        """
        if not self._assign(EpochEntry(epoch, start_offset)):
            return False
        self._write(sync=sync)
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(epoch, end_offset)`` for a requested leader epoch.

        - the latest epoch ends at the log end offset;
        - an older epoch answers the largest known epoch <= the requested one, ending where the next
          known epoch starts;
        - an epoch older than every known one answers itself, ending where the earliest known epoch
          starts (the data before has been deleted; the follower replicates from there);
        - ``UNDEFINED_EPOCH`` requested, an empty cache, or an epoch above every known one answer
          ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``.
        """
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return undefined
        if epoch == self._entries[-1].epoch:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._entries, epoch, key=lambda e: e.epoch)
        if higher == len(self._entries):
            return undefined
        end_offset = self._entries[higher].start_offset
        if higher == 0:
            return epoch, end_offset
        return self._entries[higher - 1].epoch, end_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove the entries starting at or after ``end_offset`` (the log was truncated to it)."""
        keep = bisect.bisect_left(self._entries, end_offset, key=lambda e: e.start_offset)
        if end_offset >= 0 and keep < len(self._entries):
            del self._entries[keep:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly below the new log start offset.

        The last entry starting at or before ``start_offset`` is kept but moved to begin at
        ``start_offset``, so the epoch in force there is still known; entries after it are untouched.
        """
        covered = bisect.bisect_right(self._entries, start_offset, key=lambda e: e.start_offset)
        if covered == 0 or (covered == 1 and self._entries[0].start_offset == start_offset):
            return
        first = EpochEntry(self._entries[covered - 1].epoch, start_offset)
        self._entries[:covered] = [first]
        self._write()

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        if self._entries:
            latest = self._entries[-1]
            if entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
                return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def _write(self, *, sync: bool = True) -> None:
        lines = [str(LEADER_EPOCH_CHECKPOINT_VERSION), str(len(self._entries))]
        lines += [f"{entry.epoch} {entry.start_offset}" for entry in self._entries]
        atomic_write(self.path, ("\n".join(lines) + "\n").encode(), sync=sync)


def _read_checkpoint(path: Path) -> list[EpochEntry]:
    """The checkpoint's entries; an absent file is empty. A malformed file raises ValueError."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError(f"{path}: truncated leader epoch checkpoint header")
    if int(lines[0]) != LEADER_EPOCH_CHECKPOINT_VERSION:
        raise ValueError(f"{path}: unsupported leader epoch checkpoint version {lines[0]!r}")
    count = int(lines[1])
    body = lines[2:]
    if len(body) != count:
        raise ValueError(f"{path}: expected {count} leader epoch entries, found {len(body)}")
    entries = []
    for line in body:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"{path}: malformed leader epoch entry {line!r}")
        entries.append(EpochEntry(int(fields[0]), int(fields[1])))
    return entries
