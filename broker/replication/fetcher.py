"""The replica fetcher: a follower copying its partitions' batches from one source broker (Kafka's
ReplicaFetcherThread and AbstractFetcherThread), as one Trio task.

A broker runs one :class:`ReplicaFetcher` per broker it follows partitions on; the replica manager
adds and removes partitions as leadership moves. ``run`` connects (lazily, once there is something
to fetch), learns the Fetch version both sides speak (at least 12, for diverging epochs), and then
sends one Fetch after another, each for every partition ready to fetch. The leader holds a Fetch
until data arrives or ``max_wait_ms`` passes, so the loop never polls; with nothing to fetch it waits
on an event that ``add_partition`` and ``leader_epoch_changed`` set, or until a partition's backoff
ends.

Each Fetch names this broker as a replica (``replica_id`` up to v14, ``replica_state`` from v15),
reads uncommitted data, and asks per partition from the log end offset, with the partition's
current leader epoch (so the leader can fence a stale follower), the epoch of the last batch the
follower holds (``last_fetched_epoch``, so the leader can say where the logs diverge) and the
follower's log start offset. No incremental fetch sessions: every Fetch is a full one.

Per partition (``process_partition_data``, a plain function over a replica and its part of the
response):

- data: the whole batches are appended with ``Log.append_as_follower`` exactly as the leader sent
  them (bytes, never decoded); a trailing partial batch, which a leader cuts at ``partition_max_bytes``,
  is dropped and fetched again. The follower's high watermark becomes the leader's, bounded by its own
  log end offset, and a log start offset the leader has moved up is followed. Data for a partition
  removed, re-added, truncated or given a new epoch while the Fetch was in flight is dropped.
- a diverging epoch (KIP-320's truncation on fetch): the follower finds where that epoch ends in its
  own log and truncates to the smaller of that and the leader's end offset (to its own end of an
  older epoch when it does not know the leader's, so that the next Fetch narrows it down), then goes
  on fetching; the high watermark waits for the next response.
- ``OFFSET_OUT_OF_RANGE``: ListOffsets (as a replica) asks the leader's log end offset; a follower
  ahead of it (an unclean leader election) truncates to it. Otherwise the leader's log start offset
  is asked, and a follower whose log ends before it starts again, empty, there.
- ``FENCED_LEADER_EPOCH``: the leader has a newer epoch than ours. The partition stops fetching until
  its ``leader_epoch`` changes: call ``leader_epoch_changed`` (or ``add_partition`` again) after
  updating it, as Kafka waits for the new LeaderAndIsr state.
- ``UNKNOWN_LEADER_EPOCH``, ``NOT_LEADER_OR_FOLLOWER``, ``UNKNOWN_TOPIC_OR_PARTITION``,
  ``UNKNOWN_TOPIC_ID``, ``KAFKA_STORAGE_ERROR`` and any other error: the partition backs off
  ``backoff_ms`` while the others go on.
- an append that finds corrupt batches is logged and the partition backs off (a transient state of
  the leader's log, as Kafka treats it); a storage error in the follower's own log, or any other
  failure of the append, marks the partition failed: it fetches no more until added again.

After any change to a partition's log end offset, high watermark or log start offset, ``on_progress``
is called with the replica. Appends run on the Trio thread: a response holds at most ``max_bytes``.

A lost connection (refused, closed, timed out, malformed) backs the whole fetcher off ``backoff_ms``
before it reconnects; an outage is logged once when it begins and once when it ends.
"""
from __future__ import annotations

import enum
import logging
import math
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import trio

from trafka.broker.peer import PeerConnection, PeerError
from trafka.broker.security.inter_broker import PeerSecurity
from trafka.storage.leader_epoch import UNDEFINED_EPOCH
from trafka.storage.log import Log
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from trafka.wire.protocol import ApiKey
from trafka.wire.records import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD

__all__ = [
    "FetchState",
    "FollowedPartition",
    "FollowerReplica",
    "Outcome",
    "ReplicaFetcher",
    "process_partition_data",
    "start_at_leader_start_offset",
    "truncate_on_diverging_epoch",
    "truncate_to_leader_end_offset",
    "whole_batches_size",
]

logger = logging.getLogger(__name__)

PartitionData = FetchResponse.PartitionData

#: Fetch versions below 12 carry no last_fetched_epoch nor diverging_epoch.
MIN_FETCH_VERSION = 12
#: ListOffsets carries the current leader epoch from version 4.
MIN_LIST_OFFSETS_VERSION = 4
TOPIC_IDS_FETCH_VERSION = 13
REPLICA_STATE_FETCH_VERSION = 15
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
READ_UNCOMMITTED = 0
FULL_FETCH_SESSION_ID = 0
FULL_FETCH_SESSION_EPOCH = -1
NO_BROKER_EPOCH = -1
#: replica.socket.timeout.ms: how long a request may go unanswered (beyond a Fetch's own wait).
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
#: socket.connection.setup.timeout.ms
DEFAULT_CONNECT_TIMEOUT_MS = 10_000

_BASE_OFFSET = struct.Struct(">q")
_BATCH_LENGTH = struct.Struct(">i")
_BATCH_LENGTH_OFFSET = 8
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_OFFSET = 23
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

# Errors after which a partition backs off and tries again; anything else unexpected does too.
_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INCONSISTENT_TOPIC_ID,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.LEADER_NOT_AVAILABLE,
})
# Append errors that say the leader's bytes were bad, not our disk: back off and fetch them again.
_CORRUPT = frozenset({ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD})


class FollowerReplica(Protocol):
    """What the fetcher needs of a partition this broker follows (broker.partition.Partition has it).

    ``leader_epoch`` is the partition's current leader epoch as this broker knows it; the owner
    updates it in place when the partition's state changes.
    """

    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    leader_epoch: int


@dataclass(eq=False, slots=True)
class FollowedPartition:
    """A plain :class:`FollowerReplica`."""

    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    leader_epoch: int = 0


class FetchState(enum.Enum):
    """Where a partition stands in its fetcher."""

    FETCHING = "fetching"
    DELAYED = "delayed"  # backing off after an error until its delay ends
    FENCED = "fenced"  # the leader has a newer leader epoch: waits for ours to change
    FAILED = "failed"  # the follower's log failed: waits to be added again


class Outcome(enum.Enum):
    """What one partition's part of a Fetch response did."""

    PROGRESS = "progress"  # batches appended (or none there) and the leader's offsets taken
    TRUNCATED = "truncated"  # diverging epoch: the log was truncated
    OUT_OF_RANGE = "out_of_range"  # the fetch offset is outside the leader's log: ask its offsets
    RETRY = "retry"  # back off, then fetch again
    FENCED = "fenced"  # our leader epoch is stale
    FAILED = "failed"  # the follower's log failed
    STALE = "stale"  # the log moved since the request was made: the data is dropped


# -- the decisions, as plain functions over a replica's log ------------------------------------------

def whole_batches_size(records: bytes | bytearray | memoryview) -> int:
    """How many bytes at the front of ``records`` are whole batches, read from the batch headers
    alone; the rest is a partial batch to drop. A batch too short to be one is counted in, so that
    the append reports the corruption instead of it being dropped again and again."""
    size = len(records)
    position = 0
    while size - position >= LOG_OVERHEAD:
        (batch_length,) = _BATCH_LENGTH.unpack_from(records, position + _BATCH_LENGTH_OFFSET)
        if batch_length < _MIN_BATCH_LENGTH:
            return size
        end = position + LOG_OVERHEAD + batch_length
        if end > size:
            break
        position = end
    return position


def truncate_on_diverging_epoch(log: Log, epoch: int, end_offset: int) -> int:
    """Truncate ``log`` where it diverges from the leader's, which says that ``epoch`` (the largest
    it knows at or below our last fetched one) ends at ``end_offset``. Returns the new log end offset.

    Our own end of that epoch (of the largest we know at or below it) bounds the truncation as well
    as the leader's; when we do not know the leader's epoch, our end of the older one we know is
    used alone, and the next Fetch, with that older epoch as its last fetched one, narrows it down.
    """
    log_end_offset = log.log_end_offset
    if epoch < 0 or end_offset < 0:
        return log_end_offset
    our_epoch, our_end_offset = log.end_offset_for_leader_epoch(epoch)
    if our_epoch == UNDEFINED_EPOCH:
        target = min(end_offset, log_end_offset)
    elif our_epoch != epoch:
        target = min(our_end_offset, log_end_offset)
    else:
        target = min(our_end_offset, end_offset, log_end_offset)
    log.truncate_to(target)
    return log.log_end_offset


def truncate_to_leader_end_offset(log: Log, leader_end_offset: int) -> bool:
    """OFFSET_OUT_OF_RANGE, first step: a follower whose log runs past the leader's (an unclean
    leader election) truncates to the leader's end. Returns whether it did."""
    if 0 <= leader_end_offset < log.log_end_offset:
        log.truncate_to(leader_end_offset)
        return True
    return False


def start_at_leader_start_offset(log: Log, leader_start_offset: int) -> bool:
    """OFFSET_OUT_OF_RANGE, second step: a follower whose log ends before the leader's starts (the
    leader deleted what it lacks) starts again, empty, at the leader's start. Returns whether it did."""
    if leader_start_offset > log.log_end_offset:
        log.truncate_fully_and_start_at(leader_start_offset)
        log.update_high_watermark(leader_start_offset)  # never below the log start offset
        return True
    return False


def process_partition_data(replica: FollowerReplica, data: PartitionData, *, fetch_offset: int) -> Outcome:
    """Apply one partition's part of a Fetch response, requested from ``fetch_offset``, to the
    replica's log; see the module docstring. Returns what happened, for the fetcher to act on."""
    code = data.error_code
    if code == ErrorCode.NONE:
        diverging = data.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            return _truncate_diverging(replica, diverging)
        return _append(replica, data, fetch_offset)
    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return Outcome.OUT_OF_RANGE
    if code == ErrorCode.FENCED_LEADER_EPOCH:
        logger.info("%s-%d: the leader has a newer leader epoch than %d; waiting for the new state",
                    replica.topic, replica.index, replica.leader_epoch)
        return Outcome.FENCED
    level = logging.DEBUG if code in _RETRIABLE else logging.WARNING
    logger.log(level, "%s-%d: fetch failed with %s; retrying after a backoff",
               replica.topic, replica.index, _error_name(code))
    return Outcome.RETRY


def _truncate_diverging(replica: FollowerReplica, diverging: FetchResponse.EpochEndOffset) -> Outcome:
    log = replica.log
    before = log.log_end_offset
    try:
        after = truncate_on_diverging_epoch(log, diverging.epoch, diverging.end_offset)
    except (KafkaError, OSError) as exc:
        logger.error("%s-%d: truncating the log after a diverging epoch failed: %s",
                     replica.topic, replica.index, exc)
        return Outcome.FAILED
    logger.info("%s-%d: diverging from the leader at epoch %d (ends at %d there): truncated from %d to %d",
                replica.topic, replica.index, diverging.epoch, diverging.end_offset, before, after)
    return Outcome.TRUNCATED


def _restart_at_first_batch(log: Log, records: bytes | bytearray | memoryview) -> None:
    """The leader's log start offset can fall inside a batch (DeleteRecords), and a follower that
    starts there is sent that whole batch: an empty log starts again at the batch's base offset, as
    Kafka's Partition does, and takes the leader's log start offset after the append."""
    log_end_offset = log.log_end_offset
    if log_end_offset != log.log_start_offset or len(records) < RECORD_BATCH_OVERHEAD:
        return
    (base_offset,) = _BASE_OFFSET.unpack_from(records, 0)
    (last_offset_delta,) = _LAST_OFFSET_DELTA.unpack_from(records, _LAST_OFFSET_DELTA_OFFSET)
    if base_offset < log_end_offset <= base_offset + last_offset_delta:
        log.truncate_fully_and_start_at(base_offset)


def _append(replica: FollowerReplica, data: PartitionData, fetch_offset: int) -> Outcome:
    log = replica.log
    if log.log_end_offset != fetch_offset:
        return Outcome.STALE
    records = data.records
    try:
        if records:
            whole = whole_batches_size(records)
            if whole:
                batches = records if whole == len(records) else memoryview(records)[:whole]
                _restart_at_first_batch(log, batches)
                log.append_as_follower(batches)
        if data.high_watermark >= 0:
            log.update_high_watermark(min(data.high_watermark, log.log_end_offset))
        if data.log_start_offset > log.log_start_offset:
            # Never past our high watermark (the log refuses that); the leader's start is at most its
            # own, and a follower has fetched up to it before it is told of it.
            log.delete_records_before(min(data.log_start_offset, log.high_watermark))
    except KafkaError as exc:
        if exc.code in _CORRUPT:
            logger.error("%s-%d: invalid batches fetched at offset %d: %s; fetching them again after a backoff",
                         replica.topic, replica.index, fetch_offset, exc)
            return Outcome.RETRY
        logger.error("%s-%d: appending the batches fetched at offset %d failed: %s; the partition stops fetching",
                     replica.topic, replica.index, fetch_offset, exc)
        return Outcome.FAILED
    except (OSError, ValueError) as exc:
        logger.error("%s-%d: appending the batches fetched at offset %d failed: %s; the partition stops fetching",
                     replica.topic, replica.index, fetch_offset, exc)
        return Outcome.FAILED
    return Outcome.PROGRESS


# -- the fetcher -------------------------------------------------------------------------------------

@dataclass(eq=False, slots=True)
class _PartitionFetch:
    """A partition in the fetcher: its replica and where it stands."""

    replica: FollowerReplica
    state: FetchState = FetchState.FETCHING
    delay_until: float = 0.0  # trio.current_time() at which a DELAYED partition fetches again
    fenced_epoch: int = -1  # the leader epoch a FENCED partition was fenced under


@dataclass(frozen=True, slots=True)
class _Sent:
    """What a partition was fetched with, to recognise a response that no longer applies."""

    fetch: _PartitionFetch
    fetch_offset: int
    leader_epoch: int


def _offsets(log: Log) -> tuple[int, int, int]:
    return log.log_end_offset, log.high_watermark, log.log_start_offset


class ReplicaFetcher:
    """Fetches the partitions this broker (``node_id``) follows on broker ``source_id``, which
    listens at ``address``. Settings take Kafka's replica.fetch.* defaults; see the module docstring."""

    def __init__(
        self,
        node_id: int,
        source_id: int,
        address: tuple[str, int],
        *,
        max_bytes: int = 10_485_760,  # replica.fetch.response.max.bytes
        partition_max_bytes: int = 1_048_576,  # replica.fetch.max.bytes
        max_wait_ms: int = 500,  # replica.fetch.wait.max.ms
        min_bytes: int = 1,  # replica.fetch.min.bytes
        backoff_ms: int = 1000,  # replica.fetch.backoff.ms
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,  # replica.socket.timeout.ms
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        on_progress: Callable[[FollowerReplica], None] | None = None,
        security: PeerSecurity | None = None,
    ) -> None:
        self.node_id = node_id
        self.source_id = source_id
        self.address = address
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.backoff_ms = backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.on_progress = on_progress
        #: TLS and SASL of the inter-broker listener (None: PLAINTEXT).
        self.security = security
        self.client_id = f"broker-{node_id}-fetcher-{source_id}"
        #: Connections made so far (a new one after every outage).
        self.connect_count = 0
        #: The Fetch version of the current connection; None while not connected.
        self.fetch_version: int | None = None
        self._partitions: dict[tuple[str, int], _PartitionFetch] = {}
        self._changed = trio.Event()
        self._outage_since: float | None = None
        self._log_name = f"[ReplicaFetcher replicaId={node_id}, leaderId={source_id}]"

    def __repr__(self) -> str:
        return f"ReplicaFetcher(node_id={self.node_id}, source_id={self.source_id}, partitions={len(self._partitions)})"

    # -- partitions ------------------------------------------------------------------------------------

    def add_partition(self, replica: FollowerReplica) -> None:
        """Fetch ``replica`` from the next Fetch on (a partition already here starts afresh)."""
        key = (replica.topic, replica.index)
        self._partitions.pop(key, None)
        self._partitions[key] = _PartitionFetch(replica)
        self._changed.set()

    def remove_partition(self, topic: str, index: int) -> FollowerReplica | None:
        """Stop fetching a partition; data for it in a Fetch already in flight is dropped."""
        fetch = self._partitions.pop((topic, index), None)
        return None if fetch is None else fetch.replica

    def leader_epoch_changed(self, topic: str, index: int) -> None:
        """The partition's ``leader_epoch`` was updated: a partition fenced or backing off fetches
        again at once (a failed one stays failed until added again)."""
        fetch = self._partitions.get((topic, index))
        if fetch is not None and fetch.state in (FetchState.FENCED, FetchState.DELAYED):
            fetch.state = FetchState.FETCHING
            self._changed.set()

    @property
    def partitions(self) -> Mapping[tuple[str, int], FollowerReplica]:
        """The partitions fetched, by (topic, index): a snapshot."""
        return {key: fetch.replica for key, fetch in self._partitions.items()}

    def fetch_state(self, topic: str, index: int) -> FetchState | None:
        fetch = self._partitions.get((topic, index))
        return None if fetch is None else fetch.state

    # -- the task --------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetch until cancelled, reconnecting after a backoff whenever the connection fails."""
        task_status.started()
        host, port = self.address
        while True:
            await self._ready_partitions()  # connect only once there is something to fetch
            try:
                connection = await PeerConnection.connect(
                    host, port, client_id=self.client_id, connect_timeout_s=self.connect_timeout_ms / 1000,
                    security=self.security,
                )
            except PeerError as exc:
                self._connection_failed(exc)
            else:
                self.connect_count += 1
                try:
                    await self._fetch_from(connection)
                except PeerError as exc:
                    self._connection_failed(exc)
                finally:
                    self.fetch_version = None
                    await connection.aclose()
            await trio.sleep(self.backoff_ms / 1000)

    async def _fetch_from(self, connection: PeerConnection) -> None:
        version = connection.api_versions(ApiKey.FETCH, minimum=MIN_FETCH_VERSION)
        self.fetch_version = version
        timeout_s = (self.max_wait_ms + self.request_timeout_ms) / 1000
        while True:
            ready = await self._ready_partitions()
            request, sent = self._fetch_request(ready, version)
            response = await connection.request(request, version, timeout_s=timeout_s)
            assert isinstance(response, FetchResponse)
            self._connection_ok()
            if response.error_code != ErrorCode.NONE:
                logger.warning("%s Fetch failed with %s; retrying after a backoff",
                               self._log_name, _error_name(response.error_code))
                await trio.sleep(self.backoff_ms / 1000)
                continue
            out_of_range = self._process_response(response, sent, version)
            for item in out_of_range:
                await self._handle_out_of_range(connection, item)

    async def _ready_partitions(self) -> list[_PartitionFetch]:
        """The partitions to fetch now; waits (without polling) while there are none."""
        while True:
            now = trio.current_time()
            ready = [fetch for fetch in self._partitions.values() if self._is_ready(fetch, now)]
            if ready:
                return ready
            next_delay_end = min(
                (f.delay_until for f in self._partitions.values() if f.state is FetchState.DELAYED),
                default=math.inf,
            )
            with trio.move_on_at(next_delay_end):
                await self._changed.wait()
            self._changed = trio.Event()

    @staticmethod
    def _is_ready(fetch: _PartitionFetch, now: float) -> bool:
        state = fetch.state
        if state is FetchState.DELAYED and fetch.delay_until <= now:
            fetch.state = state = FetchState.FETCHING
        elif state is FetchState.FENCED and fetch.replica.leader_epoch != fetch.fenced_epoch:
            fetch.state = state = FetchState.FETCHING
        return state is FetchState.FETCHING

    def _fetch_request(
        self, ready: list[_PartitionFetch], version: int
    ) -> tuple[FetchRequest, dict[tuple[str, int], _Sent]]:
        by_topic: dict[str, FetchRequest.FetchTopic] = {}
        sent: dict[tuple[str, int], _Sent] = {}
        for fetch in ready:
            replica = fetch.replica
            log = replica.log
            topic = by_topic.get(replica.topic)
            if topic is None:
                topic = by_topic[replica.topic] = (
                    FetchRequest.FetchTopic(topic_id=replica.topic_id) if version >= TOPIC_IDS_FETCH_VERSION
                    else FetchRequest.FetchTopic(topic=replica.topic)
                )
            latest_epoch = log.latest_epoch
            topic.partitions.append(FetchRequest.FetchPartition(
                partition=replica.index,
                current_leader_epoch=replica.leader_epoch,
                fetch_offset=log.log_end_offset,
                last_fetched_epoch=UNDEFINED_EPOCH if latest_epoch is None else latest_epoch,
                log_start_offset=log.log_start_offset,
                partition_max_bytes=self.partition_max_bytes,
            ))
            sent[(replica.topic, replica.index)] = _Sent(fetch, log.log_end_offset, replica.leader_epoch)
        request = FetchRequest(
            max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=READ_UNCOMMITTED,
            session_id=FULL_FETCH_SESSION_ID,
            session_epoch=FULL_FETCH_SESSION_EPOCH,
            topics=list(by_topic.values()),
        )
        if version >= REPLICA_STATE_FETCH_VERSION:
            request.replica_state = FetchRequest.ReplicaState(replica_id=self.node_id, replica_epoch=NO_BROKER_EPOCH)
        else:
            request.replica_id = self.node_id
        return request, sent

    def _process_response(self, response: FetchResponse, sent: dict[tuple[str, int], _Sent],
                          version: int) -> list[_Sent]:
        """Apply the response partition by partition; returns those out of range."""
        names = {s.fetch.replica.topic_id: s.fetch.replica.topic for s in sent.values()}
        out_of_range = []
        fetched_data = []
        for topic_response in response.responses:
            topic = topic_response.topic if version < TOPIC_IDS_FETCH_VERSION else names.get(topic_response.topic_id)
            for data in topic_response.partitions:
                key = (topic, data.partition_index)
                item = sent.get(key)  # type: ignore[arg-type]
                if item is None or not self._still_applies(key, item):
                    continue
                replica = item.fetch.replica
                before = _offsets(replica.log)
                outcome = process_partition_data(replica, data, fetch_offset=item.fetch_offset)
                if outcome is Outcome.OUT_OF_RANGE:
                    out_of_range.append(item)
                else:
                    self._after(item, outcome)
                if outcome is Outcome.PROGRESS and data.records:
                    fetched_data.append(key)
                self._maybe_report(replica, before)
        # Partitions that got data go to the back of the next request, as Kafka's fetchers rotate
        # them, so that one busy partition does not take every response's max_bytes.
        for key in fetched_data:
            fetch = self._partitions.pop(key, None)
            if fetch is not None:
                self._partitions[key] = fetch
        return out_of_range

    def _still_applies(self, key: tuple[str, int], item: _Sent) -> bool:
        """The partition is still the one fetched, under the same epoch, from the same offset."""
        fetch = item.fetch
        return (
            self._partitions.get(key) is fetch
            and fetch.state is FetchState.FETCHING
            and fetch.replica.leader_epoch == item.leader_epoch
            and fetch.replica.log.log_end_offset == item.fetch_offset
        )

    def _after(self, item: _Sent, outcome: Outcome) -> None:
        fetch = item.fetch
        if outcome is Outcome.RETRY:
            self._delay(fetch)
        elif outcome is Outcome.FENCED:
            fetch.state = FetchState.FENCED
            fetch.fenced_epoch = item.leader_epoch
        elif outcome is Outcome.FAILED:
            fetch.state = FetchState.FAILED

    def _delay(self, fetch: _PartitionFetch) -> None:
        fetch.state = FetchState.DELAYED
        fetch.delay_until = trio.current_time() + self.backoff_ms / 1000

    def _maybe_report(self, replica: FollowerReplica, before: tuple[int, int, int]) -> None:
        if self.on_progress is not None and _offsets(replica.log) != before:
            self.on_progress(replica)

    async def _handle_out_of_range(self, connection: PeerConnection, item: _Sent) -> None:
        """Kafka's handling of OFFSET_OUT_OF_RANGE; see the module docstring."""
        fetch = item.fetch
        replica = fetch.replica
        log = replica.log
        key = (replica.topic, replica.index)
        leader_end_offset = await self._leader_offset(connection, item, LATEST_TIMESTAMP)
        if leader_end_offset is None or not self._still_applies(key, item):
            return
        before = _offsets(log)
        try:
            if truncate_to_leader_end_offset(log, leader_end_offset):
                logger.warning("%s %s-%d: the leader's log ends at %d, before ours at %d: truncated to it",
                               self._log_name, replica.topic, replica.index, leader_end_offset, item.fetch_offset)
            else:
                leader_start_offset = await self._leader_offset(connection, item, EARLIEST_TIMESTAMP)
                if leader_start_offset is None or not self._still_applies(key, item):
                    return
                if start_at_leader_start_offset(log, leader_start_offset):
                    logger.info("%s %s-%d: the leader's log starts at %d, after ours ends at %d: starting again there",
                                self._log_name, replica.topic, replica.index, leader_start_offset, item.fetch_offset)
                else:
                    # Our offset lies within the leader's log after all (it moved meanwhile): try again,
                    # after a backoff so that a disagreement cannot turn into a busy loop.
                    self._delay(fetch)
        except (KafkaError, OSError, ValueError) as exc:
            logger.error("%s %s-%d: truncating after OFFSET_OUT_OF_RANGE failed: %s; the partition stops fetching",
                         self._log_name, replica.topic, replica.index, exc)
            fetch.state = FetchState.FAILED
        self._maybe_report(replica, before)

    async def _leader_offset(self, connection: PeerConnection, item: _Sent, timestamp: int) -> int | None:
        """The leader's log end (LATEST) or start (EARLIEST) offset, asked as a replica; None (and the
        partition backs off) when the leader answers with an error."""
        replica = item.fetch.replica
        version = connection.api_versions(ApiKey.LIST_OFFSETS, minimum=MIN_LIST_OFFSETS_VERSION)
        request = ListOffsetsRequest(
            replica_id=self.node_id,
            isolation_level=READ_UNCOMMITTED,
            timeout_ms=self.request_timeout_ms,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=replica.topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=replica.index, current_leader_epoch=item.leader_epoch, timestamp=timestamp,
                ),
            ])],
        )
        response = await connection.request(request, version, timeout_s=self.request_timeout_ms / 1000)
        assert isinstance(response, ListOffsetsResponse)
        found = [p for t in response.topics if t.name == replica.topic
                 for p in t.partitions if p.partition_index == replica.index]
        code = found[0].error_code if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if code == ErrorCode.NONE and found[0].offset >= 0:
            return found[0].offset
        what = "end" if timestamp == LATEST_TIMESTAMP else "start"
        logger.warning("%s %s-%d: asking the leader for its log %s offset failed: %s; retrying after a backoff",
                       self._log_name, replica.topic, replica.index, what,
                       _error_name(code) if code else "no offset")
        if self._partitions.get((replica.topic, replica.index)) is item.fetch:
            self._delay(item.fetch)
        return None

    # -- connection outages ----------------------------------------------------------------------------

    def _connection_failed(self, exc: PeerError) -> None:
        if self._outage_since is None:
            self._outage_since = trio.current_time()
            logger.warning("%s cannot fetch from broker %d at %s:%d: %s; reconnecting every %d ms",
                           self._log_name, self.source_id, *self.address, exc, self.backoff_ms)
        else:
            logger.debug("%s broker %d still unreachable: %s", self._log_name, self.source_id, exc)

    def _connection_ok(self) -> None:
        if self._outage_since is not None:
            logger.info("%s fetching from broker %d again, after %.1f s", self._log_name, self.source_id,
                        trio.current_time() - self._outage_since)
            self._outage_since = None


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
