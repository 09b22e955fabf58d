"""DescribeCluster (key 60), versions 0-2.

The cluster id, the live brokers (none fenced) and the controller. A single node is the whole
cluster: it lists itself and names itself as the controller, as a KRaft broker names a live broker.

The request says which endpoints it wants (v1+): brokers (1) are served here; controllers (2) get
MISMATCHED_ENDPOINT_TYPE and any other value UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST in v0,
which predates those errors). The cluster's authorized operations, when asked for, come from the ACLs (0 for a
principal that may not describe the cluster); without an authorizer they are every operation a cluster supports.

Version notes: the API is flexible from v0; v1 added the endpoint type; v2 added the option to list
fenced brokers and each broker's fenced flag.
"""
from __future__ import annotations

from enum import IntEnum

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import CLUSTER_NAME, AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import DescribeClusterRequest, DescribeClusterResponse
from trafka.wire.protocol import ApiKey

BrokerResult = DescribeClusterResponse.DescribeClusterBroker

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class EndpointType(IntEnum):
    UNKNOWN = 0
    BROKER = 1
    CONTROLLER = 2


@handles(ApiKey.DESCRIBE_CLUSTER, 0, 2)
async def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    wanted = request.endpoint_type
    if wanted != EndpointType.BROKER:
        if wanted == EndpointType.CONTROLLER:
            code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
            message = (
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
            )
        else:
            code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = f"Unsupported endpoint type {wanted}"
        return DescribeClusterResponse(
            error_code=ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else code,
            error_message=message,
            brokers=[],
        )
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        operations = (ctx.authorized_operations(AclResourceType.CLUSTER, CLUSTER_NAME)
                      if ctx.authorize_cluster(AclOperation.DESCRIBE) else 0)
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=EndpointType.BROKER,
        cluster_id=broker.cluster_id,
        controller_id=broker.topics.controller_id,
        brokers=[BrokerResult(broker_id=node_id, host=host, port=port, rack=rack, is_fenced=False)
                 for node_id, (host, port, rack) in broker.topics.live_brokers(ctx.listener).items()],
        cluster_authorized_operations=operations,
    )
