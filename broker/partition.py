"""A partition as the broker sees it: its log, its leadership, and who is waiting for data.

On a single broker this node leads every partition and is its only in-sync replica, so the high
watermark follows the log end offset on every append. Long-polling fetches register a
:class:`DataWaiter` on the partitions they read; an append wakes them with the byte count it added,
so a fetch returns as soon as min_bytes have arrived and never polls.
"""
from __future__ import annotations

import uuid

import trio

from storage.log import AppendInfo, FetchInfo, Log
from wire.errors import ErrorCode, KafkaError


class DataWaiter:
    """Woken when the partitions it watches have gained at least ``min_bytes`` between them."""

    __slots__ = ("min_bytes", "accumulated", "event")

    def __init__(self, min_bytes: int, accumulated: int = 0) -> None:
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.event = trio.Event()
        if accumulated >= min_bytes:
            self.event.set()

    def notify(self, added_bytes: int) -> None:
        self.accumulated += added_bytes
        if self.accumulated >= self.min_bytes:
            self.event.set()


class Partition:
    def __init__(self, topic: str, topic_id: uuid.UUID, index: int, log: Log, node_id: int) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = log
        self.leader_id = node_id
        self.leader_epoch = 0
        self.replicas = [node_id]
        self.isr = [node_id]
        self._waiters: set[DataWaiter] = set()
        # Becoming leader with an in-sync replica set of one: everything in the log is replicated
        # as far as it will be, so the high watermark is the log end offset (a checkpointed high
        # watermark from before an unclean stop may lag behind what recovery kept).
        self.log.update_high_watermark(self.log.log_end_offset)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def append(self, records: bytearray) -> AppendInfo:
        """Append a produce request's batches (patched in place) and wake waiting fetches."""
        info = self.log.append(records, leader_epoch=self.leader_epoch)
        if not info.duplicate:
            self.log.update_high_watermark(self.log.log_end_offset)
            if self._waiters:
                added = len(records)
                for waiter in self._waiters:
                    waiter.notify(added)
        return info

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool) -> FetchInfo:
        """Batches from ``offset`` up to the high watermark (consumers never see uncommitted data)."""
        return self.log.read(offset, max_bytes, max_offset=self.log.high_watermark, min_one_batch=min_one_batch)

    def leadership(self) -> dict[str, object]:
        """Leader, leader epoch and replica sets, under the field names of the metadata responses
        (Metadata, DescribeTopicPartitions)."""
        return {
            "partition_index": self.index,
            "leader_id": self.leader_id,
            "leader_epoch": self.leader_epoch,
            "replica_nodes": list(self.replicas),
            "isr_nodes": list(self.isr),
            "offline_replicas": [],
        }

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Refuse a request made for another leader epoch (-1: the client does not say), as
        Kafka does: an older epoch is fenced, a newer one is not known here yet."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH, f"{self}: epoch {current_leader_epoch} is fenced")
        raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH, f"{self}: epoch {current_leader_epoch} is not known yet")

    def add_waiter(self, waiter: DataWaiter) -> None:
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: DataWaiter) -> None:
        self._waiters.discard(waiter)
