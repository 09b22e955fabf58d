"""Committed offsets: what each group has consumed, per topic partition, whatever the group's type.

The store is the in-memory view of the offset-commit records in ``__consumer_offsets``: a commit
becomes one record per partition (key group/topic/partition, value offset, leader epoch, metadata,
commit timestamp), a deletion becomes a tombstone, and replaying the topic at start-up rebuilds the
same view. The store does not write records itself: it turns commits into records for the coordinator
to append, and applies records once they are in the log, so memory never runs ahead of disk.

Classic and consumer (KIP-848) groups share it: validation of who may commit belongs to the group,
storage of what was committed belongs here.

**Transactional offsets** (TxnOffsetCommit, KIP-98/KIP-447) are written in a transactional batch of
their producer and stay *pending*, per producer id, until the transaction's marker is in the log: a
COMMIT makes them committed, an ABORT drops them (:meth:`OffsetStore.complete`). As in Kafka, every
offset remembers the offset of its record in ``__consumer_offsets``, and a pending offset only replaces
a committed one written *before* it: a plain OffsetCommit that came after the transactional one wins,
whichever order the marker arrives in, so replaying a compacted log gives the same result as live
operation. A tombstone of a partition drops its pending offsets too; the group keeps its open
transaction (its producer id) until the marker, so it is neither deleted nor its pending partitions
expired meanwhile.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from trafka.broker.groups.records import OffsetCommitKey, OffsetCommitValue

NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1
    #: The offset of the commit's record in ``__consumer_offsets`` (-1: unknown). Which of two commits
    #: of a partition is the later one, when a transaction's marker materializes its offsets.
    record_offset: int = field(default=-1, compare=False)

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            self.committed_offset, self.leader_epoch, self.metadata, self.commit_timestamp_ms, self.expire_timestamp_ms
        )

    @classmethod
    def from_value(cls, value: OffsetCommitValue, record_offset: int = -1) -> OffsetAndMetadata:
        return cls(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp,
            record_offset,
        )


TopicPartition = tuple[str, int]
#: Offsets by group, topic and partition.
GroupOffsets = dict[str, dict[str, dict[int, OffsetAndMetadata]]]
#: A producer's pending offsets by group, topic and partition: per partition, the offset of its open
#: transaction, after the one of its previous transaction when that one's marker, in the log already,
#: is not applied yet (oldest first; record offsets increase).
PendingOffsets = dict[str, dict[str, dict[int, list[OffsetAndMetadata]]]]


def _put(offsets: GroupOffsets, group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
    offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = offset


def _remove(offsets: GroupOffsets, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
    topics = offsets.get(group_id)
    if topics is None:
        return None
    by_partition = topics.get(topic)
    if by_partition is None:
        return None
    removed = by_partition.pop(partition, None)
    if not by_partition:
        del topics[topic]
    if not topics:
        del offsets[group_id]
    return removed


class OffsetStore:
    def __init__(self) -> None:
        self._offsets: GroupOffsets = {}
        #: Offsets of transactions not completed yet: producer id -> group -> topic -> partition.
        self._pending: dict[int, PendingOffsets] = {}
        #: Group -> the producers with an open transaction that committed offsets for it. A producer
        #: stays here until its marker, even when tombstones dropped its pending offsets meanwhile.
        self._open_transactions: dict[str, set[int]] = {}

    # -- reads ------------------------------------------------------------------------------------

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get(topic, {}).get(partition)

    def group_offsets(self, group_id: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        """Every committed offset of the group, by topic then partition (a live view: do not modify)."""
        return self._offsets.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def groups(self) -> Iterator[str]:
        """The groups with committed offsets or an open transaction."""
        return iter(list(dict.fromkeys([*self._offsets, *self._open_transactions])))

    def partitions(self, group_id: str) -> list[TopicPartition]:
        return [
            (topic, partition)
            for topic, by_partition in self._offsets.get(group_id, {}).items()
            for partition in by_partition
        ]

    # -- changes, applied once their records are in the log -----------------------------------------

    def put(self, group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
        _put(self._offsets, group_id, topic, partition, offset)

    def remove(self, group_id: str, topic: str, partition: int) -> bool:
        """Apply a tombstone: the committed offset goes, and so do the partition's pending offsets
        (their transactions stay open). Returns whether there was a committed offset."""
        for producer_id in self._open_transactions.get(group_id, ()):
            pending = self._pending.get(producer_id)
            if pending is not None:
                _remove(pending, group_id, topic, partition)  # type: ignore[arg-type]
        return _remove(self._offsets, group_id, topic, partition) is not None

    def remove_group(self, group_id: str) -> list[TopicPartition]:
        """Forget all of a group's committed offsets; returns the partitions that had one."""
        removed = self.partitions(group_id)
        self._offsets.pop(group_id, None)
        return removed

    def forget_group(self, group_id: str) -> None:
        """Forget everything about the group, its pending offsets and open transactions too (its
        partition of ``__consumer_offsets`` is no longer led here: a new leader replays them)."""
        self._offsets.pop(group_id, None)
        for producer_id in self._open_transactions.pop(group_id, ()):
            pending = self._pending.get(producer_id)
            if pending is not None:
                pending.pop(group_id, None)
                if not pending:
                    del self._pending[producer_id]

    def replay(
        self, key: OffsetCommitKey, value: OffsetCommitValue | None, *, record_offset: int = -1, producer_id: int = -1
    ) -> None:
        """Apply an offset-commit record read from the log: a tombstone, a commit, or (written by a
        producer, ``producer_id`` >= 0) a transactional commit, pending until its marker."""
        if value is None:
            self.remove(key.group, key.topic, key.partition)
            return
        offset = OffsetAndMetadata.from_value(value, record_offset)
        if producer_id < 0:
            self.put(key.group, key.topic, key.partition, offset)
        else:
            self.put_pending(producer_id, key.group, key.topic, key.partition, offset)

    # -- transactions (KIP-98, KIP-447) --------------------------------------------------------------

    def put_pending(
        self, producer_id: int, group_id: str, topic: str, partition: int, offset: OffsetAndMetadata, *,
        transaction_start: int | None = None,
    ) -> None:
        """A transactional commit in the log, waiting for its producer's marker. It replaces the
        producer's pending offset of the partition, except one written before ``transaction_start``
        (where the producer's current transaction began in the log): that one's transaction has ended
        in the log, and it waits for its marker to be applied (:meth:`complete` with ``before``).
        Replaying the log in order, there is no such thing: None."""
        by_partition = self._pending.setdefault(producer_id, {}).setdefault(group_id, {}).setdefault(topic, {})
        values = by_partition.get(partition)
        if values and transaction_start is not None:
            values[:] = [v for v in values if v.record_offset < transaction_start]
            values.append(offset)
        else:
            by_partition[partition] = [offset]
        self._open_transactions.setdefault(group_id, set()).add(producer_id)

    def get_pending(self, producer_id: int, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        """The producer's latest pending offset of the partition."""
        values = self._pending.get(producer_id, {}).get(group_id, {}).get(topic, {}).get(partition)
        return values[-1] if values else None

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction has committed an offset for the partition (Kafka's
        ``hasPendingTransactionalOffsets``): OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT."""
        for producer_id in self._open_transactions.get(group_id, ()):
            if self.get_pending(producer_id, group_id, topic, partition) is not None:
                return True
        return False

    def pending_partitions(self, group_id: str) -> list[TopicPartition]:
        """The partitions with a pending offset in some open transaction of the group."""
        found: dict[TopicPartition, None] = {}
        for producer_id in self._open_transactions.get(group_id, ()):
            for topic, by_partition in self._pending.get(producer_id, {}).get(group_id, {}).items():
                for partition in by_partition:
                    found[(topic, partition)] = None
        return list(found)

    def has_open_transactions(self, group_id: str) -> bool:
        return group_id in self._open_transactions

    def pending_groups(self, producer_id: int) -> list[str]:
        """The groups the producer's open transaction has committed offsets for."""
        return [group_id for group_id, producers in self._open_transactions.items() if producer_id in producers]

    def complete(
        self, producer_id: int, group_ids: Iterable[str], committed: bool, *, before: int | None = None
    ) -> list[tuple[str, str, int]]:
        """The producer's transaction ended for ``group_ids`` (the groups of the ``__consumer_offsets``
        partition its marker went to): on commit its pending offsets of those groups become committed,
        except where a commit whose record is later in the log is already there; on abort they are
        dropped. Returns the (group, topic, partition) that were materialized.

        ``before``: the marker ended only the offsets whose records are below this log offset; those at
        or past it belong to the producer's next transaction, already open in the log, and stay pending."""
        pending = self._pending.get(producer_id)
        materialized: list[tuple[str, str, int]] = []
        for group_id in group_ids:
            group_pending = pending.get(group_id) if pending is not None else None
            ended: list[tuple[str, int, OffsetAndMetadata]] = []
            if group_pending:
                for topic, by_partition in list(group_pending.items()):
                    for partition, values in list(by_partition.items()):
                        later = [v for v in values if v.record_offset >= before] if before is not None else []
                        if len(later) < len(values):
                            ended.append((topic, partition, values[len(values) - len(later) - 1]))
                        if later:
                            by_partition[partition] = later
                        else:
                            del by_partition[partition]
                    if not by_partition:
                        del group_pending[topic]
            if not group_pending:  # the group's transaction of this producer is over
                if pending is not None:
                    pending.pop(group_id, None)
                producers = self._open_transactions.get(group_id)
                if producers is not None:
                    producers.discard(producer_id)
                    if not producers:
                        del self._open_transactions[group_id]
            if not committed:
                continue
            for topic, partition, offset in ended:
                existing = self.get(group_id, topic, partition)
                if existing is None or offset.record_offset > existing.record_offset:
                    self.put(group_id, topic, partition, offset)
                    materialized.append((group_id, topic, partition))
        if pending is not None and not pending:
            del self._pending[producer_id]
        return materialized

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
        unknown, after its own commit. Topics in ``keep_topics`` (still subscribed) never expire, nor
        do partitions with a pending transactional offset, as in Kafka.
        """
        keep = set(keep_topics)
        expired = []
        pending = set(self.pending_partitions(group_id)) if group_id in self._open_transactions else ()
        for topic, by_partition in self._offsets.get(group_id, {}).items():
            if topic in keep:
                continue
            for partition, offset in by_partition.items():
                if (topic, partition) in pending:
                    continue
                if offset.expire_timestamp_ms >= 0:
                    deadline = offset.expire_timestamp_ms
                else:
                    base = base_timestamp_ms if base_timestamp_ms is not None else offset.commit_timestamp_ms
                    deadline = base + retention_ms
                if now_ms >= deadline:
                    expired.append((topic, partition))
        return expired
