"""Where share partitions keep their state: the SharePersister implementations (Kafka's DefaultStatePersister).

:class:`LocalPersister` asks the share coordinator of this process. :class:`ClusterPersister`, in a cluster, finds
the broker leading the key's ``__share_group_state`` partition (creating the topic on first use, as FindCoordinator
does) and asks the coordinator there: in this process when it is this broker, otherwise with the share state APIs
(InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
ReadShareGroupStateSummary) sent over a connection kept to that broker (:mod:`trafka.broker.peer`).

A coordinator that moves, loads or cannot be reached is asked again, after a back-off doubling from
``RETRY_BACKOFF_S`` to ``RETRY_BACKOFF_MAX_S``, until ``RETRY_TIMEOUT_S`` has passed (Kafka's persister retries in
the same way); the error of the last attempt is raised then. Every other error is raised at once, with the code
and message the coordinator gave.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import trio

from trafka.broker.peer import PeerConnection, PeerError
from trafka.broker.share.state import PartitionState, StateBatch, share_coordinator_key
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:
    from trafka.broker.security.inter_broker import PeerSecurity
    from trafka.broker.share.coordinator import ShareCoordinator

log = logging.getLogger(__name__)

CLIENT_ID = "trafka-share-persister"
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 1.0
RETRY_TIMEOUT_S = 30.0
#: Errors after which the coordinator is looked for and asked again.
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.REQUEST_TIMED_OUT})


class LocalPersister:
    """The share coordinator of this process, as a SharePersister."""

    def __init__(self, coordinator: Callable[[], ShareCoordinator]) -> None:
        self._coordinator = coordinator

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> None:
        coordinator = self._coordinator()
        await coordinator.ensure_topic()
        await coordinator.initialize(group_id, topic_id, partition, state_epoch, start_offset)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionState:
        coordinator = self._coordinator()
        await coordinator.ensure_topic()
        return await coordinator.read(group_id, topic_id, partition, leader_epoch)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: PartitionState) -> None:
        coordinator = self._coordinator()
        await coordinator.ensure_topic()
        await coordinator.write(group_id, topic_id, partition, state)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        coordinator = self._coordinator()
        await coordinator.ensure_topic()
        await coordinator.delete(group_id, topic_id, partition)

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> PartitionState:
        coordinator = self._coordinator()
        await coordinator.ensure_topic()
        return await coordinator.read_summary(group_id, topic_id, partition, leader_epoch)


def _check(code: int, message: str | None) -> None:
    if code != ErrorCode.NONE:
        try:
            error = ErrorCode(code)
        except ValueError:
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        raise KafkaError(error, message or "")


def _batches(batches) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in batches)


class ClusterPersister:
    """The coordinator of each key wherever it is in the cluster (see the module docstring)."""

    def __init__(self, coordinator: Callable[[], ShareCoordinator], node_id: int,
                 live_brokers: Callable[[], Mapping[int, tuple[str, int, str | None]]], *,
                 security: PeerSecurity | None = None) -> None:
        self._coordinator = coordinator
        self._local = LocalPersister(coordinator)
        self._node_id = node_id
        self._live_brokers = live_brokers
        self._security = security
        self._connections: dict[int, PeerConnection] = {}
        self._connecting: dict[int, trio.Lock] = {}

    # -------------------------------------------------------------------------------- routing

    async def _call(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    local: Callable[[], Awaitable], remote: Callable[[PeerConnection], Awaitable]):
        key = share_coordinator_key(group_id, topic_id, partition)
        deadline = trio.current_time() + RETRY_TIMEOUT_S
        backoff = RETRY_BACKOFF_S
        while True:
            try:
                coordinator = self._coordinator()
                await coordinator.ensure_topic()
                leader = coordinator.coordinator_id(key)
                if leader is None:
                    raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
                if leader == self._node_id:
                    return await local()
                connection = await self._connection(leader)
                if connection is None:
                    raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"Broker {leader} is not live.")
                try:
                    with trio.fail_after(REQUEST_TIMEOUT_S):
                        return await remote(connection)
                except (PeerError, trio.TooSlowError) as exc:
                    await self._drop(leader)
                    raise KafkaError(ErrorCode.NETWORK_EXCEPTION, f"{key}: broker {leader}: {exc}") from None
            except KafkaError as exc:
                if exc.code not in RETRIABLE or trio.current_time() + backoff > deadline:
                    raise
                log.debug("share state of %s: %s; asking again in %.1f s", key, exc, backoff)
            await trio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)

    async def _connection(self, broker_id: int) -> PeerConnection | None:
        async with self._connecting.setdefault(broker_id, trio.Lock()):
            connection = self._connections.get(broker_id)
            if connection is not None and not connection.broken:
                return connection
            await self._drop(broker_id)
            address = self._live_brokers().get(broker_id)
            if address is None:
                return None
            host, port, _rack = address
            try:
                connection = await PeerConnection.connect(host, port, client_id=CLIENT_ID,
                                                          connect_timeout_s=CONNECT_TIMEOUT_S, security=self._security)
            except PeerError as exc:
                raise KafkaError(ErrorCode.NETWORK_EXCEPTION, str(exc)) from None
            self._connections[broker_id] = connection
            return connection

    async def _drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            await connection.aclose()

    async def aclose(self) -> None:
        for broker_id in list(self._connections):
            await self._drop(broker_id)

    # -------------------------------------------------------------------------------- the persister

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> None:
        async def remote(connection: PeerConnection) -> None:
            request = InitializeShareGroupStateRequest(group_id=group_id, topics=[
                InitializeShareGroupStateRequest.InitializeStateData(topic_id=topic_id, partitions=[
                    InitializeShareGroupStateRequest.PartitionData(partition=partition, state_epoch=state_epoch,
                                                                   start_offset=start_offset)])])
            response = await connection.request(request, connection.api_versions(
                ApiKey.INITIALIZE_SHARE_GROUP_STATE))
            result = _only(response)
            _check(result.error_code, result.error_message)

        await self._call(group_id, topic_id, partition, lambda: self._local.initialize(
            group_id, topic_id, partition, state_epoch, start_offset), remote)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionState:
        async def remote(connection: PeerConnection) -> PartitionState:
            request = ReadShareGroupStateRequest(group_id=group_id, topics=[
                ReadShareGroupStateRequest.ReadStateData(topic_id=topic_id, partitions=[
                    ReadShareGroupStateRequest.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
            response = await connection.request(request, connection.api_versions(ApiKey.READ_SHARE_GROUP_STATE))
            result = _only(response)
            _check(result.error_code, result.error_message)
            return PartitionState(result.state_epoch, leader_epoch, result.start_offset,
                                  _batches(result.state_batches))

        return await self._call(group_id, topic_id, partition, lambda: self._local.read(
            group_id, topic_id, partition, leader_epoch), remote)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: PartitionState) -> None:
        async def remote(connection: PeerConnection) -> None:
            W = WriteShareGroupStateRequest
            request = W(group_id=group_id, topics=[W.WriteStateData(topic_id=topic_id, partitions=[W.PartitionData(
                partition=partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
                start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count,
                state_batches=[W.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                            delivery_state=int(b.delivery_state), delivery_count=b.delivery_count)
                               for b in state.batches])])])
            response = await connection.request(request, connection.api_versions(ApiKey.WRITE_SHARE_GROUP_STATE))
            result = _only(response)
            _check(result.error_code, result.error_message)

        await self._call(group_id, topic_id, partition, lambda: self._local.write(
            group_id, topic_id, partition, state), remote)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        async def remote(connection: PeerConnection) -> None:
            request = DeleteShareGroupStateRequest(group_id=group_id, topics=[
                DeleteShareGroupStateRequest.DeleteStateData(topic_id=topic_id, partitions=[
                    DeleteShareGroupStateRequest.PartitionData(partition=partition)])])
            response = await connection.request(request, connection.api_versions(ApiKey.DELETE_SHARE_GROUP_STATE))
            result = _only(response)
            _check(result.error_code, result.error_message)

        await self._call(group_id, topic_id, partition, lambda: self._local.delete(
            group_id, topic_id, partition), remote)

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> PartitionState:
        async def remote(connection: PeerConnection) -> PartitionState:
            S = ReadShareGroupStateSummaryRequest
            request = S(group_id=group_id, topics=[S.ReadStateSummaryData(topic_id=topic_id, partitions=[
                S.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
            response = await connection.request(request, connection.api_versions(
                ApiKey.READ_SHARE_GROUP_STATE_SUMMARY))
            result = _only(response)
            _check(result.error_code, result.error_message)
            return PartitionState(result.state_epoch, result.leader_epoch, result.start_offset, (),
                                  result.delivery_complete_count)

        return await self._call(group_id, topic_id, partition, lambda: self._local.read_summary(
            group_id, topic_id, partition, leader_epoch), remote)


def _only(response):
    """The one partition result of a share state response to a request for one partition."""
    if len(response.results) != 1 or len(response.results[0].partitions) != 1:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "The coordinator's response does not answer the request.")
    return response.results[0].partitions[0]
