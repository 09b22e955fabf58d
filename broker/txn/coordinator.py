"""The transaction coordinator: transactional ids, their producer ids and epochs, and the two-phase
end of each transaction (Kafka's ``TransactionCoordinator`` and ``TransactionStateManager``).

Each transactional id belongs to one partition of ``__transaction_state``, and the broker leading that
partition coordinates it: a single node coordinates them all. The coordinator runtime
(:mod:`trafka.broker.coordinator_runtime`) follows that leadership, loads the partitions and writes to
them; this module keeps the ids' state machines. Every change of an id's state is written to its
partition (Kafka's TransactionLogKey/Value records, acks=all) and takes effect, and is answered, once
replicated; a broker that comes to lead the partition replays it, and finishes the transactions it
finds decided but not completed.

A transaction: InitProducerId gives the id its producer id and a new epoch (fencing any older producer
with the same id, and aborting its open transaction); AddPartitionsToTxn and AddOffsetsToTxn make it
``Ongoing`` with those partitions; EndTxn writes ``PrepareCommit`` or ``PrepareAbort`` and answers, then
the coordinator writes the COMMIT or ABORT marker to every partition of the transaction (through
``trafka.broker.txn.markers`` where this broker leads the partition, with WriteTxnMarkers to its leader
otherwise) and finally ``CompleteCommit`` or ``CompleteAbort``. Requests that find a change of the id
being written get CONCURRENT_TRANSACTIONS (retriable), as in Kafka.

Transactions left open past their timeout are aborted (their producer fenced by an epoch bump) every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``; ids idle for
``transactional.id.expiration.ms`` are removed (a tombstone) every
``transaction.remove.expired.transaction.cleanup.interval.ms``.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

import trio

from trafka.broker.config import BrokerConfig
from trafka.broker.coordinator_runtime import CoordinatorRuntime, InternalTopic
from trafka.broker.partition import Partition
from trafka.broker.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicCreator
from trafka.broker.txn.markers import TxnMarker
from trafka.broker.txn.records import decode_key, decode_value, encode_key, encode_value
from trafka.broker.txn.state import (
    COMPLETED,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
)
from trafka.storage import clock
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.primitives import DecodeError
from trafka.wire.records import RecordBatch, build_batch

log = logging.getLogger(__name__)

S = TransactionState

#: Topic configs of ``__transaction_state``, besides those from the broker's transaction.state.log.* settings.
TRANSACTION_STATE_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "uncompressed",
    "unclean.leader.election.enable": "false",
}
#: How long a write to ``__transaction_state`` may wait for its replicas (Kafka's request timeout).
WRITE_TIMEOUT_S = 30.0
#: Between two rounds of markers for partitions whose leaders did not take them yet.
MARKER_RETRY_S = 0.1

MarkerResults = dict[tuple[str, int], ErrorCode]


class ProducerIds(Protocol):
    async def next_producer_id(self) -> int: ...


def transaction_state_topic(config: BrokerConfig) -> InternalTopic:
    """``__transaction_state`` as the broker's ``transaction.state.log.*`` settings make it."""
    return InternalTopic(
        name=TRANSACTION_STATE_TOPIC,
        partitions=config.transaction_state_log_num_partitions,
        replication_factor=config.transaction_state_log_replication_factor,
        configs={**TRANSACTION_STATE_TOPIC_CONFIGS, "min.insync.replicas": str(config.transaction_state_log_min_isr),
                 "segment.bytes": str(config.transaction_state_log_segment_bytes)},
        settings=f"transaction.state.log.num.partitions={config.transaction_state_log_num_partitions}, "
                 f"transaction.state.log.replication.factor={config.transaction_state_log_replication_factor}",
        key_name="transactional id",
        users="transactional producers",
        load_buffer_bytes=config.transaction_state_log_load_buffer_size,
        write_timeout_s=WRITE_TIMEOUT_S,
    )


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions led here.

    It is given what it uses: the broker's settings, its topics (to look partitions up and create
    ``__transaction_state``), whether it is a single node, its id, the producer id allocator, how to
    find a group's partition of ``__consumer_offsets`` (AddOffsetsToTxn), and how to write markers to
    the partitions led here (``write_markers``) and to send them to other leaders (``send_markers``,
    None on a single node)."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicCreator,
        *,
        node_id: int,
        single_node: bool,
        producer_ids: ProducerIds,
        offsets_partition_for: Callable[[str], Awaitable[int]],
        write_markers: Callable[[Sequence[TxnMarker]], Awaitable[MarkerResults]],
        send_markers: Callable[[TxnMarker, Callable[[str, int], int]], Awaitable[MarkerResults]] | None,
    ) -> None:
        self.config = config
        self._topics = topics
        self._node_id = node_id
        self._producer_ids = producer_ids
        self._offsets_partition_for = offsets_partition_for
        self._write_markers = write_markers
        self._send_markers_remote = send_markers
        #: Every transactional id of the partitions led and loaded here.
        self.transactions: dict[str, TransactionMetadata] = {}
        #: Per partition being loaded, the ids replayed so far (they replace the partition's at the end).
        self._replayed: dict[int, dict[str, TransactionMetadata]] = {}
        self._nursery: trio.Nursery | None = None
        self._pending_completions: list[str] = []
        self.runtime = CoordinatorRuntime(transaction_state_topic(config), self, topics, single_node=single_node)
        self.runtime.lead_existing()

    @staticmethod
    def now_ms() -> int:
        return clock.now_ms()

    # ============================================================================ life-cycle

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Loads of the partitions led here, the abort of timed-out transactions and the expiry of idle ids."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for transactional_id in self._pending_completions:
                nursery.start_soon(self._complete, transactional_id)
            self._pending_completions = []
            await nursery.start(self.runtime.run)
            nursery.start_soon(self._every, self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                               self.abort_timed_out_transactions)
            nursery.start_soon(self._every, self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                               self.remove_expired_transactional_ids)
            task_status.started()

    @staticmethod
    async def _every(interval_ms: int, action) -> None:
        while True:
            await trio.sleep(interval_ms / 1000)
            await action()

    # ============================================================================ loading (the runtime's shard)

    def on_partition_leadership(self, index: int, leading: bool) -> None:
        """This broker became (``leading``) or stopped being the leader of ``__transaction_state``
        partition ``index``: replay it (its ids get COORDINATOR_LOAD_IN_PROGRESS meanwhile) and finish
        the transactions it decided, or forget its ids (they get NOT_COORDINATOR). Idempotent."""
        self.runtime.on_partition_leadership(index, leading)

    def replay(self, index: int, batch: RecordBatch, log_start_offset: int) -> int:
        if batch.is_control:
            return 0
        replayed = self._replayed.setdefault(index, {})
        count = 0
        for record in batch.records():
            if record.offset < log_start_offset:
                continue
            count += 1
            try:
                transactional_id = decode_key(record.key)
                if record.value is None:
                    replayed.pop(transactional_id, None)
                else:
                    replayed[transactional_id] = decode_value(record.value).to_metadata(transactional_id)
            except (DecodeError, ValueError, TypeError, IndexError) as exc:
                log.warning("skipping a %s-%d record that cannot be read: %s", TRANSACTION_STATE_TOPIC, index, exc)
        return count

    def loaded(self, index: int) -> None:
        loaded = self._replayed.pop(index, {})
        self.transactions.update(loaded)
        if loaded:
            log.info("loaded %d transactional ids of %s-%d", len(loaded), TRANSACTION_STATE_TOPIC, index)
        for metadata in loaded.values():  # decided before the last leader stopped: finish them
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                if self._nursery is None:
                    self._pending_completions.append(metadata.transactional_id)
                else:
                    self._nursery.start_soon(self._complete, metadata.transactional_id)

    def unloaded(self, index: int) -> int:
        self._replayed.pop(index, None)
        dropped = [t for t in self.transactions if self.partition_for(t) == index]
        for transactional_id in dropped:
            del self.transactions[transactional_id]
        return len(dropped)

    # ============================================================================ __transaction_state

    def partition_for(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def _state_partition(self, index: int) -> Partition | None:
        return self.runtime.partition(index)

    def coordinator_id(self, transactional_id: str) -> int | None:
        """The broker coordinating ``transactional_id``: the leader of its partition (None: none yet)."""
        return self.runtime.coordinator_id(transactional_id)

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` if it does not exist yet (FindCoordinator does, as in Kafka).
        A failure (fewer live brokers than its replication factor, say) is logged once and raised."""
        await self.runtime.ensure_topic()

    def _coordinating(self, transactional_id: str) -> Partition:
        """The partition of ``transactional_id`` if this broker coordinates it and has loaded it."""
        index = self.partition_for(transactional_id)
        partition = self._state_partition(index)
        if partition is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{TRANSACTION_STATE_TOPIC} does not exist yet.")
        code = self.runtime.error(index)
        if code == ErrorCode.NOT_COORDINATOR:
            raise KafkaError(code, f"This broker does not coordinate transactional id {transactional_id}.")
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            raise KafkaError(code, f"{TRANSACTION_STATE_TOPIC}-{index} is still being loaded.")
        if code != ErrorCode.NONE:
            raise KafkaError(code)
        return partition

    async def _write(self, metadata: TransactionMetadata, target: TransactionMetadata | None) -> ErrorCode:
        """Write ``target`` (None: a tombstone) for ``metadata``'s id and wait until its replicas have it;
        then it replaces ``metadata``. The caller has set ``metadata.pending``; it is cleared here."""
        transactional_id = metadata.transactional_id
        try:
            self._coordinating(transactional_id)
        except KafkaError as exc:
            code = exc.code
        else:
            value = None if target is None else encode_value(target)
            code = await self.runtime.write(transactional_id,
                                            bytearray(build_batch([(encode_key(transactional_id), value)])))
        metadata.pending = None
        if code != ErrorCode.NONE:
            log.warning("transactional id %s: writing %s to %s failed; answered %s", transactional_id,
                        "a tombstone" if target is None else target.state.display_name, TRANSACTION_STATE_TOPIC,
                        code.name)
            return code
        if self.transactions.get(transactional_id) is metadata:
            if target is None:
                del self.transactions[transactional_id]
            else:
                self.transactions[transactional_id] = target
        return ErrorCode.NONE

    # ============================================================================ the APIs

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = NO_PRODUCER_ID,
                               expected_epoch: int = NO_PRODUCER_EPOCH) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            log.info("InitProducerId of %s refused: transaction timeout %d ms is not in 1..%d "
                     "(transaction.max.timeout.ms)", transactional_id, timeout_ms, self.config.transaction_max_timeout_ms)
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        try:
            self._coordinating(transactional_id)
        except KafkaError as exc:
            return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        now = self.now_ms()
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            producer_id = await self._producer_ids.next_producer_id()
            metadata = self.transactions.setdefault(transactional_id, TransactionMetadata(
                transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, S.EMPTY, last_update_ms=now))
            if metadata.pending is None and metadata.producer_epoch == NO_PRODUCER_EPOCH:
                target = metadata.transition(S.EMPTY, producer_epoch=0, timeout_ms=timeout_ms, last_update_ms=now)
                metadata.pending = S.EMPTY
                error = await self._write(metadata, target)
                if error != ErrorCode.NONE:
                    if self.transactions.get(transactional_id) is metadata:
                        del self.transactions[transactional_id]
                    return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                log.info("transactional id %s: producer id %d, epoch 0", transactional_id, producer_id)
                return ErrorCode.NONE, producer_id, 0
        if metadata.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        expected = expected_producer_id != NO_PRODUCER_ID
        if expected and not (metadata.producer_epoch == NO_PRODUCER_EPOCH
                             or expected_producer_id == metadata.producer_id
                             or (expected_producer_id == metadata.last_producer_id and expected_epoch >= MAX_EPOCH - 1)):
            log.info("InitProducerId of %s refused: producer %d is not the id's (now producer %d)",
                     transactional_id, expected_producer_id, metadata.producer_id)
            return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE, S.DEAD):
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if metadata.state is S.ONGOING:
            # A new producer with this id: fence the old one and abort its transaction; the new one
            # retries (CONCURRENT_TRANSACTIONS) until the abort is complete.
            log.info("transactional id %s: a new producer fences producer %d epoch %d and aborts its transaction",
                     transactional_id, metadata.producer_id, metadata.producer_epoch)
            await self._abort_fencing(metadata, "a new producer took over the transactional id")
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if expected and expected_epoch not in (metadata.producer_epoch, NO_PRODUCER_EPOCH):
            if expected_epoch == metadata.last_producer_epoch:  # a retry whose answer was lost: the same again
                return ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch
            log.info("InitProducerId of %s refused: producer %d epoch %d is fenced (now epoch %d)",
                     transactional_id, expected_producer_id, expected_epoch, metadata.producer_epoch)
            return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        changes = self._bumped(metadata, remember_epoch=expected)
        if changes["producer_id"] != metadata.producer_id:
            changes["producer_id"] = await self._producer_ids.next_producer_id()
            if metadata.pending is not None or self.transactions.get(transactional_id) is not metadata:
                return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        target = metadata.transition(S.EMPTY, timeout_ms=timeout_ms, last_update_ms=now, partitions=set(),
                                     start_ms=-1, **changes)
        metadata.pending = S.EMPTY
        error = await self._write(metadata, target)
        if error != ErrorCode.NONE:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        log.info("transactional id %s: producer id %d, epoch %d", transactional_id, target.producer_id,
                 target.producer_epoch)
        return ErrorCode.NONE, target.producer_id, target.producer_epoch

    @staticmethod
    def _bumped(metadata: TransactionMetadata, *, remember_epoch: bool = True) -> dict[str, int]:
        """The producer id and epoch after a bump: the next epoch, or a new id (to be allocated) once
        the epoch is exhausted. The epoch bumped from is kept (for a producer's retry, KIP-360) when
        the producer named it (``remember_epoch``), and always by the coordinator's own bumps."""
        last_epoch = metadata.producer_epoch if remember_epoch else NO_PRODUCER_EPOCH
        if metadata.producer_epoch >= MAX_EPOCH - 1:
            return {"producer_id": -2, "producer_epoch": 0, "last_producer_id": metadata.producer_id,
                    "last_producer_epoch": last_epoch}
        return {"producer_id": metadata.producer_id, "producer_epoch": metadata.producer_epoch + 1,
                "last_producer_id": NO_PRODUCER_ID, "last_producer_epoch": last_epoch}

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int, *,
                        pending_ok: bool = False) -> TransactionMetadata:
        self._coordinating(transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            log.info("transactional id %s: producer %d refused, the id's producer is %s", transactional_id,
                     producer_id, "unknown" if metadata is None else metadata.producer_id)
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                             f"The producer id {producer_id} is not the current one of transactional id "
                             f"{transactional_id}.")
        if metadata.producer_epoch != epoch:
            log.info("transactional id %s: producer %d epoch %d is fenced (the current epoch is %d)",
                     transactional_id, producer_id, epoch, metadata.producer_epoch)
            raise KafkaError(ErrorCode.PRODUCER_FENCED,
                             f"There is a newer producer with the same transactional id {transactional_id}.")
        if metadata.pending is not None and not pending_ok:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        return metadata

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn (and AddOffsetsToTxn): an error for each partition."""
        wanted = set(partitions)
        try:
            metadata = self._check_producer(transactional_id, producer_id, epoch)
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
            if metadata.state not in (S.ONGOING, *COMPLETED):
                raise KafkaError(ErrorCode.INVALID_TXN_STATE)
        except KafkaError as exc:
            return dict.fromkeys(wanted, exc.code)
        if metadata.state is S.ONGOING and wanted <= metadata.partitions:
            return dict.fromkeys(wanted, ErrorCode.NONE)
        unknown = {key for key in wanted if not self._exists(*key)}
        if unknown:
            return {key: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for key in wanted}
        now = self.now_ms()
        start_ms = metadata.start_ms if metadata.state is S.ONGOING else now
        target = metadata.transition(S.ONGOING, partitions=metadata.partitions | wanted, start_ms=start_ms,
                                     last_update_ms=now)
        metadata.pending = S.ONGOING
        return dict.fromkeys(wanted, await self._write(metadata, target))

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn with ``verify_only`` (a partition leader's transaction verification): NONE
        for each partition already in the producer's ongoing transaction, TRANSACTION_ABORTABLE for the
        others (nothing is added); CONCURRENT_TRANSACTIONS while the transaction ends, as Kafka answers."""
        wanted = set(partitions)
        try:
            metadata = self._check_producer(transactional_id, producer_id, epoch, pending_ok=True)
        except KafkaError as exc:
            return dict.fromkeys(wanted, exc.code)
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(wanted, ErrorCode.CONCURRENT_TRANSACTIONS)
        ongoing = metadata.partitions if metadata.state is S.ONGOING else set()
        return {key: ErrorCode.NONE if key in ongoing else ErrorCode.TRANSACTION_ABORTABLE for key in wanted}

    def _exists(self, topic: str, partition: int) -> bool:
        found = self._topics.get(topic)
        return found is not None and 0 <= partition < len(found.partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> ErrorCode:
        """AddOffsetsToTxn: the group's partition of ``__consumer_offsets`` joins the transaction."""
        key = (OFFSETS_TOPIC, await self._offsets_partition_for(group_id))
        return (await self.add_partitions(transactional_id, producer_id, epoch, [key]))[key]

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, committed: bool) -> ErrorCode:
        """EndTxn: write the decision, answer, then write the markers and complete (in the background)."""
        try:
            metadata = self._check_producer(transactional_id, producer_id, epoch)
        except KafkaError as exc:
            return exc.code
        state = metadata.state
        done = S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT
        preparing = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        if state is done:
            return ErrorCode.NONE  # a retry of an EndTxn already completed
        if state is preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state is not S.ONGOING:
            log.info("EndTxn(%s) of transactional id %s refused: the transaction is %s", "commit" if committed else "abort",
                     transactional_id, state.display_name)
            return ErrorCode.INVALID_TXN_STATE
        error = await self._prepare(metadata, preparing)
        if error == ErrorCode.NONE:
            self._nursery.start_soon(self._complete, transactional_id)
        return error

    async def _prepare(self, metadata: TransactionMetadata, preparing: TransactionState, **changes) -> ErrorCode:
        target = metadata.transition(preparing, last_update_ms=self.now_ms(), **changes)
        metadata.pending = preparing
        return await self._write(metadata, target)

    async def _abort_fencing(self, metadata: TransactionMetadata, why: str) -> ErrorCode:
        """Fence the producer of ``metadata``'s ongoing transaction (an epoch bump) and abort it."""
        changes = self._bumped(metadata)
        if changes["producer_id"] != metadata.producer_id:
            # No epoch left to bump to: abort with the current one (the next InitProducerId gives a new id).
            changes = {}
        metadata.state = S.PREPARE_EPOCH_FENCE  # held in memory only, as in Kafka
        error = await self._prepare(metadata, S.PREPARE_ABORT, **changes)
        if error != ErrorCode.NONE:
            metadata.state = S.ONGOING
            return error
        log.info("transactional id %s: aborting the transaction of producer %d (%s)", metadata.transactional_id,
                 metadata.producer_id, why)
        self._nursery.start_soon(self._complete, metadata.transactional_id)
        return ErrorCode.NONE

    async def _complete(self, transactional_id: str) -> None:
        """Write the markers of a decided transaction to all its partitions, then its completion."""
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return
        committed = metadata.state is S.PREPARE_COMMIT
        index = self.partition_for(transactional_id)
        state_partition = self._state_partition(index)
        if state_partition is None:
            return
        # The markers carry the epoch this broker coordinates at now. A new leader epoch of the same leader
        # (the controller took a replica out of the partition's ISR) does not end its coordination, as in
        # Kafka: the runtime keeps the partition loaded, and its transactions are still this broker's to finish.
        coordinator_epoch = state_partition.leader_epoch
        remaining = set(metadata.partitions)
        while remaining:
            if not self.runtime.is_loaded(index) or self.transactions.get(transactional_id) is not metadata:
                return  # no longer this broker's to finish: the next coordinator (or this one, reloaded) does
            gone = {key for key in remaining if not self._exists(*key)}
            if gone:
                log.info("transactional id %s: no marker for %s, which no longer exist", transactional_id,
                         ", ".join(f"{t}-{p}" for t, p in sorted(gone)))
                remaining -= gone
            results = await self._send_markers(TxnMarker(metadata.producer_id, metadata.producer_epoch,
                                                         coordinator_epoch, committed, sorted(remaining)))
            for key, code in results.items():
                if code == ErrorCode.NONE:
                    remaining.discard(key)
                elif code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                    log.warning("transactional id %s: markers fenced by a newer coordinator of %s-%d",
                                transactional_id, TRANSACTION_STATE_TOPIC, index)
                    return
            if remaining:
                await trio.sleep(MARKER_RETRY_S)
        done = S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT
        while self.transactions.get(transactional_id) is metadata and self.runtime.is_loaded(index):
            if metadata.pending is None:
                metadata.pending = done
                target = metadata.transition(done, partitions=set(), last_update_ms=self.now_ms())
                if await self._write(metadata, target) == ErrorCode.NONE:
                    log.debug("transactional id %s: %s", transactional_id, done.display_name)
                    return
            await trio.sleep(MARKER_RETRY_S)

    async def _send_markers(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        """The marker to every partition it names: those led here directly, the others through their
        leader (WriteTxnMarkers). An error for each partition."""
        local = [key for key in marker.partitions if self._leader_of(*key) == self._node_id]
        results: MarkerResults = {}
        if local:
            results.update(await self._write_markers([marker._replace(partitions=local)]))
        remote = [key for key in marker.partitions if key not in results]
        if remote:
            if self._send_markers_remote is None:
                results.update(dict.fromkeys(remote, ErrorCode.NOT_LEADER_OR_FOLLOWER))
            else:
                results.update(await self._send_markers_remote(marker._replace(partitions=remote), self._leader_of))
        return results

    def _leader_of(self, topic: str, partition: int) -> int:
        found = self._topics.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            return -1
        return found.partitions[partition].leader_id

    # ============================================================================ timeouts and expiry

    async def abort_timed_out_transactions(self) -> None:
        """Abort, fencing their producers, the transactions open for longer than their timeout."""
        now = self.now_ms()
        for metadata in list(self.transactions.values()):
            if metadata.state is S.ONGOING and metadata.pending is None \
                    and metadata.start_ms + metadata.timeout_ms < now \
                    and self.runtime.is_loaded(self.partition_for(metadata.transactional_id)):
                await self._abort_fencing(metadata, f"open for longer than its timeout of {metadata.timeout_ms} ms")

    async def remove_expired_transactional_ids(self) -> None:
        """Remove (a tombstone in the log) the ids whose last transaction ended longer than
        ``transactional.id.expiration.ms`` ago."""
        deadline = self.now_ms() - self.config.transactional_id_expiration_ms
        for metadata in list(self.transactions.values()):
            if metadata.state in COMPLETED and metadata.pending is None and metadata.last_update_ms < deadline \
                    and self.runtime.is_loaded(self.partition_for(metadata.transactional_id)):
                metadata.pending = S.DEAD
                metadata.transition(S.DEAD)  # (checked: a completed id may die)
                if await self._write(metadata, None) == ErrorCode.NONE:
                    log.info("transactional id %s expired (idle since %d)", metadata.transactional_id,
                             metadata.last_update_ms)

    # ============================================================================ describe and list

    def describe(self, transactional_id: str) -> TransactionMetadata:
        """The metadata of an id coordinated here; raises KafkaError (NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND): NOT_COORDINATOR too before
        ``__transaction_state`` exists, as Kafka answers DescribeTransactions then."""
        if self._state_partition(self.partition_for(transactional_id)) is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR,
                             f"This broker does not coordinate transactional id {transactional_id}.")
        self._coordinating(transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_epoch == NO_PRODUCER_EPOCH:
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return metadata

    def listing(self) -> tuple[bool, list[TransactionMetadata]]:
        """(whether partitions are still loading, the ids of the partitions loaded here)."""
        return self.runtime.loading, [m for m in self.transactions.values()
                                      if m.producer_epoch != NO_PRODUCER_EPOCH
                                      and self.runtime.is_loaded(self.partition_for(m.transactional_id))]
