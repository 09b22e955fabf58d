"""File and directory names of the on-disk log, as Kafka names them.

A data directory holds one directory per partition, ``<topic>-<partition>`` (``orders-0``). Inside
it every segment is a group of files sharing the segment's base offset written as 20 zero-padded
digits: ``00000000000000001234.log`` (the record batches), ``.index`` (offset index),
``.timeindex`` (time index), ``.txnindex`` (aborted transactions). Producer state snapshots are
``<offset>.snapshot``. Suffixes appended to a whole file name mark files in transit:
``.deleted`` (segment scheduled for deletion), ``.cleaned`` and ``.swap`` (compaction output
not yet swapped in). A partition directory being deleted is renamed
``<topic>-<partition>.<uuid>-delete``.

Topic names may contain ``-`` and ``.``; the partition is whatever follows the last ``-``.
"""
from __future__ import annotations

import uuid
from pathlib import Path

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"

PARTITION_METADATA_FILE = "partition.metadata"

OFFSET_DIGITS = 20
MAX_FILE_NAME_LENGTH = 255


def filename_prefix(offset: int) -> str:
    """``offset`` as the 20-digit zero-padded prefix of a segment file name."""
    if offset < 0:
        raise ValueError(f"negative offset {offset} cannot name a file")
    return f"{offset:0{OFFSET_DIGITS}d}"


def log_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix(base_offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix(base_offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix(base_offset) + TIME_INDEX_FILE_SUFFIX + suffix)


def txn_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix(base_offset) + TXN_INDEX_FILE_SUFFIX + suffix)


def producer_snapshot_file(directory: Path, offset: int) -> Path:
    return directory / (filename_prefix(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX)


def offset_from_file_name(name: str) -> int:
    """The offset a segment or snapshot file is named after (``ValueError`` if it has none)."""
    prefix, dot, _ = name.partition(".")
    if not dot or len(prefix) != OFFSET_DIGITS or not prefix.isdigit():
        raise ValueError(f"{name!r} is not named after an offset")
    return int(prefix)


def is_log_file(name: str) -> bool:
    return name.endswith(LOG_FILE_SUFFIX)


def is_index_file(name: str) -> bool:
    return name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX))


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, the directory holding one partition's log."""
    return f"{topic}-{partition}"


def delete_dir_name(topic: str, partition: int) -> str:
    """A unique ``<topic>-<partition>.<uuid>-delete`` name for a directory awaiting removal.

    The topic is shortened if needed so that the name fits the 255-byte limit of file systems.
    """
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: MAX_FILE_NAME_LENGTH - len(suffix)] + suffix


def is_delete_dir_name(name: str) -> bool:
    return name.endswith(DELETE_DIR_SUFFIX) and "." in name


def parse_partition_dir_name(name: str) -> tuple[str, int]:
    """``(topic, partition)`` from ``<topic>-<partition>`` or ``<topic>-<partition>.<uuid>-delete``.

    Raises ``ValueError`` for any other name.
    """
    base = name
    if is_delete_dir_name(name):
        base = name[: name.rindex(".")]
    topic, dash, partition = base.rpartition("-")
    if not dash or not topic or not partition.isdigit() or not partition.isascii():
        raise ValueError(
            f"{name!r} is not a partition directory (expected <topic>-<partition> "
            f"or <topic>-<partition>.<id>{DELETE_DIR_SUFFIX})"
        )
    return topic, int(partition)
