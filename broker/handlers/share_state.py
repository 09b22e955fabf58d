"""What the five share state APIs have in common (InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary), as Kafka's share coordinator answers them.

They are sent by brokers: with an authorizer the sender needs CLUSTER_ACTION on the cluster, or every partition is
CLUSTER_AUTHORIZATION_FAILED with Kafka's message. An empty group id, no topics, or a topic without partitions is
answered with no results. Otherwise each partition is asked of this broker's share coordinator
(broker.share.coordinator) and answered alone: what the coordinator gave, or the KafkaError it raised.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from trafka.broker.handlers.registry import RequestContext
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode, KafkaError

#: Kafka's message for a request its sender may not make (it names no permission here).
CLUSTER_REFUSED = "Cluster authorization failed."

#: (the share coordinator, the topic id, the request's partition) -> the partition result's fields.
Act = Callable[[Any, Any, Any], Awaitable[dict[str, Any]]]


async def answer_each_partition(ctx: RequestContext, request: Any, response: type, result: type,
                                partition_result: type, act: Act) -> Any:
    """The ``response`` to a share state ``request``: ``act`` for each of its partitions, each answered in a
    ``partition_result`` within its topic's ``result``."""
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return response(results=[result(topic_id=topic.topic_id, partitions=[
            partition_result(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                             error_message=CLUSTER_REFUSED) for p in topic.partitions]) for topic in request.topics])
    if not request.group_id or not request.topics or any(not topic.partitions for topic in request.topics):
        return response(results=[])
    coordinator = ctx.broker.share_coordinator()
    results = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            try:
                fields = await act(coordinator, topic.topic_id, wanted)
            except KafkaError as exc:
                partitions.append(partition_result(partition=wanted.partition, error_code=exc.code,
                                                   error_message=exc.message))
            else:
                partitions.append(partition_result(partition=wanted.partition, **fields))
        results.append(result(topic_id=topic.topic_id, partitions=partitions))
    return response(results=results)
