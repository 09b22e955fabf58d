"""The share state that the share coordinator keeps and that share partitions persist (KIP-932).

Pure data and the persister interface; no trio. A share partition's durable state is its start offset (the
share-partition start offset, SPSO), the state epoch the group's state was initialized with, the leader epoch
of the last writer, and the state batches: offset ranges at or after the start offset whose records are not
simply AVAILABLE with no delivery yet (acknowledged, archived, or delivered before).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol
import base64
import re
import uuid


class DeliveryState(IntEnum):
    """A record's state, with the numbers the state records and the share APIs carry."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """What a consumer says of a delivered record in ShareFetch and ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


#: No state epoch, leader epoch or start offset given.
UNINITIALIZED = -1


@dataclass(frozen=True)
class StateBatch:
    """Offsets first_offset..last_offset (both included) in one delivery state, delivered delivery_count times."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class PartitionState:
    """The durable state of one share partition (group, topic id, partition).

    ``delivery_complete_count`` is the number of offsets at or after ``start_offset`` whose delivery is complete
    (acknowledged or archived), -1 where the writer did not say.
    """

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1


class SharePersister(Protocol):
    """Where share partitions keep their state: the share coordinator leading the key's state partition.

    Every method raises ``KafkaError`` with Kafka's code: NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS
    (retriable), COORDINATOR_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION for a key never initialized,
    FENCED_STATE_EPOCH and FENCED_LEADER_EPOCH for a stale writer or reader, INVALID_REQUEST for bad input.
    """

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> None:
        """Start (or restart, with a newer state epoch) the state of a share partition at start_offset."""
        ...

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionState:
        """The state with its batches; a leader epoch newer than the stored one is recorded (-1: no check)."""
        ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: PartitionState) -> None:
        """Apply ``state`` (start offset -1: unchanged; batches replace the offsets they cover)."""
        ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Forget the state of a share partition."""
        ...

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> PartitionState:
        """The state without its batches (start offset, epochs, delivery complete count)."""
        ...


def share_coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """The FindCoordinator key of a share partition, as Kafka forms it: "group:topic_id:partition"."""
    return f"{group_id}:{uuid_to_kafka_string(topic_id)}:{partition}"


def uuid_to_kafka_string(value: uuid.UUID) -> str:
    """A Uuid as Kafka prints it: URL-safe base64 of its 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def parse_share_coordinator_key(key: str) -> str | None:
    """A FindCoordinator share key in the form Kafka coordinates it ("group:topic_id:partition", the partition
    as a number), or None when Kafka refuses it: fewer than three parts, an empty group, a topic id that is not a
    Uuid, a partition that is not a 32-bit integer. The group may hold colons."""
    parts = key.split(":")
    while parts and not parts[-1]:  # as Java's String.split drops trailing empty strings
        parts.pop()
    if len(parts) < 3:
        return None
    group_id, topic, partition = ":".join(parts[:-2]), parts[-2], parts[-1]
    if not group_id or not _JAVA_INT.fullmatch(partition) or not -(2**31) <= int(partition) < 2**31:
        return None
    try:
        raw = base64.urlsafe_b64decode(topic + "=" * (-len(topic) % 4))
    except ValueError:
        return None
    if len(raw) != 16 or not _BASE64_URL.fullmatch(topic):
        return None
    return share_coordinator_key(group_id, uuid.UUID(bytes=raw), int(partition))


_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_BASE64_URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
