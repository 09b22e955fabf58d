"""Committed offsets: what each group has consumed, per topic partition, whatever the group's type.

The store is the in-memory view of the offset-commit records in ``__consumer_offsets``: a commit
becomes one record per partition (key group/topic/partition, value offset, leader epoch, metadata,
commit timestamp), a deletion becomes a tombstone, and replaying the topic at start-up rebuilds the
same view. The store does not write records itself: it turns commits into records for the coordinator
to append, and applies records once they are in the log, so memory never runs ahead of disk.

Classic and consumer (KIP-848) groups share it: validation of who may commit belongs to the group,
storage of what was committed belongs here.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from broker.groups.records import OffsetCommitKey, OffsetCommitValue

# Kafka's offset.metadata.max.bytes.
OFFSET_METADATA_MAX_SIZE = 4096
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            self.committed_offset, self.leader_epoch, self.metadata, self.commit_timestamp_ms, self.expire_timestamp_ms
        )

    @classmethod
    def from_value(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp)


TopicPartition = tuple[str, int]


class OffsetStore:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    # -- reads ------------------------------------------------------------------------------------

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get(topic, {}).get(partition)

    def group_offsets(self, group_id: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        """Every committed offset of the group, by topic then partition (a live view: do not modify)."""
        return self._offsets.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def groups(self) -> Iterator[str]:
        return iter(list(self._offsets))

    def partitions(self, group_id: str) -> list[TopicPartition]:
        return [
            (topic, partition)
            for topic, by_partition in self._offsets.get(group_id, {}).items()
            for partition in by_partition
        ]

    # -- changes, applied once their records are in the log -----------------------------------------

    def put(self, group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
        self._offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = offset

    def remove(self, group_id: str, topic: str, partition: int) -> bool:
        topics = self._offsets.get(group_id)
        if topics is None:
            return False
        by_partition = topics.get(topic)
        if by_partition is None or partition not in by_partition:
            return False
        del by_partition[partition]
        if not by_partition:
            del topics[topic]
        if not topics:
            del self._offsets[group_id]
        return True

    def remove_group(self, group_id: str) -> list[TopicPartition]:
        """Forget all of a group's offsets; returns the partitions that had one."""
        removed = self.partitions(group_id)
        self._offsets.pop(group_id, None)
        return removed

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        if value is None:
            self.remove(key.group, key.topic, key.partition)
        else:
            self.put(key.group, key.topic, key.partition, OffsetAndMetadata.from_value(value))

    # -- expiry -------------------------------------------------------------------------------------

    def expired(
        self,
        group_id: str,
        *,
        now_ms: int,
        retention_ms: int,
        base_timestamp_ms: int | None,
        keep_topics: Iterable[str] = (),
    ) -> list[TopicPartition]:
        """The partitions whose offsets have outlived the retention.

        An offset committed with an explicit expire timestamp expires then; any other expires
        ``retention_ms`` after ``base_timestamp_ms`` (the moment the group became empty) or, when that is
        unknown, after its own commit. Topics in ``keep_topics`` (still subscribed) never expire.
        """
        keep = set(keep_topics)
        expired = []
        for topic, by_partition in self._offsets.get(group_id, {}).items():
            if topic in keep:
                continue
            for partition, offset in by_partition.items():
                if offset.expire_timestamp_ms >= 0:
                    deadline = offset.expire_timestamp_ms
                else:
                    base = base_timestamp_ms if base_timestamp_ms is not None else offset.commit_timestamp_ms
                    deadline = base + retention_ms
                if now_ms >= deadline:
                    expired.append((topic, partition))
        return expired
