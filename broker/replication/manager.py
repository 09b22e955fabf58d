"""This broker's replicas, as Kafka's ReplicaManager keeps them: which partitions it leads, which it
follows and from whom, and the in-sync replica sets of those it leads.

The cluster's coordination decides each partition's leader, leader epoch and ISR
(``trafka.broker.cluster``); :meth:`ReplicaManager.apply_state` makes this broker act on it. A partition
this broker leads is served to producers and consumers; one it follows is fetched from its leader by
one :class:`~broker.replication.fetcher.ReplicaFetcher` per leader broker, each a task of its own.

The leader keeps its ISR honest: a follower that has caught up to the high watermark joins it, as
soon as a fetch shows it (Partition.read_for_follower calls back here), if its broker is alive; one
that has not caught up for ``replica.lag.time.max.ms`` leaves it, found by a check every half of that
time, and does not join again before a fetch shows it caught up. Each change is
a version-checked write of the partition's state through the coordination; a write that loses to a
newer state (a new leader, a controller's change) is dropped, and the newer state arrives through
the coordination's watch.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import trio

from trafka.broker.cluster import BrokerRegistration, PartitionState
from trafka.broker.config import BrokerConfig
from trafka.broker.partition import NO_LEADER, Partition
from trafka.broker.replication.fetcher import ReplicaFetcher
from trafka.storage import clock

if TYPE_CHECKING:
    from trafka.broker.security.inter_broker import PeerSecurity

log = logging.getLogger(__name__)

#: A cause that keeps an ISR change waiting is logged once it has lasted NOTE_AFTER_S (a watch a moment late
#: is not worth a line), and again every NOTE_EVERY_S while it lasts.
NOTE_AFTER_S = 2.0
NOTE_EVERY_S = 10.0


class PartitionStates(Protocol):
    """What the replica manager needs of the coordination: live brokers, partition states, and
    version-checked changes of a state."""

    brokers: dict[int, BrokerRegistration]
    partition_states: dict[tuple[str, int], PartitionState]

    async def update_partition_state(self, topic: str, partition: int,
                                     state: PartitionState) -> PartitionState | None: ...


class ReplicaManager:
    def __init__(self, config: BrokerConfig, cluster: PartitionStates, *,
                 security: PeerSecurity | None = None) -> None:
        self.config = config
        #: TLS and SASL of the inter-broker listener, for the fetchers' connections (None: PLAINTEXT).
        self.security = security
        self.node_id = config.node_id
        self.cluster = cluster
        self._leading: set[Partition] = set()
        # Followed partitions by leader id; those whose leader's address is not known yet wait in -1.
        self._following: dict[Partition, int] = {}
        self._fetchers: dict[int, tuple[ReplicaFetcher, BrokerRegistration, trio.CancelScope]] = {}
        #: This broker's own epoch as last seen (its registration's: broker.cluster.BrokerRegistration.epoch).
        self._own_epoch: int | None = None
        self._isr_changes: set[Partition] = set()
        self._isr_wakeup = trio.Event()
        # Each cause keeping an ISR change waiting, (topic, partition, replica or -1), with when it was first
        # seen, last seen and last logged (trio time).
        self._waits: dict[tuple[str, int, int], tuple[float, float, float]] = {}
        self._nursery: trio.Nursery | None = None
        #: Told ``(partition, leading)`` when this broker starts or stops leading a partition, or leads
        #: it under a new epoch (the group coordinator follows ``__consumer_offsets`` this way).
        self.on_leadership: Callable[[Partition, bool], None] | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The fetchers, the ISR check and the ISR writer, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._check_lagging_replicas)
            nursery.start_soon(self._write_isr_changes)
            task_status.started()
            for partition, leader in list(self._following.items()):
                self._follow(partition, leader)

    # -- state from the coordination ----------------------------------------------------------------

    def apply_state(self, partition: Partition, state: PartitionState, replicas: Sequence[int]) -> None:
        """Take ``state`` (and the assignment's ``replicas``) for ``partition``: lead it, follow its
        leader, or, when it has no leader or this broker holds no replica, neither."""
        was_leader, old_epoch = partition.is_leader, partition.leader_epoch
        partition.set_state(state.leader, state.leader_epoch, state.isr, replicas, state.version)
        if self.on_leadership is not None and (was_leader or partition.is_leader):
            if partition.is_leader != was_leader or old_epoch != state.leader_epoch:
                self.on_leadership(partition, partition.is_leader)
        if partition.log is None:
            return
        if partition.is_leader:
            self._unfollow(partition)
            self._leading.add(partition)
            partition.isr_listener = self._isr_candidate
            if not was_leader or old_epoch != state.leader_epoch:
                log.info("leading %s-%d at leader epoch %d, ISR %s, from offset %d", partition.topic,
                         partition.index, state.leader_epoch, list(state.isr), partition.log_end_offset)
            self._propose_isr_change(partition)
            return
        self._leading.discard(partition)
        partition.isr_listener = None
        if state.leader == NO_LEADER or state.leader == self.node_id:
            self._unfollow(partition)
        elif self._following.get(partition) != state.leader:
            self._unfollow(partition)
            log.info("following %s-%d from broker %d at leader epoch %d, from offset %d", partition.topic,
                     partition.index, state.leader, state.leader_epoch, partition.log_end_offset)
            self._follow(partition, state.leader)
        elif old_epoch != state.leader_epoch and state.leader in self._fetchers:
            # The same leader under a new epoch: a partition it fenced may fetch again.
            self._fetchers[state.leader][0].leader_epoch_changed(partition.topic, partition.index)

    def stop_replica(self, partition: Partition) -> None:
        """The partition is gone from this broker (its topic deleted)."""
        self._unfollow(partition)
        if partition in self._leading and self.on_leadership is not None:
            self.on_leadership(partition, False)
        self._leading.discard(partition)
        self._isr_changes.discard(partition)
        partition.isr_listener = None
        for key in [key for key in self._waits if key[:2] == (partition.topic, partition.index)]:
            del self._waits[key]

    def brokers_changed(self) -> None:
        """Live brokers changed: a leader that registered again (after a restart or an expired session, at a new
        address or the same) gets a new fetcher, and so does every leader when this broker itself registered
        again: a connection that lived through a network partition may wait for seconds in TCP's retransmission
        back-off, and a new one is made at once. Followers waiting for their leader's address start."""
        own = self.cluster.brokers.get(self.node_id)
        registered_again = own is not None and self._own_epoch is not None and own.epoch != self._own_epoch
        if own is not None:
            self._own_epoch = own.epoch
        for source_id, (_, registration, scope) in list(self._fetchers.items()):
            current = self.cluster.brokers.get(source_id)
            if current is not None and (registered_again or current != registration):
                log.info("fetching from broker %d over a new connection: %s registered again", source_id,
                         "this broker" if registered_again else f"broker {source_id}")
                scope.cancel()
                del self._fetchers[source_id]
                for partition, leader in self._following.items():
                    if leader == source_id:
                        self._follow(partition, leader)
        for partition, leader in list(self._following.items()):
            if leader not in self._fetchers:
                self._follow(partition, leader)

    # -- following ----------------------------------------------------------------------------------

    def _follow(self, partition: Partition, leader: int) -> None:
        self._following[partition] = leader
        if self._nursery is None:
            return  # started with run()
        fetcher = self._fetcher(leader)
        if fetcher is not None:
            fetcher.add_partition(partition)

    def _unfollow(self, partition: Partition) -> None:
        leader = self._following.pop(partition, None)
        if leader is not None and leader in self._fetchers:
            self._fetchers[leader][0].remove_partition(partition.topic, partition.index)

    def _fetcher(self, source_id: int) -> ReplicaFetcher | None:
        """The fetcher from ``source_id``, started on first use; None while its address is unknown."""
        entry = self._fetchers.get(source_id)
        if entry is not None:
            return entry[0]
        registration = self.cluster.brokers.get(source_id)
        if registration is None:
            return None
        config = self.config
        fetcher = ReplicaFetcher(
            self.node_id, source_id, (registration.host, registration.port),
            max_bytes=config.replica_fetch_response_max_bytes,
            partition_max_bytes=config.replica_fetch_max_bytes,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            backoff_ms=config.replica_fetch_backoff_ms,
            security=self.security,
        )
        scope = trio.CancelScope()
        self._fetchers[source_id] = (fetcher, registration, scope)

        async def run() -> None:
            with scope:
                await fetcher.run()

        self._nursery.start_soon(run)
        return fetcher

    # -- the ISR ------------------------------------------------------------------------------------

    def _isr_candidate(self, partition: Partition) -> None:
        """A follower of ``partition`` caught up while outside the ISR (from the leader's Fetch)."""
        self._propose_isr_change(partition)

    def _propose_isr_change(self, partition: Partition) -> None:
        if partition not in self._isr_changes:
            self._isr_changes.add(partition)
            self._isr_wakeup.set()

    async def _check_lagging_replicas(self) -> None:
        """Every half of ``replica.lag.time.max.ms``, as Kafka's isr-expiration task: followers of
        partitions led here that have not caught up in that time are proposed for removal."""
        max_lag_ms = self.config.replica_lag_time_max_ms
        while True:
            await trio.sleep(max_lag_ms / 2000)
            now_ms = clock.now_ms()
            for partition in list(self._leading):
                if partition.lagging_replicas(max_lag_ms, now_ms):
                    self._propose_isr_change(partition)

    async def _write_isr_changes(self) -> None:
        while True:
            await self._isr_wakeup.wait()
            self._isr_wakeup = trio.Event()
            changes, self._isr_changes = self._isr_changes, set()
            for partition in changes:
                await self._write_isr(partition)

    async def _write_isr(self, partition: Partition) -> None:
        """The ISR this leader wants for ``partition`` (caught-up followers in, lagging ones out),
        written conditionally on the state it leads under."""
        state = self.cluster.partition_states.get((partition.topic, partition.index))
        if state is None or not partition.is_leader or state.leader != self.node_id \
                or state.leader_epoch != partition.leader_epoch:
            if state is not None and partition.is_leader and state.leader == self.node_id:
                self._note(partition, -1, "ISR change of %s-%d waits: this leader is at epoch %d, the cluster's "
                           "state at %d", partition.topic, partition.index, partition.leader_epoch,
                           state.leader_epoch)
            return
        now_ms = clock.now_ms()
        max_lag_ms = self.config.replica_lag_time_max_ms
        lagging = set(partition.lagging_replicas(max_lag_ms, now_ms))
        # Only a live broker may join, as Kafka's leaders check in ZooKeeper mode.
        caught_up = set(partition.isr_candidates(max_lag_ms, now_ms))
        joining = caught_up & self.cluster.brokers.keys()
        for replica in sorted(caught_up - joining):
            self._note(partition, replica, "follower %d of %s-%d has caught up but is not registered as live: it "
                       "joins the ISR once its registration is seen", replica, partition.topic, partition.index)
        isr = [r for r in partition.replicas if (r in state.isr and r not in lagging) or r in joining]
        if self.node_id not in isr:
            isr.insert(0, self.node_id)
        if isr == list(state.isr):
            return
        proposed = PartitionState(state.leader, state.leader_epoch, tuple(isr), state.controller_epoch,
                                  state.version)
        try:
            written = await self.cluster.update_partition_state(partition.topic, partition.index, proposed)
        except Exception as exc:  # ZooKeeper unavailable: the next change or check tries again
            log.warning("could not change the ISR of %s-%d to %s: %r", partition.topic, partition.index, isr, exc)
            return
        if written is None:
            log.info("ISR change of %s-%d to %s lost to a newer state", partition.topic, partition.index, isr)
            return
        if lagging & set(state.isr):
            log.info("shrinking the ISR of %s-%d from %s to %s (%s not caught up in %d ms)", partition.topic,
                     partition.index, list(state.isr), isr, sorted(lagging), self.config.replica_lag_time_max_ms)
        else:
            log.info("expanding the ISR of %s-%d from %s to %s", partition.topic, partition.index,
                     list(state.isr), isr)
        if partition.is_leader and partition.leader_epoch == written.leader_epoch:
            partition.set_state(written.leader, written.leader_epoch, written.isr, partition.replicas,
                                written.version)

    def _note(self, partition: Partition, replica: int, message: str, *args: object) -> None:
        """Note that ``message`` says why an ISR change of ``partition`` waits (for ``replica``; -1: the
        partition itself). It is seen at each attempt (a caught-up follower's every fetch), and logged once
        it has lasted NOTE_AFTER_S, then every NOTE_EVERY_S; a cause not seen for NOTE_AFTER_S had ended."""
        now = trio.current_time()
        key = (partition.topic, partition.index, replica)
        first, last_seen, last_logged = self._waits.get(key, (now, now, -math.inf))
        if now - last_seen > NOTE_AFTER_S:
            first, last_logged = now, -math.inf
        if now - first >= NOTE_AFTER_S and now - last_logged >= NOTE_EVERY_S:
            last_logged = now
            log.info(message + " (for %.1f s)", *args, now - first)
        self._waits[key] = (first, now, last_logged)
