"""A partition as the broker sees it: its log, its leadership, its followers, and who waits on it.

Every partition of every topic in the cluster has a :class:`Partition` on every broker, for metadata;
a broker holds a log only for the partitions it is a replica of. One replica leads (``leader_id``,
under ``leader_epoch``); the others follow it, fetching its batches (broker.replication). Produce and
consumer fetches are served by the leader alone; a follower answers NOT_LEADER_OR_FOLLOWER.

The leader keeps what each follower has fetched, as Kafka's Partition does: a follower's log end
offset is the offset it fetches from next, and it is caught up while that reaches the leader's log
end offset as it stood at the follower's previous fetch. The high watermark is the smallest log end
offset in the in-sync replica set (ISR); consumers never read above it, and acks=all producers are
answered once it passes their batch. A follower that has caught up to the high watermark is
proposed for the ISR; one not caught up for ``replica.lag.time.max.ms`` is proposed for removal.
Proposals are made by the replica manager (broker.replication.manager) through the cluster's
coordination; the partition changes its ISR when the coordination says so.

On a single broker the ISR is the leader alone, so the high watermark follows the log end offset on
every append.

Transactions: the leader appends the COMMIT and ABORT markers the transaction coordinator sends
(:meth:`Partition.append_marker`) as it appends produced batches. The last stable offset (the first
offset of a transaction still open, or closed by a marker not yet below the high watermark; at most
the high watermark) bounds what read_committed consumers see; it moves when the high watermark does.

Long-polling fetches register a :class:`DataWaiter`: a follower's fetch is woken by appends, a
read_uncommitted consumer's by the high watermark moving and a read_committed one's by the last
stable offset moving, each with the bytes that became readable to it, so a fetch returns as soon as
``min_bytes`` have arrived and never polls. Bytes above the last stable offset do not count for a
read_committed fetch, as in Kafka: data held back by an open transaction does not wake it.
"""
from __future__ import annotations

import collections
import uuid
from collections.abc import Callable, Collection, Sequence

import trio

from trafka.storage import clock
from trafka.storage.log import AppendInfo, AppendOrigin, FetchInfo, Log
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import RECORD_BATCH_OVERHEAD, ControlRecordType, build_control_batch

NO_LEADER = -1
#: Appends awaiting the last stable offset that are tracked one by one; beyond this many (a
#: transaction left open for long), newer appends are counted together with the latest one.
MAX_UNSTABLE_APPENDS = 1024


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


class FollowerProgress:
    """What the leader knows of one follower: its log end offset and when it was last caught up."""

    __slots__ = ("log_end_offset", "last_caught_up_ms", "last_fetch_ms", "leader_end_offset_at_last_fetch")

    def __init__(self, now_ms: int, log_end_offset: int = -1) -> None:
        self.log_end_offset = log_end_offset
        # A follower counts as caught up when it is first seen, as in Kafka: it has
        # replica.lag.time.max.ms to show it keeps up before it is proposed for removal.
        self.last_caught_up_ms = now_ms
        self.last_fetch_ms = now_ms
        self.leader_end_offset_at_last_fetch = -1

    def on_fetch(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.leader_end_offset_at_last_fetch >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.leader_end_offset_at_last_fetch = leader_end_offset
        self.last_fetch_ms = now_ms


class Partition:
    def __init__(self, topic: str, topic_id: uuid.UUID, index: int, log: Log | None, node_id: int, *,
                 replicas: Sequence[int] | None = None) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = log
        self.local_id = node_id
        self.leader_id = node_id if replicas is None else NO_LEADER
        self.leader_epoch = 0
        self.replicas: list[int] = [node_id] if replicas is None else list(replicas)
        self.isr: list[int] = list(self.replicas) if replicas is None else []
        #: The coordination's version of this partition's state (conditional ISR changes); -1: none.
        self.state_version = -1
        #: Called (by the leader) when a follower outside the ISR has caught up: the replica manager.
        self.isr_listener: Callable[[Partition], None] | None = None
        self._followers: dict[int, FollowerProgress] = {}
        self._consumer_waiters: set[DataWaiter] = set()
        self._committed_waiters: set[DataWaiter] = set()  # read_committed consumers
        self._replica_waiters: set[DataWaiter] = set()
        # Appended but not yet below the high watermark: (end offset, bytes), for consumer waiters.
        self._uncommitted: collections.deque[tuple[int, int]] = collections.deque()
        # Appended but not yet below the last stable offset: (end offset, bytes), for read_committed
        # waiters.
        self._unstable: collections.deque[tuple[int, int]] = collections.deque()
        # acks=all producers: woken when the high watermark moves or leadership changes (made when
        # someone waits, so that appends nobody waits on make no event).
        self._high_watermark_moved: trio.Event | None = None
        if log is not None and self.is_leader:
            # Leading with an ISR of one: everything in the log is replicated as far as it will be,
            # so the high watermark is the log end offset (a checkpointed one from before an unclean
            # stop may lag behind what recovery kept).
            log.update_high_watermark(log.log_end_offset)
        self._note_unstable_tail()

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    # -- offsets -----------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id and self.log is not None

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def _leader_log(self) -> Log:
        if not self.is_leader:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"This server is not the leader for {self.topic}-{self.index} (the leader is {self.leader_id})",
            )
        return self.log

    # -- the leader's side -------------------------------------------------------------------------

    def append(self, records: bytearray, *, origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Append a produce request's batches (patched in place) as the leader; wake the fetches
        waiting on them. ``origin`` COORDINATOR: batches the broker's own coordinators write."""
        log = self._leader_log()
        info = log.append(records, leader_epoch=self.leader_epoch, origin=origin)
        if not info.duplicate:
            added = len(records)
            for waiter in self._replica_waiters:
                waiter.notify(added)
            unstable = self._unstable
            if len(unstable) < MAX_UNSTABLE_APPENDS:
                unstable.append((log.log_end_offset, added))
            else:
                unstable[-1] = (log.log_end_offset, unstable[-1][1] + added)
            if len(self.isr) <= 1:
                self._advance_high_watermark(log.log_end_offset, added)
            else:
                self._uncommitted.append((log.log_end_offset, added))
        return info

    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool, *,
                      transaction_version: int = 0) -> AppendInfo:
        """Append the COMMIT (``committed``) or ABORT marker ending ``producer_id``'s transaction, as
        the leader, for the transaction coordinator of ``coordinator_epoch``.

        Raises KafkaError: NOT_LEADER_OR_FOLLOWER; TRANSACTION_COORDINATOR_FENCED for a coordinator
        epoch older than the one of the producer's last marker; INVALID_PRODUCER_EPOCH for a producer
        epoch older than the producer's, or, from a coordinator on transaction version 2 (which bumps
        the epoch with every transaction), not newer than it unless the marker repeats the last one."""
        log = self._leader_log()
        if transaction_version >= 2:
            entry = log.producer_state.last_entry(producer_id)
            if entry is not None and producer_epoch <= entry.producer_epoch and not (
                producer_epoch == entry.producer_epoch and entry.current_txn_first_offset is None
            ):
                raise KafkaError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"{self}: marker of producer {producer_id} at epoch {producer_epoch}, not newer than its "
                    f"epoch {entry.producer_epoch} (transaction version {transaction_version})",
                )
        kind = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
        marker = bytearray(build_control_batch(kind, producer_id, producer_epoch, coordinator_epoch))
        return self.append(marker, origin=AppendOrigin.COORDINATOR)

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool, read_committed: bool = False) -> FetchInfo:
        """A consumer's batches from ``offset``: up to the high watermark (consumers never see
        uncommitted data), or with ``read_committed`` up to the last stable offset, with the aborted
        transactions among them."""
        log = self._leader_log()
        if read_committed:
            return log.read(offset, max_bytes, max_offset=log.last_stable_offset, min_one_batch=min_one_batch,
                            include_aborted_transactions=True)
        return log.read(offset, max_bytes, max_offset=log.high_watermark, min_one_batch=min_one_batch)

    def read_for_follower(self, replica_id: int, offset: int, max_bytes: int, *, min_one_batch: bool,
                          now_ms: int | None = None) -> FetchInfo:
        """A follower's fetch: its progress is noted first (the fetch offset is its log end offset,
        which may move the high watermark), then batches up to the log end offset are read."""
        log = self._leader_log()
        if replica_id not in self.replicas:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"broker {replica_id} is not a replica of {self.topic}-{self.index}")
        now = clock.now_ms() if now_ms is None else now_ms
        progress = self._followers.get(replica_id)
        if progress is None:
            progress = self._followers[replica_id] = FollowerProgress(now)
        progress.on_fetch(min(offset, log.log_end_offset), log.log_end_offset, now)
        self.maybe_increment_high_watermark()
        if replica_id not in self.isr and self.isr_listener is not None \
                and progress.log_end_offset >= log.high_watermark:
            self.isr_listener(self)
        return log.read(offset, max_bytes, max_offset=log.log_end_offset, min_one_batch=min_one_batch)

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """For a follower that last fetched under ``last_fetched_epoch``: ``(epoch, end_offset)`` when
        its log diverges from this one (that epoch ends here before its fetch offset, or is unknown
        here), telling it where to truncate; None when it may go on."""
        if last_fetched_epoch < 0:
            return None
        epoch, end_offset = self._leader_log().end_offset_for_leader_epoch(last_fetched_epoch)
        if epoch < 0 or end_offset < 0:
            # No epoch at or before the follower's here (an unclean election, say): it starts over
            # from what this log has, through its out-of-range handling.
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{self}: the end offset of the follower's last fetched epoch {last_fetched_epoch} is not known",
            )
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up to the smallest log end offset in the ISR, if that is higher."""
        log = self.log
        if log is None or not self.is_leader:
            return False
        new = log.log_end_offset
        for replica in self.isr:
            if replica != self.local_id:
                progress = self._followers.get(replica)
                if progress is None or progress.log_end_offset < 0:
                    return False  # not heard from under this leadership yet
                new = min(new, progress.log_end_offset)
        if new <= log.high_watermark:
            return False
        self._advance_high_watermark(new)
        return True

    def _advance_high_watermark(self, offset: int, added: int = 0) -> None:
        self.log.maybe_increment_high_watermark(offset)
        high_watermark = self.log.high_watermark
        uncommitted = self._uncommitted
        while uncommitted and uncommitted[0][0] <= high_watermark:
            added += uncommitted.popleft()[1]
        if added:
            for waiter in self._consumer_waiters:
                waiter.notify(added)
        self._release_stable()
        self._wake_producers()

    def _note_unstable_tail(self) -> None:
        """Start afresh under a new leadership (or a loaded log): the producer state forgets the
        transactions whose markers are below the high watermark (loading replays them as awaiting
        it, and the high watermark may not move for a while), and what read_committed fetches wait
        for is counted again: the batches above the last stable offset that this leadership did
        not append itself are at least one batch."""
        self._unstable.clear()
        log = self.log
        if log is None:
            return
        log.update_high_watermark(log.high_watermark)
        if log.last_stable_offset < log.log_end_offset:
            self._unstable.append((log.log_end_offset, RECORD_BATCH_OVERHEAD))

    def _release_stable(self) -> None:
        """Wake read_committed fetches with the bytes now below the last stable offset."""
        unstable = self._unstable
        if not unstable:
            return
        last_stable_offset = self.log.last_stable_offset
        released = 0
        while unstable and unstable[0][0] <= last_stable_offset:
            released += unstable.popleft()[1]
        if released:
            for waiter in self._committed_waiters:
                waiter.notify(released)

    def _wake_producers(self) -> None:
        moved, self._high_watermark_moved = self._high_watermark_moved, None
        if moved is not None:
            moved.set()

    async def _wait_for_high_watermark(self, offset: int) -> None:
        """Until the high watermark reaches ``offset``, or this broker stops leading (the caller
        checks which)."""
        while self.is_leader and self.log.high_watermark < offset:
            if self._high_watermark_moved is None:
                self._high_watermark_moved = trio.Event()
            await self._high_watermark_moved.wait()

    async def await_replicated(self, end_offset: int, deadline: float, min_insync_replicas: int = 1) -> ErrorCode:
        """Wait until every in-sync replica has what this leader appended below ``end_offset`` (the high
        watermark reaches it), until the Trio clock's ``deadline`` at most; then say how it went, as
        Kafka's delayed produce does: NONE, NOT_LEADER_OR_FOLLOWER if this broker stopped leading
        meanwhile, REQUEST_TIMED_OUT if the high watermark did not get there in time, and
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if it did with an ISR smaller than ``min_insync_replicas``.
        The one way acks=all Produce, transaction markers and the coordinators wait for replication."""
        if self.log.high_watermark < end_offset:
            with trio.move_on_at(deadline):
                await self._wait_for_high_watermark(end_offset)
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < end_offset:
            return ErrorCode.REQUEST_TIMED_OUT
        if len(self.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def isr_candidates(self, max_lag_ms: int, now_ms: int) -> list[int]:
        """Followers outside the ISR that have caught up to the high watermark (and to the start of
        this leader's epoch), and have been caught up within the last ``max_lag_ms``: the replicas this
        leader proposes to add to the ISR, or [] when there is none. A follower that stopped fetching
        (a dead broker) is no candidate, however far its last fetch had come: it would only be found
        lagging again."""
        log = self.log
        if not self.is_leader:
            return []
        epoch_start = _epoch_start(log, self.leader_epoch)
        joining = [
            replica for replica, progress in self._followers.items()
            if replica not in self.isr and replica in self.replicas
            and progress.log_end_offset >= max(log.high_watermark, epoch_start)
            and now_ms - progress.last_caught_up_ms <= max_lag_ms
        ]
        return joining

    def lagging_replicas(self, max_lag_ms: int, now_ms: int) -> list[int]:
        """ISR members (other than the leader) not caught up within the last ``max_lag_ms``."""
        if not self.is_leader:
            return []
        lagging = []
        for replica in self.isr:
            if replica == self.local_id:
                continue
            progress = self._followers.get(replica)
            if progress is None:
                progress = self._followers[replica] = FollowerProgress(now_ms)
            if now_ms - progress.last_caught_up_ms > max_lag_ms:
                lagging.append(replica)
        return lagging

    # -- leadership --------------------------------------------------------------------------------

    def set_state(self, leader_id: int, leader_epoch: int, isr: Sequence[int], replicas: Sequence[int],
                  version: int = -1, *, now_ms: int | None = None) -> None:
        """Take the partition's state as the cluster decided it. A new leader epoch starts afresh:
        followers must fetch again before they count for the high watermark."""
        now = clock.now_ms() if now_ms is None else now_ms
        new_epoch = leader_epoch != self.leader_epoch or leader_id != self.leader_id
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        self.isr, self.replicas, self.state_version = list(isr), list(replicas), version
        if new_epoch:
            self._followers = {replica: FollowerProgress(now) for replica in self.replicas if replica != self.local_id}
            self._uncommitted.clear()
            self._note_unstable_tail()
        else:
            for replica in self.replicas:
                if replica != self.local_id and replica not in self._followers:
                    self._followers[replica] = FollowerProgress(now)
        if self.is_leader:
            self.maybe_increment_high_watermark()
        self._wake_producers()  # acks=all waiters look again: the ISR or the leader changed

    def leadership(self, live_brokers: Collection[int] | None = None) -> dict[str, object]:
        """Leader, leader epoch and replica sets, under the field names of the metadata responses
        (Metadata, DescribeTopicPartitions); replicas on brokers not alive are offline."""
        offline = [] if live_brokers is None else [r for r in self.replicas if r not in live_brokers]
        return {
            "partition_index": self.index,
            "leader_id": self.leader_id,
            "leader_epoch": self.leader_epoch,
            "replica_nodes": list(self.replicas),
            "isr_nodes": list(self.isr),
            "offline_replicas": offline,
        }

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Refuse a request made for another leader epoch (-1: the client does not say), as
        Kafka does: an older epoch is fenced, a newer one is not known here yet."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH, f"{self}: epoch {current_leader_epoch} is fenced")
        raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH, f"{self}: epoch {current_leader_epoch} is not known yet")

    # -- waiters -----------------------------------------------------------------------------------

    def add_waiter(self, waiter: DataWaiter, *, replica: bool = False, read_committed: bool = False) -> None:
        """Wake ``waiter`` with the bytes appended (``replica``), or that moved below the high
        watermark, or (``read_committed``) below the last stable offset."""
        if replica:
            self._replica_waiters.add(waiter)
        elif read_committed:
            self._committed_waiters.add(waiter)
        else:
            self._consumer_waiters.add(waiter)

    def remove_waiter(self, waiter: DataWaiter) -> None:
        self._consumer_waiters.discard(waiter)
        self._committed_waiters.discard(waiter)
        self._replica_waiters.discard(waiter)


def _epoch_start(log: Log, epoch: int) -> int:
    """The offset at which ``epoch`` began in ``log`` (its log end offset if it has no entry yet)."""
    for entry in log.leader_epoch_cache.entries:
        if entry.epoch == epoch:
            return entry.start_offset
    return log.log_end_offset
