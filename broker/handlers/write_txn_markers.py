"""WriteTxnMarkers (key 27), versions 1-2.

Sent by a transaction coordinator to the leaders of the partitions of a transaction it has decided:
for each marker (producer id and epoch, COMMIT or ABORT, the coordinator's epoch) the leader appends
the control batch to every partition named and answers once the high watermark has passed it, or the
request timeout (30 s) is over; see broker.txn.markers, which the coordinator of this broker calls
directly, for the error each partition can get. Markers of a partition of ``__consumer_offsets``
complete the producer's transactional offset commits there.

The response lists one result per marker of the request, in its order, with the partitions of each
topic in the order asked. Markers are appended in request order; those naming distinct partitions are
replicated together.

Version notes: v0 is gone since Kafka 4.0 (KIP-896); v1 is flexible; v2 adds the marker's
TransactionVersion (KIP-1228): with 2, a marker's producer epoch must be newer than the producer's
(the coordinator bumps it with every transaction), unless it repeats the last marker.
With an authorizer, the sender (another broker) needs ALTER or CLUSTER_ACTION on the cluster
(CLUSTER_AUTHORIZATION_FAILED for every partition).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.broker.txn.markers import TxnMarker
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from trafka.wire.protocol import ApiKey

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


@handles(ApiKey.WRITE_TXN_MARKERS, 1, 2)
async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not (ctx.authorize_cluster(AclOperation.ALTER, log_if_denied=False)
            or ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)):
        return WriteTxnMarkersResponse(markers=[
            MarkerResult(producer_id=wanted.producer_id, topics=[
                TopicResult(name=topic.name, partitions=[
                    PartitionResult(partition_index=index, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    for index in topic.partition_indexes])
                for topic in wanted.topics])
            for wanted in request.markers])
    markers = [
        TxnMarker(
            producer_id=wanted.producer_id,
            producer_epoch=wanted.producer_epoch,
            coordinator_epoch=wanted.coordinator_epoch,
            committed=wanted.transaction_result,
            partitions=[(topic.name, index) for topic in wanted.topics for index in topic.partition_indexes],
            transaction_version=wanted.transaction_version,
        )
        for wanted in request.markers
    ]
    results: list[dict[tuple[str, int], ErrorCode]] = []
    for group in _rounds(markers):
        written = await ctx.broker.write_markers(group)
        results += [{key: written[key] for key in marker.partitions} for marker in group]
    return WriteTxnMarkersResponse(markers=[
        MarkerResult(producer_id=wanted.producer_id, topics=[
            TopicResult(name=topic.name, partitions=[
                PartitionResult(partition_index=index, error_code=codes[(topic.name, index)])
                for index in topic.partition_indexes
            ])
            for topic in wanted.topics
        ])
        for wanted, codes in zip(request.markers, results)
    ])


def _rounds(markers: list[TxnMarker]) -> list[list[TxnMarker]]:
    """Consecutive markers in groups that name each partition once, so that each gets its own code."""
    rounds: list[list[TxnMarker]] = []
    seen: set[tuple[str, int]] = set()
    for marker in markers:
        keys = set(marker.partitions)
        if not rounds or keys & seen:
            rounds.append([])
            seen = set()
        rounds[-1].append(marker)
        seen |= keys
    return rounds
