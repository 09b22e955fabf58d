"""Transaction markers for partitions led by other brokers of the cluster (Kafka's
``TransactionMarkerChannelManager``): one WriteTxnMarkers request per leader, over a connection kept per
broker and opened again when it breaks. A partition whose leader cannot be reached, or that is led by no
one, is answered NOT_LEADER_OR_FOLLOWER, and the coordinator tries it again."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import trio

from broker.replication.peer import PeerConnection, PeerError
from broker.txn.markers import TxnMarker
from wire.errors import ErrorCode
from wire.messages import WriteTxnMarkersRequest
from wire.protocol import ApiKey

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 40.0  # the leader waits up to its own 30 s for replication before answering
CLIENT_ID = "trafka-txn-markers"


class MarkerChannel:
    def __init__(self, live_brokers: Callable[[], Mapping[int, tuple[str, int, str | None]]]) -> None:
        self._live_brokers = live_brokers
        self._connections: dict[int, PeerConnection] = {}
        self._connecting: dict[int, trio.Lock] = {}
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
            connection = await self._connection(broker_id)
            if connection is None:
                return
            response = await connection.request(request, connection.api_versions(ApiKey.WRITE_TXN_MARKERS),
                                                timeout_s=REQUEST_TIMEOUT_S)
        except PeerError as exc:
            log.log(logging.DEBUG if broker_id in self._failing else logging.WARNING,
                    "transaction markers for producer %d to broker %d failed: %s; trying again",
                    marker.producer_id, broker_id, exc)
            self._failing.add(broker_id)
            await self._drop(broker_id)
            return
        self._failing.discard(broker_id)
        for result in response.markers:
            for topic in result.topics:
                for partition in topic.partitions:
                    results[(topic.name, partition.partition_index)] = ErrorCode(partition.error_code)

    async def _connection(self, broker_id: int) -> PeerConnection | None:
        async with self._connecting.setdefault(broker_id, trio.Lock()):  # one connection per broker
            connection = self._connections.get(broker_id)
            if connection is not None and not connection.broken:
                return connection
            await self._drop(broker_id)
            address = self._live_brokers().get(broker_id)
            if address is None:
                return None
            host, port, _rack = address
            connection = await PeerConnection.connect(host, port, client_id=CLIENT_ID,
                                                      connect_timeout_s=CONNECT_TIMEOUT_S)
            self._connections[broker_id] = connection
            return connection

    async def _drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            await connection.aclose()

    async def aclose(self) -> None:
        for broker_id in list(self._connections):
            await self._drop(broker_id)
