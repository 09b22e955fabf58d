"""ElectLeaders (key 43), versions 0-2.

Elects partition leaders on demand, as ``kafka-leader-election.sh`` asks: PREFERRED (0) makes each
partition's preferred replica (the first of its assignment) the leader when it is alive and in the
ISR; UNCLEAN (1) gives a leader to partitions that have none, from outside the ISR if need be.
Per partition, as Kafka answers: ELECTION_NOT_NEEDED when the preferred replica leads already (or,
unclean, a leader is there), PREFERRED_LEADER_NOT_AVAILABLE when it cannot lead,
ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica can, UNKNOWN_TOPIC_OR_PARTITION for a partition that
does not exist. Null topic partitions means every partition; then only the partitions an election
was tried for are reported. In a cluster the controller elects; another broker answers
NOT_CONTROLLER, which makes the admin client ask the controller. A single node leads every partition
with its only replica: there is nothing to elect.

Version notes: v1 added the election type and the top-level error code; v2 is flexible.
With an authorizer, ALTER on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED, for every partition too).
"""
from __future__ import annotations

from collections import defaultdict

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ElectLeadersRequest, ElectLeadersResponse
from trafka.wire.protocol import ApiKey

UNCLEAN = 1
Result = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = ElectLeadersResponse.PartitionResult


@handles(ApiKey.ELECT_LEADERS, 0, 2)
async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    wanted = None if request.topic_partitions is None else [
        (topic.topic, index) for topic in request.topic_partitions for index in topic.partitions]
    unclean = ctx.api_version >= 1 and request.election_type == UNCLEAN
    message = ctx.cluster_refusal(AclOperation.ALTER)
    if message is not None:
        refusal = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        by_topic_refused: dict[str, list[PartitionResult]] = defaultdict(list)
        for topic, index in wanted or ():
            by_topic_refused[topic].append(PartitionResult(partition_id=index, error_code=refusal,
                                                           error_message=message))
        return ElectLeadersResponse(error_code=refusal, replica_election_results=[
            Result(topic=topic, partition_result=results) for topic, results in by_topic_refused.items()])
    try:
        outcomes = await ctx.broker.topics.elect_leaders(wanted, unclean=unclean)
    except KafkaError as exc:  # NOT_CONTROLLER
        if ctx.api_version >= 1:
            return ElectLeadersResponse(error_code=exc.code, replica_election_results=[])
        outcomes = {key: (exc.code, exc.message or None) for key in wanted or ()}
    if wanted is None:
        outcomes = {key: outcome for key, outcome in outcomes.items() if outcome[0] != ErrorCode.ELECTION_NOT_NEEDED}
    by_topic: dict[str, list[PartitionResult]] = defaultdict(list)
    for (topic, index), (code, message) in outcomes.items():
        by_topic[topic].append(PartitionResult(partition_id=index, error_code=code, error_message=message))
    return ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=[
        Result(topic=topic, partition_result=results) for topic, results in by_topic.items()])
