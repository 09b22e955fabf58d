"""Requests of the transaction machinery to the other brokers of the cluster, over connections kept per
broker and purpose and opened again when they break.

Transaction markers (Kafka's ``TransactionMarkerChannelManager``): one WriteTxnMarkers request per
leader. A partition whose leader cannot be reached, or that is led by no one, is answered
NOT_LEADER_OR_FOLLOWER, and the coordinator tries it again.

Transaction verification (KIP-890, Kafka's ``AddPartitionsToTxnManager``): a partition leader asks the
coordinator of a transactional id whether partitions are in the producer's ongoing transaction
(AddPartitionsToTxn v4+ with ``verify_only``). Verifications for one coordinator are batched: one request
is in flight per coordinator, and those asked for meanwhile go together in the next one. A coordinator
that cannot be reached is NETWORK_EXCEPTION for each partition.

Each purpose has its own connection to a broker, so that a marker waiting for replication on the leader
does not hold verifications back."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

import trio

from trafka.broker.peer import PeerConnection, PeerError
from trafka.broker.security.inter_broker import PeerSecurity
from trafka.broker.txn.markers import TxnMarker
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import AddPartitionsToTxnRequest, WriteTxnMarkersRequest
from trafka.wire.protocol import ApiKey

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 40.0  # the leader waits up to its own 30 s for replication before answering
VERIFY_TIMEOUT_S = 30.0
CLIENT_ID = "trafka-txn-markers"
VERIFY_CLIENT_ID = "trafka-txn-verification"
MARKERS = "markers"
VERIFICATION = "verification"
_CLIENT_IDS = {MARKERS: CLIENT_ID, VERIFICATION: VERIFY_CLIENT_ID}


class _Verification:
    """One transactional id's partitions to verify, and their answer once ``done`` is set."""

    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "partitions", "results", "done")

    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                 partitions: list[tuple[str, int]]) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.partitions = partitions
        self.results: dict[tuple[str, int], ErrorCode] = {}
        self.done = trio.Event()

    def finish(self, results: Mapping[tuple[str, int], ErrorCode]) -> None:
        if not self.done.is_set():
            self.results = {key: results.get(key, ErrorCode.NONE) for key in self.partitions}
            self.done.set()

    def fail(self, code: ErrorCode) -> None:
        self.finish(dict.fromkeys(self.partitions, code))


class PeerChannel:
    """Connections to the other brokers for the transaction machinery: markers and verification."""

    def __init__(self, live_brokers: Callable[[], Mapping[int, tuple[str, int, str | None]]], *,
                 security: PeerSecurity | None = None) -> None:
        self._live_brokers = live_brokers
        self._security = security
        self._connections: dict[tuple[int, str], PeerConnection] = {}
        self._connecting: dict[tuple[int, str], trio.Lock] = {}
        #: Verifications waiting for the request in flight to their coordinator, by broker id.
        self._verify_queue: dict[int, list[_Verification]] = {}
        self._verify_sending: set[int] = set()
        #: Brokers whose last attempt failed: their next failures are logged at debug level only.
        self._failing: set[int] = set()

    async def send(self, marker: TxnMarker, leader_of: Callable[[str, int], int]) -> dict[tuple[str, int], ErrorCode]:
        """``marker`` to the leaders of its partitions, at once; an error for each partition."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for key in marker.partitions:
            by_leader.setdefault(leader_of(*key), []).append(key)
        results: dict[tuple[str, int], ErrorCode] = dict.fromkeys(by_leader.pop(-1, []),
                                                                  ErrorCode.NOT_LEADER_OR_FOLLOWER)
        async with trio.open_nursery() as nursery:
            for leader, partitions in by_leader.items():
                nursery.start_soon(self._send_to, leader, marker._replace(partitions=partitions), results)
        return results

    async def _send_to(self, broker_id: int, marker: TxnMarker, results: dict[tuple[str, int], ErrorCode]) -> None:
        results.update(dict.fromkeys(marker.partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER))
        by_topic: dict[str, list[int]] = {}
        for topic, partition in marker.partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            transaction_result=marker.committed, coordinator_epoch=marker.coordinator_epoch,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=partitions)
                    for topic, partitions in by_topic.items()])])
        try:
            connection = await self._connection(broker_id, MARKERS)
            if connection is None:
                return
            response = await connection.request(request, connection.api_versions(ApiKey.WRITE_TXN_MARKERS),
                                                timeout_s=REQUEST_TIMEOUT_S)
        except PeerError as exc:
            log.log(logging.DEBUG if broker_id in self._failing else logging.WARNING,
                    "transaction markers for producer %d to broker %d failed: %s; trying again",
                    marker.producer_id, broker_id, exc)
            self._failing.add(broker_id)
            await self._drop((broker_id, MARKERS))
            return
        self._failing.discard(broker_id)
        for result in response.markers:
            for topic in result.topics:
                for partition in topic.partitions:
                    results[(topic.name, partition.partition_index)] = ErrorCode(partition.error_code)

    # -- verification ------------------------------------------------------------------------------

    async def verify(self, broker_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """Ask ``broker_id``, the coordinator of ``transactional_id``, whether ``partitions`` are in the
        producer's ongoing transaction: an error for each partition, as the coordinator gives it
        (NETWORK_EXCEPTION when it could not be asked)."""
        wanted = _Verification(transactional_id, producer_id, producer_epoch, list(partitions))
        self._verify_queue.setdefault(broker_id, []).append(wanted)
        if broker_id not in self._verify_sending:
            # No request in flight to this coordinator: this task sends, then keeps sending what
            # others queued meanwhile, until nothing is left.
            self._verify_sending.add(broker_id)
            try:
                while self._verify_queue.get(broker_id):
                    await self._send_verifications(broker_id, self._next_verifications(broker_id))
            finally:
                self._verify_sending.discard(broker_id)
                for left in self._verify_queue.pop(broker_id, []):  # only if this task was cancelled
                    left.fail(ErrorCode.NETWORK_EXCEPTION)
        await wanted.done.wait()
        return wanted.results

    def _next_verifications(self, broker_id: int) -> list[_Verification]:
        """The queued verifications for the next request: one per transactional id (the request's
        transactions are keyed by it); a second one for the same id waits for the request after."""
        queue = self._verify_queue[broker_id]
        batch: dict[str, _Verification] = {}
        later: list[_Verification] = []
        for wanted in queue:
            if wanted.transactional_id in batch:
                later.append(wanted)
            else:
                batch[wanted.transactional_id] = wanted
        self._verify_queue[broker_id] = later
        return list(batch.values())

    async def _send_verifications(self, broker_id: int, batch: list[_Verification]) -> None:
        try:
            request = AddPartitionsToTxnRequest(transactions=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                    transactional_id=wanted.transactional_id, producer_id=wanted.producer_id,
                    producer_epoch=wanted.producer_epoch, verify_only=True,
                    topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=indexes)
                            for topic, indexes in _by_topic(wanted.partitions).items()])
                for wanted in batch])
            try:
                connection = await self._connection(broker_id, VERIFICATION)
                if connection is None:
                    raise PeerError(f"broker {broker_id} is not alive")
                version = connection.api_versions(ApiKey.ADD_PARTITIONS_TO_TXN, minimum=4)
                response = await connection.request(request, version, timeout_s=VERIFY_TIMEOUT_S)
            except (PeerError, OSError) as exc:
                log.log(logging.DEBUG if broker_id in self._failing else logging.WARNING,
                        "transaction verification with broker %d failed: %s", broker_id, exc)
                self._failing.add(broker_id)
                await self._drop((broker_id, VERIFICATION))
                for wanted in batch:
                    wanted.fail(ErrorCode.NETWORK_EXCEPTION)
                return
            self._failing.discard(broker_id)
            if response.error_code != ErrorCode.NONE:
                # A request-level error (Kafka's CLUSTER_AUTHORIZATION_FAILED among them: the
                # partition then cannot be shown to be in the transaction).
                code = ErrorCode(response.error_code)
                code = ErrorCode.INVALID_TXN_STATE if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else code
                for wanted in batch:
                    wanted.fail(code)
                return
            by_id = {wanted.transactional_id: wanted for wanted in batch}
            for result in response.results_by_transaction:
                wanted = by_id.get(result.transactional_id)
                if wanted is not None:
                    wanted.finish({(topic.name, partition.partition_index): ErrorCode(partition.partition_error_code)
                                   for topic in result.topic_results for partition in topic.results_by_partition})
        finally:
            for wanted in batch:  # not answered (or cancelled): the coordinator could not be asked
                wanted.fail(ErrorCode.NETWORK_EXCEPTION)

    # -- connections -----------------------------------------------------------------------------

    async def _connection(self, broker_id: int, purpose: str) -> PeerConnection | None:
        key = (broker_id, purpose)
        async with self._connecting.setdefault(key, trio.Lock()):  # one connection per broker and purpose
            connection = self._connections.get(key)
            if connection is not None and not connection.broken:
                return connection
            await self._drop(key)
            address = self._live_brokers().get(broker_id)
            if address is None:
                return None
            host, port, _rack = address
            connection = await PeerConnection.connect(host, port, client_id=_CLIENT_IDS[purpose],
                                                      connect_timeout_s=CONNECT_TIMEOUT_S, security=self._security)
            self._connections[key] = connection
            return connection

    async def _drop(self, key: tuple[int, str]) -> None:
        connection = self._connections.pop(key, None)
        if connection is not None:
            await connection.aclose()

    async def aclose(self) -> None:
        for key in list(self._connections):
            await self._drop(key)


#: The name the broker knows the channel by.


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return by_topic
